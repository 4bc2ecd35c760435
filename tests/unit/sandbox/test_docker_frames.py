"""The docker backend's pure parts: frames, caps, error mapping, create arguments.

No Docker engine needed: frames are literal bytes, the stream pump talks to a
socketpair, and create arguments are checked as plain dicts.
"""

from __future__ import annotations

import http.client
import math
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker.errors  # type: ignore[import-untyped, unused-ignore]
import docker.utils.socket  # type: ignore[import-untyped, unused-ignore]
import pytest
import requests  # type: ignore[import-untyped, unused-ignore]
import requests.exceptions  # type: ignore[import-untyped, unused-ignore]
import urllib3.exceptions
from support import FakeEngine

from executor.core.options import SandboxOptions
from executor.errors import SandboxError, SandboxUnavailable
from executor.sandbox.base import RunRequest
from executor.sandbox.docker import (
    BACKEND_ERRORS,
    BASE_ENV,
    DEFAULT_IMAGE,
    EXPIRES_LABEL,
    MANAGED_LABEL,
    NOBODY,
    SELF_END_PIDS,
    STDERR,
    STDOUT,
    SYSTEMERR,
    CappedBuffer,
    DockerProfile,
    FrameError,
    FrameState,
    container_args,
    default_user,
    demux_frames,
    is_transient,
    map_engine_error,
    pump,
    retry_transient,
    self_ending,
)

URL = "unix:///var/run/docker.sock"


def frame(stream: int, payload: bytes) -> bytes:
    return bytes([stream, 0, 0, 0]) + len(payload).to_bytes(4, "big") + payload


def decode(reads: list[bytes]) -> tuple[FrameState, list[tuple[int, bytes]]]:
    """Feed reads one by one; merge consecutive pieces of the same stream."""
    state = FrameState()
    merged: list[tuple[int, bytes]] = []
    for data in reads:
        state, pieces = demux_frames(state, data)
        for stream, piece in pieces:
            if merged and merged[-1][0] == stream:
                merged[-1] = (stream, merged[-1][1] + bytes(piece))
            else:
                merged.append((stream, bytes(piece)))
    return state, merged


# --------------------------------------------------------------------------
# Frames
# --------------------------------------------------------------------------

STREAM = frame(STDOUT, b"hello ") + frame(STDERR, b"oops\n") + frame(STDOUT, b"world\n")
EXPECTED = [(STDOUT, b"hello "), (STDERR, b"oops\n"), (STDOUT, b"world\n")]


def test_whole_frames_in_one_read() -> None:
    state, pieces = decode([STREAM])
    assert pieces == EXPECTED
    assert state == FrameState(b"", STDOUT, 0)


def test_every_split_point_gives_the_same_result() -> None:
    for cut in range(len(STREAM) + 1):
        _, pieces = decode([STREAM[:cut], STREAM[cut:]])
        assert pieces == EXPECTED, cut


def test_byte_by_byte_reads() -> None:
    _, pieces = decode([bytes([b]) for b in STREAM])
    assert pieces == EXPECTED


def test_header_split_keeps_partial_header_in_state() -> None:
    state, pieces = demux_frames(FrameState(), frame(STDERR, b"abc")[:5])
    assert pieces == []
    assert state.header == b"\x02\x00\x00\x00\x00"
    state, pieces = demux_frames(state, b"\x00\x00\x03ab")
    assert [(s, bytes(p)) for s, p in pieces] == [(STDERR, b"ab")]
    assert state.remaining == 1


def test_payload_comes_out_before_its_frame_is_complete() -> None:
    # A frame declaring 4 GiB must not make the decoder wait (or buffer) for it.
    header = bytes([STDOUT, 0, 0, 0]) + (2**32 - 1).to_bytes(4, "big")
    state, pieces = demux_frames(FrameState(), header + b"x" * 10)
    assert [(s, bytes(p)) for s, p in pieces] == [(STDOUT, b"x" * 10)]
    assert state.remaining == 2**32 - 1 - 10


def test_empty_frames_and_empty_reads() -> None:
    state, pieces = decode([b"", frame(STDOUT, b""), b"", frame(STDERR, b"e")])
    assert pieces == [(STDERR, b"e")]
    assert state == FrameState(b"", STDERR, 0)


def test_engine_system_error_stream_is_reported_as_its_own_stream() -> None:
    _, pieces = decode([frame(SYSTEMERR, b"engine trouble")])
    assert pieces == [(SYSTEMERR, b"engine trouble")]


