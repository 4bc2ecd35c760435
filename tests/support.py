"""Helpers shared by the unit and integration suites."""

from __future__ import annotations

import json
import os
import socket
import threading
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

TEST_SESSION_ENV = "HOOKCAGE_TEST_SESSION"
"""Names this test session (set by the integration conftest): containers of
concurrent sessions on a shared engine are told apart by it."""
POOL_OWNERS: set[str] = set()
"""Pids of the ``hookcage serve`` processes this session started: their
pools' containers (labelled ``hookcage.pool=PID``, and nothing else of ours)
belong to this session."""


def agent_session(kind: str) -> str:
    """A fresh agent ``session_id`` for hook runs: the runs' containers carry it
    (``hookcage.session``), and its prefix marks them as this test session's."""
    return f"{os.environ.get(TEST_SESSION_ENV, 'unit')}-{kind}-{uuid.uuid4().hex[:8]}"


def commands_in(hooks: dict[str, Any] | str) -> list[str]:
    """Every ``command`` string of a hook file (dict or JSON text); [] when it does not parse."""
    if isinstance(hooks, str):
        try:
            hooks = json.loads(hooks)
        except ValueError:
            return []
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if isinstance(value.get("command"), str):
                found.append(value["command"])
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(hooks)
    return found


def allow(home: Path, entries: Iterable[str]) -> None:
    """Put exact allow-list entries in ``home/config.toml`` (what `hookcage allow` would do)."""
    path = home / "config.toml"
    existing: list[str] = []
    if path.exists():
        import tomllib

        existing = tomllib.loads(path.read_text()).get("allowlist", {}).get("allow", [])
    merged = list(dict.fromkeys([*existing, *entries]))
    path.write_text("[allowlist]\nallow = " + json.dumps(merged) + "\n")


def containers_created(client: Any, session: str, since: float) -> int:
    """How many containers the engine created for hookcage ``session`` since ``since`` (its event log)."""
    import time

    events = client.events(since=int(since) - 1, until=int(time.time()) + 1, decode=True,
                           filters={"type": "container", "event": "create",
                                    "label": f"hookcage.session={session}"})
    return sum(1 for _ in events)


class OnlyThese:
    """An Engine API client that lists only the given containers (for ``reap``):
    the engine is shared, so other sessions' containers are left alone."""

    def __init__(self, api: Any, ids: set[str]) -> None:
        self._api, self._ids = api, ids

    def containers(self, *, all: bool, filters: dict[str, Any]) -> Any:
        return [c for c in self._api.containers(all=all, filters=filters) if c["Id"] in self._ids]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._api, name)


class FakeEngine(threading.Thread):
    """The engine's side of an attach on a socket pair: reads stdin until our
    half-close (unless ``read_stdin`` is False; with ``stdin_length``, that many
    bytes, as the warm pool's bootstrap reads a job), sends ``reply``, then closes
    its end, or with ``keep_open`` leaves the stream open (a container still running)."""

    def __init__(
        self, sock: socket.socket, reply: bytes, *, read_stdin: bool = True, keep_open: bool = False,
        stdin_length: int | None = None,
    ) -> None:
        super().__init__(daemon=True)
        self.sock, self.reply = sock, reply
        self.read_stdin, self.keep_open = read_stdin, keep_open
        self.stdin_length = stdin_length
        self.stdin = bytearray()

    def run(self) -> None:
        while self.read_stdin and (self.stdin_length is None or len(self.stdin) < self.stdin_length):
            data = self.sock.recv(65536)
            if not data:  # our half-close
                break
            self.stdin += data
        self.sock.sendall(self.reply)
        if not self.keep_open:
            self.sock.close()


CLEARED_ENV = ("CLAUDE_PROJECT_DIR", "CLAUDE_ENV_FILE", "HOOKCAGE_PROJECT_DIR", "HOOKCAGE_HOME_CAP",
               "CODEBUDDY_PROJECT_DIR", "GEMINI_PROJECT_DIR", "CLAUDE_CONFIG_DIR", "GEMINI_CLI_HOME", "CODEX_HOME",
               "INFER_HOOKS_ENABLED", "HOOKCAGE_IN_HOOK", "CURSOR_PROJECT_DIR", "COPILOT_HOME")
"""Variables of the test runner's own environment that would leak into a user's run."""


class CliUser:
    """A repository (``root``, with its ``.hookcage`` folder) and a user who runs the
    real ``hookcage`` console script in it, with an isolated ``HOOKCAGE_HOME``.

    Integration suites subclass it with the hooks their attacks need.
    """

    def __init__(self, tmp: Path, root: Path, kind: str, *, home: Path | None = None) -> None:
        self.home = home or tmp / "hookcage-home"
        self.home.mkdir(exist_ok=True)
        self.root = root
        self.hookdir = root / ".hookcage"
        self.hookdir.mkdir(exist_ok=True)
        self.hookdir.chmod(0o755)
        # An isolated user too: the agents' user files (~/.claude/settings.json, ...) are theirs.
        self.user_home = tmp / "user-home"
        self.user_home.mkdir(exist_ok=True)
        self.env = {**os.environ, "HOOKCAGE_HOME": str(self.home), "HOOKCAGE_MANAGED_DIR": str(tmp / "managed"),
                    "HOME": str(self.user_home)}
        for name in CLEARED_ENV:
            self.env.pop(name, None)
        self.session = agent_session(kind)

    def run(self, *args: str, stdin: str = "", env: dict[str, str] | None = None, cwd: Path | None = None,
            timeout: float = 180) -> Any:
        """``hookcage ARGS`` with ``stdin``; returns the ``subprocess.CompletedProcess[str]``."""
        import shutil
        import subprocess

        hookcage = shutil.which("hookcage")
        assert hookcage is not None, "the hookcage console script is not installed"
        return subprocess.run([hookcage, *args], input=stdin, capture_output=True, text=True,
                              cwd=cwd or self.root, env={**self.env, **(env or {})}, timeout=timeout)

    def allow(self, *entries: str) -> None:
        allow(self.home, entries)


def hooks_run_under_gvisor(client: Any) -> bool:
    """Whether hook containers get gVisor on this engine (``runtime`` auto, or runsc, resolved as hookcage does).

    Under gVisor the parents of a mount point inside the sandbox's own ``/tmp``
    are 0777 (root's 0755 under runc), so a hook's ``touch`` of a host path
    next to the workspace succeeds there, in the sandbox's tmpfs, and vanishes
    with it: tests assert on the host instead.
    """
    from executor.sandbox.runtimes import GVISOR, isolation, resolve_runtime

    info = client.info()
    runtime = resolve_runtime(os.environ.get("HOOKCAGE_RUNTIME") or "auto", list(info.get("Runtimes") or {}),
                              str(info.get("DefaultRuntime") or "runc"))
    return isolation(runtime) == GVISOR


def use_hook_runtime(runtime: str, client: Any, monkeypatch: Any) -> str:
    """Run this test's hooks under ``runtime`` (``HOOKCAGE_RUNTIME``, as a user sets it; the CLI and the
    in-process executors the test starts read it). A runtime the engine lacks fails the test on CI (it
    installs and registers runsc) and skips it elsewhere."""
    import pytest

    if runtime not in (client.info().get("Runtimes") or {}):
        message = f"the engine has no {runtime} runtime: apt-get install runsc && hookcage setup runsc"
        if os.environ.get("CI") == "true" or os.environ.get("HOOKCAGE_REQUIRE_DOCKER"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    monkeypatch.setenv("HOOKCAGE_RUNTIME", runtime)
    return runtime
