"""The host backend: a hook command as a plain subprocess, with a deadline.

How this works: ``/bin/sh -c COMMAND`` starts in a process group of its own,
with an environment built from scratch. One loop writes stdin and reads both
output streams until the main process has exited and its pipes are drained.
At the deadline, or as soon as the main process exits, the whole group is
killed, so background children neither outlive the hook nor keep us waiting;
a process that left the group (``setsid``) only gets a short grace to finish
writing before we stop reading.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Mapping
from typing import IO

from executor.errors import SandboxError
from executor.sandbox.base import RunRequest, RunResult, Sandbox

_SHELL = "/bin/sh"
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
DEFAULT_LANG = "C.UTF-8"
_CHUNK = 64 * 1024
# How long output may still arrive after the main process is gone: only a
# process that escaped the group can hold a pipe open that long.
_DRAIN_GRACE = 0.3
# How often we look for the main process's exit while its pipes stay open.
_TICK = 0.05


def default_base_env() -> dict[str, str]:
    """PATH, HOME and LANG from this process's environment, with fallbacks."""
    env = {
        "PATH": os.environ.get("PATH") or DEFAULT_PATH,
        "LANG": os.environ.get("LANG") or DEFAULT_LANG,
    }
    if "HOME" in os.environ:
        env["HOME"] = os.environ["HOME"]
    return env


class _Capture:
    """The first ``cap`` bytes of one stream; the rest is dropped and flagged."""

    def __init__(self, cap: int) -> None:
        self.data = bytearray()
        self.cap = cap
        self.truncated = False

    def add(self, chunk: bytes) -> None:
        room = self.cap - len(self.data)
        if len(chunk) > room:
            self.truncated = True
            chunk = chunk[: max(room, 0)]
        self.data += chunk


def _kill_group(pgid: int) -> None:
    """SIGKILL every process left in the group ``pgid``."""
    # Nobody left is fine (macOS answers EPERM for a group of zombies).
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


class HostSandbox(Sandbox):
    """Runs hook commands directly on this machine, without isolation.

    Args:
        base_env: the environment every hook starts from, under the
            request's ``env``; default :func:`default_base_env`.
    """

    name = "host"

    def __init__(self, base_env: Mapping[str, str] | None = None) -> None:
        self.base_env: dict[str, str] = dict(default_base_env() if base_env is None else base_env)

    def run(self, request: RunRequest) -> RunResult:
        """Run ``request.command`` under ``/bin/sh -c`` until it exits or times out.

        Raises:
            SandboxError: the shell could not be started (missing cwd or shell).
        """
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                [_SHELL, "-c", request.command],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=request.cwd,
                env={**self.base_env, **request.env},
                close_fds=True,
                start_new_session=True,
            )
        except OSError as exc:
            where = exc.filename if exc.filename is not None else request.cwd
            raise SandboxError(
                f"host sandbox cannot start the hook: {where}: {exc.strerror or exc}"
            ) from exc
        except ValueError as exc:  # a NUL byte in the command, cwd or environment
            raise SandboxError(f"host sandbox cannot start the hook: {exc}") from exc

        out, err = _Capture(request.output_cap), _Capture(request.output_cap)
        # Popen's __exit__ closes every pipe and reaps the main process.
        with proc:
            try:
                timed_out = _communicate(proc, request, out, err, start + request.timeout)
            finally:
                if proc.returncode is None:
                    # Timed out or interrupted: the group still has its leader.
                    _kill_group(proc.pid)
        code = proc.returncode
        return RunResult(
            exit_code=None if timed_out else (code if code >= 0 else 128 - code),
            stdout=bytes(out.data),
            stderr=bytes(err.data),
            duration=time.monotonic() - start,
            timed_out=timed_out,
            stdout_truncated=out.truncated,
            stderr_truncated=err.truncated,
        )


def _communicate(
    proc: subprocess.Popen[bytes],
    request: RunRequest,
    out: _Capture,
    err: _Capture,
    deadline: float,
) -> bool:
    """Feed stdin and collect output until the run is over; True if it timed out."""
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    stdin: IO[bytes] = proc.stdin
    captures = {proc.stdout.fileno(): out, proc.stderr.fileno(): err}
    pending = memoryview(request.stdin)
    timed_out = False
    ended_at: float | None = None

    with selectors.DefaultSelector() as selector:
        for fd in captures:
            selector.register(fd, selectors.EVENT_READ)
        if pending:
            # Non-blocking, so a command that never reads its stdin cannot stall us.
            os.set_blocking(stdin.fileno(), False)
            selector.register(stdin.fileno(), selectors.EVENT_WRITE)
        else:
            stdin.close()

        while True:
            now = time.monotonic()
            if ended_at is None:
                if proc.poll() is not None:
                    # Its group ID stays reserved while members remain (POSIX),
                    # so this reaches only the hook's leftovers.
                    _kill_group(proc.pid)
                    ended_at = now
                elif now >= deadline:
                    _kill_group(proc.pid)
                    timed_out = True
                    ended_at = now
                if ended_at is not None and not stdin.closed:
                    selector.unregister(stdin.fileno())
                    stdin.close()
            if ended_at is not None and (not selector.get_map() or now >= ended_at + _DRAIN_GRACE):
                return timed_out
            if not selector.get_map():
                # Output is closed but the process runs on: just wait for it.
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=max(deadline - now, 0))
                continue

            limit = deadline if ended_at is None else ended_at + _DRAIN_GRACE
            for key, _ in selector.select(max(min(limit - now, _TICK), 0)):
                if key.fd in captures:
                    chunk = os.read(key.fd, _CHUNK)
                    if chunk:
                        captures[key.fd].add(chunk)
                    else:
                        selector.unregister(key.fd)
                    continue
                try:
                    written = os.write(key.fd, pending[:_CHUNK])
                except BlockingIOError:
                    written = 0
                except BrokenPipeError:
                    # The command stopped reading; the rest of its input is moot.
                    written = len(pending)
                pending = pending[written:]
                if not pending:
                    selector.unregister(key.fd)
                    stdin.close()