def test_binary_payload_is_preserved_exactly() -> None:
    payload = bytes(range(256)) + b"\x1b]0;title\x07\xff\xfe"
    _, pieces = decode([frame(STDOUT, payload)])
    assert pieces == [(STDOUT, payload)]


@pytest.mark.parametrize(
    "header",
    [
        b"\x04\x00\x00\x00\x00\x00\x00\x01",  # unknown stream
        b"\x01\x00\x01\x00\x00\x00\x00\x01",  # padding not zero
        b"HTTP/1.1",  # a tty stream or a plain HTTP body, not frames
    ],
)
def test_bad_headers_are_refused(header: bytes) -> None:
    with pytest.raises(FrameError):
        demux_frames(FrameState(), header + b"x")


# --------------------------------------------------------------------------
# The output cap
# --------------------------------------------------------------------------


def test_capped_buffer_keeps_up_to_the_cap() -> None:
    buf = CappedBuffer(5)
    buf.add(b"abc")
    assert (buf.getvalue(), buf.truncated) == (b"abc", False)
    buf.add(memoryview(b"de"))
    assert (buf.getvalue(), buf.truncated) == (b"abcde", False)
    buf.add(b"")
    assert buf.truncated is False
    buf.add(b"f")
    assert (buf.getvalue(), buf.truncated) == (b"abcde", True)


def test_capped_buffer_cuts_a_chunk_that_crosses_the_cap() -> None:
    buf = CappedBuffer(4)
    buf.add(b"abcdefgh")
    assert (buf.getvalue(), buf.truncated) == (b"abcd", True)


def test_capped_buffer_with_zero_cap() -> None:
    buf = CappedBuffer(0)
    buf.add(b"x")
    assert (buf.getvalue(), buf.truncated) == (b"", True)


# --------------------------------------------------------------------------
# The stream pump, against a fake engine on a socketpair
# --------------------------------------------------------------------------


