"""The docker backend: one fresh, hardened, network-less container per hook run.

How a run works (docker-py's low-level ``APIClient``; never the CLI, never
``containers.run``, which leaves ``StdinOnce`` off and loses end-of-input):

1. ``container_args`` turns the profile and the request into create
   arguments (pure apart from a few host-path checks; unit-tested).
2. create the container (``/bin/sh -c COMMAND``, stdin open once), retried
   on transient engine errors with a fresh name each time.
3. attach to stdin/stdout/stderr BEFORE start: nothing the hook prints can be
   missed, and no hook output can sit in the HTTP layer's buffer.
4. start, exactly once (never retried: a hook must not run twice). The
   deadline is the moment before start plus the request's timeout.
5. pump: write stdin and half-close the socket's write side (the hook sees
   end-of-input), while reading the multiplexed stream through a selector
   bounded by the deadline. ``demux_frames`` (pure) splits the 8-byte-header
   frames, wherever the reads cut them; each stream keeps ``output_cap``
   bytes and discards the rest, so memory stays bounded whatever the hook
   prints.
6. at end of stream, wait for the exit within the deadline; at the deadline,
   kill the container by id (its init process takes every child with it).
7. inspect (exit code, ``OOMKilled``) and remove (force) in ``finally``.

Engine errors (docker-py's own and the ``requests``/socket ones it lets
through) are mapped to hookcage's in one place, ``map_engine_error``. Every
container carries ``hookcage.managed=true`` and ``hookcage.expires`` so that
``reap`` can remove what a crashed run left behind.
"""

from __future__ import annotations

import contextlib
import http.client
import logging
import math
import os
import re
import secrets
import selectors
import socket
import ssl
import stat
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Literal, TypedDict, TypeVar

import docker  # type: ignore[import-untyped, unused-ignore]
import docker.errors  # type: ignore[import-untyped, unused-ignore]
import docker.utils  # type: ignore[import-untyped, unused-ignore]
import docker.utils.socket  # type: ignore[import-untyped, unused-ignore]
import requests.exceptions  # type: ignore[import-untyped, unused-ignore]
import urllib3.exceptions
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential

from executor import __version__
from executor.errors import SandboxError, SandboxUnavailable
from executor.sandbox.base import RunRequest, RunResult, Sandbox
from executor.sandbox.paths import (
    IDENTITY,
    PathMap,
    detect_path_map,
    engine_path,
    resolve_path_map,
    with_resolved_keys,
)

logger = logging.getLogger(__name__)

RUNNER_REPOSITORY = "hookcage/runner"
DEFAULT_IMAGE = f"{RUNNER_REPOSITORY}:{__version__}"
MANAGED_LABEL = "hookcage.managed"
EXPIRES_LABEL = "hookcage.expires"
EXPIRY_MARGIN = 30
"""Seconds past a run's timeout after which its container is surely abandoned."""
UNLABELLED_GRACE = 60
"""Seconds after it stopped that ``reap`` leaves a managed container without expiry."""
SELF_END_GRACE = 10
"""Seconds past its timeout after which a hook's container ends itself (:func:`self_ending`)."""
SELF_END_PIDS = 2
"""Processes the self-ending watch takes (a subshell and its ``sleep``), on top of the hook's ``pids``."""
DEFAULT_API_TIMEOUT = 10.0
"""Seconds the default client waits for one Engine API answer."""
NOBODY = "65534:65534"
BASE_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/tmp",
    "LANG": "C.UTF-8",
}
ENGINE_HINT = "start Docker, or set DOCKER_HOST"
TLS_HINT = ("DOCKER_CERT_PATH must hold the engine's ca.pem and this client's cert.pem and key.pem "
            "(DOCKER_TLS_VERIFY=1 checks the engine against that ca.pem)")

_READ_CHUNK = 256 * 1024
_WRITE_CHUNK = 64 * 1024
_RETRY_ATTEMPTS = 3

_T = TypeVar("_T")


# --------------------------------------------------------------------------
# Frames: the Engine's multiplexed attach stream (pure)
# --------------------------------------------------------------------------

STDIN, STDOUT, STDERR, SYSTEMERR = 0, 1, 2, 3
FRAME_HEADER_SIZE = 8


class FrameError(ValueError):
    """The attach stream is not the Engine's multiplexed frame format."""


@dataclass(frozen=True)
class FrameState:
    """Where the decoder stands between two reads.

    Attributes:
        header: bytes of a frame header not yet complete (fewer than 8).
        stream: the stream of the frame whose payload is being read.
        remaining: payload bytes of that frame still to come.
    """

    header: bytes = b""
    stream: int = STDOUT
    remaining: int = 0


def demux_frames(state: FrameState, data: bytes) -> tuple[FrameState, list[tuple[int, memoryview]]]:
    """Split one read of the attach stream into ``(stream, payload)`` pieces.

    A frame is an 8-byte header (stream id, three zero bytes, big-endian
    payload size) and its payload. Reads may cut frames anywhere, so the
    decoder's position travels in ``state``; payloads come out as they
    arrive, never held back until their frame is complete (so a frame's
    declared size costs no memory).

    Args:
        state: the state returned for the previous read (``FrameState()`` first).
        data: the bytes just read.

    Returns:
        The new state and the payload pieces, in order, as views into ``data``.

    Raises:
        FrameError: a header that no Engine writes (unknown stream, non-zero padding).
    """
    view = memoryview(data)
    header, stream, remaining = state.header, state.stream, state.remaining
    pieces: list[tuple[int, memoryview]] = []
    pos, end = 0, len(view)
    while pos < end:
        if remaining:
            take = min(remaining, end - pos)
            pieces.append((stream, view[pos : pos + take]))
            pos += take
            remaining -= take
            continue
        need = FRAME_HEADER_SIZE - len(header)
        header += bytes(view[pos : pos + need])
        pos += need
        if len(header) < FRAME_HEADER_SIZE:
            break
        stream = header[0]
        if stream > SYSTEMERR or header[1:4] != b"\0\0\0":
            raise FrameError(f"bad frame header {header.hex()}")
        remaining = int.from_bytes(header[4:8], "big")
        header = b""
    return FrameState(header, stream, remaining), pieces


class CappedBuffer:
    """Keeps the first ``cap`` bytes written to it and counts the rest away."""

    def __init__(self, cap: int) -> None:
        self.cap = max(cap, 0)
        self.truncated = False
        self._data = bytearray()

    def add(self, chunk: memoryview | bytes) -> None:
        """Keep what fits under the cap; mark truncated if anything is dropped."""
        room = self.cap - len(self._data)
        if len(chunk) > room:
            self.truncated = True
            chunk = chunk[:room]
        self._data += chunk

    def getvalue(self) -> bytes:
        """The bytes kept."""
        return bytes(self._data)


