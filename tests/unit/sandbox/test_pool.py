"""The warm pool's pure parts: the job encoding, the end markers, creation keys, bookkeeping.

No Docker engine: jobs and streams are literal bytes, the pump talks to a
socketpair, the book runs on a made-up clock. The bootstrap script itself is
only parsed here (``sh -n``): it ends by killing every process of its user,
so it must never run outside a container (the integration suite runs it).
"""

from __future__ import annotations

import contextlib
import shlex
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import FakeEngine

from executor.core.options import SandboxOptions
from executor.sandbox.base import RunRequest
from executor.sandbox.docker import (
    EXPIRY_MARGIN,
    STDERR,
    STDOUT,
    SYSTEMERR,
    CappedBuffer,
    DockerProfile,
    FrameState,
    container_args,
    demux_frames,
)
from executor.sandbox.pool import (
    BOOTSTRAP,
    READY_LINE,
    EndScanner,
    JobReader,
    PoolBook,
    PooledDockerSandbox,
    Spare,
    await_ready,
    bootstrap_command,
    creation_key,
    encode_job,
    has_writable_bind,
    mountinfo_escape,
    pump_job,
)
from executor.sandbox.poolbook import TAKE_MARGIN
from executor.sandbox.warmjob import LAUNCH, RUNNER_READY_LINE, WARMUPS, job_environment, warmups

pytestmark = pytest.mark.spawns  # the bootstrap is parsed by real shells (sh -n)

NONCE = "0123456789abcdef0123456789abcdef"
OTHER = "fedcba9876543210fedcba9876543210"
ACK = f"hookcage-job {NONCE}\n".encode()


def marker(status: int | str = 0, oom: int | str = 0, nonce: str = NONCE) -> bytes:
    return f"hookcage-end {nonce} {status} {oom}\n".encode()


def frame(stream: int, payload: bytes) -> bytes:
    return bytes([stream, 0, 0, 0]) + len(payload).to_bytes(4, "big") + payload


# --------------------------------------------------------------------------
# The job: what the bootstrap reads with `read -r`
# --------------------------------------------------------------------------


def decode_job(data: bytes) -> tuple[str, str, str, list[str], bytes]:
    """What the bootstrap makes of ``data``, line by line as ``IFS= read -r`` does."""
    lines = iter(data.split(b"\n"))
    consumed = 0

    def line() -> bytes:
        nonlocal consumed
        text = next(lines)
        consumed += len(text) + 1
        return text

    tag, nonce, count, length, watch = line(), line(), line(), line(), line()
    assert tag == b"hookcage-job/3" and int(watch) >= 1

    def field() -> str:
        return b"\n".join(line() for _ in range(int(line()))).decode()

    cwd, command = field(), field()
    env = [field() for _ in range(int(count))]
    stdin = data[consumed:]
    if length != b"-":  # "-": until end of input; else the bootstrap feeds the hook exactly that many bytes
        assert int(length) == len(stdin)
    return nonce.decode(), cwd, command, env, stdin


def test_job_is_a_header_and_line_counted_fields() -> None:
    job = encode_job(NONCE, "/work", "echo hi", {"A": "1", "PATH": "/bin"}, 12, watch=40)
    assert job == (
        f"hookcage-job/3\n{NONCE}\n2\n12\n40\n".encode()
        + b"1\n/work\n"
        + b"1\necho hi\n"
        + b"1\nA=1\n"
        + b"1\nPATH=/bin\n"
    )


def test_protocol_4_is_protocol_3_counted_in_bytes() -> None:
    three = encode_job(NONCE, "/work", "echo hi", {"A": "1\nx"}, None, watch=40)
    four = encode_job(NONCE, "/work", "echo hi", {"A": "1\nx"}, None, watch=40, protocol=4)
    body = three.removeprefix(b"hookcage-job/3\n")
    assert four == f"hookcage-job/4 {len(body):010d}\n".encode() + body


@pytest.mark.parametrize(
    "value",
    ["", "\n", "a\n", "\na", "two\nlines", "trailing  ", "  leading", "back\\slash\\", "$(id) `id` ;'\"",
     "tab\there", "\r\n", "ünïcödé", "x" * 10000],
)
def test_any_value_comes_back_exactly(value: str) -> None:
    job = encode_job(NONCE, value, value, {"V": value}, len(b"stdin follows\n"), watch=40)
    assert decode_job(job + b"stdin follows\n") == (NONCE, value, value, [f"V={value}"], b"stdin follows\n")


def test_a_newline_in_a_value_is_a_line_count_not_an_escape() -> None:
    assert encode_job(NONCE, "/", "a\nb\n", {}, watch=40) == f"hookcage-job/3\n{NONCE}\n0\n-\n40\n1\n/\n3\na\nb\n\n".encode()
    assert encode_job(NONCE, "/", "x", {}, 0, watch=40).startswith(f"hookcage-job/3\n{NONCE}\n0\n0\n40\n".encode())


@pytest.mark.parametrize(
    ("nonce", "cwd", "command", "env"),
    [
        ("NOT-HEX", "/", "true", {}),
        ("abc", "/", "true", {}),  # too short
        (NONCE, "/", "true\0", {}),
        (NONCE, "/\0", "true", {}),
        (NONCE, "/", "true", {"A": "\0"}),
    ],
)
def test_bad_job_fields_are_refused(nonce: str, cwd: str, command: str, env: dict[str, str]) -> None:
    with pytest.raises(ValueError):
        encode_job(nonce, cwd, command, env, watch=40)


def test_a_negative_stdin_length_is_refused() -> None:
    with pytest.raises(ValueError):
        encode_job(NONCE, "/", "true", {}, -1, watch=40)


def test_bootstrap_command_passes_only_the_idle_timeout_the_output_mode_the_warmups_and_mount_points() -> None:
    argv = bootstrap_command(2.2, ["/w/a b", "/w/c"])
    assert argv[:3] == ["/bin/sh", "-c", BOOTSTRAP]
    # each mount point as mountinfo shows it (to find it there) and as a path (to look it up first)
    assert argv[3:] == ["hookcage-pool", "3", "direct", "-", "/w/a\\040b", "/w/a b", "/w/c", "/w/c"]
    assert bootstrap_command(0.1)[3:] == ["hookcage-pool", "1", "direct", "-"]
    assert bootstrap_command(0.1, relay=True)[3:] == ["hookcage-pool", "1", "relay", "-"]  # under gVisor
    # warm-ups by name only, sorted; a name the bootstrap does not know is never passed
    assert bootstrap_command(60, warm={"python3", "jq", "rm -rf /", "$(id)"})[6] == "python3"


