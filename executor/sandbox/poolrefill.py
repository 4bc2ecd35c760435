"""The warm pool's refill side: its state, the threads that keep it filled, ``close``.

Background threads keep ``pool_size`` containers ready for each key asked
for recently (:mod:`executor.sandbox.pool`'s "how this works", step 2):
each spare is created like a cold run's container, attached, started and
awaited until its ready line; used or idle spares are removed in the
background once no warm run is in flight (``refill_hold`` at most). Which
spares to make or discard is :class:`executor.sandbox.poolbook.PoolBook`'s
(pure). :class:`executor.sandbox.pool.PooledDockerSandbox` adds the run
side (taking a spare, sending its job); this class alone runs every hook
cold.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import queue
import secrets
import shutil
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from executor.errors import SandboxError
from executor.sandbox import orphans
from executor.sandbox.docker import (
    BACKEND_ERRORS,
    DEFAULT_API_TIMEOUT,
    EXPIRES_LABEL,
    EXPIRY_MARGIN,
    MANAGED_LABEL,
    POOL_LABEL,
    DockerSandbox,
    container_args,
    host_config,
    raw_socket,
    remove_container_quietly,
    retry_transient,
)
from executor.sandbox.docker.profile import relays_output
from executor.sandbox.poolbook import TAKE_MARGIN, PoolBook, Spare
from executor.sandbox.poolkeys import KeyTemplate, pool_key
from executor.sandbox.poolspare import SpareHandle, tree_file
from executor.sandbox.poolwire import await_end, await_ready, job_runner_text
from executor.sandbox.warmjob import bootstrap_command

logger = logging.getLogger("executor.sandbox.pool")  # the pool's messages, under the pool's name as ever

EXIT_GRACE = 0.5
"""Seconds a used pooled container gets to exit by itself before it is removed running."""
REFILL_HOLD = 2.0
"""Seconds at most that creating and removing pooled containers waits for the warm runs
in flight to end (counted from the oldest one's start): starting or removing a
container costs the engine (and, on a small machine, the CPU) what the running hooks
need. A run never waits for the pool: with no spare ready it goes cold."""
SETTLE = 0.25
"""Seconds without an event the pool's own engine work waits for, while every key it keeps
has a spare ready (``note_event``): an agent sends a tool call's events in a burst
(Claude Code: PreToolUse, the tool, PostToolUse, PostToolBatch) and then waits for its
model; a refill started inside the burst competes on a small machine with the events
still to come and with the agent itself (gVisor: ~0.4 s of CPU per container)."""
SETTLE_MAX = 3.0
"""Seconds at most the pool's engine work waits for such a quiet moment, so that events
coming without a pause (no model in between) hold it back no longer than that."""
DRY_WINDOW = 1.0
"""Seconds after a run found no spare ready during which the pool's engine work does not
hold back: the pool is not keeping up, and each run it misses starts a container anyway."""


@dataclass
class PoolStats:
    """What the pool did so far."""

    warm: int = 0
    """Runs served by a pooled container."""
    cold: int = 0
    """Runs that went the cold path (no spare ready, or the spare failed before the job)."""
    fallbacks: int = 0
    """Of the cold runs, those whose spare refused or was dead."""
    created: int = 0
    """Pooled containers created."""
    creation_failures: int = 0
    ready: int = 0
    """Containers waiting for a job right now, all keys."""
    running: int = 0
    """Warm runs in flight right now."""


class RefillingDockerSandbox(DockerSandbox):
    """The docker backend keeping a warm pool filled (see the module's docstring).

    Use :class:`executor.sandbox.pool.PooledDockerSandbox`: this class
    holds the pool's state and its engine work, not the run side.
    """

    def __init__(
        self,
        *,
        pool_size: int = 2,
        pool_total: int = 8,
        idle_timeout: float = 300.0,
        labels: Mapping[str, str] | None = None,
        staging_dir: str | None = None,
        refill_threads: int = 2,
        refill_hold: float = REFILL_HOLD,
        settle: float = SETTLE,
        job_runner: bool = True,
        **options: Any,
    ) -> None:
        """Set up the pool; nothing is created until a run or ``prewarm`` asks for a key.

        Args:
            pool_size: ready containers kept per creation key.
            pool_total: ready containers kept across keys.
            idle_timeout: seconds after which a pooled container without a job
                exits by itself, and a key not asked for is forgotten.
            labels: labels put on every pooled container (a request's own
                labels are per run and cannot be: they go on cold runs only).
            staging_dir: where the pool's private folder of overlay files goes
                (the system's temporary directory by default).
            refill_threads: containers created at once when refilling.
            refill_hold: seconds at most that the pool's own engine work
                (creating, removing) waits while warm runs are in flight.
            settle: seconds without an event (``note_event``) that the same
                work waits for while every key has a spare ready (0: none).
            job_runner: where the image has ``python3``, a pooled container
                runs :mod:`executor.sandbox.jobrunner` rather than the sh
                bootstrap (same job, far fewer system calls: what gVisor
                charges for); False: the bootstrap always.
            **options: everything ``DockerSandbox`` takes.
        """
        super().__init__(**options)
        if idle_timeout <= 2 * TAKE_MARGIN:
            raise ValueError(f"idle_timeout must be over {2 * TAKE_MARGIN} seconds")
        self.idle_timeout = idle_timeout
        self.job_runner = job_runner
        self.labels = dict(labels or {})
        self._staging_parent = staging_dir
        self._staging: str | None = None
        self._book = PoolBook(pool_size, pool_total, idle_timeout)
        self._templates: dict[str, KeyTemplate] = {}
        self._warm: dict[str, frozenset[str]] = {}
        """Per key, the interpreters its hooks named (``warmjob.warmups``): run once in a spare before it is ready."""
        self._cond = threading.Condition()
        self._closed = False
        self._stats = PoolStats()
        self._owned: set[str] = set()
        self._removals: queue.SimpleQueue[tuple[str, SpareHandle | None] | None] = queue.SimpleQueue()
        self._refill_threads = max(1, refill_threads)
        self._refillers: list[threading.Thread] = []
        self._remover: threading.Thread | None = None
        self._pid = str(os.getpid())
        self._ready_timeout = DEFAULT_API_TIMEOUT
        self._flights: dict[int, float] = {}
        """Warm runs in flight: a token -> when it took its spare (monotonic)."""
        self._refill_hold = max(0.0, refill_hold)
        self._dry_at = -math.inf
        """When a run last found no spare of its key (monotonic)."""
        self._settle = max(0.0, settle)
        self._event_at = -math.inf
        """When the last event began or ended (``note_event``; monotonic)."""
        self._settling_since: float | None = None
        """Since when the engine work has been waiting for a quiet moment (bounded by ``SETTLE_MAX``)."""

    # -- the refill side ---------------------------------------------------

    def _start_threads(self) -> None:
        with self._cond:
            if self._closed or self._refillers:
                return
            self._refillers = [
                threading.Thread(target=self._refill_loop, name="hookcage-pool-refill", daemon=True)
                for _ in range(self._refill_threads)
            ]
            self._remover = threading.Thread(
                target=self._remove_loop, name="hookcage-pool-remove", daemon=True
            )
            for thread in self._refillers:
                thread.start()
            self._remover.start()

    def _refill_loop(self) -> None:
        """One refill worker: plan (under the lock), then create or discard (outside it)."""
        while True:
            with self._cond:
                if self._closed:
                    return
                now = time.monotonic()
                if (hold := self._hold(now)) > 0:
                    # Let the hooks in flight have the machine (a key that ran dry
                    # sends its next runs cold meanwhile: they never wait for us).
                    self._cond.wait(hold)
                    continue
                plan = self._book.plan(now)
                if plan.create is None and not plan.discard:
                    wake = self._book.next_change(now)
                    self._cond.wait(min(max(wake - now, 0.05), 5.0))
                    continue
                for forgotten in [k for k in self._templates if not self._book.known(k)]:
                    del self._templates[forgotten]
                    self._warm.pop(forgotten, None)
                template = self._templates.get(plan.create) if plan.create else None
                warm = self._warm.get(plan.create, frozenset()) if plan.create else frozenset()
                timeout = self._book.template_timeout(plan.create) if plan.create else 0.0
            for old in plan.discard:
                self._drop(old)
            if plan.create is None:
                continue
            spare = self._create_spare(plan.create, template, timeout, warm) if template else None
            with self._cond:
                now = time.monotonic()
                if spare is None:
                    self._book.failed(plan.create, now)
                    self._stats.creation_failures += 1
                    continue
                self._stats.created += 1
                kept = not self._closed and self._book.add(spare, now)
                self._cond.notify_all()
            if not kept:
                self._drop(spare)

    def note_event(self) -> None:
        """An event began or ended (the daemon says so for every event, with a hook or not).

        While every key has a spare ready, creating and removing containers waits until
        ``settle`` seconds pass without one (``SETTLE_MAX`` at most): out of the agent's burst.
        """
        with self._cond:
            self._event_at = time.monotonic()

    def _hold(self, now: float) -> float:
        """Seconds the pool's own engine work should still wait (0: none): for the warm runs in
        flight (``refill_hold`` at most), and for a quiet moment between events (``settle``).

        Call with ``self._cond`` held.
        """
        if self._closed or now - self._dry_at < DRY_WINDOW:
            # Runs going cold (the pool does not keep up, as under sustained load): refilling at
            # once costs the hooks in flight less than more runs starting their own containers.
            return 0.0
        hold = min(self._flights.values()) + self._refill_hold - now if self._flights else 0.0
        quiet = self._event_at + self._settle
        if quiet > now and not self._book.hungry(now):  # a spare of every key is ready: no hurry
            if self._settling_since is None:
                self._settling_since = now
            if now - self._settling_since < SETTLE_MAX:
                hold = max(hold, min(quiet, self._settling_since + SETTLE_MAX) - now)
        else:
            self._settling_since = None
        return max(0.0, hold)

    def _await_quiet(self) -> None:
        """Wait until no warm run is in flight (``refill_hold`` at most) and the events settle (``_hold``)."""
        with self._cond:
            while (hold := self._hold(time.monotonic())) > 0:
                self._cond.wait(hold)

    def _create_spare(self, key: str, template: KeyTemplate, timeout: float,
                      warm: frozenset[str] = frozenset()) -> Spare | None:
        """Create, attach and start one pooled container of ``key`` (running the ``warm``
        warm-ups before it is ready); None on failure."""
        client = self.client
        handle = SpareHandle()
        container: str | None = None
        try:
            overlays: dict[str, str] = {}
            if template.targets:
                handle.folder = tempfile.mkdtemp(prefix="c-", dir=self._staging_folder())
                project = os.path.normpath(template.request.project_dir)
                for i, target in enumerate(template.targets):
                    path = os.path.join(handle.folder, str(i))
                    if template.tree:  # laid out as the cold path's tree: an overlay, as for a cold run
                        path = tree_file(handle.folder, project, target)
                    mode = 0o555 if target in template.executable else 0o444
                    handle.overlays[target] = os.open(
                        path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode
                    )
                    os.fchmod(handle.overlays[target], mode)  # not narrowed by the umask
                    overlays[target] = path
            request = replace(template.request, overlays=overlays)
            if template.transcript_folder is not None:
                if handle.folder is None:
                    handle.folder = tempfile.mkdtemp(prefix="c-", dir=self._staging_folder())
                handle.transcript = os.path.join(handle.folder, "transcript")
                os.mkdir(handle.transcript, 0o755)
                os.chmod(handle.transcript, 0o755)  # not narrowed by the umask: the hook lists it
                request = replace(request, transcript_folder=handle.transcript)

            def create() -> tuple[str, float]:
                wall = time.time()
                name = f"hookcage-{secrets.token_hex(8)}"
                args, host = container_args(self.profile, request, name=name, now=wall)
                if pool_key(args, host, template.targets, template.executable,
                            template.transcript_folder) != key:
                    # The host changed since the key was made (a transcript or
                    # a mount appeared, the project changed owner): a container
                    # made now would not be what runs of this key get cold.
                    raise SandboxError("the creation key no longer matches the host")
                expires = math.ceil(wall + self.idle_timeout + timeout) + EXPIRY_MARGIN
                args["command"] = bootstrap_command(self.idle_timeout, template.mount_points,
                                                    relay=relays_output(self.profile), warm=warm,
                                                    runner=job_runner_text() if self.job_runner else None)
                args["working_dir"] = "/"
                args["labels"] = {
                    **self.labels,
                    MANAGED_LABEL: "true",
                    POOL_LABEL: self._pid,
                    EXPIRES_LABEL: str(expires),
                    # Killed outright, this process leaves them (and the hook one may
                    # be running): the next `hookcage serve` or `gc` removes them at once.
                    orphans.OWNER_LABEL: orphans.owner_value(),
                }
                # The bootstrap waits in the container while the hook runs: one
                # more process, so that the hook's own budget is the cold one.
                # Over TLS it also feeds the hook's stdin with `head` (from a
                # subshell that exits at once): as many as the cold path's
                # counted stdin, already in the cold arguments.
                if not self.profile.counted_stdin:
                    host["pids_limit"] += 1
                created = client.create_container(
                    host_config=host_config(client, host), **args
                )
                handle.environment = dict(args.get("environment") or {})
                return str(created["Id"]), float(expires)

            container, expires = retry_transient(create, conflict=True)
            with self._cond:
                self._owned.add(container)
            handle.attached = client.attach_socket(
                container, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
            )
            handle.sock = raw_socket(handle.attached)
            started = time.monotonic()
            client.start(container)
            handle.protocol = await_ready(handle.sock, started + self._ready_timeout)
            if not handle.protocol:
                raise SandboxError("the pooled container did not get ready")
            return Spare(
                container=container,
                key=key,
                ready=time.monotonic(),
                idle_deadline=started + self.idle_timeout,
                expires=expires,
                handle=handle,
            )
        except Exception as exc:  # best-effort: runs go cold meanwhile
            # Logged quietly: runs of this key go cold (and report the trouble)
            # meanwhile, and the key backs off.
            logger.debug("could not start a pooled container: %s", exc)
            handle.close()
            if container is not None:
                self._schedule_removal(container)
            return None

    def _staging_folder(self) -> str:
        with self._cond:
            if self._staging is None:
                parent = self._staging_parent or tempfile.gettempdir()
                self._staging = tempfile.mkdtemp(prefix=f"hookcage-pool-{self._pid}-", dir=parent)
            return self._staging

    def _drop(self, spare: Spare, *, let_exit: bool = False) -> None:
        """Remove ``spare``'s container in the background and release what the pool holds of it.

        With ``let_exit``, the removal first gives the container up to
        ``EXIT_GRACE`` seconds to exit by itself (its attach stream ends).
        """
        handle: SpareHandle | None = spare.handle
        if handle is not None and not let_exit:
            handle.close()
            handle = None
        self._schedule_removal(spare.container, handle)

    def _schedule_removal(self, container: str, handle: SpareHandle | None = None) -> None:
        with self._cond:
            if self._remover is not None and self._remover.is_alive():
                self._removals.put((container, handle))
                return
        if handle is not None:
            handle.close()
        self._remove_now(container)

    def _remove_now(self, container: str) -> None:
        try:
            remove_container_quietly(self.client, container)
        except BACKEND_ERRORS as exc:
            # reap() removes it once its hookcage.expires label has passed.
            logger.warning("could not remove pooled container %s: %s", container[:12], exc)
        with self._cond:
            self._owned.discard(container)

    def _remove_loop(self) -> None:
        while True:
            item = self._removals.get()
            if item is None:
                return
            container, handle = item
            if handle is not None:
                if handle.sock is not None:
                    await_end(handle.sock, time.monotonic() + EXIT_GRACE)
                handle.close()
            self._await_quiet()  # removing costs the engine what the hooks in flight need
            self._remove_now(container)

    def close(self, *, timeout: float = 30.0) -> None:
        """Stop refilling and remove every pooled container.

        Best-effort and bounded: what is still there after about ``timeout``
        seconds (an engine that stopped answering) is left to ``reap``, as
        its ``hookcage.expires`` label says. The spares go first, all at
        once; containers of runs still in flight are removed as they end.
        """
        ends = time.monotonic() + timeout
        with self._cond:
            self._closed = True
            spares = self._book.drain()
            self._cond.notify_all()
        for spare in spares:
            if spare.handle is not None:
                spare.handle.close()
        self._remove_all([spare.container for spare in spares], ends)
        for thread in self._refillers:
            thread.join(max(0.0, ends - time.monotonic()))
        if self._remover is not None:
            self._removals.put(None)
            self._remover.join(max(0.0, ends - time.monotonic()))
        with contextlib.suppress(queue.Empty):
            while True:  # what a stuck remover did not get to
                item = self._removals.get_nowait()
                if item is not None and item[1] is not None:
                    item[1].close()
        with self._cond:
            left = list(self._owned)
        self._remove_all(left, ends)
        with self._cond:
            if self._owned:
                logger.warning("left %d pooled containers to reap()", len(self._owned))
        if self._staging is not None:
            shutil.rmtree(self._staging, ignore_errors=True)
        super().close()

    def _remove_all(self, containers: Sequence[str], ends: float) -> None:
        """Remove ``containers`` side by side, waiting for them until ``ends`` at most."""
        threads = [
            threading.Thread(target=self._remove_now, args=(c,), name="hookcage-pool-close", daemon=True)
            for c in containers
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(max(0.0, ends - time.monotonic()))


__all__ = ["DRY_WINDOW", "EXIT_GRACE", "REFILL_HOLD", "SETTLE", "SETTLE_MAX", "PoolStats", "RefillingDockerSandbox"]
