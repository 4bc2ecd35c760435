"""Every engine exception mapped to hookcage's in one place, and the retry of transient ones.

docker-py's own errors and the ``requests``/``urllib3``/socket ones it lets
through become ``SandboxUnavailable`` (the backend cannot be used at all) or
``SandboxError`` (this call failed), with a one-line message, by the first
rule of ``_ERROR_RULES`` that applies (:func:`map_engine_error`).
"""

from __future__ import annotations

import http.client
import re
import ssl
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

import docker  # type: ignore[import-untyped, unused-ignore]
import docker.errors  # type: ignore[import-untyped, unused-ignore]
import docker.utils.socket  # type: ignore[import-untyped, unused-ignore]
import requests.exceptions  # type: ignore[import-untyped, unused-ignore]
import urllib3.exceptions
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential

from executor.errors import SandboxError, SandboxUnavailable
from executor.sandbox.conventions import RUNNER_REPOSITORY
from executor.sandbox.docker.frames import FrameError

NotFound = docker.errors.NotFound
"""docker-py's "no such container or image" (for modules outside this package: they never import docker-py)."""
APIError = docker.errors.APIError
"""docker-py's "the engine answered with an error" (idem)."""

ENGINE_HINT = "start Docker, or set DOCKER_HOST"
TLS_HINT = ("DOCKER_CERT_PATH must hold the engine's ca.pem and this client's cert.pem and key.pem "
            "(DOCKER_TLS_VERIFY=1 checks the engine against that ca.pem)")

_RETRY_ATTEMPTS = 3

_T = TypeVar("_T")


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


def is_timeout(exc: BaseException) -> bool:
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


def explanation(exc: BaseException) -> str:
    """The engine's explanation of an error on one line, at most 300 characters."""
    text = getattr(exc, "explanation", None) or str(exc) or type(exc).__name__
    return " ".join(str(text).split())[:300]


def status_code(exc: BaseException) -> int:
    """The HTTP status of an engine error, 0 when it has none."""
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
            f"the Docker TLS settings for {w.url} are unusable ({explanation(e)}): {TLS_HINT}"
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
                and "image" in explanation(e).lower()
            )
        ),
        lambda e, w: SandboxUnavailable(f"image {w.image} is missing: {_image_hint(w.image)}"),
    ),
    _Rule(
        lambda e, w: (
            isinstance(e, docker.errors.APIError)
            and w.runtime is not None
            and "runtime" in explanation(e).lower()
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
            f"({status_code(e) or 'error'}): {explanation(e)}"
        ),
    ),
    _Rule(
        lambda e, w: is_timeout(e),
        lambda e, w: SandboxError(
            f"the Docker engine at {w.url} did not answer in time ({w.step})"
        ),
    ),
    _Rule(
        lambda e, w: isinstance(e, FrameError | docker.utils.socket.SocketError),
        lambda e, w: SandboxError(
            f"malformed output stream from the Docker engine: {explanation(e)}"
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
            f"lost the connection to the Docker engine at {w.url} ({w.step}): {explanation(e)}"
        ),
    ),
    _Rule(
        lambda e, w: True,
        lambda e, w: SandboxError(f"Docker error ({w.step}): {explanation(e)}"),
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


def is_transient(exc: BaseException, *, conflict: bool = False) -> bool:
    """Worth one more try: the engine answered 5xx (or 409 when ``conflict``) or dropped us."""
    if isinstance(exc, docker.errors.APIError):
        status = status_code(exc)
        return status >= 500 or (conflict and status == 409)
    if _is_unreachable(exc) or is_timeout(exc) or _caused_by(exc, PermissionError):
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
        retry=retry_if_exception(lambda e: is_transient(e, conflict=conflict)),
        reraise=True,
    )
    return retrying(call)