@pytest.mark.parametrize(("command", "names"), [
    ('python3 "$CLAUDE_PROJECT_DIR"/.claude/hooks/guard.py', {"python3"}),
    ("python -c 'import sys'", {"python3"}),
    ("/usr/bin/python3.11 -m tool", {"python3"}),
    ('"$CLAUDE_PROJECT_DIR"/.claude/hooks/check.py', {"python3"}),
    ("jq -r .prompt | python3 x.py", {"python3"}),
    ("node hooks/lint.mjs", set()),  # measured for Python only (the warm-up of node costs more than it saves)
    ("jq -r .tool_input.command | grep -q rm", set()),
    ("bash ./hooks/x.sh && echo done", set()),
    ("cat >/dev/null; echo ok", set()),
    ("echo python3-is-a-word-here", set()),
])
def test_warmups_are_the_interpreters_a_command_names(command: str, names: set[str]) -> None:
    assert warmups(command) == names


def test_every_warmup_is_a_fixed_command_of_the_bootstrap() -> None:
    for name, command in WARMUPS.items():
        assert f"*,{name},*) {{ {command}; }} </dev/null >/dev/null 2>&1" in BOOTSTRAP


def test_a_job_sends_only_the_environment_the_container_lacks() -> None:
    created = {"PATH": "/bin", "HOME": "/tmp", "CLAUDE_PROJECT_DIR": "/w"}
    run = {"PATH": "/bin", "HOME": "/root", "CLAUDE_PROJECT_DIR": "/w", "HOOKCAGE_IN_HOOK": "1:2:3"}
    assert job_environment(run, created) == {"HOME": "/root", "HOOKCAGE_IN_HOOK": "1:2:3"}
    assert job_environment(run, {}) == run
    assert job_environment({}, created) == {}


