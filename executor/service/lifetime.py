"""How long the daemon lives: it stops when idle, and retires when its own code changed on disk.

:class:`Lifetime` counts the daemon's work (dispatches in flight, ``async`` hooks
still running) and, on a thread of its own, every :data:`TICK` seconds or so:

- stops the daemon (through the ``retire`` callback) once nothing has been in
  flight for ``idle_timeout`` seconds (0: never);
- compares the package's files with those the daemon started with
  (:func:`executor.service.autostart.package_fingerprint`, every
  :data:`SCAN_EVERY` seconds): an upgrade in place or an edit of an editable
  install marks the code as changed; an idle daemon then retires at once, a
  busy one at its next event (which is answered by a new daemon).

The daemon's code stamp (what a caller's must equal) is taken when it starts.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator

from executor.service import autostart, client

logger = logging.getLogger("hookcage.daemon")

TICK = 1.0
"""Longest sleep of the watch (shorter for a short idle timeout)."""
SCAN_EVERY = 2.0
"""Seconds between two looks at the package's files."""


class Lifetime:
    """The daemon's activity, idle clock and code, watched on a thread of its own.

    Args:
        retire: called once, from the watch thread, with the reason the daemon should go.
        idle_timeout: seconds without anything in flight before ``retire`` (0: never).
        replaceable: retire when the code changed (a daemon with ``--listen`` only says so in its log).
    """

    def __init__(self, retire: Callable[[str], None], idle_timeout: float = 0.0, *, replaceable: bool = True) -> None:
        self.retire = retire
        self.idle_timeout = idle_timeout
        self.replaceable = replaceable
        self.started = time.time()
        self.code = client.code_stamp()
        self._fingerprint = autostart.package_fingerprint()
        self.code_changed = False
        self.requests = 0
        self._busy = 0
        self._last = time.monotonic()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @contextlib.contextmanager
    def activity(self, *, request: bool = True) -> Iterator[None]:
        """Hold the daemon awake while the block runs (a dispatch, or an ``async`` hook's run)."""
        self.begin(request=request)
        try:
            yield
        finally:
            self.end()

    def begin(self, *, request: bool = False) -> None:
        """Something started (a dispatch counts as a request)."""
        with self._lock:
            self._busy += 1
            self.requests += request

    def end(self) -> None:
        """Something ended: the idle clock starts again from now."""
        with self._lock:
            self._busy -= 1
            self._last = time.monotonic()

    def idle_for(self) -> float:
        """Seconds since the last activity ended (0 while something is in flight)."""
        with self._lock:
            return 0.0 if self._busy else time.monotonic() - self._last

    def uptime(self) -> float:
        return max(0.0, time.time() - self.started)

    def start(self) -> None:
        """Start the watch (the idle clock starts now)."""
        with self._lock:
            self._last = time.monotonic()
        self._thread = threading.Thread(target=self._watch, name="hookcage-lifetime", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()

    def check_code(self) -> bool:
        """Look at the package's files now; whether they differ from those the daemon started with."""
        if not self.code_changed and autostart.package_fingerprint() != self._fingerprint:
            self.code_changed = True
            logger.info("hookcage's files changed on disk since this daemon started")
        return self.code_changed

    def _watch(self) -> None:
        tick = TICK if not self.idle_timeout else min(TICK, max(0.1, self.idle_timeout / 10))
        scanned = time.monotonic()
        warned = False
        while not self._stop.wait(tick):
            now = time.monotonic()
            if now - scanned >= SCAN_EVERY:
                scanned = now
                try:
                    changed = self.check_code()
                except Exception:  # never let the watch die
                    logger.exception("looking at hookcage's files failed")
                    changed = False
                if changed and not self.replaceable and not warned:
                    warned = True
                    logger.warning("hookcage's files changed on disk: restart this service to run the new code")
                if changed and self.replaceable and self.idle_for() > 0:
                    self.retire("hookcage's files changed on disk (upgraded or edited): the next event starts "
                                "the daemon of the new code")
                    return
            if self.idle_timeout and self.idle_for() >= self.idle_timeout:
                self.retire(f"idle for {self.idle_timeout:g} s")
                return
