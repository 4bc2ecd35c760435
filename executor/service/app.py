"""The daemon's HTTP app on its unix socket (local mode): ``GET /health``, ``POST /stop``, ``POST /dispatch``.

The socket is the user's own (0600), so these need no token. ``POST /dispatch``
is answered on a worker thread (:func:`executor.service.dispatching.answer_watching`)
by :meth:`executor.service.daemon.Daemon.answer`; at most :data:`MAX_IN_FLIGHT`
at once, and one more is refused at once (409: the caller answers
in-process). The TCP listener's app is :mod:`executor.service.remote`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
from collections.abc import AsyncIterator
from typing import Any, Protocol

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from executor import __version__
from executor.core.protocol import AgentAnswer
from executor.service.dispatching import DispatchRequest, Watch, answer_watching
from executor.service.metrics import ServiceMetrics, agent_label

logger = logging.getLogger("hookcage.daemon")

MAX_IN_FLIGHT = 32
"""Dispatches on the socket at once; one more is refused at once (409: the caller answers
in-process), never queued behind them. Below anyio's 40 worker threads, so ``/health`` and a
refusal always find a thread."""


class LocalAnswerer(Protocol):
    """What the socket's app needs of the daemon behind it (:class:`executor.service.daemon.Daemon`)."""

    metrics: ServiceMetrics
    remote_task: asyncio.Future[None] | None

    def health(self) -> dict[str, Any]: ...

    def retire(self, reason: str) -> None: ...

    def answer(self, request: DispatchRequest, watch: Watch | None = None) -> tuple[AgentAnswer, str]: ...

    def close(self) -> None: ...


def build_local_app(daemon: LocalAnswerer) -> FastAPI:
    """The ASGI app the unix socket serves; closing it (uvicorn's shutdown) closes ``daemon``."""
    local_in_flight = 0  # on the socket; counted on the event loop

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        if daemon.remote_task is not None:
            # The TCP listener drains its requests in flight before the sandboxes close.
            with contextlib.suppress(BaseException):
                await asyncio.shield(daemon.remote_task)
        daemon.close()

    app = FastAPI(title="hookcage daemon", version=__version__, lifespan=lifespan,
                  docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/health")
    def health() -> dict[str, Any]:
        return daemon.health()

    @app.post("/stop")
    def stop() -> dict[str, Any]:
        # The socket is the user's own (0600): whoever may dispatch may stop (`hookcage serve --stop`).
        daemon.retire("asked to stop (hookcage serve --stop)")
        return {"pid": os.getpid(), "stopping": True}

    @app.post("/dispatch")
    async def dispatch(request: DispatchRequest, http: Request) -> JSONResponse:
        nonlocal local_in_flight
        if local_in_flight >= MAX_IN_FLIGHT:  # never queued behind what is in flight
            detail = f"{local_in_flight} dispatches are in flight already (at most {MAX_IN_FLIGHT})"
            logger.info("left to the caller (in-process): %s", detail)
            daemon.metrics.dispatched("local", agent_label(request.agent), "unknown", "refused", None)
            return JSONResponse({"detail": detail}, status_code=409)
        local_in_flight += 1
        try:
            return await answer_watching(functools.partial(daemon.answer, request), http)
        finally:
            local_in_flight -= 1

    return app
