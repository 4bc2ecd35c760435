"""Fixtures for tests against the real Docker engine.

- ``docker_api``: a low-level client from ``DOCKER_HOST``; the test is skipped,
  with the reason, when no engine answers.
- ``runner_image``: the runner image's tag; skipped (never built) when absent.
- every test marked ``docker`` is checked for leftovers: a container labelled
  ``hookcage.managed=true`` that appeared during the test and still exists
  after it is removed, and the test FAILS (the code under test leaked it).
  The same sweep runs for the whole session when it ends.
- ``workspace``: a small project directory a container user can read.
- every docker test holds a turn on the engine while it runs (``engine_turns``): shared
  with the other workers' tests, or exclusive for a test marked ``alone`` (one that
  observes the engine as a whole: the host's disk, ``reap`` of every session, a benchmark).

Several test sessions may share one engine (developers, CI jobs). The sweeps
therefore never touch what existed before, nor what belongs to another
session (or to a real agent on this machine): tests label the containers
they make themselves ``hookcage.test-session=$HOOKCAGE_TEST_SESSION`` (set
here, once per session); hook runs made through the executor (``hookcage
dispatch``, the daemon) carry the agent's session id instead, so tests start
it with ``$HOOKCAGE_TEST_SESSION`` (``support.agent_session``); and a
daemon's pool is this session's when a test here started that daemon
(``support.POOL_OWNERS``).
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker.errors  # type: ignore[import-untyped, unused-ignore]
import pytest
from engine_turns import turn
from support import POOL_OWNERS, TEST_SESSION_ENV, use_hook_runtime

from executor.errors import HookcageError, SandboxError
from executor.sandbox.docker import DEFAULT_IMAGE, MANAGED_LABEL, default_client, reap
from executor.sandbox.pool import POOL_LABEL

MANAGED = {"label": f"{MANAGED_LABEL}=true"}
SESSION_LABEL = "hookcage.test-session"
RUN_SESSION_LABEL = "hookcage.session"
"""The agent's session id, on every hook run the executor makes."""
_SESSION_ENV = TEST_SESSION_ENV
LEAK_GRACE = 10.0
"""Seconds a new container may take to go away on its own (another session's run; a gVisor
container's removal takes seconds on a loaded machine)."""

os.environ.setdefault(_SESSION_ENV, uuid.uuid4().hex[:12])


def _managed(client: Any) -> dict[str, Any]:
    return {entry["Id"]: entry for entry in client.containers(all=True, filters=MANAGED)}


def _ours(entry: Any, before: set[str], since: float) -> bool:
    labels = entry.get("Labels") or {}
    mine = os.environ[_SESSION_ENV]
    if SESSION_LABEL in labels:
        if labels[SESSION_LABEL] != mine:
            return False
    elif RUN_SESSION_LABEL in labels:
        if not labels[RUN_SESSION_LABEL].startswith(mine):
            return False  # another session's hook run, or a real agent's
    elif POOL_LABEL in labels and labels[POOL_LABEL] not in {str(os.getpid()), *POOL_OWNERS}:
        return False  # the pool of a daemon (or process) this session did not start
    return entry["Id"] not in before and entry["Created"] >= int(since) - 1


def remove_leftovers(client: Any, before: set[str], since: float) -> list[str]:
    """Remove the managed containers created since ``since`` (not in ``before``).

    Waits up to ``LEAK_GRACE`` for them to go away by themselves first.

    Returns:
        ``name (state)`` of each container removed.
    """
    deadline = time.monotonic() + LEAK_GRACE
    while True:
        left = [e for e in _managed(client).values() if _ours(e, before, since)]
        if not left or time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    names = []
    for entry in left:
        if entry["State"] == "removing":
            continue  # its run is removing it: not left behind
        names.append(f"{entry['Names'][0].lstrip('/')} ({entry['State']})")
        try:
            client.remove_container(entry["Id"], force=True, v=True)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:  # 409: its removal began meanwhile
            if exc.status_code != 409:
                raise
    return names