# --------------------------------------------------------------------------
# Errors: every backend exception mapped in one place
# --------------------------------------------------------------------------

BACKEND_ERRORS: tuple[type[BaseException], ...] = (
    docker.errors.DockerException,
    requests.exceptions.RequestException,
    urllib3.exceptions.HTTPError,
    http.client.HTTPException,
    docker.utils.socket.SocketError,
    FrameError,
    OSError,
)
"""Everything an Engine API call through docker-py can raise at us."""


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and every exception it wraps (chain, context and args), once each."""
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        todo.extend(e for e in (current.__cause__, current.__context__) if e is not None)
        todo.extend(a for a in current.args if isinstance(a, BaseException))
        reason = getattr(current, "reason", None)  # urllib3's MaxRetryError
        if isinstance(reason, BaseException):
            todo.append(reason)


def _caused_by(exc: BaseException, *kinds: type[BaseException]) -> bool:
    return any(isinstance(e, kinds) for e in _causes(exc))


def _is_unreachable(exc: BaseException) -> bool:
    """Nothing answers at the engine's address (not: it answered, then failed)."""
    if "Error while fetching server API version" in str(exc):
        return True
    if isinstance(exc, requests.exceptions.ConnectTimeout | urllib3.exceptions.NewConnectionError):
        return True
    return _caused_by(exc, FileNotFoundError, ConnectionRefusedError)


def _is_timeout(exc: BaseException) -> bool:
    """The engine did not answer in time.

    docker-py's unix-socket transport reports a read timeout as
    ``ConnectionError(ReadTimeoutError)``, not as ``ReadTimeout``.
    """
    return isinstance(exc, requests.exceptions.Timeout) or _caused_by(
        exc, TimeoutError, urllib3.exceptions.TimeoutError
    )


def _tls_reason(exc: BaseException) -> str:
    """What the TLS layer said, e.g. ``certificate verify failed: unable to get local issuer certificate``."""
    for cause in _causes(exc):
        if isinstance(cause, ssl.SSLEOFError | ConnectionResetError | ConnectionAbortedError):
            # A refused certificate often ends this way: the alert is lost when the engine hangs up.
            return "the engine closed the connection during the handshake (it may not accept this client's certificate)"
        if isinstance(cause, ssl.SSLError):
            # "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: ... (_ssl.c:1006)"
            text = _SSL_NOISE.sub("", str(cause.args[1] if len(cause.args) > 1 else cause))
            text = " ".join(text.split())[:200] or type(cause).__name__
            if "alert" in text:  # the engine's answer to this client's certificate
                return f"the engine refused this client's certificate ({text})"
            if isinstance(cause, ssl.SSLCertVerificationError):
                return f"this client refused the engine's certificate ({text})"
            return text
    return "no reason given"  # pragma: no cover - only called when an SSLError is in the chain


_SSL_NOISE = re.compile(r"^\[SSL: [A-Z0-9_]+\]\s*|\s*\(_ssl\.c:\d+\)$")


def _explanation(exc: BaseException) -> str:
    text = getattr(exc, "explanation", None) or str(exc) or type(exc).__name__
    return " ".join(str(text).split())[:300]


def _status(exc: BaseException) -> int:
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else 0


_MISSING_SOURCE = (
    re.compile(r"bind source path does not exist: (.+)$"),
    re.compile(r"failed to mount local volume: .*lowerdir=(.+): no such file or directory$"),
)


def _missing_source(exc: BaseException) -> str | None:
    """The mount source the engine said its host lacks (a bind's, an overlay's layers), if that is the error."""
    text = " ".join(str(getattr(exc, "explanation", None) or exc).split())
    for pattern in _MISSING_SOURCE:
        if match := pattern.search(text):
            return match.group(1)
    return None


def _image_hint(image: str) -> str:
    if image.startswith(RUNNER_REPOSITORY + ":"):
        return "run `hookcage image build`"
    return "build or pull it first (hookcage never pulls)"


@dataclass(frozen=True)
class _Where:
    """What a failing call was about, for the message."""

    step: str
    url: str
    image: str = ""
    runtime: str | None = None
    tls: bool = False


@dataclass(frozen=True)
class _Rule:
    applies: Callable[[BaseException, _Where], bool]
    build: Callable[[BaseException, _Where], SandboxError]


_ERROR_RULES: tuple[_Rule, ...] = (
    _Rule(
        lambda e, w: isinstance(e, docker.errors.TLSParameterError),
        lambda e, w: SandboxUnavailable(
            f"the Docker TLS settings for {w.url} are unusable ({_explanation(e)}): {TLS_HINT}"
        ),
    ),
    _Rule(
        lambda e, w: w.step == "connect" and (
            _caused_by(e, ssl.SSLError) or (w.tls and _caused_by(e, ConnectionResetError, ConnectionAbortedError))
        ),
        lambda e, w: SandboxUnavailable(
            f"the TLS handshake with the Docker engine at {w.url} failed: {_tls_reason(e)}; {TLS_HINT}"
        ),
    ),
    _Rule(
        lambda e, w: _caused_by(e, ssl.SSLError),
        lambda e, w: SandboxError(
            f"the TLS connection to the Docker engine at {w.url} failed ({w.step}): {_tls_reason(e)}"
        ),
    ),
    _Rule(
        lambda e, w: _caused_by(e, PermissionError),
        lambda e, w: SandboxUnavailable(
            f"permission denied on the Docker engine at {w.url}: "
            "join the docker group, or set DOCKER_HOST"
        ),
    ),
    _Rule(
        lambda e, w: _is_unreachable(e),
        lambda e, w: SandboxUnavailable(
            f"cannot reach the Docker engine at {w.url}: {ENGINE_HINT}"
        ),
    ),
    _Rule(
        lambda e, w: (
            isinstance(e, docker.errors.ImageNotFound)
            or (
                w.step == "create"
                and isinstance(e, docker.errors.NotFound)
                and "image" in _explanation(e).lower()
            )
        ),
        lambda e, w: SandboxUnavailable(f"image {w.image} is missing: {_image_hint(w.image)}"),
    ),
    _Rule(
        lambda e, w: (
            isinstance(e, docker.errors.APIError)
            and w.runtime is not None
            and "runtime" in _explanation(e).lower()
        ),
        lambda e, w: SandboxUnavailable(
            f"the Docker engine at {w.url} has no runtime {w.runtime!r}: "
            "install it, or leave the runtime unset"
        ),
    ),
    _Rule(
        lambda e, w: isinstance(e, docker.errors.APIError) and _missing_source(e) is not None,
        lambda e, w: SandboxError(
            f"the Docker engine's host has no {_missing_source(e)} to mount (hookcage sees a path there "
            "that the engine does not): when hookcage runs in a container, mount that path into it, or set "
            "path_map (HOOKCAGE_PATH_MAP); `hookcage doctor` checks the mapping"
        ),
    ),
    _Rule(
        lambda e, w: isinstance(e, docker.errors.APIError),
        lambda e, w: SandboxError(
            f"the Docker engine refused to {w.step} the container "
            f"({_status(e) or 'error'}): {_explanation(e)}"
        ),
    ),
    _Rule(
        lambda e, w: _is_timeout(e),
        lambda e, w: SandboxError(
            f"the Docker engine at {w.url} did not answer in time ({w.step})"
        ),
    ),
    _Rule(
        lambda e, w: isinstance(e, FrameError | docker.utils.socket.SocketError),
        lambda e, w: SandboxError(
            f"malformed output stream from the Docker engine: {_explanation(e)}"
        ),
    ),
    _Rule(
        lambda e, w: isinstance(
            e,
            OSError
            | http.client.HTTPException
            | urllib3.exceptions.HTTPError
            | requests.exceptions.RequestException,
        ),
        lambda e, w: SandboxError(
            f"lost the connection to the Docker engine at {w.url} ({w.step}): {_explanation(e)}"
        ),
    ),
    _Rule(
        lambda e, w: True,
        lambda e, w: SandboxError(f"Docker error ({w.step}): {_explanation(e)}"),
    ),
)


