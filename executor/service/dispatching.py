"""A dispatch over HTTP, as both listeners take it: the request bodies, the refusals, and the answer.

The socket's app (:mod:`executor.service.app`) and the TCP service's
(:mod:`executor.service.remote`) read the same body (:class:`DispatchRequest`,
:class:`RemoteDispatchRequest`), refuse with the same exceptions and answer
through :func:`answer_watching`: the work on a worker thread, cancelled when
the caller hangs up. Neither listener imports the other.
"""

from __future__ import annotations

import asyncio
import binascii
import contextlib
import dataclasses
import logging
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import anyio.to_thread
from fastapi import Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from executor.core.protocol import AgentAnswer
from executor.errors import PayloadError
from executor.service import client
from executor.service.answer import read_payload
from executor.service.keepout import PathRefused

if TYPE_CHECKING:
    from executor.executor import HookExecutor

logger = logging.getLogger("hookcage.daemon")

DISCONNECT_POLL = 0.25
"""Seconds between two checks that the caller of a dispatch in progress is still there."""
START_WAIT = 5.0
"""Seconds a request waits for a worker thread; then it is refused (409 / 503), never left waiting."""


class Refusal(Exception):
    """This call must be answered in the caller's process (HTTP 409); the message says why."""


class Retire(Refusal):
    """The caller runs other code than this daemon (or this daemon's files changed): HTTP 410. The
    daemon has let go of its socket and is leaving; the caller starts the daemon of its own code."""


class Busy(Refusal):
    """Too much is in flight (for this project, or at all): 409 on the socket (the caller
    answers in-process), 503 with ``Retry-After`` on TCP. Nothing has run."""


class DispatchRequest(BaseModel):
    """``POST /dispatch``: one ``hookcage dispatch`` call, as :mod:`executor.service.client` sends it."""

    model_config = ConfigDict(extra="ignore")

    version: str
    code: str | None = None
    event: str | None = None
    agent: str | None = None
    payload_b64: str
    env: dict[str, str] = Field(default_factory=dict)
    home: str | None = None
    cwd: str | None = None


PROTOCOL = 1
"""The remote request's ``protocol``: a caller speaking another one is refused (409)."""


class RemoteDispatchRequest(DispatchRequest):
    """``POST /dispatch`` over TCP (remote mode): the same body, plus ``protocol``.

    Only ``event``, ``agent``, ``payload_b64``, the project-dir variables in
    ``env`` and ``cwd`` are used; the rest (``version``, ``home``, every other
    variable) is accepted and ignored: the service's settings are its own.
    """

    version: str = ""
    protocol: int = PROTOCOL


class BadRequest(Exception):
    """The request itself is malformed (HTTP 422): nothing has run."""


def decode_payload(payload_b64: str, bad: type[Exception]) -> tuple[bytes, Mapping[str, Any]]:
    """The agent's stdin bytes of a request, and its payload (``{}`` when they do not parse:
    :func:`dispatch_bytes` answers that; no path in it matters).

    Raises:
        bad: ``payload_b64`` is not base64 (:class:`Refusal` on the socket, :class:`BadRequest` on TCP).
    """
    try:
        raw = binascii.a2b_base64(payload_b64, strict_mode=True)
    except (binascii.Error, ValueError) as exc:
        raise bad("payload_b64 is not base64") from exc
    try:
        return raw, read_payload(raw)
    except PayloadError:
        return raw, {}


@dataclasses.dataclass
class Watch:
    """One dispatch in progress, as its HTTP handler sees it: cancel it when the caller hangs up."""

    cancel: threading.Event = dataclasses.field(default_factory=threading.Event)
    executors: list[HookExecutor] = dataclasses.field(default_factory=list)

    def abort(self) -> None:
        """Cancel the dispatch: nothing more starts, its containers are removed."""
        self.cancel.set()
        for executor in list(self.executors):
            try:
                executor.abort()
            except Exception:
                logger.exception("cancelling a dispatch failed")


def _busy(detail: str, local: bool) -> JSONResponse:
    if local:
        return JSONResponse({"detail": detail}, status_code=409)
    return JSONResponse({"detail": f"{detail}; retry later"}, status_code=503, headers={"Retry-After": "1"})


async def answer_watching(answer: Callable[[Watch], tuple[AgentAnswer, str]], http: Request, *,
                          local: bool = True) -> JSONResponse:
    """Run ``answer`` on a worker thread, cancel it if the caller hangs up; the HTTP reply.

    200 ``{"exit_code", "stdout", "stderr", "agent"}``; 409 ``{"detail"}`` for a
    :class:`Refusal`, 422 for a :class:`BadRequest`, 499 when the caller has gone.
    """
    watch = Watch()
    state = threading.Lock()
    begun: list[bool] = []  # [True]: a thread took it; [False]: refused before one did

    def begin() -> tuple[AgentAnswer, str]:
        with state:
            if begun:  # it waited past START_WAIT for a thread: refused already, run nothing
                raise Busy("no worker thread was free in time")
            begun.append(True)
        return answer(watch)

    work = asyncio.ensure_future(anyio.to_thread.run_sync(begin))
    await asyncio.wait({work}, timeout=START_WAIT)
    with state:
        refuse = not begun
        if refuse:
            begun.append(False)
    if refuse:
        work.add_done_callback(lambda done: done.cancelled() or done.exception())  # its Busy, retrieved
        detail = f"no worker thread was free within {START_WAIT:g} s"
        logger.info("left to the caller (in-process): %s" if local else "refused (503), nothing run: %s", detail)
        return _busy(detail, local)
    while not work.done():
        await asyncio.wait({work}, timeout=DISCONNECT_POLL)
        if not work.done() and await http.is_disconnected():
            logger.info("the caller hung up: cancelling its dispatch")
            await anyio.to_thread.run_sync(watch.abort)
            with contextlib.suppress(Exception):
                await work  # ends at once now: nothing more starts, its containers are gone
            return JSONResponse({"detail": "cancelled: the caller hung up"}, status_code=499)
    try:
        answer_, agent = work.result()
    except Retire as exc:
        logger.info("retired: %s", exc)
        return JSONResponse({"detail": str(exc), "retire": True}, status_code=client.RETIRE_STATUS)
    except Busy as exc:
        logger.info("left to the caller (in-process): %s" if local else "refused (503), nothing run: %s", exc)
        return _busy(str(exc), local)
    except Refusal as exc:
        logger.info("left to the caller (in-process): %s" if local else "refused (409), nothing run: %s", exc)
        return JSONResponse({"detail": str(exc)}, status_code=409)
    except PathRefused as exc:
        logger.info("refused (%d), nothing run: %s", exc.status, exc)
        return JSONResponse({"detail": str(exc)}, status_code=exc.status)
    except BadRequest as exc:
        return JSONResponse({"detail": str(exc)}, status_code=422)
    return JSONResponse({"exit_code": answer_.exit_code, "stdout": answer_.stdout,
                         "stderr": answer_.stderr, "agent": agent})