REQUIRED = os.environ.get("CI") == "true" or bool(os.environ.get("HOOKCAGE_REQUIRE_DOCKER"))
"""On CI (or when asked) a missing engine or image fails the run instead of skipping."""


def _unavailable(message: str) -> None:
    if REQUIRED:
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def docker_api() -> Iterator[Any]:
    """A docker-py ``APIClient`` for the engine at ``DOCKER_HOST``, or a skip (a failure on CI)."""
    try:
        client = default_client(timeout=30)
    except SandboxError as exc:
        _unavailable(f"Docker engine unreachable: {exc}")
    with turn(alone=False):  # never while a test that is alone on the engine runs
        reap(client)  # what earlier sessions left and is surely over
    before, since = set(_managed(client)), time.time()
    yield client
    try:
        left = remove_leftovers(client, before, since)
    finally:
        client.close()
    if left:
        pytest.fail(f"containers left behind at the end of the session: {', '.join(left)}")


@pytest.fixture(scope="session")
def runner_image(docker_api: Any) -> str:
    """The runner image tag, built (offline when no registry answers) if it is missing or stale."""
    from executor.provision.images import build_runner_image, runner_image_current

    if not runner_image_current(docker_api):
        try:
            build_runner_image(docker_api)
        except HookcageError as exc:
            if not docker_api.images(name=DEFAULT_IMAGE):
                _unavailable(f"{DEFAULT_IMAGE} is missing and could not be built: {exc}")
            print(f"warning: testing on an out-of-date {DEFAULT_IMAGE} (rebuild failed: {exc})")
    return DEFAULT_IMAGE


HOOK_RUNTIMES = ["runc", "runsc"]
"""The runtimes every gate and containment suite runs under: the host's kernel, and gVisor's (the default
where it is installed: ``runtime = auto``)."""


@pytest.fixture(params=HOOK_RUNTIMES)
def hook_runtime(request: pytest.FixtureRequest, docker_api: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    """Runs the test's hooks under this runtime (``HOOKCAGE_RUNTIME``, as a user sets it; the CLI and
    in-process executors the test starts read it). A runtime the engine lacks: a failure on CI (it
    installs and registers runsc), a skip elsewhere."""
    return use_hook_runtime(str(request.param), docker_api, monkeypatch)


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest) -> Any:
    """A module's or session's fixture is set up under a shared turn on the engine (its images,
    services and pools are made while no ``alone`` test runs)."""
    if fixturedef.scope == "function":
        return (yield)
    with turn(alone=False):
        return (yield)


@pytest.fixture(autouse=True)
def no_leftover_containers(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail a docker test that leaves a hookcage-managed container behind."""
    if request.node.get_closest_marker("docker") is None:
        yield
        return
    client = request.getfixturevalue("docker_api")
    with turn(alone=request.node.get_closest_marker("alone") is not None):
        before, since = set(_managed(client)), time.time()
        yield
        left = remove_leftovers(client, before, since)
    if left:
        pytest.fail(f"the test left containers behind: {', '.join(left)}")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A project directory (with ``.git/hooks`` and ``src``) readable by any uid.

    pytest's temporary directories are 0700. Inside the container the parents
    of a bind mount are fresh directories, so only the project itself must be
    readable there; ``tmp_path`` is opened too for engines that resolve mount
    sources as the calling user (rootless).
    """
    root = tmp_path / "project"
    (root / ".git" / "hooks").mkdir(parents=True)
    (root / "src").mkdir()
    (root / "README.md").write_text("hello from the workspace\n")
    (root / "src" / "main.py").write_text("print('hi')\n")
    for path in (tmp_path, root, root / ".git", root / ".git" / "hooks", root / "src"):
        path.chmod(0o755)
    for path in (root / "README.md", root / "src" / "main.py"):
        path.chmod(0o644)
    return root