def map_engine_error(
    exc: BaseException, *, step: str, url: str, image: str = "", runtime: str | None = None, tls: bool = False
) -> SandboxError:
    """The hookcage exception for a backend exception; the caller raises it ``from exc``.

    Args:
        exc: what docker-py (or the socket under it) raised.
        step: the call that failed (``create``, ``start``, ...), for the message.
        url: the engine's address, for the message.
        image: the image of the run, for "missing image" messages.
        runtime: the OCI runtime asked for, if any.
        tls: the client talks TLS to the engine (also assumed for an ``https://`` url).

    Returns:
        ``SandboxUnavailable`` when the backend cannot be used at all (engine
        unreachable, image or runtime missing), else ``SandboxError``; the
        message is one line.
    """
    where = _Where(step, url, image, runtime, tls or url.startswith("https://"))
    for rule in _ERROR_RULES:
        if rule.applies(exc, where):
            return rule.build(exc, where)
    raise AssertionError("the last rule matches everything")  # pragma: no cover


def _is_transient(exc: BaseException, *, conflict: bool = False) -> bool:
    """Worth one more try: the engine answered 5xx (or 409 when ``conflict``) or dropped us."""
    if isinstance(exc, docker.errors.APIError):
        status = _status(exc)
        return status >= 500 or (conflict and status == 409)
    if _is_unreachable(exc) or _is_timeout(exc) or _caused_by(exc, PermissionError):
        return False  # retrying a timeout would multiply the wait on a stuck engine
    return isinstance(exc, requests.exceptions.ConnectionError) or _caused_by(
        exc,
        ConnectionResetError,
        ConnectionAbortedError,
        BrokenPipeError,
        http.client.RemoteDisconnected,
    )


def retry_transient(call: Callable[[], _T], *, conflict: bool = False) -> _T:
    """Run a step that is safe to repeat, retrying transient engine failures."""
    retrying = Retrying(
        stop=stop_after_attempt(_RETRY_ATTEMPTS),
        wait=wait_exponential(multiplier=0.05, max=0.5),
        retry=retry_if_exception(lambda e: _is_transient(e, conflict=conflict)),
        reraise=True,
    )
    return retrying(call)


# --------------------------------------------------------------------------
# Profile: what a container looks like
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class DockerProfile:
    """Executor-wide container defaults; a request's options may widen some."""

    image: str = DEFAULT_IMAGE
    runtime: str | None = None
    memory: str = "512m"
    cpus: float = 1.0
    pids: int = 256
    tmpfs_size: str = "64m"
    file_size: str = "64m"
    hostname: str = "hookcage"
    user: str | None = None
    """``uid:gid``; ``None``: decided per run by :func:`default_user`."""
    paths: PathMap = IDENTITY
    """Where the engine sees hookcage's paths (:mod:`executor.sandbox.paths`)."""


def default_user(project_dir: str | None = None) -> str:
    """Who hooks run as: the invoking ``uid:gid``; when that is root, the project's owner, or nobody.

    Never root: a root invoker (CI, a container) gets the owner of the project
    directory when that is not root (so ``workspace: rw`` can write a
    developer's checkout), else ``65534:65534``.
    """
    uid, gid = os.getuid(), os.getgid()
    if uid != 0:
        return f"{uid}:{gid}"
    if project_dir:
        try:
            st = os.stat(project_dir)
        except OSError:
            return NOBODY
        if st.st_uid != 0:
            return f"{st.st_uid}:{st.st_gid if st.st_gid != 0 else st.st_uid}"
    return NOBODY


def _size(value: str | int, what: str) -> int:
    try:
        size = int(docker.utils.parse_bytes(value))
    except (docker.errors.DockerException, ValueError, TypeError) as exc:
        raise SandboxError(f"invalid {what} {value!r}: use a size such as 512m") from exc
    if size <= 0:
        raise SandboxError(f"invalid {what} {value!r}: must be positive")
    return size


def _inside(path: str, root: str) -> bool:
    return os.path.commonpath([path, root]) == root


def engine_source(path: str, paths: PathMap) -> str:
    """Where the engine finds ``path`` (as hookcage sees it), to hand it as a mount source.

    With a path map in force, symlinks are resolved here first, as hookcage
    sees them: an absolute link means another thing on the engine's host.

    Raises:
        SandboxError: the engine cannot see ``path`` (outside every path_map entry).
    """
    if not paths.active:
        return path
    return engine_path(os.path.realpath(path), paths)


def _bind(source: str, target: str, *, read_only: bool, paths: PathMap = IDENTITY) -> dict[str, Any]:
    """A bind of ``source`` (as hookcage sees it) at ``target`` in the container.

    The Mount API (unlike ``-v``) refuses a source the engine's host does not
    have instead of creating an empty directory there: a wrong path_map fails
    the run (see ``map_engine_error``), it never mounts an empty workspace.
    """
    # NonRecursive: on engines before API 1.44 a read-only bind is not
    # recursively read-only, so a host mount nested in the workspace would be
    # writable. Not bringing submounts along at all closes that.
    return {
        "Type": "bind",
        "Source": engine_source(source, paths),
        "Target": target,
        "ReadOnly": read_only,
        "BindOptions": {"NonRecursive": True},
    }


