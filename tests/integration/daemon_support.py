"""A real ``hookcage serve`` on a temporary ``HOOKCAGE_HOME``, and agents calling it.

Shared by the daemon tests against the engine (``test_daemon.py``,
``test_daemon_protocol.py``). The daemon runs as the console script runs it;
each agent call is a fresh Python, as an agent spawns ``hookcage dispatch``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import docker.errors  # type: ignore[import-untyped, unused-ignore]
from support import POOL_OWNERS, allow, commands_in

from executor.sandbox.docker import MANAGED_LABEL
from executor.sandbox.pool import POOL_LABEL
from executor.service import client

PY = sys.executable
_SCRIPT = Path(sys.executable).with_name("hookcage")
SERVE = [str(_SCRIPT), "serve"] if _SCRIPT.exists() else [PY, "-m", "executor", "serve"]
"""``hookcage serve`` as installed next to this interpreter (``python -m executor`` without it)."""
# The console script's path with the in-process fallback made impossible:
# an answer proves the daemon gave it.
THROUGH_DAEMON_ONLY = """
import sys
sys.modules["executor.cli"] = None
from executor.entry import main
main(sys.argv[1:])
"""
_KEEP = {"HOOKCAGE_TEST_SESSION"}


def clean_env(home: Path, managed: Path) -> dict[str, str]:
    """This process's environment without hookcage's variables, for ``home`` and ``managed``."""
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("HOOKCAGE_") or k in _KEEP}
    for name in client.PROJECT_DIR_VARS:
        env.pop(name, None)
    env.update(HOOKCAGE_HOME=str(home), HOOKCAGE_MANAGED_DIR=str(managed))
    return env


class Daemon:
    """One ``hookcage serve`` process (started by :meth:`start`) and its callers."""

    def __init__(self, home: Path, managed: Path, project: Path, log: Path) -> None:
        self.home = home
        self.managed = managed
        self.project = project
        self.socket = home / client.SOCKET_NAME
        self.log = log
        self.env = clean_env(home, managed)
        self.proc: subprocess.Popen[bytes] | None = None
        self.pid: int | None = None
        self.started_at = 0.0

    # -- the daemon ----------------------------------------------------------------

    def start(self, **env: str) -> subprocess.Popen[bytes]:
        self.started_at = time.time()
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(SERVE, env={**self.env, **env}, stdout=log, stderr=log, cwd=self.home)
        deadline = time.monotonic() + 30
        while (health := client.health(str(self.socket), timeout=0.5)) is None:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError(f"the daemon did not start: {self.log.read_text()}")
            time.sleep(0.05)
        self.pid = int(str(health["pid"]))
        POOL_OWNERS.add(str(self.pid))  # its pool's containers are this test session's
        return self.proc

    def stop(self) -> int | None:
        """SIGTERM (as ``systemctl stop``), then wait; the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError(f"the daemon did not stop on SIGTERM: {self.log.read_text()}") from None
        return self.proc.returncode

    def health(self) -> dict[str, Any]:
        health = client.health(str(self.socket), timeout=5.0)
        assert health is not None, "the daemon does not answer /health"
        return health

    def pool(self) -> dict[str, int]:
        """The pool counters of every shared sandbox, added up ({} without a pool)."""
        total: dict[str, int] = {}
        for sandbox in self.health()["sandboxes"]:
            for name, value in (sandbox["pool"] or {}).items():
                total[name] = total.get(name, 0) + value
        return total

    def wait_ready(self, count: int, timeout: float = 30.0) -> dict[str, int]:
        """Wait until the pool holds ``count`` started containers waiting for a hook."""
        deadline = time.monotonic() + timeout
        while (stats := self.pool()).get("ready", 0) < count:
            assert time.monotonic() < deadline, f"the pool never got {count} ready: {stats}"
            time.sleep(0.05)
        return stats

    # -- its callers ----------------------------------------------------------------

    def user_hooks(self, data: dict[str, Any]) -> None:
        (self.home / "hooks.json").write_text(json.dumps(data))
        allow(self.home, commands_in(data))

    def command(self, event: str, *, daemon: bool, env: dict[str, str] | None = None) -> tuple[list[str], dict[str, str]]:
        """The agent's command line and environment: through the daemon only, or in-process only."""
        full = {**self.env, **(env or {})}
        if daemon:
            return [PY, "-c", THROUGH_DAEMON_ONLY, "dispatch", event], full
        full["HOOKCAGE_NO_DAEMON"] = "1"
        return [PY, "-m", "executor.entry", "dispatch", event], full

    def dispatch(self, event: str, stdin: bytes, *, daemon: bool, env: dict[str, str] | None = None,
                 timeout: float = 120) -> tuple[int, str, str]:
        command, full = self.command(event, daemon=daemon, env=env)
        proc = subprocess.run(command, input=stdin, capture_output=True, env=full, cwd=self.project,
                              timeout=timeout)
        return proc.returncode, proc.stdout.decode(), proc.stderr.decode()

    def log_lines(self, path: Path | None = None) -> list[dict[str, Any]]:
        """The run log without what differs between two runs of the same hook (time, duration)."""
        path = path or self.home / "runs.jsonl"
        lines = path.read_text().splitlines() if path.exists() else []
        return [{k: v for k, v in json.loads(line).items() if k not in ("time", "duration_ms")} for line in lines]

    # -- its containers -------------------------------------------------------------------

    def containers(self, docker_api: Any, session: str | None = None) -> list[dict[str, Any]]:
        """The hookcage containers this daemon made: its pool's, and its cold runs' of ``session``.

        (A cold run of an in-process ``hookcage dispatch`` of the same session is listed too.)
        """
        assert self.pid is not None
        managed = f"{MANAGED_LABEL}=true"
        found = {c["Id"]: c for c in docker_api.containers(
            all=True, filters={"label": [managed, f"{POOL_LABEL}={self.pid}"]})
            if c["Created"] >= int(self.started_at) - 1}
        if session is not None:
            found.update((c["Id"], c) for c in docker_api.containers(
                all=True, filters={"label": [managed, f"hookcage.session={session}"]}))
        return list(found.values())


def runs_command(docker_api: Any, container: str, needle: str) -> bool:
    """Whether a process of ``container`` has ``needle`` in its command line.

    Under gVisor the host's ``ps`` (``docker top``) sees only gVisor's own processes: the
    container's are listed from its own ``/proc``, by an exec.
    """
    try:
        top = docker_api.top(container, ps_args="-o pid,args")
        if any(needle in " ".join(process) for process in top.get("Processes") or []):
            return True
        if docker_api.inspect_container(container)["HostConfig"].get("Runtime") != "runsc":
            return False
        listing = docker_api.exec_create(container, ["sh", "-c", "cat /proc/[0-9]*/cmdline | tr '\\0' ' '"])
        return needle in docker_api.exec_start(listing["Id"]).decode("utf-8", "replace")
    except docker.errors.APIError:  # not running (any more)
        return False


def wait_stopped(docker_api: Any, ids: set[str], timeout: float = 30.0) -> None:
    """Wait until none of ``ids`` is running (gone counts as stopped)."""
    deadline = time.monotonic() + timeout
    while True:
        running = []
        for container in ids:
            with contextlib.suppress(docker.errors.NotFound):
                if docker_api.inspect_container(container)["State"]["Running"]:
                    running.append(container[:12])
        if not running:
            return
        assert time.monotonic() < deadline, f"still running: {running}"
        time.sleep(0.1)