def test_pump_writes_stdin_half_closes_and_reads_to_the_end(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    ours, theirs = pair
    engine = FakeEngine(theirs, frame(STDOUT, b"out") + frame(STDERR, b"err"))
    engine.start()
    out, err = CappedBuffer(100), CappedBuffer(100)
    assert pump(ours, b"payload" * 100_000, time.monotonic() + 5, out, err) is True
    engine.join(5)
    assert bytes(engine.stdin) == b"payload" * 100_000
    assert (out.getvalue(), err.getvalue()) == (b"out", b"err")


def test_pump_without_stdin_still_signals_end_of_input(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    ours, theirs = pair
    engine = FakeEngine(theirs, frame(STDOUT, b"0\n"))
    engine.start()
    out, err = CappedBuffer(100), CappedBuffer(100)
    assert pump(ours, b"", time.monotonic() + 5, out, err) is True
    assert out.getvalue() == b"0\n"


def test_pump_survives_a_peer_that_never_reads_stdin(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    ours, theirs = pair
    engine = FakeEngine(theirs, frame(STDOUT, b"ignored you"), read_stdin=False)
    engine.start()
    out, err = CappedBuffer(100), CappedBuffer(100)
    assert pump(ours, b"x" * 10_000_000, time.monotonic() + 5, out, err) is True
    assert out.getvalue() == b"ignored you"


def test_pump_gives_up_at_the_deadline(pair: tuple[socket.socket, socket.socket]) -> None:
    ours, theirs = pair
    theirs.sendall(frame(STDOUT, b"partial"))  # and never closes
    out, err = CappedBuffer(100), CappedBuffer(100)
    began = time.monotonic()
    assert pump(ours, b"", began + 0.3, out, err) is False
    assert 0.25 < time.monotonic() - began < 1.0
    assert out.getvalue() == b"partial"


def test_pump_caps_each_stream_while_streaming(pair: tuple[socket.socket, socket.socket]) -> None:
    ours, theirs = pair
    chunk = frame(STDOUT, b"y\n" * 16384)
    engine = FakeEngine(theirs, chunk * 64 + frame(STDERR, b"tail"), read_stdin=False)
    engine.start()
    out, err = CappedBuffer(1000), CappedBuffer(1000)
    assert pump(ours, b"", time.monotonic() + 5, out, err) is True
    assert out.getvalue() == b"y\n" * 500
    assert out.truncated and not err.truncated
    assert err.getvalue() == b"tail"


@pytest.mark.parametrize(
    "tail",
    [
        frame(STDOUT, b"0123456789")[:-4],  # a payload announced and cut short
        frame(STDERR, b"late")[:5],  # a header cut short
    ],
    ids=["payload", "header"],
)
def test_a_stream_that_ends_inside_a_frame_is_never_a_whole_output(
    pair: tuple[socket.socket, socket.socket], tail: bytes
) -> None:
    # The engine (or anything between) closes the connection in the middle of a frame: the rest of
    # the hook's output never came. Both buffers say so (truncated), as the run log then does.
    ours, theirs = pair
    engine = FakeEngine(theirs, frame(STDOUT, b"whole\n") + tail, read_stdin=False)
    engine.start()
    out, err = CappedBuffer(1000), CappedBuffer(1000)
    assert pump(ours, b"", time.monotonic() + 5, out, err) is True
    assert out.getvalue().startswith(b"whole\n")
    assert out.truncated and err.truncated


def test_a_stream_that_ends_between_frames_is_whole(pair: tuple[socket.socket, socket.socket]) -> None:
    ours, theirs = pair
    engine = FakeEngine(theirs, frame(STDOUT, b"whole\n") + frame(STDERR, b""), read_stdin=False)
    engine.start()
    out, err = CappedBuffer(1000), CappedBuffer(1000)
    assert pump(ours, b"", time.monotonic() + 5, out, err) is True
    assert (out.getvalue(), out.truncated, err.truncated) == (b"whole\n", False, False)


# --------------------------------------------------------------------------
# Error mapping
# --------------------------------------------------------------------------


def _response(status: int) -> requests.Response:
    response = requests.Response()
    response.status_code = status
    response.url = "http+docker://localhost/v1.41/containers/create"
    response.reason = "Reason"
    return response


def api_error(status: int, explanation: str, cls: Any = docker.errors.APIError) -> Exception:
    return cls("boom", response=_response(status), explanation=explanation)  # type: ignore[no-any-return]


def wrapped_connection_error(cause: BaseException) -> Exception:
    inner = urllib3.exceptions.ProtocolError("Connection aborted.", cause)
    return requests.exceptions.ConnectionError(inner)  # type: ignore[no-any-return, unused-ignore]


def wrapped_read_timeout() -> Exception:
    """How docker-py's unix-socket transport reports a read timeout."""
    inner = urllib3.exceptions.ReadTimeoutError(None, "/containers/x/wait", "Read timed out.")  # type: ignore[arg-type]
    return requests.exceptions.ConnectionError(inner)  # type: ignore[no-any-return, unused-ignore]


def _subclasses(cls: type[BaseException]) -> Iterator[type[BaseException]]:
    yield cls
    for sub in cls.__subclasses__():
        yield from _subclasses(sub)


BACKEND_PACKAGES = ("docker", "requests", "urllib3", "http", "socket", "ssl", "executor")


def test_every_backend_exception_type_maps_to_a_hookcage_exception() -> None:
    """Each exception class docker-py and the layers under it define has a mapping."""
    checked = 0
    for root in BACKEND_ERRORS:
        for cls in set(_subclasses(root)):
            if cls.__module__.split(".")[0] not in BACKEND_PACKAGES:
                continue
            try:
                exc = cls("boom\nsecond line")
            except TypeError:
                continue  # needs structured arguments (high-level API only)
            mapped = map_engine_error(exc, step="create", url=URL, image=DEFAULT_IMAGE)
            assert isinstance(mapped, SandboxError), cls
            assert "\n" not in str(mapped) and str(mapped), cls
            checked += 1
    assert checked > 40  # the walk really found docker's, requests' and urllib3's trees


@pytest.mark.parametrize(
    ("exc", "kind", "message"),
    [
        (
            docker.errors.DockerException(
                "Error while fetching server API version: ('Connection aborted.', "
                "FileNotFoundError(2, 'No such file or directory'))"
            ),
            SandboxUnavailable,
            f"cannot reach the Docker engine at {URL}: start Docker, or set DOCKER_HOST",
        ),
        (
            wrapped_connection_error(FileNotFoundError(2, "No such file or directory")),
            SandboxUnavailable,
            f"cannot reach the Docker engine at {URL}: start Docker, or set DOCKER_HOST",
        ),
        (
            wrapped_connection_error(ConnectionRefusedError(111, "Connection refused")),
            SandboxUnavailable,
            f"cannot reach the Docker engine at {URL}: start Docker, or set DOCKER_HOST",
        ),
        (
            requests.exceptions.ConnectTimeout("slow"),
            SandboxUnavailable,
            f"cannot reach the Docker engine at {URL}: start Docker, or set DOCKER_HOST",
        ),
        (
            wrapped_connection_error(PermissionError(13, "Permission denied")),
            SandboxUnavailable,
            f"permission denied on the Docker engine at {URL}: join the docker group, or set DOCKER_HOST",
        ),
        (
            api_error(404, "No such image: hookcage/runner:0.1.0", docker.errors.ImageNotFound),
            SandboxUnavailable,
            f"image {DEFAULT_IMAGE} is missing: run `hookcage image build`",
        ),
        (
            api_error(404, "No such image: hookcage/runner:0.1.0", docker.errors.NotFound),
            SandboxUnavailable,
            f"image {DEFAULT_IMAGE} is missing: run `hookcage image build`",
        ),
        (
            api_error(500, "driver failed\nprogramming external connectivity"),
            SandboxError,
            "the Docker engine refused to create the container (500): "
            "driver failed programming external connectivity",
        ),
        (
            requests.exceptions.ReadTimeout("Read timed out."),
            SandboxError,
            f"the Docker engine at {URL} did not answer in time (create)",
        ),
        (
            wrapped_read_timeout(),
            SandboxError,
            f"the Docker engine at {URL} did not answer in time (create)",
        ),
        (
            FrameError("bad frame header 48545450"),
            SandboxError,
            "malformed output stream from the Docker engine: bad frame header 48545450",
        ),
        (
            ConnectionResetError(104, "Connection reset by peer"),
            SandboxError,
            f"lost the connection to the Docker engine at {URL} (create): "
            "[Errno 104] Connection reset by peer",
        ),
        (
            http.client.RemoteDisconnected("Remote end closed connection without response"),
            SandboxError,
            f"lost the connection to the Docker engine at {URL} (create): "
            "Remote end closed connection without response",
        ),
    ],
)
def test_mapping_table(exc: BaseException, kind: type[SandboxError], message: str) -> None:
    mapped = map_engine_error(exc, step="create", url=URL, image=DEFAULT_IMAGE)
    assert type(mapped) is kind
    assert str(mapped) == message


def test_missing_user_image_does_not_suggest_building_the_runner() -> None:
    exc = api_error(404, "No such image: python:3.12", docker.errors.ImageNotFound)
    mapped = map_engine_error(exc, step="create", url=URL, image="python:3.12")
    assert isinstance(mapped, SandboxUnavailable)
    assert (
        str(mapped) == "image python:3.12 is missing: build or pull it first (hookcage never pulls)"
    )


def test_missing_runtime_is_unavailable() -> None:
    exc = api_error(400, "unknown or invalid runtime name: runsc")
    mapped = map_engine_error(exc, step="create", url=URL, runtime="runsc")
    assert isinstance(mapped, SandboxUnavailable)
    assert "runsc" in str(mapped)


# --------------------------------------------------------------------------
# Retries
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("exc", "conflict", "transient"),
    [
        (api_error(500, "x"), False, True),
        (api_error(503, "x"), False, True),
        (api_error(404, "x"), False, False),
        (api_error(400, "x"), False, False),
        (api_error(409, "Conflict. The container name is already in use"), False, False),
        (api_error(409, "Conflict. The container name is already in use"), True, True),
        (wrapped_connection_error(ConnectionResetError(104, "reset")), False, True),
        (wrapped_connection_error(FileNotFoundError(2, "gone")), False, False),
        (wrapped_connection_error(PermissionError(13, "denied")), False, False),
        (requests.exceptions.ReadTimeout("slow"), False, False),
        (wrapped_read_timeout(), False, False),
        (FrameError("bad"), False, False),
    ],
)
def test_which_failures_are_retried(exc: BaseException, conflict: bool, transient: bool) -> None:
    assert is_transient(exc, conflict=conflict) is transient


def test_retry_is_bounded_and_succeeds_after_transient_failures() -> None:
    calls: list[int] = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise api_error(500, "busy")
        return "ok"

    assert retry_transient(flaky) == "ok"
    assert len(calls) == 3

    calls.clear()

    def broken() -> str:
        calls.append(1)
        raise api_error(500, "busy")

    with pytest.raises(docker.errors.APIError):
        retry_transient(broken)
    assert len(calls) == 3


def test_permanent_failures_are_not_retried() -> None:
    calls: list[int] = []

    def missing() -> None:
        calls.append(1)
        raise api_error(404, "No such container", docker.errors.NotFound)

    with pytest.raises(docker.errors.NotFound):
        retry_transient(missing)
    assert len(calls) == 1


# --------------------------------------------------------------------------
# Profile -> create arguments
# --------------------------------------------------------------------------


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "src").mkdir(parents=True)
    return root


def args_for(
    project: Path, profile: DockerProfile | None = None, now: float = 1_000.5, **kwargs: Any
) -> tuple[dict[str, Any], dict[str, Any]]:
    request = RunRequest(
        **{"command": "echo hi", "project_dir": str(project), "cwd": str(project), **kwargs}
    )
    return container_args(profile or DockerProfile(), request, name="hookcage-abc", now=now)


def test_default_profile_is_hardened(project: Path) -> None:
    create, host = args_for(project, timeout=7.2)
    assert create["image"] == DEFAULT_IMAGE
    assert create["command"] == ["/bin/sh", "-c", self_ending("echo hi", 7.2)]
    assert create["name"] == "hookcage-abc"
    assert create["hostname"] == "hookcage"
    assert create["stdin_open"] is True and create["tty"] is False
    assert create["network_disabled"] is True
    assert create["user"] == NOBODY
    assert create["labels"] == {
        MANAGED_LABEL: "true",
        EXPIRES_LABEL: str(math.ceil(1_000.5 + 7.2) + 30),
    }
    assert host["network_mode"] == "none"
    assert host["read_only"] is True
    assert host["tmpfs"] == {"/tmp": "rw,noexec,nosuid,nodev,size=67108864"}
    assert host["cap_drop"] == ["ALL"]
    assert host["security_opt"] == ["no-new-privileges"]
    assert host["pids_limit"] == 256 + SELF_END_PIDS  # the hook's budget, plus the self-ending watch
    assert host["mem_limit"] == host["memswap_limit"] == 512 * 1024 * 1024
    assert host["nano_cpus"] == 1_000_000_000
    assert {"name": "fsize", "soft": 64 << 20, "hard": 64 << 20} in host["ulimits"]
    assert host["init"] is True
    assert host["log_config"] == {"type": "none"}
    assert "runtime" not in host
    for forbidden in ("privileged", "cap_add", "devices", "pid_mode", "ipc_mode", "binds"):
        assert forbidden not in host


def test_workspace_is_mounted_read_only_at_its_own_path(project: Path) -> None:
    create, host = args_for(project)
    assert host["mounts"] == [
        {
            "Type": "bind",
            "Source": str(project),
            "Target": str(project),
            "ReadOnly": True,
            "BindOptions": {"NonRecursive": True},
        }
    ]
    assert create["working_dir"] == str(project)


def test_workspace_rw_and_none(project: Path) -> None:
    _, host = args_for(project, options=SandboxOptions(workspace="rw"))
    assert host["mounts"][0]["ReadOnly"] is False
    create, host = args_for(project, options=SandboxOptions(workspace="none"))
    assert host["mounts"] == []
    assert create["working_dir"] == "/tmp"


def test_working_dir_follows_cwd_only_inside_the_workspace(project: Path, tmp_path: Path) -> None:
    assert args_for(project, cwd=str(project / "src"))[0]["working_dir"] == str(project / "src")
    assert args_for(project, cwd=str(tmp_path))[0]["working_dir"] == str(project)
    assert args_for(project, cwd=str(project / "missing"))[0]["working_dir"] == str(project)
    assert args_for(project, cwd=str(project) + "-sibling")[0]["working_dir"] == str(project)


def test_environment_is_built_from_scratch(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOOKCAGE_CANARY_SECRET", "s3cret")
    create, _ = args_for(project, env={"CLAUDE_PROJECT_DIR": str(project)})
    assert create["environment"] == {**BASE_ENV, "CLAUDE_PROJECT_DIR": str(project)}


def test_request_labels_cannot_unmark_the_container(project: Path) -> None:
    create, _ = args_for(
        project, labels={"hookcage.session": "s1", MANAGED_LABEL: "false", EXPIRES_LABEL: "9"}
    )
    assert create["labels"]["hookcage.session"] == "s1"
    assert create["labels"][MANAGED_LABEL] == "true"
    assert create["labels"][EXPIRES_LABEL] != "9"


def test_options_override_limits_image_and_network(project: Path) -> None:
    options = SandboxOptions(image="python:3.12", memory="1g", cpus=0.5, pids=64, network="bridge")
    create, host = args_for(project, DockerProfile(runtime="runc"), options=options)
    assert create["image"] == "python:3.12"
    assert host["mem_limit"] == host["memswap_limit"] == 1 << 30
    assert host["nano_cpus"] == 500_000_000
    assert host["pids_limit"] == 64 + SELF_END_PIDS
    assert create["network_disabled"] is False
    assert host["network_mode"] == "bridge"
    assert host["runtime"] == "runc"
    assert "nproc" not in [u["name"] for u in host["ulimits"]]  # under runc it would count the whole host's


def test_extra_mounts_and_transcript_are_read_only(project: Path, tmp_path: Path) -> None:
    transcript = tmp_path / "transcript.jsonl"
    transcript.write_text("{}\n")
    options = SandboxOptions(workspace="rw", mounts=(str(project / "src"),))
    _, host = args_for(project, options=options, transcript_path=str(transcript))
    by_target = {m["Target"]: m for m in host["mounts"]}
    assert by_target[str(project)]["ReadOnly"] is False
    assert by_target[str(project / "src")]["ReadOnly"] is True
    assert by_target[str(transcript)]["ReadOnly"] is True


def test_transcript_is_skipped_when_missing_or_a_symlink(project: Path, tmp_path: Path) -> None:
    link = tmp_path / "link.jsonl"
    os.symlink("/etc/shadow", link)
    for path in (str(tmp_path / "missing.jsonl"), str(link), "relative.jsonl"):
        _, host = args_for(project, transcript_path=path)
        assert [m["Target"] for m in host["mounts"]] == [str(project)]


def test_a_judged_transcript_is_bound_from_its_real_path_only_while_it_still_is_one(
    project: Path, tmp_path: Path
) -> None:
    # The service's keep-out resolved the caller's path; the bind uses that real file, and a
    # directory on the way swapped for a symlink since (a TOCTOU) means no transcript at all.
    real = tmp_path / "logs" / "t.jsonl"
    real.parent.mkdir()
    real.write_text("{}\n")
    _, host = args_for(project, transcript_path=str(project / "t.jsonl"), transcript_source=str(real))
    by_target = {m["Target"]: m for m in host["mounts"]}
    assert by_target[str(project / "t.jsonl")]["Source"] == str(real)
    assert by_target[str(project / "t.jsonl")]["ReadOnly"] is True
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "t.jsonl").write_text("secret\n")
    real.unlink()
    real.parent.rmdir()
    real.parent.symlink_to(secret)
    _, host = args_for(project, transcript_path=str(project / "t.jsonl"), transcript_source=str(real))
    assert [m["Target"] for m in host["mounts"]] == [str(project)]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"command": "-c id"},
        {"command": "echo \0"},
        {"options": SandboxOptions(image="--privileged")},
        {"options": SandboxOptions(memory="lots")},
        {"options": SandboxOptions(pids=0)},
        {"options": SandboxOptions(mounts=("/etc",))},
        {"options": SandboxOptions(mounts=("relative",))},
        {"env": {"A=B": "x"}},
    ],
)
def test_refused_requests(project: Path, kwargs: dict[str, Any]) -> None:
    with pytest.raises(SandboxError):
        args_for(project, **kwargs)


