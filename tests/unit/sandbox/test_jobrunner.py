"""The job runner (sandbox/jobrunner.py), run on the host as a pooled container runs it.

On the host its parent is not the container's init, so it never kills
``-1``; everything else is what it does in a container (the engine tests in
tests/integration/test_pool_engine.py run the pool both ways, with the
runner and with the sh bootstrap).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from executor.sandbox.poolwire import job_runner_text
from executor.sandbox.warmjob import (
    BOOTSTRAP,
    READY_LINE,
    RUNNER_JOB_TAG,
    RUNNER_READY_LINE,
    bootstrap_command,
    encode_job,
    mountinfo_escape,
)

pytestmark = pytest.mark.spawns

NONCE = "0123456789abcdef0123456789abcdef"
ACK = f"hookcage-job {NONCE}\n".encode()




def end(status: int) -> bytes:
    return f"hookcage-end {NONCE} {status} ".encode()


def runner(*, relay: bool = False, idle: float = 30, pairs: tuple[str, ...] = (),
           warm: tuple[str, ...] = ()) -> list[str]:
    argv = bootstrap_command(idle, pairs, relay=relay, warm=warm, runner=job_runner_text())
    assert argv[:3] == ["/bin/sh", "-c", argv[2]] and argv[4] == job_runner_text()
    return argv


def job(command: str, *, env: dict[str, str] | None = None, cwd: str = "/", stdin_length: int | None = None,
        watch: int = 20) -> bytes:
    return encode_job(NONCE, cwd, command, env or {}, stdin_length, watch=watch, protocol=4)


def run(data: bytes, *, timeout: float = 20, **options: object) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(runner(**options), input=data, capture_output=True, timeout=timeout)  # type: ignore[arg-type]


def hook_output(done: subprocess.CompletedProcess[bytes], status: int) -> tuple[bytes, bytes]:
    """The hook's stdout and stderr, once the protocol around them is checked."""
    out, err = done.stdout, done.stderr
    assert out.startswith(RUNNER_READY_LINE + ACK), out[:200]
    out = out[len(RUNNER_READY_LINE + ACK):]
    for name, stream in (("stdout", out), ("stderr", err)):
        assert stream.endswith(b"\n") and stream[stream.rindex(b"hookcage-end "):].startswith(end(status)), \
            (name, stream[-200:])
    assert done.returncode == status
    return out[: out.rindex(b"hookcage-end ")], err[: err.rindex(b"hookcage-end ")]


@pytest.mark.parametrize("relay", [False, True], ids=["direct", "relay"])
def test_a_job_runs_its_command_with_its_directory_environment_and_stdin(relay: bool, tmp_path: Path) -> None:
    env = {"A": "1", "EMPTY": "", "NEWLINES": "x\ny\n", "EQ": "a=b=c", "QUOTES": "'\"$(id)`id`"}
    command = "pwd; printf '%s|' \"$A\" \"$EMPTY\" \"$NEWLINES\" \"$EQ\" \"$QUOTES\"; " \
              "cat; echo oops >&2; exit 3"
    done = run(job(command, env=env, cwd=str(tmp_path)) + b"the hook's stdin", relay=relay)
    out, err = hook_output(done, 3)
    assert out == f"{tmp_path}\n1||x\ny\n|a=b=c|'\"$(id)`id`|the hook's stdin".encode()
    assert err == b"oops\n"


def test_the_exit_status_of_a_hook_killed_by_a_signal_is_a_shells() -> None:
    done = run(job("kill -TERM $$"))
    assert hook_output(done, 128 + signal.SIGTERM) == (b"", b"")


def test_a_counted_stdin_gives_the_hook_exactly_its_bytes() -> None:
    done = run(job("cat; echo; cat", stdin_length=5) + b"12345 and more the sender never meant")
    out, _ = hook_output(done, 0)
    assert out == b"12345\n"


def test_a_counted_stdin_the_hook_never_reads_does_not_hold_the_run() -> None:
    big = 4 << 20  # more than any pipe holds
    began = time.monotonic()
    done = run(job("echo done", stdin_length=big) + b"x" * big)
    assert hook_output(done, 0)[0] == b"done\n"
    assert time.monotonic() - began < 10


def test_no_stdin_is_an_empty_one() -> None:
    done = run(job("wc -c", stdin_length=0) + b"not for the hook")
    assert hook_output(done, 0)[0].strip() == b"0"


@pytest.mark.parametrize("relay", [False, True], ids=["direct", "relay"])
def test_large_output_arrives_whole(relay: bool) -> None:
    done = run(job("head -c 10000000 /dev/zero; head -c 3000000 /dev/zero >&2"), relay=relay, timeout=60)
    out, err = hook_output(done, 0)
    assert (len(out), len(err)) == (10_000_000, 3_000_000)


