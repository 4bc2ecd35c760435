"""The host backend, against real subprocesses (no Docker)."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from executor.errors import SandboxError
from executor.sandbox.base import RunRequest, RunResult
from executor.sandbox.host import HostSandbox

pytestmark = pytest.mark.spawns

# Bounds only catch hangs; they are generous on purpose.
SLACK = 2.0


def run(command: str, **fields: Any) -> RunResult:
    """Run one command in a fresh host sandbox."""
    with HostSandbox() as sandbox:
        return sandbox.run(RunRequest(command=command, **fields))


def timed(command: str, **fields: Any) -> tuple[RunResult, float]:
    """Run one command and measure how long run() itself took."""
    start = time.monotonic()
    result = run(command, **fields)
    return result, time.monotonic() - start


def is_gone(pid: int, within: float = SLACK) -> bool:
    """True once ``pid`` is dead (a zombie waiting for its reaper counts as dead)."""
    end = time.monotonic() + within
    while True:
        try:
            os.kill(pid, 0)
            with open(f"/proc/{pid}/stat") as stat:
                if stat.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except (ProcessLookupError, FileNotFoundError):
            return True
        if time.monotonic() > end:
            return False
        time.sleep(0.05)


def read_pid(path: Path) -> int:
    return int(path.read_text().strip())


@pytest.fixture
def escapee(tmp_path: Path) -> Iterator[Path]:
    """A pidfile for a process that leaves the hook's group; killed after the test."""
    pidfile = tmp_path / "escapee.pid"
    yield pidfile
    if pidfile.exists():
        with contextlib.suppress(ProcessLookupError):
            os.kill(read_pid(pidfile), signal.SIGKILL)


@pytest.mark.parametrize("code", [0, 1, 2, 3])
def test_exit_code_and_both_streams_are_reported(code: int) -> None:
    result = run(f"echo out; echo err >&2; exit {code}")
    assert result.exit_code == code
    assert result.stdout == b"out\n"
    assert result.stderr == b"err\n"
    assert not result.timed_out
    assert not result.truncated
    assert result.duration > 0


def test_death_by_signal_is_128_plus_signal() -> None:
    result = run("kill -TERM $$")
    assert result.exit_code == 128 + signal.SIGTERM
    assert not result.timed_out


def test_stdin_reaches_the_command() -> None:
    payload = b'{"hook_event_name": "PreToolUse"}\n' * 1000
    assert run("cat", stdin=payload).stdout == payload


def test_empty_stdin_is_end_of_input() -> None:
    result = run("cat; echo done", stdin=b"")
    assert result.exit_code == 0
    assert result.stdout == b"done\n"


@pytest.mark.parametrize("command", ["true", "exit 0"])
def test_large_stdin_to_a_command_that_ignores_it(command: str) -> None:
    result, took = timed(command, stdin=b"x" * (10 * 1024 * 1024), timeout=30)
    assert result.exit_code == 0
    assert not result.timed_out
    assert took < 30


def test_environment_is_built_from_scratch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOOKCAGE_CANARY", "leaked")
    monkeypatch.setenv("PATH", "/canary/bin:/usr/bin:/bin")
    monkeypatch.setenv("HOME", "/canary/home")
    monkeypatch.setenv("LANG", "C.UTF-8")
    result = run("env", env={"CLAUDE_PROJECT_DIR": "/proj", "HOOK_VALUE": "a b=c"})
    lines = result.stdout.decode().splitlines()
    assert "HOOKCAGE_CANARY=leaked" not in lines
    assert not any(line.startswith("HOOKCAGE_CANARY=") for line in lines)
    assert "CLAUDE_PROJECT_DIR=/proj" in lines
    assert "HOOK_VALUE=a b=c" in lines
    assert "PATH=/canary/bin:/usr/bin:/bin" in lines
    assert "HOME=/canary/home" in lines
    assert "LANG=C.UTF-8" in lines


def test_base_env_can_be_given_and_request_env_wins() -> None:
    with HostSandbox(base_env={"PATH": "/usr/bin:/bin", "LANG": "C"}) as sandbox:
        result = sandbox.run(RunRequest(command="env", env={"LANG": "C.UTF-8"}))
    lines = result.stdout.decode().splitlines()
    assert "LANG=C.UTF-8" in lines
    assert not any(line.startswith("HOME=") for line in lines)