def test_extra_mount_escaping_through_a_symlink_is_refused(project: Path, tmp_path: Path) -> None:
    os.symlink(tmp_path, project / "out")
    with pytest.raises(SandboxError, match="not inside the project"):
        args_for(project, options=SandboxOptions(mounts=(str(project / "out"),)))


def test_no_extra_mounts_without_a_project() -> None:
    request = RunRequest(
        command="true", project_dir="/", options=SandboxOptions(workspace="none", mounts=("/etc",))
    )
    with pytest.raises(SandboxError, match="not inside the project"):
        container_args(DockerProfile(), request, name="n", now=0)


def test_root_or_missing_project_is_never_mounted(tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="refusing to mount"):
        args_for(Path("/"))
    with pytest.raises(SandboxError, match="does not exist"):
        args_for(tmp_path / "nope")


def test_default_user_is_the_caller_or_nobody_for_root() -> None:
    expected = NOBODY if os.getuid() == 0 else f"{os.getuid()}:{os.getgid()}"
    assert default_user() == expected


def test_socket_error_type_is_covered() -> None:
    # docker-py's own stream parser error does not derive from DockerException.
    assert not issubclass(docker.utils.socket.SocketError, docker.errors.DockerException)
    assert isinstance(docker.utils.socket.SocketError("x"), BACKEND_ERRORS)
