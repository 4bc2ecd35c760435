"""The TCP side of ``hookcage serve --listen HOST:PORT``: remote mode, behind a bearer token.

How this works:

1. :class:`RemoteOptions` holds what the command line gave (address, token,
   TLS files, limits); :meth:`RemoteOptions.check` refuses a bad certificate
   or key before anything listens, :meth:`RemoteOptions.bind` binds the
   address.
2. :func:`build_remote_app` is the ASGI app served on that socket: the
   :class:`Gate` in front of a FastAPI app. The gate decides before any
   route or body parser sees the request:

   - ``Authorization: Bearer <token>`` on every path, compared in constant
     time (:func:`executor.service.auth.bearer_matches`); a missing or wrong
     token is 401 with ``WWW-Authenticate: Bearer`` and nothing else happens.
     The one exception: ``GET /health`` with no ``Authorization`` header at
     all answers a bare ``{"status": "ok"}`` (liveness for orchestrators).
   - ``POST /dispatch``: a ``Content-Length`` over ``max_body`` is 413 before
     a byte of the body is read; then the request waits for one of
     ``max_concurrent`` slots, with at most ``max_queue`` waiting (503 and
     ``Retry-After`` past that); then the body is read, counting bytes (a
     chunked body over ``max_body`` is 413 too) and handed to the app.

3. The app answers ``POST /dispatch`` through
   :meth:`executor.service.daemon.Daemon.answer_remote` (the service's own
   settings, the caller's project), ``GET /health``, ``GET /metrics``
   (Prometheus text) and ``GET /openapi.json``. A body that is not JSON is
   400, one that lacks fields or has the wrong types 422, each with a
   one-line ``detail``. Every path a dispatch names passes the keep-out
   (:mod:`executor.service.keepout`): malformed is 400, out of bounds 403.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import socket
import ssl
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel

from executor import __version__
from executor.service.auth import ServiceConfigError, bearer_matches
from executor.service.dispatching import RemoteDispatchRequest, Watch, answer_watching
from executor.service.metrics import ServiceMetrics

if TYPE_CHECKING:
    from executor.core.protocol import AgentAnswer

logger = logging.getLogger("hookcage.daemon")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

DEFAULT_MAX_BODY = 16 * 1024 * 1024
DEFAULT_MAX_CONCURRENT = 8
DEFAULT_MAX_QUEUE = 64
RETRY_AFTER = 1
"""Seconds a caller turned away with 503 is told to wait."""


@dataclasses.dataclass(frozen=True)
class RemoteOptions:
    """What ``hookcage serve --listen ...`` was given."""

    host: str
    port: int
    token: str = dataclasses.field(repr=False)
    tls_cert: Path | None = None
    tls_key: Path | None = None
    max_body: int = DEFAULT_MAX_BODY
    max_concurrent: int = DEFAULT_MAX_CONCURRENT
    max_queue: int = DEFAULT_MAX_QUEUE
    project_roots: tuple[Path, ...] = ()
    """The directories a remote caller's project must lie in (``--project-root``); any when empty."""
    transcript_roots: tuple[Path, ...] = ()
    """Where a caller's transcripts may lie outside its project (``--transcript-root``); none when empty."""
    token_file: Path | None = None
    """The token's file, if the token came from one: no request path may lead to it."""

    def secrets(self) -> tuple[Path, ...]:
        """The service's own files no request path may lead to (token and TLS files)."""
        return tuple(path for path in (self.token_file, self.tls_cert, self.tls_key) if path is not None)

    @property
    def tls(self) -> bool:
        return self.tls_cert is not None

    def check(self) -> None:
        """Refuse unusable options before anything listens.

        Raises:
            ServiceConfigError: one TLS file without the other, a certificate or key
                that does not load, or a limit below 1 (0 for the queue).
        """
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ServiceConfigError("--tls-cert and --tls-key go together: give both or neither")
        if self.max_body < 1 or self.max_concurrent < 1 or self.max_queue < 0:
            raise ServiceConfigError("--max-body and --max-concurrent must be at least 1, --max-queue at least 0")
        for root in self.project_roots:
            if not root.is_absolute() or not root.is_dir():
                raise ServiceConfigError(f"--project-root must be an existing directory given as an absolute path: {root}")
        for root in self.transcript_roots:
            if not root.is_absolute() or not root.is_dir():
                raise ServiceConfigError(
                    f"--transcript-root must be an existing directory given as an absolute path: {root}")
        if self.tls_cert is not None and self.tls_key is not None:
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            try:
                context.load_cert_chain(self.tls_cert, self.tls_key)
            except ssl.SSLError as exc:  # before OSError: it is one
                raise ServiceConfigError(
                    f"--tls-cert and --tls-key do not load as a PEM certificate and its private key "
                    f"({exc.reason or exc}): {self.tls_cert}, {self.tls_key}"
                ) from exc
            except OSError as exc:
                raise ServiceConfigError(
                    f"cannot read --tls-cert or --tls-key ({exc.strerror or exc}): {self.tls_cert}, {self.tls_key}"
                ) from exc

    def bind(self) -> socket.socket:
        """A listening TCP socket on ``host:port``.

        Raises:
            ServiceConfigError: the address does not resolve or cannot be bound.
        """
        where = f"{self.host}:{self.port}" if ":" not in self.host else f"[{self.host}]:{self.port}"
        try:
            infos = socket.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        except socket.gaierror as exc:
            raise ServiceConfigError(f"cannot listen on {where}: {exc.strerror}") from exc
        family, _, _, _, address = infos[0]
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            # Inherited by accepted connections: with TLS, the response's records otherwise wait for
            # the client's delayed ACK (Nagle), about 40 ms per event (measured: benchmarks/service_tcp.py).
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.bind(address)
            sock.listen(128)
        except OSError as exc:
            sock.close()
            raise ServiceConfigError(f"cannot listen on {where}: {exc.strerror or exc}") from exc
        sock.set_inheritable(False)
        return sock

    def uvicorn_ssl(self) -> dict[str, Any]:
        """uvicorn's TLS options (none without TLS)."""
        if self.tls_cert is None or self.tls_key is None:
            return {}
        return {"ssl_certfile": os.fspath(self.tls_cert), "ssl_keyfile": os.fspath(self.tls_key)}


