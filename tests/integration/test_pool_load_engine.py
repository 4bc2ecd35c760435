"""The warm pool under load, against the real engine: what it does, never how fast.

- The pool's own engine work (creating, removing) waits while warm runs are
  in flight, a bounded time: a hook never shares the machine with a refill.
- The matching hooks of one event run side by side, each in its own warm
  container (the executor runs them in parallel; the pool learned the burst).
- One event a second is served warm every time after the first.

Counted with the pool's stats (``warm``, ``cold``, ``created``, ``running``)
and the engine's list of this pool's containers; no timed assertion.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support import agent_session, allow, commands_in

from executor.executor import HookExecutor
from executor.sandbox.base import RunRequest, RunResult
from executor.sandbox.pool import POOL_LABEL, PooledDockerSandbox, RunPath
from executor.settings import load_settings

pytestmark = pytest.mark.docker

SESSION = os.environ["HOOKCAGE_TEST_SESSION"]
SESSION_LABELS = {"hookcage.test-session": SESSION}
WAIT_FOR_GO = 'n=0; until [ -e "$CLAUDE_PROJECT_DIR/go" ] || [ "$n" -ge 1200 ]; do sleep 0.05; n=$((n + 1)); done; '
"""A hook prefix that waits (at most about a minute) until the test writes ``go`` in the workspace."""

PoolMaker = Callable[..., PooledDockerSandbox]


@pytest.fixture
def make_pool(docker_api: Any, runner_image: str) -> Iterator[PoolMaker]:
    made: list[PooledDockerSandbox] = []

    def make(**options: Any) -> PooledDockerSandbox:
        options.setdefault("image", runner_image)
        options.setdefault("idle_timeout", 120)
        options.setdefault("runtime", "runc")
        pool = PooledDockerSandbox(client=docker_api, labels=SESSION_LABELS, **options)
        made.append(pool)
        return pool

    yield make
    for pool in made:
        pool.close()


def request(workspace: Path, command: str) -> RunRequest:
    return RunRequest(command=command, cwd=str(workspace), project_dir=str(workspace), timeout=90.0,
                      env={"CLAUDE_PROJECT_DIR": str(workspace)}, labels={"hookcage.hook": "pool-load", **SESSION_LABELS})


def pool_containers(docker_api: Any) -> list[str]:
    filters = {"label": [f"{POOL_LABEL}={os.getpid()}", f"hookcage.test-session={SESSION}"]}
    return [c["Id"] for c in docker_api.containers(all=True, filters=filters)]


def until(check: Callable[[], bool], within: float = 60.0) -> bool:
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def in_thread(fn: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    thread.start()
    return thread, out


def test_no_container_is_created_or_removed_while_a_warm_hook_runs(
    make_pool: PoolMaker, workspace: Path, docker_api: Any
) -> None:
    pool = make_pool(pool_size=1, refill_hold=600)
    req = request(workspace, WAIT_FOR_GO + "echo ran")
    assert pool.prewarm(req, wait=60)
    assert until(lambda: len(pool_containers(docker_api)) == 1)  # only the spare
    created = pool.stats().created
    thread, out = in_thread(lambda: pool.run_with_path(req))
    try:
        assert until(lambda: pool.stats().running == 1)
        # The key has no spare left: the refill would start now, competing with the hook.
        time.sleep(1.5)  # not a timed assertion: the chance for the refill to misbehave
        assert pool.stats().created == created and pool.stats().ready == 0
        assert len(pool_containers(docker_api)) == 1  # the hook's own container, nothing being made
    finally:
        (workspace / "go").write_text("")
        thread.join(120)
    result, path = out[0]
    assert (path, result.exit_code, result.stdout) == ("warm", 0, b"ran\n")
    assert pool.prewarm(req, wait=60)  # the refill came once the run was over


def test_the_hold_is_bounded_a_long_hook_does_not_starve_the_pool(make_pool: PoolMaker, workspace: Path) -> None:
    pool = make_pool(pool_size=1, refill_hold=0.5)
    req = request(workspace, WAIT_FOR_GO + "echo ran")
    assert pool.prewarm(req, wait=60)
    thread, out = in_thread(lambda: pool.run_with_path(req))
    try:
        assert until(lambda: pool.stats().running == 1)
        assert pool.prewarm(req, wait=60)  # refilled while the long hook still runs
        assert pool.stats().running == 1
    finally:
        (workspace / "go").write_text("")
        thread.join(120)
    assert out[0][1] == "warm"


class Project:
    """A user's hooks file with ``count`` matching PreToolUse hooks, each waiting for ``go``."""

    def __init__(self, tmp: Path, workspace: Path, count: int, *, wait: bool) -> None:
        self.home = tmp / "home"
        self.home.mkdir(exist_ok=True)
        self.managed = tmp / "managed"
        self.workspace = workspace
        prefix = WAIT_FOR_GO if wait else ""
        handlers = [{"type": "command", "command": f"{prefix}cat >/dev/null; echo hook{i} >&2"} for i in range(count)]
        data = {"hooks": {"PreToolUse": [{"hooks": handlers}]}}
        (self.home / "hooks.json").write_text(json.dumps(data))
        allow(self.home, commands_in(data))
        self.session = agent_session("pool-load")

    def executor(self, pool: PooledDockerSandbox) -> HookExecutor:
        settings = load_settings(home=self.home, managed_dir=self.managed, log_runs=False)
        return HookExecutor(settings, environ={}, sandboxes={"docker": pool})

    def payload(self) -> dict[str, Any]:
        return {"session_id": self.session, "cwd": str(self.workspace), "tool_name": "Bash",
                "tool_input": {"command": "ls"}}


