"""The daemon's shared sandboxes: one per backend and profile, lent to every request.

The sandboxes ``sandbox_factory`` builds (for ``docker``, an engine connection
and a warm pool of started containers) are kept for the daemon's life, one per
distinct :data:`SANDBOX_SETTINGS`, and closed when it stops, which removes the
pool's containers. A request borrows one through the executor's sandbox
factory (:meth:`SharedSandboxes.factory_for`); closing what it borrowed is
the daemon's job, not the request's. ``host`` sandboxes hold nothing and are
made per request from the caller's PATH, HOME and LANG. Image ids are kept per
engine while it reports no image event (:mod:`executor.service.image_ids`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from executor.core.options import SandboxOptions
from executor.errors import HookcageError, SandboxError
from executor.executor import SandboxFactory
from executor.prepare import staging
from executor.sandbox import backends, orphans
from executor.sandbox.base import RunRequest, RunResult, Sandbox
from executor.service.image_ids import ImageIds
from executor.settings import Settings, load_settings

logger = logging.getLogger("hookcage.daemon")

SANDBOX_SETTINGS = (
    "image", "runtime", "memory", "cpus", "pids", "tmpfs_size", "pool_size", "pool_total", "pool_idle_timeout",
    "path_map",
)
"""The settings a shared sandbox is built from: one sandbox per distinct combination."""


def _key_part(value: Any) -> Any:
    """A setting as part of a dict key: a mapping (``path_map``) as its sorted items."""
    return tuple(sorted(value.items())) if isinstance(value, dict) else value


def _shown_part(value: Any) -> Any:
    """:func:`_key_part` undone, for ``GET /health`` (no scalar setting is a tuple)."""
    return dict(value) if isinstance(value, tuple) else value


class _Shared(Sandbox):
    """A daemon-wide sandbox lent to one request: closing it is the daemon's job."""

    def __init__(self, inner: Sandbox, ids: ImageIds | None = None) -> None:
        self.inner = inner
        self.name = inner.name
        self.ids = ids

    def run(self, request: RunRequest) -> RunResult:
        return self.inner.run(request)

    def image_identity(self, image: str | None) -> str:
        # Kept while the engine's image events say nothing changed (executor.service.image_ids).
        return self.ids.identity(image) if self.ids is not None else self.inner.image_identity(image)

    def runtime(self) -> str | None:
        # Part of the trust profile (gVisor or not): as the in-process executor sees it, or no daemon
        # run under gVisor would match a review made with `hookcage trust`.
        return self.inner.runtime()


def pooled_sandbox_factory(backend: str, settings: Settings) -> Sandbox:
    """The daemon's sandboxes: each backend's ``pooled`` variant (:func:`executor.sandbox.backends.build_sandbox`).

    For ``docker``, a warm pool (``pool_size`` or ``pool_total`` 0: the cold
    ``DockerSandbox``); the rest as in-process.

    Raises:
        UnknownBackend: ``backend`` names no backend.
    """
    return backends.build_sandbox(backend, settings, pooled=True)


def sandbox_health(key: tuple[Any, ...], sandbox: Sandbox) -> dict[str, Any]:
    """One shared sandbox in ``GET /health``: its backend, profile and pool counters."""
    from executor.sandbox.pool import PooledDockerSandbox

    pool = dataclasses.asdict(sandbox.stats()) if isinstance(sandbox, PooledDockerSandbox) else None
    profile = {name: _shown_part(value) for name, value in zip(SANDBOX_SETTINGS, key[1:], strict=True)}
    return {"backend": key[0], "profile": profile, "pool": pool}