def address_of(sock: socket.socket, tls: bool) -> str:
    """``http(s)://host:port`` of a bound socket (the port it really got when 0 was asked)."""
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"{'https' if tls else 'http'}://{shown}:{port}"


# -- the gate -----------------------------------------------------------------------


class QueueFull(Exception):
    """Every slot is taken and the queue is full."""


class Admission:
    """At most ``limit`` dispatches at once, at most ``queue`` waiting for a slot."""

    def __init__(self, limit: int, queue: int) -> None:
        self.limit = limit
        self.queue = queue
        self.running = 0
        self.waiting = 0
        self._free = asyncio.Semaphore(limit)

    @contextlib.asynccontextmanager
    async def slot(self) -> Any:
        """Hold a slot for the duration of the block.

        Raises:
            QueueFull: no slot is free and ``queue`` requests already wait.
        """
        if self._free.locked() and self.waiting >= self.queue:
            raise QueueFull
        self.waiting += 1
        try:
            await self._free.acquire()
        finally:
            self.waiting -= 1
        self.running += 1
        try:
            yield
        finally:
            self.running -= 1
            self._free.release()


async def _reply(send: Send, status: int, body: dict[str, Any], headers: Sequence[tuple[bytes, bytes]] = ()) -> None:
    data = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()), *headers]})
    await send({"type": "http.response.body", "body": data})


def _header(scope: Scope, name: bytes) -> bytes | None:
    found = [value for key, value in scope.get("headers", ()) if key.lower() == name]
    if len(found) != 1:
        return None  # absent, or sent twice (ambiguous: treated as absent)
    return bytes(found[0])