def test_base_env_falls_back_when_the_host_has_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PATH", raising=False)
    monkeypatch.delenv("LANG", raising=False)
    lines = run("/usr/bin/env").stdout.decode().splitlines()
    assert "PATH=/usr/local/bin:/usr/bin:/bin" in lines
    assert "LANG=C.UTF-8" in lines


def test_busy_loop_is_killed_at_the_deadline() -> None:
    result, took = timed("while :; do :; done", timeout=1)
    assert result.timed_out
    assert result.exit_code is None
    assert took < 1 + SLACK


@pytest.mark.parametrize(
    "command",
    [
        "sleep 100 & echo $! > {pidfile}; sleep 100",
        "(sleep 100 & echo $! > {pidfile}); sleep 100",
    ],
)
def test_timeout_kills_grandchildren_holding_stdout(command: str, tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    result, took = timed(command.format(pidfile=pidfile), timeout=1)
    assert result.timed_out
    assert result.exit_code is None
    assert took < 1 + SLACK
    assert is_gone(read_pid(pidfile))


def test_background_child_is_killed_when_the_hook_exits(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    result, took = timed(f"sleep 100 & echo $! > {pidfile}; echo done", timeout=30)
    assert result.exit_code == 0
    assert result.stdout == b"done\n"
    assert took < SLACK
    assert is_gone(read_pid(pidfile))


def escape(pidfile: Path, redirect: str = "") -> str:
    """Shell that starts ``sleep 60`` in a session of its own and waits until it is there."""
    return (
        f"setsid sh -c 'echo $$ > {pidfile}; exec sleep 60' {redirect} & "
        f"while [ ! -s {pidfile} ]; do sleep 0.01; done; "
    )


def test_escaped_process_holding_stdout_does_not_hang_us(escapee: Path) -> None:
    result, took = timed(escape(escapee) + "echo done", timeout=30)
    assert result.exit_code == 0
    assert not result.timed_out
    assert result.stdout == b"done\n"
    assert took < SLACK
    assert not is_gone(read_pid(escapee), within=0)  # it really did escape


def test_escaped_process_with_its_own_output_does_not_matter(escapee: Path) -> None:
    result, took = timed(escape(escapee, ">/dev/null 2>&1") + "exit 4", timeout=30)
    assert result.exit_code == 4
    assert took < SLACK


def test_output_past_the_cap_is_truncated_and_drained() -> None:
    result = run("yes | head -c 5000000", output_cap=65536)
    assert result.exit_code == 0
    assert result.stdout == b"y\n" * 32768
    assert result.stdout_truncated
    assert not result.stderr_truncated


def test_stderr_past_the_cap_is_truncated() -> None:
    result = run("head -c 100000 /dev/zero >&2; echo ok", output_cap=1000)
    assert result.stdout == b"ok\n"
    assert result.stderr == b"\0" * 1000
    assert result.stderr_truncated
    assert not result.stdout_truncated


def test_output_exactly_at_the_cap_is_not_truncated() -> None:
    result = run("printf abcd", output_cap=4)
    assert result.stdout == b"abcd"
    assert not result.truncated


def test_binary_output_is_kept_byte_for_byte() -> None:
    result = run(r"printf '\377\376\000\200\n\300\257'")
    assert result.stdout == b"\xff\xfe\x00\x80\n\xc0\xaf"


def test_binary_stdin_round_trips() -> None:
    payload = bytes(range(256)) * 64
    assert run("cat", stdin=payload).stdout == payload


def test_runs_in_the_requested_cwd(tmp_path: Path) -> None:
    assert run("pwd -P", cwd=str(tmp_path)).stdout == str(tmp_path.resolve()).encode() + b"\n"


def test_missing_cwd_is_a_sandbox_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(SandboxError, match=str(missing)) as info:
        run("true", cwd=str(missing))
    assert isinstance(info.value.__cause__, OSError)
    assert "\n" not in str(info.value)
