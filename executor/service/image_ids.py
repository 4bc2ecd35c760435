"""Image ids as the engine last gave them, until the engine reports any change to an image.

A repository's hook is trusted for the image it runs in, by id
(:func:`executor.sandbox.backends.trust_profile`): every dispatch of such a hook asks the engine
``inspect_image`` (a round trip, 2-20 ms on a busy machine). The daemon
keeps the answer instead, and forgets every id as soon as the engine
reports an image event (``tag``, ``untag``, ``pull``, ``load``, ``import``,
``delete``...: any of them), on a stream it keeps open (``GET /events``,
``type=image``).

Never stale beyond what the engine itself allows:

- ids are kept only while the stream is open; a stream that ends or fails
  forgets them all, and none is kept until it is open again (retried every
  :data:`RETRY` seconds);
- the stream asks for the events since :data:`REPLAY` seconds before it was
  opened (the engine flushes its answer's headers before it subscribes, and
  its clock may differ): an image event in between clears the ids too;
- an id fetched while an event arrived is not kept (a generation counter).

What remains is the engine's own delivery delay (milliseconds): a dispatch
in that moment uses the id from before, as one whose container was created
a few milliseconds after the check always could (the container is created
by the image's name).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

logger = logging.getLogger("hookcage.daemon")

RETRY = 5.0
"""Seconds between two attempts to open the event stream."""
REPLAY = 5
"""Seconds of the engine's past events asked for when the stream opens."""


class ImageIds:
    """``image name -> id`` of one engine, kept while its image event stream is open.

    Args:
        inspect: the sandbox's ``image_identity`` (asks the engine).
        client: the engine's API client (docker-py ``APIClient``): its ``events``.
    """

    def __init__(self, inspect: Any, client: Any) -> None:
        self._inspect = inspect
        self._client = client
        self._ids: dict[str | None, str] = {}
        self._lock = threading.Lock()
        self._generation = 0
        self._watching = False
        self._closed = threading.Event()
        self._stream: Any = None
        self._thread = threading.Thread(target=self._watch, name="hookcage-image-events", daemon=True)
        self._thread.start()
        self.asked = 0
        """How many times the engine was asked (misses)."""

    def identity(self, image: str | None) -> str:
        """The id of ``image`` (the default image when None).

        Raises:
            SandboxUnavailable: as the sandbox's ``image_identity``.
        """
        with self._lock:
            if self._watching and image in self._ids:
                return self._ids[image]
            generation = self._generation
        self.asked += 1
        found = str(self._inspect(image))
        with self._lock:
            if self._watching and self._generation == generation:
                self._ids[image] = found
        return found

    def _forget(self, watching: bool) -> None:
        with self._lock:
            self._ids.clear()
            self._generation += 1
            self._watching = watching

    def _watch(self) -> None:
        while not self._closed.is_set():
            try:
                stream = self._client.events(since=int(time.time()) - REPLAY, filters={"type": "image"},
                                             decode=True)
            except Exception as exc:  # the engine is away: nothing kept, try again later
                logger.debug("no image event stream (ids not kept): %s", exc)
                self._closed.wait(RETRY)
                continue
            self._stream = stream
            self._forget(watching=True)
            try:
                for _event in stream:
                    self._forget(watching=True)
            except Exception as exc:
                if not self._closed.is_set():
                    logger.debug("the image event stream broke (ids forgotten): %s", exc)
            finally:
                self._forget(watching=False)
                self._stream = None
                try:
                    stream.close()
                except Exception:  # closing a broken stream: nothing more to do
                    logger.debug("closing the image event stream failed", exc_info=True)
            self._closed.wait(RETRY)

    def close(self) -> None:
        """Stop watching (the daemon stops)."""
        self._closed.set()
        self._forget(watching=False)
        stream = self._stream
        if stream is not None:
            try:
                stream.close()
            except Exception:
                logger.debug("closing the image event stream failed", exc_info=True)
        self._thread.join(timeout=2.0)