class Gate:
    """Auth, body size and admission in front of the remote app (see the module docstring)."""

    def __init__(self, app: ASGIApp, options: RemoteOptions, metrics: ServiceMetrics) -> None:
        self.app = app
        self.token = options.token.encode("ascii")
        self.max_body = options.max_body
        self.admission = Admission(options.max_concurrent, options.max_queue)
        self.metrics = metrics

    def _rejected(self, code: int) -> None:
        self.metrics.rejected(code)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":
            return  # no websockets here (uvicorn runs with ws="none")
        method, path = scope["method"], scope["path"]
        authorization = [value for key, value in scope.get("headers", ()) if key.lower() == b"authorization"]
        if not authorization and method in ("GET", "HEAD") and path == "/health":
            await _reply(send, 200, {"status": "ok"})
            return
        if len(authorization) != 1 or not bearer_matches(bytes(authorization[0]), self.token):
            self._rejected(401)
            challenge = b'Bearer realm="hookcage"' + (b', error="invalid_token"' if authorization else b"")
            detail = "wrong bearer token" if authorization else "a bearer token is required (Authorization: Bearer ...)"
            await _reply(send, 401, {"detail": detail}, [(b"www-authenticate", challenge)])
            return
        if path != "/dispatch" or method != "POST":
            await self.app(scope, receive, send)
            return
        kind = (_header(scope, b"content-type") or b"").split(b";")[0].strip().lower()
        if kind != b"application/json":
            self._rejected(415)
            await _reply(send, 415, {"detail": "the request body must be JSON (Content-Type: application/json)"})
            return
        length = _header(scope, b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_body:
            self._rejected(413)
            await _reply(send, 413, {"detail": f"request body over {self.max_body} bytes"})
            return
        try:
            async with self.admission.slot():
                await self._dispatch(scope, receive, send)
        except QueueFull:
            self._rejected(503)
            await _reply(send, 503, {"detail": "too many dispatches in progress; retry later"},
                         [(b"retry-after", str(RETRY_AFTER).encode())])

    async def _dispatch(self, scope: Scope, receive: Receive, send: Send) -> None:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # the caller has gone: nothing to answer, nothing run
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                self._rejected(413)
                await _reply(send, 413, {"detail": f"request body over {self.max_body} bytes"})
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body: bytes | None = b"".join(chunks)

        async def replay() -> Message:
            nonlocal body
            if body is not None:
                message = {"type": "http.request", "body": body, "more_body": False}
                body = None
                return message
            return await receive()  # after the body: http.disconnect when the caller hangs up

        await self.app(scope, replay, send)


# -- the app --------------------------------------------------------------------------


class DispatchAnswer(BaseModel):
    """What ``hookcage dispatch`` prints and exits with, and the agent dialect it is written in."""

    exit_code: int
    stdout: str
    stderr: str
    agent: str


class Detail(BaseModel):
    """Why the request was not answered (nothing ran)."""

    detail: str


class Liveness(BaseModel):
    """``GET /health`` without a token."""

    status: str


def _one_line(exc: RequestValidationError) -> tuple[int, str]:
    errors = exc.errors()
    first = errors[0] if errors else {}
    if first.get("type") == "json_invalid":
        return 400, "the request body is not valid JSON"
    if first.get("type") == "missing" and tuple(first.get("loc", ())) == ("body",):
        return 400, "the request body is empty: a JSON object is expected"
    where = ".".join(str(part) for part in first.get("loc", ()) if part != "body") or "body"
    message = str(first.get("msg", "invalid request")).replace("\n", " ")
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return 422, f"{where}: {message}{more}"


_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": Detail, "description": "Missing or wrong bearer token; nothing ran"},
}
_DISPATCH_ERRORS: dict[int | str, dict[str, Any]] = {
    **_ERRORS,
    400: {"model": Detail, "description": "The body is not JSON, or a path it names is malformed (relative, "
                                          "a NUL byte, not UTF-8, too long, '..'); nothing ran"},
    403: {"model": Detail, "description": "A path it names leads where the caller may not go (the service's "
                                          "own files, outside its project or the project roots); nothing ran"},
    409: {"model": Detail, "description": "Refused (another protocol, unknown agent, "
                                          "a project directory the service cannot see); nothing ran"},
    413: {"model": Detail, "description": "The body is over --max-body bytes; nothing ran"},
    415: {"model": Detail, "description": "The Content-Type is not application/json; nothing ran"},
    422: {"model": Detail, "description": "A field is missing or malformed; nothing ran"},
    503: {"model": Detail, "description": "Too many dispatches in progress (see Retry-After); nothing ran"},
}