@pytest.mark.parametrize("shell", [["dash", "-n"], ["bash", "--posix", "-n"], ["busybox", "sh", "-n"]])
def test_bootstrap_parses_in_posix_shells(shell: list[str]) -> None:
    if shutil.which(shell[0]) is None:
        pytest.skip(f"{shell[0]} is not installed")
    # -n: parse only. Never run it here: it ends with `kill -1`.
    done = subprocess.run([*shell, "-c", BOOTSTRAP], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_bootstrap_exports_only_the_jobs_entries_and_unsets_what_it_uses() -> None:
    # The one export: the job's NAME=VALUE entries, in the hook's own subshell right before it
    # execs the hook (_hc_exec, always run as `(_hc_exec ...)`); never one of its own variables.
    assert [line.strip() for line in BOOTSTRAP.splitlines() if "export" in line] == ['export "$_hc_x"']
    assert "_hc_* |" in BOOTSTRAP  # an entry named like its variables goes through `env` instead
    assert "set -a" not in BOOTSTRAP
    assert "(_hc_exec " in BOOTSTRAP and " _hc_exec " not in BOOTSTRAP.replace("(_hc_exec ", "")
    names = set()
    for word in BOOTSTRAP.replace("$", " ").replace("{", " ").replace("=", " ").split():
        if word.startswith("_hc_") and word.isidentifier() and word not in (
                "_hc_field", "_hc_job", "_hc_exec", "_hc_relay", "_hc_relay_start"):
            names.add(word)
    unset = {w for line in BOOTSTRAP.splitlines() if line.startswith("unset ") for w in line.split()[1:]}
    assert names <= unset


@pytest.mark.parametrize(
    ("path", "escaped"),
    [
        ("/w/plain", "/w/plain"),
        ("/w/a b", "/w/a\\040b"),
        ("/w/tab\there", "/w/tab\\011here"),
        ("/w/new\nline", "/w/new\\012line"),
        ("/w/back\\slash", "/w/back\\134slash"),
        ("/w/ünï", "/w/ünï"),
    ],
)
def test_mount_points_are_escaped_as_mountinfo_shows_them(path: str, escaped: str) -> None:
    assert mountinfo_escape(path) == escaped


# --------------------------------------------------------------------------
# End markers: only this job's, only at the very end
# --------------------------------------------------------------------------


def scan(pieces: list[bytes], nonce: str = NONCE) -> tuple[bytes, EndScanner]:
    scanner = EndScanner(nonce)
    out = b"".join(scanner.feed(p) for p in pieces)
    return out, scanner


def test_marker_at_the_end_ends_the_stream_and_is_not_output() -> None:
    out, scanner = scan([b"hello\n" + marker(3, 0)])
    assert out == b"hello\n"
    assert (scanner.ended, scanner.status, scanner.oom_kills) == (True, 3, 0)


def test_marker_after_output_without_a_newline() -> None:
    out, scanner = scan([b"no newline", marker(0, 2)])
    assert out == b"no newline"
    assert (scanner.ended, scanner.status, scanner.oom_kills) == (True, 0, 2)


def test_unknown_oom_count() -> None:
    _, scanner = scan([marker(137, "-")])
    assert (scanner.ended, scanner.status, scanner.oom_kills) == (True, 137, None)


def test_marker_split_anywhere_is_found() -> None:
    data = b"output line\n" + marker(42, 1)
    for cut in range(len(data) + 1):
        out, scanner = scan([data[:cut], data[cut:]])
        assert out == b"output line\n", cut
        assert scanner.ended and scanner.status == 42, cut
    out, scanner = scan([bytes([b]) for b in data])
    assert out == b"output line\n" and scanner.ended


def test_a_marker_with_another_nonce_is_output() -> None:
    forged = marker(0, 0, nonce=OTHER)
    out, scanner = scan([b"a\n", forged, b"b\n"])
    assert out == b"a\n" + forged + b"b\n"
    assert not scanner.ended
    out, scanner = scan([forged])  # even as the very last bytes
    assert not scanner.ended
    assert out + scanner.finish() == forged


def test_a_marker_followed_by_more_output_is_output() -> None:
    # Only the last bytes of the stream can be the end: what follows a marker
    # proves it was not the bootstrap's.
    out, scanner = scan([b"x" + marker(0, 0), b"more\n"])
    assert not scanner.ended
    assert out + scanner.finish() == b"x" + marker(0, 0) + b"more\n"


def test_output_after_a_forged_marker_and_then_the_real_end() -> None:
    data = marker(0, 0, nonce=OTHER) + b"after the forgery\n" + marker(5, 0)
    for cut in range(len(data) + 1):
        out, scanner = scan([data[:cut], data[cut:]])
        assert out == marker(0, 0, nonce=OTHER) + b"after the forgery\n", cut
        assert scanner.ended and scanner.status == 5


@pytest.mark.parametrize(
    "almost",
    [
        f"hookcage-end {NONCE} 0 0".encode(),  # no newline: not over yet
        f"hookcage-end {NONCE} 1234 0\n".encode(),  # no status has four digits
        f"hookcage-end {NONCE} x 0\n".encode(),
        f"hookcage-end {NONCE}  0 0\n".encode(),
        f"hookcage-end {NONCE[:-1]} 0 0\n".encode(),
        f"hookcage-end {NONCE} 0 0\r\n".encode(),
    ],
)
def test_near_markers_do_not_end_the_stream(almost: bytes) -> None:
    out, scanner = scan([b"o", almost])
    assert not scanner.ended
    assert out + scanner.finish() == b"o" + almost


def test_held_back_bytes_are_bounded() -> None:
    scanner = EndScanner(NONCE)
    out = scanner.feed(b"y" * 100_000 + b"hookcage-end " + NONCE[:10].encode())
    assert len(out) == 100_000  # only a possible marker's start is held
    assert scanner.finish() == b"hookcage-end " + NONCE[:10].encode()


def test_reader_strips_the_acknowledgement_and_both_markers() -> None:
    reader = JobReader(NONCE)
    assert reader.feed(STDOUT, ACK + b"out\n") == b"out\n"
    assert reader.feed(STDERR, b"err\n" + marker(1, 0)) == b"err\n"
    assert not reader.done  # stdout's marker is still to come
    assert reader.feed(STDOUT, marker(1, 0)) == b""
    assert reader.done and reader.status == 1 and reader.oom_kills == 0


def test_reader_with_frames_cut_anywhere_and_streams_interleaved() -> None:
    stream = (
        frame(STDERR, b"early err ")
        + frame(STDOUT, ACK[:7])
        + frame(STDOUT, ACK[7:] + b"o1 ")
        + frame(STDERR, marker(0, 0, nonce=OTHER))
        + frame(STDOUT, b"o2\n" + marker(9, 3)[:20])
        + frame(STDERR, b"late err\n" + marker(9, 3))
        + frame(STDOUT, marker(9, 3)[20:])
    )
    for cut in range(0, len(stream) + 1, 3):
        reader, state = JobReader(NONCE), FrameState()
        got = {STDOUT: b"", STDERR: b""}
        for read in (stream[:cut], stream[cut:]):
            state, pieces = demux_frames(state, read)
            for s, piece in pieces:
                got[s] += reader.feed(s, piece)
        assert reader.done, cut
        assert (reader.status, reader.oom_kills) == (9, 3)
        assert got[STDOUT] == b"o1 o2\n", cut
        assert got[STDERR] == b"early err " + marker(0, 0, nonce=OTHER) + b"late err\n", cut


def test_reader_without_acknowledgement_never_ends_and_gives_everything_back() -> None:
    reader = JobReader(NONCE)
    out = reader.feed(STDOUT, b"something else\n" + marker(0, 0))
    err = reader.feed(STDERR, marker(0, 0))
    assert not reader.acknowledged and not reader.done and reader.status is None
    rest_out, rest_err = reader.finish()
    assert out + rest_out == b"something else\n" + marker(0, 0)
    assert err + rest_err == marker(0, 0)


def test_reader_partial_acknowledgement_at_eof_is_output() -> None:
    reader = JobReader(NONCE)
    assert reader.feed(STDOUT, ACK[:5]) == b""
    assert reader.finish() == (ACK[:5], b"")
    assert not reader.acknowledged


# --------------------------------------------------------------------------
# The pump, against a fake bootstrap (the engine side, left open) on a socketpair
# --------------------------------------------------------------------------


def pump(
    ours: socket.socket, data: bytes, timeout: float = 5.0, *, until_eof: bool = False, end_input: bool = True
) -> tuple[str, JobReader, bytes, bytes]:
    reader, out, err = JobReader(NONCE), CappedBuffer(1 << 20), CappedBuffer(1 << 20)
    end = pump_job(ours, data, time.monotonic() + timeout, reader, out, err, until_eof=until_eof,
                   end_input=end_input)
    return end, reader, out.getvalue(), err.getvalue()


def test_pump_returns_on_both_markers_without_waiting_for_the_stream_to_end(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    ours, theirs = pair
    job = encode_job(NONCE, "/", "cat", {}, len(b"stdin bytes"), watch=40) + b"stdin bytes"
    reply = (
        frame(STDOUT, ACK + b"stdin bytes")
        + frame(STDERR, marker(0, 0))
        + frame(SYSTEMERR, b"engine note\n")
        + frame(STDOUT, marker(0, 0))
    )
    engine = FakeEngine(theirs, reply, keep_open=True, stdin_length=len(job))
    engine.start()
    began = time.monotonic()
    end, reader, out, err = pump(ours, job, end_input=False)  # a counted job (over TLS)
    assert end == "done" and time.monotonic() - began < 2  # the socket is still open
    assert (out, err) == (b"stdin bytes", b"engine note\n")
    assert reader.status == 0
    engine.join(2)
    assert bytes(engine.stdin) == job
    # ... and no half-close: the job counts its stdin (TLS may not carry a half-close to the engine).
    theirs.setblocking(False)
    with pytest.raises(BlockingIOError):
        theirs.recv(1)


def test_pump_a_stream_cut_inside_a_frame_marks_the_output_cut(pair: tuple[socket.socket, socket.socket]) -> None:
    # The connection ends in the middle of a frame: the rest of the hook's output is lost.
    ours, theirs = pair
    job = encode_job(NONCE, "/", "x", {}, watch=40)
    reply = frame(STDOUT, ACK + b"kept") + frame(STDOUT, b"0123456789")[:-3]
    FakeEngine(theirs, reply, stdin_length=len(job)).start()
    reader, out, err = JobReader(NONCE), CappedBuffer(1 << 20), CappedBuffer(1 << 20)
    end = pump_job(ours, job, time.monotonic() + 5, reader, out, err)
    assert end == "eof" and not reader.done
    assert out.getvalue().startswith(b"kept")
    assert out.truncated and err.truncated


def test_pump_forged_markers_do_not_end_the_run(pair: tuple[socket.socket, socket.socket]) -> None:
    ours, theirs = pair
    forged = marker(0, 0, nonce=OTHER)
    reply = frame(STDOUT, ACK + forged) + frame(STDERR, forged) + frame(STDOUT, b"still here\n")
    job = encode_job(NONCE, "/", "x", {}, watch=40)
    FakeEngine(theirs, reply, keep_open=True, stdin_length=len(job)).start()
    end, reader, out, err = pump(ours, job, timeout=0.5)
    assert end == "deadline" and not reader.done
    assert out == forged + b"still here\n"
    assert err == forged  # not this job's nonce: output like any other


def test_pump_until_eof_does_not_end_on_markers_while_the_stream_is_open(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    # A hook that stole its nonce prints this job's markers and lives on:
    # with a writable mount the run must not end before its last process.
    ours, theirs = pair
    FakeEngine(theirs, frame(STDOUT, ACK + marker(0, 0)) + frame(STDERR, marker(0, 0)), keep_open=True,
               stdin_length=3).start()
    end, reader, _, _ = pump(ours, b"job", timeout=0.5, until_eof=True)
    assert end == "deadline"
    assert reader.done  # the markers were there: only the open stream kept the run going


def test_pump_until_eof_takes_the_last_markers_once_the_stream_ends(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    ours, theirs = pair
    forged = marker(0, 0)  # this job's nonce, stolen
    theirs.sendall(
        frame(STDOUT, ACK + forged)
        + frame(STDERR, forged)
        + frame(STDOUT, b"still here\n" + marker(3, 0))
        + frame(STDERR, marker(3, 0))
    )
    theirs.shutdown(socket.SHUT_WR)  # the container's last process is gone
    end, reader, out, err = pump(ours, b"job", until_eof=True)
    assert end == "done" and reader.status == 3
    assert out == forged + b"still here\n"
    assert err == forged


def test_pump_end_of_stream_without_markers(pair: tuple[socket.socket, socket.socket]) -> None:
    ours, theirs = pair
    theirs.sendall(frame(STDOUT, ACK + b"partial " + marker(0, 0)[:15]))
    theirs.shutdown(socket.SHUT_WR)  # the container died
    end, reader, out, _ = pump(ours, b"job")
    assert end == "eof" and reader.acknowledged and not reader.done
    assert out == b"partial " + marker(0, 0)[:15]


def test_pump_returns_with_stdin_unsent_when_the_hook_ignores_it(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    ours, theirs = pair
    FakeEngine(
        theirs,
        frame(STDOUT, ACK + marker(0, 0)) + frame(STDERR, marker(0, 0)),
        read_stdin=False,
        keep_open=True,
    ).start()
    end, _, _, _ = pump(ours, b"z" * (32 << 20))
    assert end == "done"


@pytest.mark.parametrize("line, protocol", [(READY_LINE, 3), (RUNNER_READY_LINE, 4)], ids=["bootstrap", "runner"])
def test_await_ready_reads_exactly_the_ready_line(
    pair: tuple[socket.socket, socket.socket], line: bytes, protocol: int
) -> None:
    ours, theirs = pair
    theirs.sendall(frame(STDOUT, line[:4]) + frame(STDOUT, line[4:]))
    assert await_ready(ours, time.monotonic() + 1) == protocol
    theirs.sendall(frame(STDOUT, b"later"))
    assert ours.recv(100) == frame(STDOUT, b"later")  # nothing past it was consumed


@pytest.mark.parametrize(
    "data", [frame(STDERR, READY_LINE), frame(STDOUT, b"sh: 1: sleep: not found\n"), b"",
             frame(STDOUT, b"hookcage-ready/sh\n"), frame(STDOUT, RUNNER_READY_LINE[:-1] + b"x")]
)
def test_await_ready_refuses_anything_else(
    pair: tuple[socket.socket, socket.socket], data: bytes
) -> None:
    ours, theirs = pair
    theirs.sendall(data)
    if not data:
        theirs.shutdown(socket.SHUT_WR)
    assert await_ready(ours, time.monotonic() + 0.3) == 0


# --------------------------------------------------------------------------
# Creation keys
# --------------------------------------------------------------------------


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "src").mkdir(parents=True)
    (root / "hook.sh").write_text("echo hi\n")
    (root / "other.sh").write_text("echo other\n")
    return root


def key_of(request: RunRequest) -> str:
    create, host = container_args(DockerProfile(user="1000:1000"), request, name="n", now=0.0)
    return creation_key(create, host, [str(Path(t)) for t in request.overlays])


def test_per_run_values_do_not_change_the_key(project: Path, tmp_path: Path) -> None:
    staged_a, staged_b = tmp_path / "a", tmp_path / "b"
    staged_a.write_text("1")
    staged_b.write_text("2")
    base = RunRequest(
        command="sh hook.sh", project_dir=str(project), cwd=str(project),
        overlays={str(project / "hook.sh"): str(staged_a)},
    )
    variant = RunRequest(
        command="other", stdin=b"{}", cwd=str(project / "src"), env={"A": "1"}, timeout=3,
        project_dir=str(project), labels={"hookcage.hook": "x"}, output_cap=10,
        overlays={str(project / "hook.sh"): str(staged_b)},
    )
    assert key_of(base) == key_of(variant)


def test_what_is_fixed_at_creation_changes_the_key(project: Path, tmp_path: Path) -> None:
    staged = tmp_path / "s"
    staged.write_text("1")
    transcript = tmp_path / "t.jsonl"
    transcript.write_text("{}\n")
    base = RunRequest(command="c", project_dir=str(project), cwd=str(project))
    variants = [
        RunRequest(command="c", project_dir=str(project / "src"), cwd=str(project)),
        RunRequest(command="c", project_dir=str(project), options=SandboxOptions(workspace="rw")),
        RunRequest(command="c", project_dir=str(project), options=SandboxOptions(workspace="none")),
        RunRequest(command="c", project_dir=str(project), options=SandboxOptions(image="other:1")),
        RunRequest(command="c", project_dir=str(project), options=SandboxOptions(memory="64m")),
        RunRequest(command="c", project_dir=str(project), options=SandboxOptions(cpus=0.5)),
        RunRequest(command="c", project_dir=str(project), options=SandboxOptions(pids=64)),
        RunRequest(command="c", project_dir=str(project), options=SandboxOptions(network="bridge")),
        RunRequest(
            command="c", project_dir=str(project), options=SandboxOptions(mounts=(str(project / "src"),))
        ),
        RunRequest(command="c", project_dir=str(project), transcript_path=str(transcript)),
        RunRequest(command="c", project_dir=str(project), overlays={str(project / "hook.sh"): str(staged)}),
        RunRequest(command="c", project_dir=str(project), overlays={str(project / "other.sh"): str(staged)}),
    ]
    keys = {key_of(base), *(key_of(v) for v in variants)}
    assert len(keys) == len(variants) + 1


@pytest.mark.parametrize(
    ("workspace", "extra", "writable"),
    [
        ("ro", [], False),
        ("none", [], False),
        ("rw", [], True),
        ("ro", ["{project}/out"], False),  # extra mounts are always read-only
    ],
)
def test_a_writable_bind_is_told_apart(
    project: Path, workspace: str, extra: list[str], writable: bool
) -> None:
    (project / "out").mkdir(exist_ok=True)
    options = SandboxOptions(workspace=workspace, mounts=tuple(m.format(project=project) for m in extra))
    request = RunRequest(command=":", cwd=str(project), project_dir=str(project), options=options)
    _, host = container_args(DockerProfile(), request, name="x", now=0)
    assert has_writable_bind(host) is writable


def test_profile_changes_the_key(project: Path) -> None:
    request = RunRequest(command="c", project_dir=str(project))
    keys = set()
    for profile in [
        DockerProfile(user="1000:1000"),
        DockerProfile(user="1001:1001"),
        DockerProfile(user="1000:1000", runtime="runsc"),
        DockerProfile(user="1000:1000", hostname="other"),
        DockerProfile(user="1000:1000", tmpfs_size="1m"),
        DockerProfile(user="1000:1000", file_size="1m"),
    ]:
        create, host = container_args(profile, request, name="n", now=0.0)
        keys.add(creation_key(create, host, []))
    assert len(keys) == 6


# --------------------------------------------------------------------------
# Bookkeeping, on a made-up clock
# --------------------------------------------------------------------------

IDLE = 100.0
WALL = 1_000_000.0


def spare(key: str, ready: float, name: str = "", *, expires: float | None = None) -> Spare:
    return Spare(
        container=name or f"{key}-{ready}",
        key=key,
        ready=ready,
        idle_deadline=ready + IDLE,
        expires=WALL + IDLE + 60 + EXPIRY_MARGIN if expires is None else expires,
    )


def fill(book: PoolBook, now: float) -> list[str]:
    """Run the refill side until it has nothing to create; the keys created, in order."""
    created = []
    for _ in range(100):
        plan = book.plan(now)
        if plan.create is None:
            return created
        created.append(plan.create)
        assert book.add(spare(plan.create, now, f"{plan.create}#{len(created)}"), now)
    raise AssertionError("the book never stops creating")


def test_an_unknown_key_gets_nothing() -> None:
    book = PoolBook(pool_size=2, pool_total=8, idle_timeout=IDLE)
    assert book.take("k", 10, 0, WALL) is None
    assert book.plan(0).create is None


def test_a_wanted_key_is_filled_to_pool_size_and_one_spare_serves_one_run() -> None:
    book = PoolBook(pool_size=2, pool_total=8, idle_timeout=IDLE)
    book.want("k", 10, now=0)
    assert fill(book, 0) == ["k", "k"]
    first = book.take("k", 10, 1, WALL)
    second = book.take("k", 10, 1, WALL)
    assert first is not None and second is not None and first is not second
    assert book.take("k", 10, 1, WALL) is None
    assert fill(book, 1) == ["k", "k"]


def test_a_key_whose_runs_come_in_bursts_keeps_as_many_ready() -> None:
    # One event with five matching hooks of one shape: five runs at once.
    book = PoolBook(pool_size=2, pool_total=8, idle_timeout=IDLE)
    for i in range(5):
        book.want("k", 10, now=0.01 * i)
    assert fill(book, 0.1) == ["k"] * 5
    assert book.size("k") == 5


def test_bursts_are_capped_by_the_total_and_prewarms_do_not_count() -> None:
    book = PoolBook(pool_size=2, pool_total=3, idle_timeout=IDLE)
    for i in range(10):
        book.want("k", 10, now=0.01 * i)
        book.want("p", 10, now=0.01 * i, run=False)
    assert book.size("k") == 3
    assert book.size("p") == 2
    spread = PoolBook(pool_size=2, pool_total=8, idle_timeout=IDLE)
    for i in range(10):
        spread.want("k", 10, now=2.0 * i)  # one at a time: no burst
    assert spread.size("k") == 2


def test_a_key_without_a_ready_spare_is_hungry() -> None:
    book = PoolBook(pool_size=2, pool_total=8, idle_timeout=IDLE)
    assert not book.hungry(0)
    book.want("k", 10, now=0)
    assert book.hungry(0)  # wanted, nothing ready yet
    assert fill(book, 0) == ["k", "k"]
    assert not book.hungry(0)
    assert book.take("k", 10, 1, WALL) is not None
    assert not book.hungry(1)  # one left: refilling can wait for the run
    assert book.take("k", 10, 1, WALL) is not None
    assert book.hungry(1)


def test_no_pool_size_means_no_pool_whatever_the_bursts() -> None:
    book = PoolBook(pool_size=0, pool_total=8, idle_timeout=IDLE)
    for i in range(5):
        book.want("k", 10, now=0.01 * i)
    assert book.size("k") == 0
    assert book.plan(0.1).create is None


def test_creation_in_flight_counts_against_the_size() -> None:
    book = PoolBook(pool_size=2, pool_total=8, idle_timeout=IDLE)
    book.want("k", 10, now=0)
    assert book.plan(0).create == "k"
    assert book.plan(0).create == "k"
    assert book.plan(0).create is None  # two on their way


def test_the_total_cap_goes_to_the_most_recently_wanted_keys() -> None:
    book = PoolBook(pool_size=2, pool_total=3, idle_timeout=IDLE)
    book.want("old", 10, now=0)
    assert fill(book, 0) == ["old", "old"]
    book.want("new", 10, now=1)
    plan = book.plan(1)
    # "new" gets its 2, "old" keeps 1: one of its spares goes.
    assert [s.key for s in plan.discard] == ["old"]
    assert plan.create == "new"
    book.add(spare("new", 1), 1)
    assert fill(book, 1) == ["new"]
    assert (book.ready("new"), book.ready("old"), book.total()) == (2, 1, 3)


def test_spares_near_their_idle_end_are_not_taken_and_get_replaced() -> None:
    book = PoolBook(pool_size=1, pool_total=8, idle_timeout=IDLE)
    book.want("k", 10, now=0)
    fill(book, 0)
    late = IDLE - TAKE_MARGIN / 2
    book.want("k", 10, now=late)
    assert book.take("k", 10, late, WALL) is None  # would die under the job
    plan = book.plan(late)
    assert [s.container for s in plan.discard] == ["k#1"]
    assert plan.create == "k"


def test_a_spare_is_only_given_a_run_that_ends_before_its_expiry_label() -> None:
    book = PoolBook(pool_size=1, pool_total=8, idle_timeout=IDLE)
    book.want("k", 10, now=0)
    book.plan(0)
    book.add(spare("k", 0, expires=WALL + 40 + EXPIRY_MARGIN), 0)
    assert book.take("k", 60, 1, WALL) is None  # reap could remove it mid-run
    assert book.ready("k") == 1  # kept for shorter runs
    assert book.take("k", 40, 1, WALL) is not None


def test_the_longest_timeout_asked_is_remembered_for_the_expiry() -> None:
    book = PoolBook(pool_size=1, pool_total=8, idle_timeout=IDLE)
    book.want("k", 10, now=0)
    book.want("k", 90, now=1)
    book.want("k", 5, now=2)
    assert book.template_timeout("k") == 90


def test_a_key_not_wanted_for_the_idle_timeout_is_forgotten() -> None:
    book = PoolBook(pool_size=2, pool_total=8, idle_timeout=IDLE)
    book.want("k", 10, now=0)
    fill(book, 0)
    assert book.plan(IDLE - 1 - TAKE_MARGIN).discard == ()
    plan = book.plan(IDLE)
    assert sorted(s.container for s in plan.discard) == ["k#1", "k#2"]
    assert plan.create is None and not book.known("k")


def test_a_container_finished_after_its_key_was_forgotten_is_not_kept() -> None:
    book = PoolBook(pool_size=1, pool_total=8, idle_timeout=IDLE)
    book.want("k", 10, now=0)
    assert book.plan(0).create == "k"
    assert book.plan(IDLE + 1).discard == ()  # still creating: remembered
    assert not book.add(spare("k", IDLE + 1), IDLE + 1)


def test_creation_failures_back_off_doubling() -> None:
    book = PoolBook(pool_size=1, pool_total=8, idle_timeout=IDLE)
    book.want("k", 10, now=0)
    assert book.plan(0).create == "k"
    book.failed("k", now=0)
    assert book.plan(0.5).create is None
    assert book.plan(1.0).create == "k"
    book.failed("k", now=1.0)
    assert book.plan(2.5).create is None
    assert book.plan(3.0).create == "k"
    book.add(spare("k", 3.0), 3.0)  # success resets the pause
    book.take("k", 10, 3.1, WALL)
    assert book.plan(3.1).create == "k"
    book.failed("k", now=3.1)
    assert book.next_change(3.1) == pytest.approx(4.1)


def test_a_key_whose_spares_keep_failing_before_the_job_goes_cold() -> None:
    book = PoolBook(pool_size=1, pool_total=8, idle_timeout=IDLE)
    book.want("k", 10, now=0)
    for _ in range(3):
        book.started("k", ok=False, now=0)
    assert book.plan(0).create is None
    book.want("k", 10, now=IDLE)
    assert book.plan(IDLE).create == "k"


def test_drain_hands_back_every_spare() -> None:
    book = PoolBook(pool_size=2, pool_total=8, idle_timeout=IDLE)
    book.want("a", 10, now=0)
    book.want("b", 10, now=0)
    fill(book, 0)
    assert sorted(book.containers()) == ["a#1", "a#2", "b#3", "b#4"]
    assert len(book.drain()) == 4
    assert book.total() == 0 and book.containers() == []


# --------------------------------------------------------------------------
# The pool's orchestration, against a fake engine
# --------------------------------------------------------------------------


class FakeContainer:
    """One container of the fake engine: its stream and a made-up program."""

    def __init__(
        self, cid: str, command: list[str], labels: dict[str, str], host: dict[str, object],
        environment: dict[str, str] | None = None,
    ) -> None:
        self.id, self.command, self.labels, self.host = cid, command, labels, host
        self.environment = environment or {}
        """What it was created with: a hook's environment is this plus the job's entries."""
        self.ours, self.engine = socket.socketpair()
        self.running = False
        self.exit_code: int | None = None
        self.removed = False

    def start(self) -> None:
        self.running = True
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        try:
            if self.command[3:4] == ["hookcage-pool"]:
                self._bootstrap()
            else:  # a cold run: echo stdin, say which command
                self.engine.sendall(frame(STDOUT, self._stdin() + f"cold:{hook_of(self.command[2])}\n".encode()))
                self.exit_code = 0
        except OSError:
            self.exit_code = 137  # killed
        finally:
            self.running = False
            self.engine.close()

    def _stdin(self) -> bytes:
        data = b""
        while chunk := self.engine.recv(65536):
            data += chunk
        return data

    def _bootstrap(self) -> None:
        time.sleep(0.05)  # starting takes a while, as with a real engine
        self.engine.sendall(frame(STDOUT, READY_LINE))
        data, complete = b"", False
        while True:  # the job, then its stdin: as many bytes as it counts, or up to our half-close ("-")
            with contextlib.suppress(StopIteration, AssertionError, ValueError):
                decode_job(data)
                complete = True
                if data.split(b"\n", 5)[3] != b"-":
                    break
            chunk = self.engine.recv(65536)
            if not chunk:
                break
            data += chunk
        if not complete:
            self.exit_code = 0
            return
        nonce, cwd, command, entries, stdin = decode_job(data)
        env = dict(self.environment)
        env.update(entry.split("=", 1) for entry in entries)
        env = [f"{k}={v}" for k, v in env.items()]
        out = stdin + f"warm:{hook_of(command)} in {cwd} with {sorted(env)} from {self.id}\n".encode()
        end = marker(0, 0, nonce=nonce)
        self.engine.sendall(frame(STDOUT, ACK.replace(NONCE.encode(), nonce.encode()) + out))
        self.engine.sendall(frame(STDERR, end) + frame(STDOUT, end))
        self.exit_code = 0


def hook_of(script: str) -> str:
    """The hook command a run runs: a cold run's shell script (``docker.self_ending``) execs it,
    a warm job carries it as it is (the bootstrap's watch ends the container)."""
    watch, sep, quoted = script.partition("; exec /bin/sh -c ")
    if not sep:
        return script
    assert "kill -9 -1" in watch, script
    [command] = shlex.split(quoted)
    return command


class FakeClient:
    """The few Engine API calls the docker backend makes, in memory."""

    base_url = "http+docker://fake"

    def __init__(self) -> None:
        self.containers: dict[str, FakeContainer] = {}
        self.lock = threading.Lock()

    def create_host_config(self, **kwargs: object) -> dict[str, object]:
        return kwargs

    def info(self) -> dict[str, object]:  # what runtime "auto" resolves to (one call per sandbox)
        return {"Runtimes": {"runc": {}}, "DefaultRuntime": "runc"}

    def version(self) -> dict[str, object]:  # what kind of engine (Docker, not Podman)
        return {"Version": "27.0.0", "ApiVersion": "1.47", "Components": [{"Name": "Engine", "Version": "27.0.0"}]}

    def create_container(self, **kwargs: object) -> dict[str, str]:
        with self.lock:
            cid = f"c{len(self.containers):03d}"
            self.containers[cid] = FakeContainer(
                cid, kwargs["command"], kwargs["labels"], kwargs["host_config"],  # type: ignore[arg-type]
                dict(kwargs.get("environment") or {}),  # type: ignore[call-overload]
            )
        return {"Id": cid}

    def attach_socket(self, cid: str, params: object) -> socket.socket:
        return self.containers[cid].ours

    def start(self, cid: str) -> None:
        self.containers[cid].start()

    def inspect_container(self, cid: str) -> dict[str, object]:
        c = self.containers[cid]
        return {"State": {"Running": c.running, "ExitCode": c.exit_code, "OOMKilled": False}}

    def wait(self, cid: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while self.containers[cid].running and time.monotonic() < deadline:
            time.sleep(0.01)

    def kill(self, cid: str) -> None:
        with contextlib.suppress(OSError):
            self.containers[cid].engine.shutdown(socket.SHUT_RDWR)

    def remove_container(self, cid: str, force: bool = False, v: bool = False) -> None:
        self.kill(cid)
        self.containers[cid].removed = True

    def live(self) -> list[str]:
        return [cid for cid, c in self.containers.items() if not c.removed]


@pytest.fixture
def fake_pool(project: Path) -> Iterator[tuple[PooledDockerSandbox, FakeClient]]:
    client = FakeClient()
    pool = PooledDockerSandbox(client=client, reap_on_start=False, user="1000:1000")  # type: ignore[arg-type]
    yield pool, client
    pool.close()


def fake_request(project: Path, command: str = "hook", **kwargs: object) -> RunRequest:
    return RunRequest(command=command, project_dir=str(project), cwd=str(project), **kwargs)  # type: ignore[arg-type]


def settle(client: FakeClient, count: int) -> None:
    deadline = time.monotonic() + 5
    while len(client.live()) != count and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(client.live()) == count, client.live()


def test_fake_engine_first_run_is_cold_then_each_run_uses_a_fresh_container(
    fake_pool: tuple[PooledDockerSandbox, FakeClient], project: Path
) -> None:
    pool, client = fake_pool
    result, path = pool.run_with_path(fake_request(project, stdin=b"in "))
    assert path == "cold" and result.stdout == b"in cold:hook\n"
    assert pool.prewarm(fake_request(project), wait=5)
    served = []
    for i in range(4):
        assert pool.prewarm(fake_request(project), wait=5)
        result, path = pool.run_with_path(fake_request(project, f"h{i}", stdin=b"x ", env={"E": "1"}))
        assert path == "warm" and result.exit_code == 0
        text = result.stdout.decode()
        assert text.startswith(f"x warm:h{i} in {project} with ['E=1', 'HOME=/tmp', 'LANG=C.UTF-8', 'PATH=")
        served.append(text.split()[-1])
    assert len(set(served)) == 4  # one container per run
    deadline = time.monotonic() + 5
    while not all(client.containers[c].removed for c in served) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert all(client.containers[c].removed for c in served)  # used ones go, in the background
    assert pool.stats().warm == 4 and pool.stats().cold == 1


def test_fake_engine_spares_warm_up_the_interpreters_their_key_has_run(
    fake_pool: tuple[PooledDockerSandbox, FakeClient], project: Path
) -> None:
    pool, client = fake_pool

    def warm_names(ids: set[str]) -> set[str]:  # of the pooled containers (a cold run's has no such argument)
        commands = [client.containers[c].command for c in ids]
        return {argv[8] if argv[2] == LAUNCH else argv[6] for argv in commands if argv[3:4] == ["hookcage-pool"]}

    assert pool.prewarm(fake_request(project, "echo plain"), wait=5)
    first = set(client.containers)
    assert warm_names(first) == {"-"}  # nothing named yet: no warm-up
    pool.run(fake_request(project, 'python3 "$CLAUDE_PROJECT_DIR"/.claude/hooks/guard.py'))
    pool.run(fake_request(project, "jq -r .prompt"))
    deadline = time.monotonic() + 5
    while "python3" not in (later := warm_names(set(client.containers) - first)) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert "python3" in later  # what the key's hooks named, for every spare made after


def test_fake_engine_a_dead_spare_means_a_cold_run_and_is_removed(
    fake_pool: tuple[PooledDockerSandbox, FakeClient], project: Path
) -> None:
    pool, client = fake_pool
    assert pool.prewarm(fake_request(project), wait=5)
    deadline = time.monotonic() + 5
    while len(pool.spares()) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    spares = pool.spares()
    assert len(spares) == 2
    for cid in spares:
        client.kill(cid)  # both die while waiting
    result, path = pool.run_with_path(fake_request(project))
    # Cold, or warm in a container the refill made meanwhile: never a dead one.
    if path == "cold":
        assert result.stdout == b"cold:hook\n"
    else:
        assert path == "warm" and result.stdout.split()[-1].decode() not in spares
    deadline = time.monotonic() + 5
    while not all(client.containers[c].removed for c in spares) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert all(client.containers[c].removed for c in spares)  # in the background


def test_fake_engine_close_removes_everything_and_later_runs_are_cold(
    fake_pool: tuple[PooledDockerSandbox, FakeClient], project: Path
) -> None:
    pool, client = fake_pool
    assert pool.prewarm(fake_request(project), wait=5)
    assert pool.prewarm(fake_request(project, options=SandboxOptions(workspace="none")), wait=5)
    settle(client, 4)
    pool.close()
    assert client.live() == []
    result, path = pool.run_with_path(fake_request(project))
    assert (path, result.stdout) == ("cold", b"cold:hook\n") and client.live() == []


def test_fake_engine_a_pooled_container_is_made_only_as_its_key_says(
    fake_pool: tuple[PooledDockerSandbox, FakeClient], project: Path, tmp_path: Path
) -> None:
    # Session A's transcript does not exist yet: its runs' key has no transcript
    # mount, like session B's. Once it exists, a container made from A's request
    # would carry it: the pool must not hand that to B.
    pool, client = fake_pool
    transcript_a, transcript_b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    pool.run(fake_request(project, transcript_path=str(transcript_a)))
    deadline = time.monotonic() + 5
    while len(pool.spares()) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    transcript_a.write_text("{}\n")
    for _ in range(2):  # B's runs use the spares made before; refilling now must fail
        assert pool.run_with_path(fake_request(project, transcript_path=str(transcript_b)))[1] == "warm"
    while pool.stats().creation_failures == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert pool.stats().creation_failures >= 1 and pool.spares() == []
    for container in client.containers.values():
        mounts = container.host.get("mounts") or []
        assert str(transcript_a) not in {m["Source"] for m in mounts}  # type: ignore[attr-defined, index]


# -- the refill waits out an agent's burst of events ---------------------------------------------


def _keep_events_coming(pool: PooledDockerSandbox, seconds: float) -> None:
    """Events every 50 ms (a tool call's PostToolUse, PostToolBatch...) for ``seconds``."""
    ends = time.monotonic() + seconds
    while time.monotonic() < ends:
        pool.note_event()
        time.sleep(0.05)


def _both_ready(pool: PooledDockerSandbox) -> None:
    deadline = time.monotonic() + 5
    while pool.stats().ready < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert pool.stats().ready == 2


def test_the_refill_waits_for_the_events_to_settle_while_a_spare_is_ready(
    fake_pool: tuple[PooledDockerSandbox, FakeClient], project: Path
) -> None:
    pool, _client = fake_pool  # pool_size 2
    assert pool.prewarm(fake_request(project), wait=5)
    _both_ready(pool)
    created = pool.stats().created
    pool.note_event()
    assert pool.run_with_path(fake_request(project))[1] == "warm"
    _keep_events_coming(pool, 0.8)
    assert pool.stats().created == created and pool.stats().ready == 1  # one spare still ready: no hurry
    deadline = time.monotonic() + 5
    while pool.stats().ready < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert pool.stats().created == created + 1 and pool.stats().ready == 2  # once the events stopped


def test_a_key_with_no_spare_left_is_refilled_at_once_whatever_the_events(
    project: Path,
) -> None:
    client = FakeClient()
    pool = PooledDockerSandbox(client=client, reap_on_start=False, user="1000:1000",  # type: ignore[arg-type]
                               pool_size=1)
    try:
        assert pool.prewarm(fake_request(project), wait=5)
        assert pool.run_with_path(fake_request(project))[1] == "warm"
        thread = threading.Thread(target=_keep_events_coming, args=(pool, 1.5))
        thread.start()
        try:
            assert pool.prewarm(fake_request(project), wait=1.0)  # while the events keep coming
        finally:
            thread.join()
    finally:
        pool.close()


def test_events_without_a_pause_hold_the_refill_back_no_longer_than_settle_max(
    fake_pool: tuple[PooledDockerSandbox, FakeClient], project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from executor.sandbox import poolrefill

    monkeypatch.setattr(poolrefill, "SETTLE_MAX", 0.4)
    pool, _client = fake_pool
    assert pool.prewarm(fake_request(project), wait=5)
    _both_ready(pool)
    created = pool.stats().created
    assert pool.run_with_path(fake_request(project))[1] == "warm"
    thread = threading.Thread(target=_keep_events_coming, args=(pool, 3.0))
    thread.start()
    try:
        deadline = time.monotonic() + 2.5
        while pool.stats().ready < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert pool.stats().created == created + 1  # refilled while the events still came
    finally:
        thread.join()