def staged_tree(request: RunRequest) -> str | None:
    """The folder that mirrors the project with the run's staged files, if the overlays form one.

    The executor stages the reviewed bytes of ``ROOT/a/b.sh`` at
    ``TREE/a/b.sh`` (one ``TREE`` per run). Such a run's read-only workspace
    is an overlay file system, ``TREE`` over the project, rather than a bind of
    the project with a bind of each staged file: a bind over a file is
    detached the moment that file is unlinked or renamed over on the host (a
    ``git checkout`` during the run), and the container would then read the
    new file. An overlay layer is looked up by name at every access, and the
    staged layer is hookcage's own: nothing in the project can take it away.

    Returns:
        ``TREE``, or None when there are no overlays or they do not mirror
        the project this way (then each is bound over its path).
    """
    if not request.overlays:
        return None
    project = os.path.normpath(request.project_dir)
    tree: str | None = None
    for target, source in request.overlays.items():
        target = os.path.normpath(target)
        if not os.path.isabs(target) or not _inside(target, project) or target == project:
            return None
        relative = os.path.relpath(target, project)
        source = os.path.normpath(source)
        if not source.endswith(os.sep + relative):
            return None
        base = source[: -len(relative) - 1]
        if tree is None:
            tree = base
        elif base != tree:
            return None
    return tree


# Characters the kernel's overlay options cannot carry unescaped.
_OVERLAY_UNSAFE = re.compile(r"[,:\\\0\n]")


def _overlay_workspace(tree: str, project: str, paths: PathMap = IDENTITY) -> dict[str, Any]:
    """An anonymous volume mounting ``tree`` over ``project`` (read-only: no upper layer).

    The engine mounts it on its host: both layers are given as the engine
    sees them (``paths``). A project path the overlay options cannot carry
    (``,``, ``:``, a backslash) is reached through a symlink beside the tree,
    holding the project's path on the engine's host, which the kernel
    follows there when it mounts.
    """
    upper_tree = engine_source(tree, paths)
    lower = engine_source(project, paths)
    if _OVERLAY_UNSAFE.search(lower):
        link = os.path.join(os.path.dirname(tree), "project")
        with contextlib.suppress(FileExistsError):
            os.symlink(lower, link)
        lower = os.path.join(engine_source(os.path.dirname(tree), paths), "project")  # not the link's target
    for path in (upper_tree, lower):
        if _OVERLAY_UNSAFE.search(path):
            raise SandboxError(f"cannot lay the reviewed files over the workspace: {path!r} holds ',', ':' or '\\'")
    return {
        "Type": "volume",
        "Target": project,
        "VolumeOptions": {
            "NoCopy": True,
            "DriverConfig": {
                "Name": "local",
                "Options": {"type": "overlay", "device": "overlay", "o": f"lowerdir={upper_tree}:{lower}"},
            },
        },
    }


def _mounts(request: RunRequest, paths: PathMap = IDENTITY) -> tuple[list[dict[str, Any]], str]:
    """The bind mounts of a run and its working directory.

    Every check looks at the paths as hookcage sees them; every source handed
    to the engine is translated by ``paths`` (:func:`engine_source`).
    """
    options = request.options
    mounts: list[dict[str, Any]] = []
    targets: set[str] = set()
    workdir = "/tmp"
    project = os.path.normpath(request.project_dir)
    tree = staged_tree(request)
    if options.workspace != "none":
        if not os.path.isabs(project) or project == "/":
            raise SandboxError(f"refusing to mount {request.project_dir!r} as the workspace")
        if not os.path.isdir(project):
            raise SandboxError(f"the project directory {project} does not exist")
        if tree is not None and options.workspace == "ro":
            mounts.append(_overlay_workspace(tree, project, paths))
            targets.update(os.path.normpath(t) for t in request.overlays)
        else:
            mounts.append(_bind(project, project, read_only=options.workspace != "rw", paths=paths))
        targets.add(project)
        cwd = os.path.normpath(request.cwd)
        workdir = (
            cwd if os.path.isabs(cwd) and _inside(cwd, project) and os.path.isdir(cwd) else project
        )
    for target, source in sorted(request.overlays.items()):
        target = os.path.normpath(target)
        if not os.path.isabs(target) or not _inside(target, project) or target == project:
            raise SandboxError(f"staged file {target!r} is not inside the project {project}")
        if target in targets:
            continue  # laid over the workspace by the overlay file system
        mounts.append(_bind(source, target, read_only=True, paths=paths))
        targets.add(target)
    real_project = os.path.realpath(project)
    for extra in options.mounts:
        path = os.path.normpath(extra)
        real = os.path.realpath(path)
        if not os.path.isabs(path) or real_project == "/" or not _inside(real, real_project):
            raise SandboxError(f"extra mount {extra!r} is not inside the project {project}")
        try:
            mode = os.stat(real).st_mode
        except OSError as exc:
            raise SandboxError(f"extra mount {extra!r} does not exist") from exc
        if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
            raise SandboxError(f"extra mount {extra!r} is not a file or directory")
        if path not in targets:
            mounts.append(_bind(real, path, read_only=True, paths=paths))
            targets.add(path)
    for bind in request.binds:
        target = os.path.normpath(bind.target)
        if not os.path.isabs(target) or not os.path.isabs(bind.source) or target in targets:
            raise SandboxError(f"refusing to bind {bind.source!r} at {bind.target!r}")
        mounts.append(_bind(bind.source, target, read_only=bind.read_only, paths=paths))
        targets.add(target)
    transcript = request.transcript_path
    if transcript and os.path.isabs(transcript):
        transcript = os.path.normpath(transcript)
        try:
            # lstat: a symlink posing as the transcript could point at a secret.
            regular = stat.S_ISREG(os.lstat(transcript).st_mode)
        except OSError:
            regular = False
        if regular and transcript not in targets:
            try:
                mounts.append(_bind(transcript, transcript, read_only=True, paths=paths))
            except SandboxError as exc:
                # As when hookcage cannot see it: the hook runs without the transcript.
                logger.warning("not mounting the transcript: %s", exc)
    return mounts, workdir


def _environment(request: RunRequest) -> dict[str, str]:
    env = {**BASE_ENV, **request.env}
    for key, value in env.items():
        if not key or "=" in key or "\0" in key or "\0" in value:
            raise SandboxError(f"invalid environment variable name or value: {key!r}")
    return env


