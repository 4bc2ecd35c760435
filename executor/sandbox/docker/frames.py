"""The Engine's multiplexed attach stream: frames, capped buffers, the socket pump.

``demux_frames`` and ``CappedBuffer`` are pure; ``pump_frames``/``pump``
move bytes over the attached socket (plain or TLS) within a deadline. No
docker-py here: the socket is whatever ``attach_socket`` returned.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from executor.errors import SandboxUnavailable
from executor.sandbox.conventions import STDERR, STDIN, STDOUT, SYSTEMERR

__all__ = [
    "FRAME_HEADER_SIZE",
    "STDERR",
    "STDIN",
    "STDOUT",
    "SYSTEMERR",
    "CappedBuffer",
    "FrameError",
    "FrameState",
    "PumpEnd",
    "buffered",
    "close_attached",
    "demux_frames",
    "half_close",
    "pump",
    "pump_frames",
    "raw_socket",
]

_READ_CHUNK = 256 * 1024
_WRITE_CHUNK = 64 * 1024

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

    def cut(self) -> None:
        """Bytes of this stream were lost on the way (the stream ended mid-frame): never a complete output."""
        self.truncated = True


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


PumpEnd = Literal["eof", "cut", "deadline", "stopped"]
"""How reading ended: ``eof`` (the stream ended between two frames), ``cut`` (it ended inside a frame:
its rest is lost), ``deadline``, ``stopped`` (the reader had what it needed)."""


def pump_frames(
    sock: socket.socket,
    data: bytes,
    deadline: float,
    take: Callable[[int, memoryview], bool],
    *,
    end_input: bool = True,
) -> PumpEnd:
    """Write ``data`` then half-close, while handing each demultiplexed piece to ``take``.

    Args:
        sock: the attached socket, blocking or not (made non-blocking here).
        data: everything to send on stdin.
        deadline: ``time.monotonic()`` value at which to give up.
        take: gets ``(stream, piece)`` for each piece; returns True to stop
            reading now (the caller has what it needs).
        end_input: half-close once ``data`` is sent (the hook's end of stdin);
            False leaves the write side open (the warm pool's job counts its
            stdin, and a half-close under TLS may not reach the engine).

    Returns:
        ``"eof"`` (the stream ended), ``"cut"`` (it ended inside a frame: a header
        or payload announced and not delivered), ``"deadline"`` or ``"stopped"``
        (``take`` said so).

    Raises:
        FrameError: the stream is not in the multiplexed format.
        OSError: the connection failed other than by the engine closing it.
    """
    sock.setblocking(False)
    pending = memoryview(data)
    if not pending and end_input:
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
                    if end_input:
                        half_close(sock)
                    key = selector.modify(key.fileobj, selectors.EVENT_READ)
            if mask & selectors.EVENT_READ:
                try:
                    chunk = sock.recv(_READ_CHUNK)
                except _WOULD_BLOCK:
                    continue
                except (ConnectionResetError, ssl.SSLEOFError, ssl.SSLZeroReturnError):
                    return _ended(state)
                if not chunk:
                    return _ended(state)
                state, pieces = demux_frames(state, chunk)
                stop = False
                for stream, piece in pieces:
                    stop = take(stream, piece) or stop
                if stop:
                    return "stopped"


def _ended(state: FrameState) -> PumpEnd:
    """``eof``, or ``cut`` when the stream ended inside a frame (part of the output never came)."""
    return "cut" if state.header or state.remaining else "eof"


def pump(
    sock: socket.socket, stdin: bytes, deadline: float, stdout: CappedBuffer, stderr: CappedBuffer,
    *, end_input: bool = True,
) -> bool:
    """Write ``stdin`` then half-close, while reading frames into the buffers.

    Args:
        sock: the attached socket, blocking or not (made non-blocking here).
        stdin: all of the hook's input.
        deadline: ``time.monotonic()`` value at which to give up.
        stdout: where stdout payloads go.
        stderr: where stderr (and engine error) payloads go.

    Returns:
        True when the stream ended, False when the deadline came first. A
        stream that ended inside a frame marks both buffers cut (truncated):
        the output is not whole, and is never reported as if it were.

    Raises:
        FrameError: the stream is not in the multiplexed format.
        OSError: the connection failed other than by the engine closing it.
    """
    sinks = {STDIN: stdout, STDOUT: stdout, STDERR: stderr, SYSTEMERR: stderr}

    def take(stream: int, piece: memoryview) -> bool:
        sinks[stream].add(piece)
        return False

    end = pump_frames(sock, stdin, deadline, take, end_input=end_input)
    if end == "cut":
        stdout.cut()
        stderr.cut()
    return end in ("eof", "cut")


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