def test_five_matching_hooks_run_side_by_side_each_in_a_warm_container(
    make_pool: PoolMaker, workspace: Path, tmp_path: Path
) -> None:
    pool = make_pool()  # the default size (2): the first event teaches it the burst of five
    project = Project(tmp_path, workspace, 5, wait=False)
    with project.executor(pool) as ex:
        ex.dispatch("PreToolUse", project.payload())
    assert until(lambda: pool.stats().ready >= 5)
    project = Project(tmp_path, workspace, 5, wait=True)  # same shape of container: same key
    before = pool.stats()
    with project.executor(pool) as ex:
        thread, out = in_thread(lambda: ex.dispatch("PreToolUse", project.payload()))
        try:
            assert until(lambda: pool.stats().running == 5), pool.stats()  # all five at once
        finally:
            (workspace / "go").write_text("")
            thread.join(120)
    verdict = out[0]
    assert not verdict.blocked and len(verdict.outcomes) == 5, verdict
    assert all(o.status == "ok" for o in verdict.outcomes), verdict
    after = pool.stats()
    assert (after.warm - before.warm, after.cold - before.cold) == (5, 0)


def test_one_event_a_second_is_served_warm_after_the_first(
    make_pool: PoolMaker, workspace: Path, tmp_path: Path
) -> None:
    pool = make_pool()
    project = Project(tmp_path, workspace, 1, wait=False)
    paths: list[RunPath] = []
    real_run = pool.run_with_path

    def counted(req: RunRequest) -> tuple[RunResult, RunPath]:
        result, path = real_run(req)
        paths.append(path)
        return result, path

    pool.run_with_path = counted  # type: ignore[method-assign]
    pool.run = lambda req: counted(req)[0]  # type: ignore[method-assign]
    with project.executor(pool) as ex:
        ex.dispatch("PreToolUse", project.payload())  # the first: cold, the pool learns the key
        assert until(lambda: pool.stats().ready >= 1)
        for _ in range(8):
            time.sleep(1.0)  # one event a second, as an agent's tool calls come
            ex.dispatch("PreToolUse", project.payload())
    assert paths == ["cold"] + ["warm"] * 8, paths
    stats = pool.stats()
    assert (stats.cold, stats.warm) == (1, 8)
