"""Turns on the engine for the test sessions of one run (``pytest -n 4``: one per xdist worker).

Most engine tests share the engine with whatever else runs: their containers carry their
session's labels and their sweeps count only those. A few observe the engine as a whole and
cannot share it: the host's disk usage around a hook that fills its ``/tmp``; ``reap``, which
by design removes any session's expired containers; the benchmark, which times the engine.
Those are marked ``alone`` and take the engine for themselves: every other engine test holds
a *shared* turn while it runs, an ``alone`` test an *exclusive* one.

A readers-writer lock on two lock files (``flock``; both under ``$HOOKCAGE_TEST_TURNS``, a
folder the run's controller names): the *door* is held exclusively by a test coming in, only
for the moment it takes its turn, and by an ``alone`` test for its whole run, so that once it
waits at the *room* for the tests inside to end, no new test goes in before it (no starvation
of the ``alone`` test by a stream of shared ones).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

TURNS_ENV = "HOOKCAGE_TEST_TURNS"


def _folder() -> Path:
    folder = Path(os.environ.get(TURNS_ENV) or f"/tmp/hookcage-test-turns-{os.getpid()}")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@contextlib.contextmanager
def _held(path: Path, mode: int) -> Iterator[int]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, mode)
        yield fd
    finally:
        os.close(fd)  # releases the lock


@contextlib.contextmanager
def turn(*, alone: bool) -> Iterator[None]:
    """Hold a turn on the engine: shared with the other engine tests, or ``alone``."""
    folder = _folder()
    if alone:
        with _held(folder / "door", fcntl.LOCK_EX), _held(folder / "room", fcntl.LOCK_EX):
            yield
        return
    with contextlib.ExitStack() as stack:
        with _held(folder / "door", fcntl.LOCK_EX):
            stack.enter_context(_held(folder / "room", fcntl.LOCK_SH))
        yield