class SharedSandboxes:
    """The daemon's shared sandboxes and their image ids, built on first use.

    Args:
        factory: builds a shared sandbox (:func:`pooled_sandbox_factory` in ``hookcage serve``).
        lock: the daemon's own lock, so building a sandbox holds back its retiring as it always
            did; re-entrant, so the daemon detaches its sandboxes while holding it.
    """

    def __init__(self, factory: SandboxFactory, lock: threading.RLock) -> None:
        self._factory = factory
        self._shared: dict[tuple[Any, ...], Sandbox] = {}
        self._ids: dict[int, ImageIds] = {}  # id(shared sandbox) -> its image ids
        self._lock = lock
        self._closed = False
        self._noted: tuple[Callable[[], None], ...] = ()
        """Each shared sandbox's ``note_event`` (replaced whole, read without the lock)."""

    def factory_for(self, base_env: Mapping[str, str]) -> SandboxFactory:
        """The sandbox factory of one request: the shared sandboxes lent, ``host`` made for its caller."""
        def factory(backend: str, settings: Settings) -> Sandbox:
            if not backends.shared_by_callers(backend):  # host: runs with the caller's PATH, HOME and LANG
                return backends.build_sandbox(backend, settings, environ=base_env)
            shared = self.get(backend, settings)
            return _Shared(shared, self._image_ids(shared))

        return factory

    def _image_ids(self, sandbox: Sandbox) -> ImageIds | None:
        """The image ids kept for a shared sandbox of an engine (None: asked every time)."""
        with self._lock:
            if id(sandbox) in self._ids:
                return self._ids[id(sandbox)]
            if self._closed or not backends.on_engine(sandbox.name):
                return None
        try:
            client = getattr(sandbox, "client", None)  # connects: the engine may be away
        except Exception:
            return None
        if client is None or not hasattr(client, "events"):
            return None
        with self._lock:
            if self._closed:
                return None
            if id(sandbox) not in self._ids:
                self._ids[id(sandbox)] = ImageIds(sandbox.image_identity, client)
            return self._ids[id(sandbox)]

    def get(self, backend: str, settings: Settings) -> Sandbox:
        """The daemon-wide sandbox for a backend and profile, built on first use.

        Raises:
            SandboxError: the daemon is stopping, or the factory failed.
        """
        key = (backend, *(_key_part(getattr(settings, name)) for name in SANDBOX_SETTINGS))
        with self._lock:
            if self._closed:
                raise SandboxError("the hookcage daemon is stopping")
            sandbox = self._shared.get(key)
            if sandbox is None:
                sandbox = self._shared[key] = self._factory(backend, settings)
                note = getattr(sandbox, "note_event", None)
                if callable(note):
                    self._noted = (*self._noted, note)
            return sandbox

    def note_event(self) -> None:
        """An event began or ended: each warm pool holds its own engine work until events settle
        (:meth:`executor.sandbox.poolrefill.RefillingDockerSandbox.note_event`)."""
        for note in self._noted:  # not under the daemon's lock: a sandbox being built holds it
            note()

    def health(self) -> list[dict[str, Any]]:
        """The shared sandboxes built so far, for ``GET /health`` (:func:`sandbox_health`)."""
        with self._lock:
            shared = list(self._shared.items())
        return [sandbox_health(key, sandbox) for key, sandbox in shared]

    def pool_stats(self) -> list[dict[str, Any]]:
        """Each warm pool's counters (the metrics read them at scrape time)."""
        return [entry["pool"] for entry in self.health() if entry["pool"]]

    def containers_alive(self) -> int | None:
        """Running containers this process started (hook runs and pools); None when the engine
        does not answer. No docker sandbox yet: none."""
        from executor.sandbox.conventions import MANAGED_LABEL, POOL_LABEL

        with self._lock:
            engines = [getattr(sandbox, "client", None) for sandbox in self._shared.values()]
        engine = next((found for found in engines if found is not None), None)
        if engine is None:
            return 0
        found: set[str] = set()
        try:
            for label in (f"{orphans.OWNER_LABEL}={orphans.owner_value()}", f"{POOL_LABEL}={os.getpid()}"):
                filters = {"label": [f"{MANAGED_LABEL}=true", label], "status": "running"}
                found.update(entry["Id"] for entry in engine.containers(filters=filters))
        except Exception as exc:  # the engine is away: say nothing rather than something wrong
            logger.debug("counting containers failed: %s", exc)
            return None
        return len(found)

    def warm(self) -> Any:
        """Build the default backend's sandbox (docker) for the daemon's own settings now (engine connection,
        reap); the sandbox, or None when it cannot be built (said in the log)."""
        try:
            return self.get(SandboxOptions().backend, load_settings())
        except HookcageError as exc:
            logger.warning("no docker sandbox prepared: %s", exc)
            return None

    def detach(self) -> tuple[list[Sandbox], list[ImageIds]]:
        """Build nothing more and hand every sandbox and image-id watch over, for the daemon to close."""
        with self._lock:
            self._closed = True
            shared = list(self._shared.values())
            self._shared.clear()
            self._noted = ()
            ids = list(self._ids.values())
            self._ids.clear()
        return shared, ids


def sweep(home: Path, sandbox: Any) -> None:
    """Remove what killed processes left: staging folders, containers of dead owners (best effort).

    Run in a thread once the daemon answers: the first event (the one that started the daemon)
    does not wait for it. It removes only what belongs to processes that are gone."""
    with contextlib.suppress(OSError):
        if (home / staging.STAGING).is_dir() and (count := staging.sweep(home / staging.STAGING)):
            logger.info("removed %d staging folder(s) of processes that are gone", count)
    client = getattr(sandbox, "client", None)
    if client is not None:
        try:
            if count := orphans.remove_orphans(client):
                logger.info("removed %d container(s) of processes that are gone", count)
        except Exception as exc:  # best effort: reap() removes them at expiry
            logger.debug("removing orphaned containers failed: %s", exc)