def self_ending(command: str, timeout: float) -> str:
    """``command`` as a shell script that ends its own container ``SELF_END_GRACE`` s past ``timeout``.

    The hookcage process that started a run kills its container at the
    deadline. When that process is gone (``hookcage serve`` killed with
    SIGKILL, its container stopped), nobody would: this watch does. Before
    the hook starts, a detached subshell (a child of the container's init,
    not of the hook: the hook's ``wait`` never waits for it) sleeps, then
    kills every process of the container (``kill -9 -1``: all but init and
    itself), so init exits and the container stops; the next reap removes it
    (see ``hookcage.expires``). It fires only when pid 1 is ``docker-init``
    (the container's own pid namespace). Then the shell execs the hook
    as ``/bin/sh -c COMMAND``, so the hook sees what it always saw: the same
    pid, ``$0``, environment (``SHLVL`` unset, as a warm run has it) and
    working directory. An image without ``sleep`` just lacks the watch.
    """
    seconds = math.ceil(timeout) + SELF_END_GRACE
    quoted = "'" + command.replace("'", "'\"'\"'") + "'"
    return (
        f"( (sleep {seconds} && read -r _hc_p </proc/1/comm && [ \"$_hc_p\" = docker-init ] && kill -9 -1)"
        f" </dev/null >/dev/null 2>&1 & ); unset SHLVL _hc_p; exec /bin/sh -c {quoted}"
    )