class Answerer(Protocol):
    """What the TCP app needs of the daemon behind it (:class:`executor.service.daemon.Daemon`)."""

    metrics: ServiceMetrics

    def health(self) -> dict[str, Any]: ...

    def answer_remote(self, request: RemoteDispatchRequest, watch: Watch | None = None, *,
                      roots: Sequence[Path] = (), transcript_roots: Sequence[Path] = (),
                      secrets: Sequence[Path] = ()) -> tuple[AgentAnswer, str]: ...


def build_remote_app(daemon: Answerer, options: RemoteOptions, address: str) -> Gate:
    """The ASGI app the TCP listener serves (remote mode), counting into ``daemon.metrics``."""
    metrics = daemon.metrics
    app = FastAPI(title="hookcage service", version=__version__, docs_url=None, redoc_url=None,
                  openapi_url="/openapi.json",
                  description="hookcage over the network (`hookcage serve --listen HOST:PORT`). "
                              "Every endpoint needs `Authorization: Bearer <token>`, except a bare "
                              "`GET /health`. See docs/service.md.")

    @app.exception_handler(RequestValidationError)
    async def malformed(request: Request, exc: RequestValidationError) -> JSONResponse:
        status, detail = _one_line(exc)
        metrics.rejected(status)
        return JSONResponse({"detail": detail}, status_code=status)

    @app.get("/health", responses={**_ERRORS, 200: {
        "description": "With the token: the service's details. Without an Authorization header: "
                       "only `{\"status\": \"ok\"}`."}})
    def health() -> dict[str, Any]:
        """Liveness; with the token, the version, pid, home, listeners and shared sandboxes."""
        return {"status": "ok", **daemon.health(), "listen": address}

    @app.post("/dispatch", response_model=DispatchAnswer, responses=_DISPATCH_ERRORS)
    async def dispatch(request: RemoteDispatchRequest, http: Request) -> Response:
        """Answer one agent event as `hookcage dispatch` would in the service's own environment.

        `payload_b64` is the agent's stdin (base64); the project comes from the
        project-dir variables in `env` (CLAUDE_PROJECT_DIR, ...), else the
        payload's `cwd`, else `cwd`: absolute paths the service sees at the same
        place. The service's settings, user hooks and trust store are its own.
        """
        if await http.is_disconnected():
            return JSONResponse({"detail": "cancelled: the caller hung up"}, status_code=499)
        return await answer_watching(
            lambda watch: daemon.answer_remote(request, watch, roots=options.project_roots,
                                               transcript_roots=options.transcript_roots, secrets=options.secrets()),
            http, local=False)

    @app.get("/metrics", response_class=Response, responses={**_ERRORS, 200: {
        "content": {"text/plain": {"schema": {"type": "string"}}},
        "description": "Prometheus text exposition format 0.0.4"}})
    def metrics_text() -> Response:
        """Counters, gauges and histograms of what the service ran (Prometheus text format)."""
        body, content_type = metrics.exposition()
        return Response(body, media_type=content_type)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version, description=app.description,
                                 routes=app.routes)
            schema.setdefault("components", {})["securitySchemes"] = {
                "bearer": {"type": "http", "scheme": "bearer"}}
            schema["security"] = [{"bearer": []}]
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    gate = Gate(app, options, metrics)
    metrics.queued.set_function(lambda: gate.admission.waiting)
    return gate


def openapi_document() -> dict[str, Any]:
    """The OpenAPI description of the TCP service (what ``GET /openapi.json`` answers)."""

    class Unused:
        """The app's description needs no daemon behind it: nothing is answered."""

        metrics = ServiceMetrics()

        def health(self) -> dict[str, Any]:
            raise NotImplementedError

        def answer_remote(self, request: RemoteDispatchRequest, watch: Watch | None = None, *,
                          roots: Sequence[Path] = (), transcript_roots: Sequence[Path] = (),
                          secrets: Sequence[Path] = ()) -> tuple[AgentAnswer, str]:
            raise NotImplementedError

    gate = build_remote_app(Unused(), RemoteOptions("127.0.0.1", 0, "x" * 16), "http://127.0.0.1:0")
    app = gate.app
    assert isinstance(app, FastAPI)
    return app.openapi()


if __name__ == "__main__":  # python -m executor.service.remote > docs/openapi.json
    print(json.dumps(openapi_document(), indent=2))
