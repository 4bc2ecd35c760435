"""Turns on the engine for the test sessions of one run (``pytest -n 4``: one per xdist worker).

Most engine tests share the engine with whatever else runs: their containers carry their
session's labels and their sweeps count only those. A few observe the engine as a whole and
cannot share it: the host's disk usage around a hook that fills its ``/tmp``; ``reap``, which
by design removes any session's expired containers; the benchmark, which times the engine.
Those are marked ``alone`` and take the engine for themselves: every other engine test holds
a *shared* turn while it runs, an ``alone`` test an *exclusive* one. The set-up of a module's or
a session's fixture (a Podman service loading the runner image, a daemon filling its pool) holds
a shared turn too (``tests/integration/conftest.py``), so that it never runs beside an ``alone``
test either.

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


_shared_depth = 0
"""Turns this process holds now. A fixture set up inside a test's turn takes none of its own:
waiting at the door while holding the room would deadlock (with an ``alone`` test waiting at the
room, or with this process's own exclusive turn)."""


@contextlib.contextmanager
def turn(*, alone: bool) -> Iterator[None]:
    """Hold a turn on the engine: shared with the other engine tests, or ``alone``."""
    global _shared_depth
    folder = _folder()
    if alone:
        if _shared_depth:
            raise RuntimeError("an alone turn asked for inside a shared one (it would wait for itself)")
        with _held(folder / "door", fcntl.LOCK_EX), _held(folder / "room", fcntl.LOCK_EX):
            _shared_depth += 1  # what is set up inside it needs no turn of its own
            try:
                yield
            finally:
                _shared_depth -= 1
        return
    if _shared_depth:
        _shared_depth += 1
        try:
            yield
        finally:
            _shared_depth -= 1
        return
    with contextlib.ExitStack() as stack:
        with _held(folder / "door", fcntl.LOCK_EX):
            stack.enter_context(_held(folder / "room", fcntl.LOCK_SH))
        _shared_depth += 1
        try:
            yield
        finally:
            _shared_depth -= 1