def container_args(
    profile: DockerProfile, request: RunRequest, *, name: str, now: float
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``create_container`` and ``create_host_config`` arguments of one run.

    Args:
        profile: the executor-wide defaults.
        request: the run; its options override image, limits, network, workspace.
        name: the container name.
        now: the Unix time of creation, for the ``hookcage.expires`` label.

    Returns:
        ``(create_kwargs, host_config_kwargs)``; ``create_kwargs`` lacks
        ``host_config``, which the client builds from the second dict.

    Raises:
        SandboxError: an image or command starting with ``-``, a bad size, a
            mount that does not exist or leaves the project.
    """
    options = request.options
    image = options.image or profile.image
    if not image or image.startswith("-"):
        raise SandboxError(f"refusing image name {image!r}")
    if request.command.startswith("-") or "\0" in request.command:
        raise SandboxError("refusing a hook command that starts with '-' or holds a NUL byte")
    memory = _size(options.memory or profile.memory, "memory limit")
    cpus = options.cpus if options.cpus is not None else profile.cpus
    pids = options.pids if options.pids is not None else profile.pids
    if cpus <= 0 or pids <= 0:
        raise SandboxError(f"invalid limits: cpus={cpus}, pids={pids}")
    file_size = _size(profile.file_size, "file size limit")
    tmpfs_size = _size(profile.tmpfs_size, "tmpfs size")
    mounts, workdir = _mounts(request, profile.paths)
    network_disabled = options.network == "none"
    labels = {
        **request.labels,
        MANAGED_LABEL: "true",
        EXPIRES_LABEL: str(math.ceil(now + request.timeout) + EXPIRY_MARGIN),
    }
    create = {
        "image": image,
        "command": ["/bin/sh", "-c", self_ending(request.command, request.timeout)],
        "name": name,
        "hostname": profile.hostname,
        "user": profile.user or default_user(request.project_dir),
        "environment": _environment(request),
        "working_dir": workdir,
        "labels": labels,
        "stdin_open": True,  # with attach: OpenStdin, StdinOnce, AttachStdin/out/err
        "tty": False,
        "network_disabled": network_disabled,
    }
    host = {
        "read_only": True,
        "tmpfs": {"/tmp": f"rw,noexec,nosuid,nodev,size={tmpfs_size}"},
        "mounts": mounts,
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        "pids_limit": pids + SELF_END_PIDS,
        "mem_limit": memory,
        "memswap_limit": memory,
        "nano_cpus": round(cpus * 1e9),
        "ulimits": [
            {"name": "fsize", "soft": file_size, "hard": file_size},
            {"name": "core", "soft": 0, "hard": 0},
        ],
        "init": True,
        "log_config": {"type": "none"},
        "network_mode": "none" if network_disabled else options.network,
    }
    if profile.runtime:
        host["runtime"] = profile.runtime
    return create, host


# --------------------------------------------------------------------------
# Engine access
# --------------------------------------------------------------------------


def _env_engine_url(environ: Mapping[str, str]) -> str:
    return environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"


def engine_url(client: docker.APIClient) -> str:
    """The address a client talks to, as a user would write it (``unix:///...``)."""
    try:
        adapter = client.get_adapter(client.base_url)
    except (AttributeError, requests.exceptions.InvalidSchema):
        adapter = None  # not a requests-based client: its URL will do
    socket_path = getattr(adapter, "socket_path", None)
    if isinstance(socket_path, str):
        return f"unix://{socket_path}"
    return str(getattr(client, "base_url", "the Docker engine"))


def over_tls(client: docker.APIClient) -> bool:
    """Whether the client talks to its engine over TLS (``DOCKER_TLS_VERIFY``, e.g. GitLab's dind)."""
    return str(getattr(client, "base_url", "")).startswith("https://")


def default_client(
    *, timeout: float = DEFAULT_API_TIMEOUT, environ: Mapping[str, str] | None = None
) -> docker.APIClient:
    """An ``APIClient`` configured like ``docker.from_env`` (``DOCKER_HOST``, TLS vars).

    The API version is negotiated with the engine (one ``/version`` call), so
    this contacts the engine.

    Args:
        timeout: seconds to wait for each API answer.
        environ: where to read ``DOCKER_*`` from; ``os.environ`` by default.

    Raises:
        SandboxUnavailable: the engine cannot be reached.
        SandboxError: the environment's Docker settings are unusable.
    """
    env = dict(os.environ if environ is None else environ)
    url = _env_engine_url(env)
    kwargs: dict[str, Any] = {}
    try:
        # kwargs_from_env reads os.environ when handed an empty mapping.
        kwargs = docker.utils.kwargs_from_env(environment=env or {"DOCKER_HOST": url})
        return EngineClient(version="auto", timeout=timeout, **kwargs)
    except BACKEND_ERRORS as exc:
        raise map_engine_error(exc, step="connect", url=url, tls=bool(kwargs.get("tls"))) from exc


class EngineClient(docker.APIClient):  # type: ignore[misc, unused-ignore]
    """docker-py's ``APIClient``, but the engine's CA from ``DOCKER_CERT_PATH`` stays the one checked.

    ``requests`` lets ``REQUESTS_CA_BUNDLE`` / ``CURL_CA_BUNDLE`` replace a
    session's CA file on every request (many CI images set them), so a TLS
    engine (GitLab's ``docker:dind``) would be checked against the system
    bundle and refused. The docker CLI never reads those variables.
    """

    def merge_environment_settings(
        self, url: Any, proxies: Any, stream: Any, verify: Any, cert: Any
    ) -> dict[str, Any]:
        settings: dict[str, Any] = super().merge_environment_settings(url, proxies, stream, verify, cert)
        if isinstance(self.verify, str) and verify is None:
            settings["verify"] = self.verify
        return settings


class StateInfo(TypedDict):
    """The parts of ``State`` that a run's result needs."""

    running: bool
    exit_code: int | None
    oom_killed: bool


def _inspect(client: docker.APIClient, container: str) -> StateInfo:
    """The container's run state (retried: inspecting is safe to repeat)."""
    inspected = retry_transient(lambda: client.inspect_container(container))
    state = inspected.get("State") or {}
    code = state.get("ExitCode")
    return StateInfo(
        running=bool(state.get("Running")),
        exit_code=code if isinstance(code, int) else None,
        oom_killed=bool(state.get("OOMKilled")),
    )


def remove_container_quietly(client: docker.APIClient, container: str) -> bool:
    """Remove a container (force); ``False`` when it was already gone."""

    def call() -> bool:
        try:
            client.remove_container(container, force=True, v=True)
        except docker.errors.NotFound:
            return False
        except docker.errors.APIError as exc:
            if _status(exc) == 409 and "in progress" in _explanation(exc):
                return False  # someone else is removing it
            raise
        return True

    return retry_transient(call)


def _kill(client: docker.APIClient, container: str) -> None:
    """SIGKILL a container by id; a container that already stopped is fine."""

    def call() -> None:
        try:
            client.kill(container)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
            if _status(exc) != 409:  # 409: not running any more
                raise

    retry_transient(call)


def _wait(client: docker.APIClient, container: str, timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for a container to stop; False if it did not."""
    try:
        client.wait(container, timeout=timeout)
    except (requests.exceptions.Timeout, requests.exceptions.ConnectionError) as exc:
        if _is_timeout(exc):
            return False
        raise
    return True


def _finished_at(client: docker.APIClient, entry: Mapping[str, Any]) -> float:
    """When a stopped container stopped (Unix time); its creation if it never ran."""
    created = float(entry.get("Created") or 0)
    inspected = client.inspect_container(entry["Id"])
    finished = str((inspected.get("State") or {}).get("FinishedAt") or "")
    if finished.startswith("0001-") or not finished:
        return created
    # RFC 3339 with nanoseconds; fromisoformat takes at most microseconds.
    stamp, _, fraction = finished.rstrip("Z").partition(".")
    parsed = datetime.fromisoformat(stamp).replace(tzinfo=UTC)
    return parsed.timestamp() + float(f"0.{fraction or 0}"[:8])


POOL_LABEL = "hookcage.pool"
"""Label of a warm pool's containers (its value: the pid of the pool's process)."""


def _run_is_over(
    client: docker.APIClient, entry: Mapping[str, Any], now: float, include_running_expired: bool
) -> bool:
    labels = entry.get("Labels") or {}
    try:
        expires: float | None = float(labels[EXPIRES_LABEL])
    except (KeyError, TypeError, ValueError):
        expires = None
    expired = expires is not None and expires <= now
    state = entry.get("State")
    if state in ("exited", "dead", "created"):
        if expires is None or (POOL_LABEL in labels and not expired):
            # Not a hook run (an image build, say), or a warm pool's container
            # that ended (its pool may have been killed; a pooled container
            # never starts again): its owner may still be reading it.
            return _finished_at(client, entry) + UNLABELLED_GRACE <= now
        return expired
    if state == "removing":
        return False
    return include_running_expired and expired


def reap(
    client: docker.APIClient,
    *,
    include_running_expired: bool = True,
    everything: bool = False,
    now: float | None = None,
    labels: Mapping[str, str] | None = None,
) -> int:
    """Remove the ``hookcage.managed`` containers whose run is over.

    Over means: stopped (exited, dead or never started) and past its
    ``hookcage.expires`` (until then its run may still be reading the exit
    code), or, with ``include_running_expired``, still running past it.
    Stopped containers without the label count as over a minute after they
    stopped; running ones without it are never touched.

    Args:
        client: the Engine API client.
        include_running_expired: also remove running containers past expiry.
        everything: remove every hookcage container, runs in flight included
            (``hookcage gc --all``).
        now: the current Unix time (for tests).
        labels: only containers that also carry these labels (one engine
            may serve several users, sessions or services: touch only yours).

    Returns:
        How many containers this call removed.

    Raises:
        SandboxUnavailable: the engine cannot be reached.
        SandboxError: the engine refused to list containers.
    """
    now = time.time() if now is None else now
    url = engine_url(client)
    wanted = [f"{MANAGED_LABEL}=true", *(f"{name}={value}" for name, value in (labels or {}).items())]
    try:
        listed = retry_transient(
            lambda: client.containers(all=True, filters={"label": wanted})
        )
    except BACKEND_ERRORS as exc:
        raise map_engine_error(exc, step="list", url=url) from exc
    removed = 0
    for entry in listed:
        try:
            if everything or _run_is_over(client, entry, now, include_running_expired):
                removed += remove_container_quietly(client, entry["Id"])
        except docker.errors.NotFound:
            continue  # gone meanwhile
        except BACKEND_ERRORS as exc:
            # Left for the next reap; one stuck container must not stop the rest.
            logger.warning("could not remove container %s: %s", str(entry.get("Id"))[:12], exc)
    return removed


class EngineInfo(TypedDict):
    """What ``engine_info`` reports about the Docker engine."""

    version: str
    api_version: str
    os: str
    kernel: str
    runtimes: list[str]
    default_runtime: str
    cgroup_version: str
    cgroup_driver: str
    storage_driver: str
    memory_limit: bool
    swap_limit: bool
    pids_limit: bool
    cpu_limit: bool
    rootless: bool
    security_options: list[str]
    warnings: list[str]


def engine_info(client: docker.APIClient) -> EngineInfo:
    """The engine's version and what of the sandbox profile it can enforce.

    Raises:
        SandboxUnavailable: the engine cannot be reached.
        SandboxError: the engine refused to answer.
    """
    url = engine_url(client)
    try:
        version = retry_transient(client.version)
        info = retry_transient(client.info)
    except BACKEND_ERRORS as exc:
        raise map_engine_error(exc, step="describe", url=url) from exc
    security = [str(s) for s in info.get("SecurityOptions") or []]
    return EngineInfo(
        version=str(version.get("Version", "")),
        api_version=str(version.get("ApiVersion", "")),
        os=str(info.get("OperatingSystem", "")),
        kernel=str(info.get("KernelVersion", "")),
        runtimes=sorted(info.get("Runtimes") or {}),
        default_runtime=str(info.get("DefaultRuntime", "")),
        cgroup_version=str(info.get("CgroupVersion", "")),
        cgroup_driver=str(info.get("CgroupDriver", "")),
        storage_driver=str(info.get("Driver", "")),
        memory_limit=bool(info.get("MemoryLimit")),
        swap_limit=bool(info.get("SwapLimit")),
        pids_limit=bool(info.get("PidsLimit")),
        cpu_limit=bool(info.get("CpuCfsQuota")),
        rootless=any("rootless" in s for s in security),
        security_options=security,
        warnings=[str(w) for w in info.get("Warnings") or []],
    )


# --------------------------------------------------------------------------
# The stream pump
# --------------------------------------------------------------------------


def raw_socket(attached: Any) -> socket.socket:
    """The socket under what ``attach_socket`` returned (a TLS one for a TLS engine)."""
    raw = getattr(attached, "_sock", attached)  # socket.SocketIO wraps the socket
    if not isinstance(raw, socket.socket):
        raise SandboxUnavailable(
            "the docker backend needs a unix socket or tcp engine address "
            "(ssh engines are not supported): set DOCKER_HOST"
        )
    return raw


def half_close(sock: socket.socket) -> None:
    """End the hook's stdin: shut down the connection's write side.

    Over TLS, as the docker CLI does (``CloseWrite`` on the TCP connection
    under ``tls.Conn``): the TCP write side is shut down beneath the TLS
    layer, which is left as it is, so the engine's answer can still be read.
    The engine takes that end of stream as the end of stdin.
    """
    # OSError: the engine already closed the connection; the hook is done with stdin.
    with contextlib.suppress(OSError):
        # socket.socket.shutdown, not ssl.SSLSocket.shutdown (which drops the TLS layer).
        socket.socket.shutdown(sock, socket.SHUT_WR)


_WOULD_BLOCK = (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError)
"""No progress now, try again when the socket is ready (the TLS ones: a record is incomplete)."""


def buffered(sock: socket.socket) -> bool:
    """Whether decrypted bytes wait in the TLS layer (the socket itself may not look readable)."""
    return isinstance(sock, ssl.SSLSocket) and sock.pending() > 0


PumpEnd = Literal["eof", "deadline", "stopped"]


def pump_frames(
    sock: socket.socket,
    data: bytes,
    deadline: float,
    take: Callable[[int, memoryview], bool],
) -> PumpEnd:
    """Write ``data`` then half-close, while handing each demultiplexed piece to ``take``.

    Args:
        sock: the attached socket, blocking or not (made non-blocking here).
        data: everything to send on stdin.
        deadline: ``time.monotonic()`` value at which to give up.
        take: gets ``(stream, piece)`` for each piece; returns True to stop
            reading now (the caller has what it needs).

    Returns:
        ``"eof"`` (the stream ended), ``"deadline"`` or ``"stopped"`` (``take`` said so).

    Raises:
        FrameError: the stream is not in the multiplexed format.
        OSError: the connection failed other than by the engine closing it.
    """
    sock.setblocking(False)
    pending = memoryview(data)
    if not pending:
        half_close(sock)
    state = FrameState()
    with selectors.DefaultSelector() as selector:
        key = selector.register(
            sock, selectors.EVENT_READ | (selectors.EVENT_WRITE if pending else 0)
        )
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "deadline"
            waiting = buffered(sock)
            ready = selector.select(0 if waiting else remaining)
            mask = (ready[0][1] if ready else 0) | (selectors.EVENT_READ if waiting else 0)
            if mask & selectors.EVENT_WRITE:
                try:
                    sent = sock.send(pending[:_WRITE_CHUNK])
                except _WOULD_BLOCK:
                    sent = 0
                except (BrokenPipeError, ConnectionResetError, ssl.SSLEOFError):
                    sent = len(pending)  # the hook exited without reading it all
                pending = pending[sent:]
                if not pending:
                    half_close(sock)
                    key = selector.modify(key.fileobj, selectors.EVENT_READ)
            if mask & selectors.EVENT_READ:
                try:
                    chunk = sock.recv(_READ_CHUNK)
                except _WOULD_BLOCK:
                    continue
                except (ConnectionResetError, ssl.SSLEOFError, ssl.SSLZeroReturnError):
                    return "eof"
                if not chunk:
                    return "eof"
                state, pieces = demux_frames(state, chunk)
                stop = False
                for stream, piece in pieces:
                    stop = take(stream, piece) or stop
                if stop:
                    return "stopped"


def pump(
    sock: socket.socket, stdin: bytes, deadline: float, stdout: CappedBuffer, stderr: CappedBuffer
) -> bool:
    """Write ``stdin`` then half-close, while reading frames into the buffers.

    Args:
        sock: the attached socket, blocking or not (made non-blocking here).
        stdin: all of the hook's input.
        deadline: ``time.monotonic()`` value at which to give up.
        stdout: where stdout payloads go.
        stderr: where stderr (and engine error) payloads go.

    Returns:
        True when the stream ended, False when the deadline came first.

    Raises:
        FrameError: the stream is not in the multiplexed format.
        OSError: the connection failed other than by the engine closing it.
    """
    sinks = {STDIN: stdout, STDOUT: stdout, STDERR: stderr, SYSTEMERR: stderr}

    def take(stream: int, piece: memoryview) -> bool:
        sinks[stream].add(piece)
        return False

    return pump_frames(sock, stdin, deadline, take) == "eof"


# --------------------------------------------------------------------------
# The backend
# --------------------------------------------------------------------------


class DockerSandbox(Sandbox):
    """Runs each hook in a fresh hardened container through the Engine API."""

    name = "docker"

    def __init__(
        self,
        *,
        image: str | None = None,
        runtime: str | None = None,
        memory: str = "512m",
        cpus: float = 1.0,
        pids: int = 256,
        tmpfs_size: str = "64m",
        file_size: str = "64m",
        hostname: str = "hookcage",
        user: str | None = None,
        path_map: PathMap | Mapping[str, str] | None = None,
        client: docker.APIClient | None = None,
        reap_on_start: bool = True,
    ) -> None:
        """Set up the backend; no engine call happens on this thread.

        Args:
            image: the default image, ``hookcage/runner:<version>`` when None
                (a hook's ``options.image`` overrides it).
            runtime: an OCI runtime registered with the engine (e.g. ``runsc``).
            memory: memory limit, swap included (no swap), e.g. ``512m``.
            cpus: CPUs the container may use (fractional).
            pids: most processes and threads at once.
            tmpfs_size: size of the writable ``/tmp``.
            file_size: the largest file a hook may write (``RLIMIT_FSIZE``).
            hostname: the container's fixed hostname.
            user: ``uid:gid`` to run as; the invoking user by default, or
                nobody (65534) when that is root.
            path_map: where the engine sees hookcage's paths
                (:mod:`executor.sandbox.paths`): ``{path here: path on the
                engine's host}``; ``{}``: the same paths; None: detected from
                hookcage's own container (with the first engine call) when it
                runs in one.
            client: an Engine API client; by default one from ``DOCKER_HOST``
                is made on first use (and closed by ``close()``).
            reap_on_start: remove stale hookcage containers once, in the
                background, best-effort.
        """
        self.profile = DockerProfile(
            image=image or DEFAULT_IMAGE,
            runtime=runtime,
            memory=memory,
            cpus=cpus,
            pids=pids,
            tmpfs_size=tmpfs_size,
            file_size=file_size,
            hostname=hostname,
            user=user,
        )
        self._paths: PathMap | None = None
        """The map in force; None until detected (with the first engine call)."""
        self._paths_applied = False
        if isinstance(path_map, PathMap):
            self._paths = path_map
        elif path_map is not None:
            self._paths = resolve_path_map(path_map, None)  # no engine call for a setting; SandboxError if invalid
        self._client = client
        self._owns_client = client is None
        self._lock = threading.Lock()
        self._reaper: threading.Thread | None = None
        if reap_on_start:
            self._reaper = threading.Thread(
                target=self._reap_quietly, name="hookcage-reap", daemon=True
            )
            self._reaper.start()

    @property
    def client(self) -> docker.APIClient:
        """The Engine API client, made on first use.

        Raises:
            SandboxUnavailable: the engine cannot be reached.
        """
        with self._lock:
            if self._client is None:
                self._client = default_client()
            if not self._paths_applied:
                # Once, before any mount is built: where the engine sees hookcage's paths.
                if self._paths is None:
                    self._paths = detect_path_map(self._client)
                from executor.sandbox.pathcheck import verify_path_map

                verify_path_map(self._client, self._paths)  # a wrong setting: every run refused, one line
                if self._paths.active:
                    self.profile = replace(self.profile, paths=with_resolved_keys(self._paths, os.path.realpath))
                self._paths_applied = True
            return self._client

    def image_identity(self, image: str | None) -> str:
        """The id (``sha256:...``) of ``image`` (or the default image) in the engine.

        Raises:
            SandboxUnavailable: the engine cannot be reached or the image is missing.
        """
        name = image or self.profile.image
        client = self.client
        try:
            return str(retry_transient(lambda: client.inspect_image(name))["Id"])
        except BACKEND_ERRORS as exc:
            raise map_engine_error(exc, step="inspect", url=engine_url(client), image=name) from exc

    def _reap_quietly(self) -> None:
        try:
            count = reap(self.client)
        except Exception as exc:  # best-effort: the next start tries again
            logger.debug("reaping stale containers failed: %s", exc)
        else:
            if count:
                logger.debug("removed %d stale hookcage containers", count)

    def run(self, request: RunRequest) -> RunResult:
        """Run one hook command in a fresh container (see the module docstring).

        The result's ``duration`` runs from creation to the exit being known
        (removal excluded); ``exit_code`` is None after a timeout or OOM kill.

        Raises:
            SandboxUnavailable: the engine is unreachable, the image or runtime missing.
            SandboxError: the engine refused or broke off this run.
        """
        began = time.monotonic()
        client = self.client
        image = request.options.image or self.profile.image
        url = engine_url(client)
        step = "create"
        container: str | None = None
        try:
            container = self._create(client, request)
            step = "attach"
            attached = client.attach_socket(
                container, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
            )
            try:
                sock = raw_socket(attached)
                step = "start"
                deadline = time.monotonic() + request.timeout
                client.start(container)
                step = "stream from"
                stdout = CappedBuffer(request.output_cap)
                stderr = CappedBuffer(request.output_cap)
                ended = pump(sock, request.stdin, deadline, stdout, stderr)
            finally:
                close_attached(attached)
            step = "wait for"
            timed_out, state = self._finish(client, container, ended, deadline)
            duration = time.monotonic() - began
        except BACKEND_ERRORS as exc:
            raise map_engine_error(
                exc, step=step, url=url, image=image, runtime=self.profile.runtime
            ) from exc
        finally:
            if container is not None:
                self._discard(client, container)
        return RunResult(
            exit_code=None if timed_out or state["oom_killed"] else state["exit_code"],
            stdout=stdout.getvalue(),
            stderr=stderr.getvalue(),
            duration=duration,
            timed_out=timed_out,
            oom_killed=state["oom_killed"],
            stdout_truncated=stdout.truncated,
            stderr_truncated=stderr.truncated,
        )

    def _create(self, client: docker.APIClient, request: RunRequest) -> str:
        """Create the run's container (a fresh name on each try); its id."""

        def call() -> str:
            name = f"hookcage-{secrets.token_hex(8)}"
            create, host = container_args(self.profile, request, name=name, now=time.time())
            created = client.create_container(
                host_config=client.create_host_config(**host), **create
            )
            return str(created["Id"])

        return retry_transient(call, conflict=True)

    @staticmethod
    def _finish(
        client: docker.APIClient, container: str, ended: bool, deadline: float
    ) -> tuple[bool, StateInfo]:
        """Make sure the container stopped by ``deadline`` (killing it if not).

        Returns:
            Whether the run timed out, and the container's final state.
        """
        if ended:
            # The stream ends when the init process exits; the engine may
            # record the exit a moment later.
            state = _inspect(client, container)
            if not state["running"]:
                return False, state
            remaining = deadline - time.monotonic()
            if remaining > 0 and _wait(client, container, remaining):
                return False, _inspect(client, container)
        _kill(client, container)
        return True, _inspect(client, container)

    @staticmethod
    def _discard(client: docker.APIClient, container: str) -> None:
        try:
            remove_container_quietly(client, container)
        except BACKEND_ERRORS as exc:
            # The result (or the error in flight) matters more; reap() removes
            # it later, as its hookcage.expires label says.
            logger.warning("could not remove container %s: %s", container[:12], exc)

    def close(self) -> None:
        """Close the client if this sandbox made it."""
        if self._reaper is not None:
            self._reaper.join(timeout=2.0)
        with self._lock:
            if self._owns_client and self._client is not None:
                self._client.close()
                self._client = None


def close_attached(attached: Any) -> None:
    """Close the attach connection for good.

    Closing the ``SocketIO`` wrapper leaves the socket open, and the HTTP
    layer may hold more references to it: shut the connection down first.
    """
    raw = getattr(attached, "_sock", attached)
    attached.close()
    if isinstance(raw, socket.socket):
        with contextlib.suppress(OSError):  # already closed by the engine
            raw.shutdown(socket.SHUT_RDWR)
        raw.close()
