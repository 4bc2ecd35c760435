"""The daemon's shared sandboxes: the warm pool's settings, which factory builds what, closing.

No engine is asked anything: ``DOCKER_HOST`` points nowhere, so the
reaper every docker sandbox starts fails quietly.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from executor.errors import ConfigError
from executor.executor import default_sandbox_factory
from executor.sandbox.base import RunRequest, RunResult, Sandbox
from executor.sandbox.docker import DockerSandbox
from executor.sandbox.host import HostSandbox
from executor.sandbox.pool import PooledDockerSandbox
from executor.service.daemon import Daemon
from executor.service.sandboxes import SANDBOX_SETTINGS, pooled_sandbox_factory
from executor.settings import Settings, load_settings


@pytest.fixture(autouse=True)
def dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    home, managed = tmp_path / "home", tmp_path / "managed"
    home.mkdir()
    managed.mkdir()
    monkeypatch.setenv("HOOKCAGE_HOME", str(home))
    monkeypatch.setenv("HOOKCAGE_MANAGED_DIR", str(managed))
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    for name in ("HOOKCAGE_POOL_SIZE", "HOOKCAGE_POOL_TOTAL", "HOOKCAGE_POOL_IDLE_TIMEOUT"):
        monkeypatch.delenv(name, raising=False)
    return home, managed


def test_pool_settings_defaults_environment_and_files(dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    home, _ = dirs
    s = load_settings()
    assert (s.pool_size, s.pool_total, s.pool_idle_timeout) == (2, 8, 300.0)
    (home / "config.toml").write_text("pool_size = 4\npool_idle_timeout = 60\n")
    monkeypatch.setenv("HOOKCAGE_POOL_TOTAL", "3")
    s = load_settings()
    assert (s.pool_size, s.pool_total, s.pool_idle_timeout) == (4, 3, 60.0)
    monkeypatch.setenv("HOOKCAGE_POOL_SIZE", "0")
    assert load_settings().pool_size == 0


@pytest.mark.parametrize(
    ("line", "name"),
    [("pool_size = -1", "pool_size"), ("pool_total = -1", "pool_total"), ("pool_idle_timeout = 1", "pool_idle_timeout")],
)
def test_bad_pool_settings_name_the_file(dirs: tuple[Path, Path], line: str, name: str) -> None:
    home, _ = dirs
    (home / "config.toml").write_text(line + "\n")
    with pytest.raises(ConfigError, match=rf"config.toml: setting '{name}'"):
        load_settings()


def test_in_process_docker_is_cold_and_the_daemons_is_pooled_with_the_same_profile(
    dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: dict[str, Any] = {}

    class Spy(PooledDockerSandbox):
        def __init__(self, **options: Any) -> None:
            asked.update(options)
            super().__init__(**options)

    monkeypatch.setattr("executor.sandbox.pool.PooledDockerSandbox", Spy)
    settings = load_settings(memory="256m", cpus=0.5, pids=64, tmpfs_size="16m", pool_size=3, pool_total=5,
                             pool_idle_timeout=42)
    cold = default_sandbox_factory("docker", settings)
    warm = pooled_sandbox_factory("docker", settings)
    try:
        assert type(cold) is DockerSandbox
        assert isinstance(warm, Spy)
        assert warm.profile == cold.profile
        assert (asked["pool_size"], asked["pool_total"], asked["idle_timeout"]) == (3, 5, 42.0)
        assert asked["staging_dir"] == str(dirs[0] / "staging")
        assert warm.stats().ready == 0  # nothing is started before a run asks for a shape
    finally:
        cold.close()
        warm.close()
    assert isinstance(pooled_sandbox_factory("host", settings), HostSandbox)


@pytest.mark.parametrize("overrides", [{"pool_size": 0}, {"pool_total": 0}])
def test_a_pool_of_zero_is_the_cold_backend(overrides: dict[str, Any]) -> None:
    sandbox = pooled_sandbox_factory("docker", load_settings(**overrides))
    try:
        assert type(sandbox) is DockerSandbox
    finally:
        sandbox.close()


class Recorded(Sandbox):
    name = "docker"

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.closed = False

    def run(self, request: RunRequest) -> RunResult:
        raise AssertionError("not run here")

    def close(self) -> None:
        self.closed = True


def test_one_shared_sandbox_per_profile_pool_settings_included_all_closed_at_stop(tmp_path: Path) -> None:
    assert {"pool_size", "pool_total", "pool_idle_timeout"} <= set(SANDBOX_SETTINGS)
    made: list[Recorded] = []

    def factory(backend: str, settings: Settings) -> Sandbox:
        made.append(Recorded(settings))
        return made[-1]

    daemon = Daemon(tmp_path / "sock", sandbox_factory=factory, home=tmp_path / "home")
    first = daemon.shared_sandbox("docker", load_settings())
    assert daemon.shared_sandbox("docker", load_settings()) is first
    assert daemon.shared_sandbox("docker", load_settings(pool_size=5)) is not first
    assert daemon.shared_sandbox("docker", load_settings(pool_idle_timeout=30)) is not first
    assert len(made) == 3
    [entry, *_] = daemon.sandboxes()
    assert entry["backend"] == "docker" and entry["pool"] is None
    assert entry["profile"]["pool_size"] == 2 and set(entry["profile"]) == set(SANDBOX_SETTINGS)
    daemon.close()
    assert all(sandbox.closed for sandbox in made)
    assert daemon.sandboxes() == []


def test_health_shows_the_pools_counters(tmp_path: Path) -> None:
    daemon = Daemon(tmp_path / "sock", home=tmp_path / "home")
    try:
        daemon.shared_sandbox("docker", load_settings())
        [entry] = daemon.sandboxes()
        assert entry["pool"] == {"warm": 0, "cold": 0, "fallbacks": 0, "created": 0,
                                 "creation_failures": 0, "ready": 0, "running": 0}
    finally:
        daemon.close()


def test_a_lent_shared_sandbox_has_the_trust_profile_of_the_one_it_lends(tmp_path: Path) -> None:
    """A daemon run's trust profile is the in-process one: gVisor's ``isolation`` key included (it was lost)."""
    from executor.core.options import SandboxOptions
    from executor.sandbox.backends import trust_profile

    class UnderGVisor(Recorded):
        def image_identity(self, image: str | None) -> str:
            return "sha256:runner"

        def runtime(self) -> str | None:
            return "runsc"

    daemon = Daemon(tmp_path / "sock", sandbox_factory=lambda backend, settings: UnderGVisor(settings),
                    home=tmp_path / "home")
    try:
        lent = daemon.shared.factory_for({})("docker", load_settings())
        assert lent is not daemon.shared_sandbox("docker", load_settings()) and lent.runtime() == "runsc"
        assert trust_profile("docker", lent, SandboxOptions()) == trust_profile(
            "docker", UnderGVisor(load_settings()), SandboxOptions()) == {"image": "sha256:runner", "isolation": "gvisor"}
    finally:
        daemon.close()


class _Noting(Sandbox):
    name = "docker"

    def __init__(self) -> None:
        self.events = 0

    def run(self, request: RunRequest) -> RunResult:
        return RunResult(0)

    def note_event(self) -> None:
        self.events += 1


def test_every_event_is_noted_by_the_shared_pools_even_while_a_sandbox_is_being_built() -> None:
    import threading

    from executor.service.sandboxes import SharedSandboxes

    lock = threading.RLock()
    made: list[_Noting] = []

    def factory(backend: str, settings: Settings) -> Sandbox:
        made.append(_Noting())
        return made[-1]

    shared = SharedSandboxes(factory, lock)
    shared.note_event()  # nothing built yet: nothing to tell
    shared.get("docker", load_settings())
    shared.note_event()
    assert made[0].events == 1
    holder = threading.Thread(target=lambda: (lock.acquire(), time.sleep(1.0), lock.release()))
    holder.start()  # as while another profile's sandbox is built (the engine connected, reaped)
    time.sleep(0.1)
    began = time.monotonic()
    shared.note_event()
    waited = time.monotonic() - began
    holder.join()
    assert made[0].events == 2 and waited < 0.5  # an event with no hook never waits for that
    shared.detach()
    shared.note_event()
    assert made[0].events == 2  # detached: the daemon is stopping


def test_the_daemon_notes_each_events_start_and_end(tmp_path: Path) -> None:
    import base64
    import json

    from executor import __version__
    from executor.service.daemon import DispatchRequest

    made: list[_Noting] = []

    def factory(backend: str, settings: Settings) -> Sandbox:
        made.append(_Noting())
        return made[-1]

    daemon = Daemon(home=tmp_path / "home", sandbox_factory=factory)
    try:
        daemon.shared.get("docker", load_settings())
        project = tmp_path / "project"
        project.mkdir()
        payload = base64.b64encode(json.dumps({"hook_event_name": "Stop", "cwd": str(project)}).encode()).decode()
        request = DispatchRequest(version=__version__, event="Stop", agent="claude", payload_b64=payload,
                                  env={"HOOKCAGE_HOME": str(tmp_path / "home"),
                                       "DOCKER_HOST": os.environ["DOCKER_HOST"]}, home=str(tmp_path / "home"),
                                  cwd=str(project))
        answer, _ = daemon.answer(request)
        assert answer.exit_code == 0 and made[0].events == 2
    finally:
        daemon.close()
