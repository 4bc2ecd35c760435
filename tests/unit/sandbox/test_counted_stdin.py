"""A cold run's stdin by count, for engines reached over TLS (profile.counted_stdin).

The wrapper runs here in dash, bash --posix and busybox sh (it kills nothing):
the hook gets exactly the counted bytes and end-of-input while the stream
itself stays open, and a hook that leaves a child holding its stdin does not
keep the shell waiting.
"""

from __future__ import annotations

import shutil
import subprocess
import time

import pytest

from executor.core.options import SandboxOptions
from executor.sandbox.base import RunRequest
from executor.sandbox.docker.profile import (
    COUNTED_STDIN_PIDS,
    DockerProfile,
    container_args,
    counted_stdin,
)

pytestmark = pytest.mark.spawns

SHELLS = [["dash"], ["bash", "--posix"], ["busybox", "sh"]]


def run_open(shell: list[str], script: str, data: bytes) -> tuple[int, bytes, float]:
    """Run ``script`` with ``data`` on a stdin left open until it ends; (status, stdout, seconds)."""
    if shutil.which(shell[0]) is None:
        pytest.skip(f"{shell[0]} is not installed")
    began = time.monotonic()
    proc = subprocess.Popen([*shell, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            start_new_session=True)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(data)
        proc.stdin.flush()
    except BrokenPipeError:
        pass
    out = b""
    while chunk := proc.stdout.read1(65536):
        out += chunk
        if b"END" in out:
            break
    status = proc.wait(timeout=30)
    proc.stdin.close()
    return status, out, time.monotonic() - began


@pytest.mark.parametrize("shell", SHELLS, ids=lambda s: s[0])
@pytest.mark.parametrize(
    ("hook", "data", "expected"),
    [
        ("wc -c; echo END", b"x" * 300_000, b"300000\nEND\n"),
        ("cat; echo END", b"", b"END\n"),
        ("head -c 2; echo END", b"abcdef", b"abEND\n"),
        ("echo END; exit 3", b"y" * 300_000, b"END\n"),
    ],
    ids=["all", "none", "part", "unread"],
)
def test_the_hook_gets_the_counted_bytes_then_end_of_input(
    shell: list[str], hook: str, data: bytes, expected: bytes
) -> None:
    status, out, _ = run_open(shell, counted_stdin(hook, len(data)), data)
    assert out == expected
    assert status == (3 if "exit 3" in hook else 0)


def test_a_child_holding_the_hooks_stdin_does_not_keep_the_shell_waiting() -> None:
    # `sleep` holds the pipe `head` writes into and never reads: head blocks, the shell must not wait for it.
    status, out, _ = run_open(["dash"], counted_stdin("sleep 3 <&0 & echo END", 300_000), b"z" * 300_000)
    assert (status, out) == (0, b"END\n")


def test_the_profile_wraps_the_command_and_counts_the_processes() -> None:
    req = RunRequest(command="cat", stdin=b"12345", cwd="/", project_dir="/",
                     options=SandboxOptions(workspace="none"))
    plain, plain_host = container_args(DockerProfile(user="1:1"), req, name="n", now=0)
    counted, counted_host = container_args(DockerProfile(user="1:1", counted_stdin=True), req, name="n", now=0)
    assert "head -c 5" in counted["command"][2] and "head" not in plain["command"][2]
    assert counted_host["pids_limit"] == plain_host["pids_limit"] + COUNTED_STDIN_PIDS