def test_the_hook_gets_default_signals_and_only_three_descriptors() -> None:
    # Python ignores SIGPIPE and SIGXFSZ; the hook must not inherit that (a shell the
    # test starts the same way is the yardstick: what this process had before Python).
    show = "grep -E '^Sig(Ign|Blk)' /proc/self/status"
    yardstick = subprocess.run(["/bin/sh", "-c", show], capture_output=True, check=True).stdout.decode().split()
    done = run(job(f"{show}; ls /proc/self/fd"))
    out, _ = hook_output(done, 0)
    lines = out.decode().split()
    # glibc's posix_spawn leaves its own two internal signals (32, 33) ignored in the child;
    # glibc installs its handlers for them when it uses them: nothing a hook can tell apart.
    internal = 1 << 31 | 1 << 32
    assert lines[:3] == yardstick[:3]
    assert int(lines[3], 16) & ~internal == int(yardstick[3], 16) & ~internal
    assert int(lines[3], 16) & (1 << (signal.SIGPIPE - 1) | 1 << (signal.SIGXFSZ - 1)) == 0
    assert lines[4:] == ["0", "1", "2", "3"]  # 3: ls's own listing of the folder


@pytest.mark.parametrize("bad", [
    b"hookcage-job/3\n",  # the sh bootstrap's protocol
    b"hookcage-job/4 000000000x\n",
    b"hookcage-job/4 0000000009\nNOTHEX\n0\n-\n20\n",
    b"hookcage-job/4 0000000012\nabcdef\nx\n-\n20\n",
    b"hookcage-job/4 0000000999\nabcdef\n0\n-\n20\n",  # shorter than it says
])
def test_a_malformed_job_is_refused_without_a_word(bad: bytes) -> None:
    done = run(bad)
    assert (done.returncode, done.stdout, done.stderr) == (0, RUNNER_READY_LINE, b"")


def test_a_job_whose_fields_run_short_is_refused() -> None:
    whole = job("echo never")
    body = whole[26:].rsplit(b"1\n", 1)[0]  # the command field's line is gone
    done = run(f"hookcage-job/4 {len(body):010d}\n".encode() + body)
    assert (done.returncode, done.stdout) == (0, RUNNER_READY_LINE)


def test_no_job_within_the_idle_timeout_and_it_exits() -> None:
    began = time.monotonic()
    with subprocess.Popen(runner(idle=1), stdin=subprocess.PIPE, stdout=subprocess.PIPE) as proc:
        assert proc.stdout is not None and proc.stdout.readline() == RUNNER_READY_LINE
        assert proc.wait(timeout=20) == 0
    assert time.monotonic() - began < 15  # the idle timeout (1 s), not the test's own


def test_the_watch_ends_a_job_that_outlives_it() -> None:
    # In a container the watch kills every process; on the host (no init above it) only itself.
    began = time.monotonic()
    with subprocess.Popen(runner(), stdin=subprocess.PIPE, stdout=subprocess.DEVNULL) as proc:
        assert proc.stdin is not None
        proc.stdin.write(job("sleep 9", watch=1))
        proc.stdin.close()
        assert proc.wait(timeout=20) == 137
    assert time.monotonic() - began < 8  # the watch (1 s), not the hook's end (9 s)


def test_overlays_must_be_mounted_where_they_were() -> None:
    mounted = run(job("echo ran"), pairs=(mountinfo_escape("/"), "/"))
    assert hook_output(mounted, 0)[0] == b"ran\n"
    missing = run(job("echo ran"), pairs=(mountinfo_escape("/no such mount"), "/no such mount"))
    assert (missing.returncode, missing.stdout) == (0, RUNNER_READY_LINE)


def test_warm_ups_run_before_ready_and_leave_nothing(tmp_path: Path) -> None:
    done = run(job("echo ok"), warm=("python3", "unknown"))
    assert hook_output(done, 0)[0] == b"ok\n"


def test_without_python3_the_container_runs_the_bootstrap(tmp_path: Path) -> None:
    (tmp_path / "sh").symlink_to("/bin/sh")
    env = {"PATH": str(tmp_path)}
    with subprocess.Popen(runner(idle=1), stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env) as proc:
        assert proc.stdout is not None and proc.stdout.readline() == READY_LINE
        proc.kill()


def test_on_a_python_older_than_3_8_it_hands_over_to_the_bootstrap() -> None:
    # What the runner does without os.posix_spawn: exec the bootstrap, its first argument.
    text = "import os, sys; del os.posix_spawn; sys.argv = sys.argv[1:]; exec(sys.argv[0], {'__name__': '__main__'})"
    argv = runner(idle=1)
    assert argv[5] == BOOTSTRAP
    with subprocess.Popen([sys.executable, "-I", "-S", "-c", text, *argv[4:]], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE) as proc:
        assert proc.stdout is not None and proc.stdout.readline() == READY_LINE
        proc.kill()


def test_the_runner_imports_only_what_it_says() -> None:
    probe = "import sys; before = set(sys.modules); exec(sys.argv[1], {'__name__': 'probe'}); " \
            "print(sorted(set(sys.modules) - before))"
    done = subprocess.run([sys.executable, "-I", "-S", "-c", probe, job_runner_text()],
                          capture_output=True, text=True, check=True)
    # os (and what it always loads), select and the C signal module: nothing Python-level beyond os.
    assert set(eval(done.stdout)) <= {"os", "os.path", "stat", "_stat", "posixpath", "genericpath",
                                      "_collections_abc", "select", "_signal"}, done.stdout


def test_an_import_runs_nothing_and_both_sides_agree_on_the_protocol() -> None:
    import executor.sandbox.jobrunner as module  # no job read, no exit

    assert module.READY == RUNNER_READY_LINE
    assert RUNNER_JOB_TAG.encode() + b" " == module.TAG
    assert job("true").startswith(module.TAG) and job("true")[module.HEAD - 1:module.HEAD] == b"\n"
