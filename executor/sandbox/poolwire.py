"""The wire side of one warm run: bytes over a pooled container's attach socket.

A fresh container's ready line (``await_ready``), one job sent and its
output read until both end markers (``pump_job``), and what is left of a
used container's stream read and dropped (``await_end``). The bytes of the
job and its markers are :mod:`executor.sandbox.warmjob`'s (pure);
:mod:`executor.sandbox.pool` decides what to send and what the outcome is.
"""

from __future__ import annotations

import functools
import select
import socket
import ssl
import time
from pathlib import Path
from typing import Literal

from executor.sandbox.docker import (
    FRAME_HEADER_SIZE,
    STDERR,
    STDIN,
    STDOUT,
    CappedBuffer,
    FrameState,
    buffered,
    demux_frames,
    pump_frames,
)
from executor.sandbox.warmjob import READY_LINE, RUNNER_READY_LINE, JobReader

_READ_CHUNK = 256 * 1024
WOULD_BLOCK = (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError)
"""What a non-blocking socket raises when nothing can be read or written yet (over TLS too)."""


JobEnd = Literal["done", "eof", "deadline"]


def pump_job(
    sock: socket.socket,
    data: bytes,
    deadline: float,
    reader: JobReader,
    stdout: CappedBuffer,
    stderr: CappedBuffer,
    *,
    until_eof: bool = False,
    end_input: bool = True,
) -> JobEnd:
    """Send ``data`` (the job and the hook's stdin) then, with ``end_input``, half-close, reading the output.

    Without ``end_input`` the write side stays open: a job that counts its
    stdin (over TLS, where a half-close may not reach the engine) needs none.

    Like the cold path's ``pump``, but the run is over as soon as ``reader``
    has both end markers: no wait for the stream to end. With ``until_eof``
    the markers count only once the stream has ended too (the container's
    last process is gone): what a run with a writable mount needs, since a
    hook that stole its nonce could otherwise write after its verdict.

    Returns:
        ``"done"`` (both markers), ``"eof"`` (the stream ended first) or
        ``"deadline"``.

    Raises:
        FrameError: the stream is not in the multiplexed format.
        OSError: the connection failed other than by the engine closing it.
    """
    buffers = {STDIN: stdout, STDOUT: stdout, STDERR: stderr}

    def take(stream: int, piece: memoryview) -> bool:
        if reader.done and not until_eof:
            # Both markers are in: the bootstrap has killed every other process, so what follows in
            # the same read is the engine's, not the hook's (Podman writes "Error: write unixpacket
            # ...: connection reset by peer" on stderr when stdin the hook left unread cannot be copied).
            return True
        if stream in buffers:
            buffers[stream].add(reader.feed(stream, piece))
        else:  # the engine's own error stream: not the hook's
            stderr.add(piece)
        return reader.done and not until_eof

    end = pump_frames(sock, data, deadline, take, end_input=end_input)
    if end == "stopped":
        return "done"
    if end == "deadline":
        return "deadline"
    if end == "cut":  # the stream ended inside a frame: part of the output never came
        stdout.cut()
        stderr.cut()
    done = reader.done
    out, err = reader.finish()
    stdout.add(out)
    stderr.add(err)
    return "done" if done and until_eof else "eof"


@functools.cache
def job_runner_text() -> str:
    """The text of :mod:`executor.sandbox.jobrunner`, the program a pooled container runs under ``python3``."""
    return Path(__file__).with_name("jobrunner.py").read_text(encoding="utf-8")


def await_ready(sock: socket.socket, deadline: float) -> int:
    """Read a fresh pooled container's stream until its ready line; its job protocol, 0 if anything else.

    The bootstrap prints ``READY_LINE`` (its jobs are protocol 3), the job
    runner ``RUNNER_READY_LINE`` (protocol 4), and nothing else until a job
    comes, once it runs: the image has a shell and the container is up.
    """
    sock.setblocking(False)
    state, seen = FrameState(), b""
    lines = {READY_LINE: 3, RUNNER_READY_LINE: 4}
    longest = max(len(line) for line in lines)
    while seen not in lines:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return 0
        if not buffered(sock):
            readable, _, _ = select.select([sock], [], [], remaining)
            if not readable:
                continue
        try:
            chunk = sock.recv(longest + FRAME_HEADER_SIZE - len(seen))
        except WOULD_BLOCK:  # over TLS: a record not complete yet, or one with no data (a ticket)
            continue
        if not chunk:
            return 0
        state, pieces = demux_frames(state, chunk)
        for stream, piece in pieces:
            if stream != STDOUT:
                return 0
            seen += bytes(piece)
        if not any(line.startswith(seen) for line in lines):
            return 0
    return lines[seen]



def await_end(sock: socket.socket, deadline: float) -> None:
    """Read and drop what is left of an attach stream until it ends or ``deadline``."""
    try:
        sock.setblocking(False)
        while (remaining := deadline - time.monotonic()) > 0:
            if not buffered(sock):
                readable, _, _ = select.select([sock], [], [], remaining)
                if not readable:
                    continue
            try:
                if not sock.recv(_READ_CHUNK):
                    return
            except WOULD_BLOCK:
                continue
    except (OSError, ValueError):
        return  # closed or reset: over either way


__all__ = ["WOULD_BLOCK", "JobEnd", "await_end", "await_ready", "job_runner_text", "pump_job"]
