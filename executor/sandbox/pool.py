"""A warm pool for the docker backend: pre-started containers, one use each.

How a warm run works:

1. A run's *creation key* is everything fixed when a container is created
   (image, runtime, user, limits, network, hostname, the workspace bind,
   extra mounts, the transcript mount and the overlay TARGET paths):
   ``container_args`` of the cold path, minus what travels in the job
   (command, environment, working directory) and the labels.
2. Background threads keep ``pool_size`` containers ready for each key
   asked for recently (``pool_total`` across keys). Each one is created like
   a cold run's container (same hardening, same mounts, same labels' kind),
   attached, started, and runs ``BOOTSTRAP``: a POSIX sh script that reads
   ONE job from stdin. It exits by itself after ``idle_timeout`` seconds
   without one, or as soon as the pool's process is gone (its stdin ends).
   The pool's own engine work (creating, removing) waits while warm runs
   are in flight (``refill_hold`` at most): a hook never shares a small
   machine with a container start it does not need.
3. ``run`` takes a ready container of the request's key (never waiting: with
   none ready it runs cold and the pool refills behind it), writes the
   reviewed bytes of any overlays into the container's own read-only
   overlay files, and sends the job (``encode_job``) followed by the hook's
   stdin, then end-of-input (a half-close). Over TLS, where a half-close may
   not get through to the engine, the job counts the bytes of stdin instead
   and the hook gets exactly those (``head -c``), then end-of-input; the
   connection's write side is never shut down.
4. The bootstrap checks its overlays are still in place, ``cd``s, arms its
   watch (the container ends itself past the timeout, as a cold run's
   does), prints an acknowledgement line on stdout and runs
   ``/bin/sh -c COMMAND`` with the job's ``NAME=VALUE`` entries exported and the rest of stdin (over TLS, the counted bytes). When it exits, the
   bootstrap kills every other process left in the container (as the end
   of a cold run's init does), then prints an end marker with the job's
   nonce, the exit status and the cgroup's OOM-kill count on stdout AND
   stderr (the two streams arrive out of order), and exits.
5. ``JobReader`` (pure) strips the acknowledgement and the markers from the
   streams; the run is over when both streams end in a marker. The
   container is then removed in the background (once it has exited, or
   after ``EXIT_GRACE``): never reused.

Why what a hook prints cannot end its run: the nonce is 128 random bits
made per job and sent only in the job's header, which the bootstrap
consumes before the hook starts; the bootstrap never passes it to a program
(no argv, no environment, no file), and a marker counts only as the very
last bytes of a stream, with the nonce of this job. A marker-looking line
with any other nonce is output like any other.

The one way around it: a hook that reads the bootstrap's memory
(``/proc/PID/mem``; same uid, allowed wherever the kernel has no Yama
``ptrace_scope`` >= 1) learns the nonce. What that buys it depends on the
mounts, and the pool makes sure it buys nothing:

- with a writable bind (``workspace: rw``) the markers count only once the
  attach stream has ended too, i.e. once the container's last process is
  gone (``pump_job(until_eof=True)``): a stolen end changes nothing, and no
  hook process can write after its verdict. This costs the engine's exit
  handling (tens of milliseconds) on such runs.
- with read-only binds only, the stolen end is taken: the hook ends its run
  early with a status and output of its choosing, which it can do anyway by
  exiting, and its leftover processes live on until the container is
  removed (within ``EXIT_GRACE`` plus one removal) with nowhere outside
  their own container to write to (read-only binds and rootfs, private
  tmpfs, no network).

Overlays (reviewed bytes laid over workspace paths) are served warm too: a
pooled container binds, read-only, a dedicated empty file per overlay
target from the pool's private staging directory (0700, this process's
uid). At job time the pool writes the request's staged bytes into those
files IN PLACE (same inode: the bind follows the inode, a rename would not
reach the container) before the job is sent. Safe because only this
process can write those files, the container sees them through a read-only
bind, and each container serves one job. Because the workspace may change
between creation and use, and unlinking or renaming a mount point's file on
the host detaches or moves the mount, the bootstrap looks every
target up (under gVisor the lookup is what drops a bind whose file was replaced
on the host) and checks ``/proc/self/mountinfo`` for it before running
anything; if one moved, it refuses (no acknowledgement) and the run goes cold.

Whatever fails before the acknowledgement (a dead container, a refused
overlay) means the hook never ran, so the run falls back to the cold path.
After it, the run's outcome is reported as the cold path would: timeout
(kill by id), OOM kill, death without markers (inspected).
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
from typing import Any, Literal

from executor.errors import SandboxError
from executor.sandbox import orphans
from executor.sandbox.base import RunRequest, RunResult
from executor.sandbox.docker import (
    BACKEND_ERRORS,
    DEFAULT_API_TIMEOUT,
    EXPIRES_LABEL,
    EXPIRY_MARGIN,
    MANAGED_LABEL,
    POOL_LABEL,
    CappedBuffer,
    DockerSandbox,
    container_args,
    engine_url,
    host_config,
    map_engine_error,
    raw_socket,
    remove_container_quietly,
    retry_transient,
)
from executor.sandbox.docker.profile import relays_output
from executor.sandbox.engines import strip_engine_noise
from executor.sandbox.pathcheck import WORKSPACE_PROBE_LABEL
from executor.sandbox.poolbook import (
    TAKE_MARGIN,
    Plan,
    PoolBook,
    Spare,
    creation_key,
)
from executor.sandbox.poolkeys import (
    KeyTemplate,
    executable_targets,
    has_writable_bind,
    key_template,
    pool_key,
)
from executor.sandbox.poolspare import SpareHandle, alive, tree_file, write_overlays
from executor.sandbox.poolwire import await_end, await_ready, job_runner_text, pump_job
from executor.sandbox.warmjob import (
    BOOTSTRAP,
    READY_LINE,
    EndScanner,
    JobReader,
    bootstrap_command,
    encode_job,
    job_environment,
    mountinfo_escape,
    warmups,
    watch_seconds,
)

logger = logging.getLogger(__name__)

NONCE_BYTES = 16
EXIT_GRACE = 0.5
"""Seconds a used pooled container gets to exit by itself before it is removed running."""
REFILL_HOLD = 2.0
"""Seconds at most that creating and removing pooled containers waits for the warm runs
in flight to end (counted from the oldest one's start): starting or removing a
container costs the engine (and, on a small machine, the CPU) what the running hooks
need. A run never waits for the pool: with no spare ready it goes cold."""
DRY_WINDOW = 1.0
"""Seconds after a run found no spare ready during which the pool's engine work does not
hold back: the pool is not keeping up, and each run it misses starts a container anyway."""

RunPath = Literal["warm", "cold", "fallback"]


# --------------------------------------------------------------------------
# The backend
# --------------------------------------------------------------------------


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


class PooledDockerSandbox(DockerSandbox):
    """The docker backend with a warm pool: same containers, one use each, started ahead.

    ``run`` uses a ready container of the request's creation key, else runs
    cold (never waiting) while the pool refills in the background. Use as a
    context manager or call ``close()``: it removes every pooled container.
    """

    name = "docker"

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

    # -- the run side ------------------------------------------------------

    def run(self, request: RunRequest) -> RunResult:
        """Run one hook command in a pooled container if one is ready, else cold.

        Same results, errors and guarantees as ``DockerSandbox.run``.
        """
        return self.run_with_path(request)[0]

    def run_with_path(self, request: RunRequest) -> tuple[RunResult, RunPath]:
        """``run``, and which way it went: ``warm``, ``cold`` (no spare ready)
        or ``fallback`` (the spare was dead or refused before the hook ran;
        the run went cold)."""
        if WORKSPACE_PROBE_LABEL in request.labels:  # hookcage's own probe, not a hook run: not counted
            return DockerSandbox.run(self, request), "cold"
        self.verify_workspace(request)  # a remote engine has the workspace, or nothing runs
        plan = self._plan_run(request) if request.warm else None
        if plan is None:
            return self._cold(request), "cold"
        key, create, writable = plan
        spare = self._take(key, request.timeout)
        if spare is None:
            with self._cond:  # the pool is not keeping up: its refill holds back no more for a while
                self._dry_at = time.monotonic()
                self._cond.notify_all()
            return self._cold(request), "cold"
        try:
            result = self._run_warm(spare, request, create, writable=writable)
        finally:
            with self._cond:
                self._flights.pop(id(spare), None)
                self._cond.notify_all()
        with self._cond:
            self._book.started(key, result is not None, time.monotonic())
            if result is not None:
                self._stats.warm += 1
                return result, "warm"
            self._stats.fallbacks += 1
        return self._cold(request), "fallback"

    def prewarm(self, request: RunRequest, *, wait: float = 0.0) -> bool:
        """Make ``request``'s creation key known, so the pool fills it now.

        Args:
            request: a request like those to come (only what is fixed at
                creation matters: workspace, options, overlay targets...).
            wait: seconds to wait for one container of that key to be ready.

        Returns:
            Whether one is ready.

        Raises:
            SandboxError: the request could never run (as ``run`` would raise).
        """
        plan = self._plan_run(request, run=False)
        if plan is None:
            return False
        key = plan[0]
        deadline = time.monotonic() + wait
        with self._cond:
            while not self._closed:
                if self._book.ready(key):
                    return True
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
        return False

    def spares(self) -> list[str]:
        """Ids of the pooled containers waiting for a job."""
        with self._cond:
            return self._book.containers()

    def stats(self) -> PoolStats:
        """A copy of the pool's counters."""
        with self._cond:
            return replace(self._stats, ready=len(self._book.containers()), running=len(self._flights))

    def _cold(self, request: RunRequest) -> RunResult:
        with self._cond:
            self._stats.cold += 1
        return super().run(request)

    def _plan_run(
        self, request: RunRequest, *, run: bool = True
    ) -> tuple[str, dict[str, Any], bool] | None:
        """The request's creation key, cold create arguments and whether it has a
        writable bind mount; the key becomes known.

        Raises:
            SandboxError: the request is invalid (exactly as the cold path says).
        """
        self.client  # noqa: B018 -- first: where the engine sees hookcage's paths (path_map) is known
        create, host = container_args(self.profile, request, name="hookcage-key", now=time.time())
        targets = tuple(sorted(os.path.normpath(t) for t in request.overlays))
        executable = executable_targets(request.overlays)
        key = pool_key(create, host, targets, executable)
        with self._cond:
            if self._closed:
                return None
            if key not in self._templates:
                self._templates[key] = key_template(request, targets, self.labels, executable)
            self._warm[key] = self._warm.get(key, frozenset()) | warmups(request.command)
            self._book.want(key, request.timeout, time.monotonic(), run=run)
            self._cond.notify_all()
        self._start_threads()
        return key, create, has_writable_bind(host)

    def _take(self, key: str, timeout: float) -> Spare | None:
        """A live spare of ``key``, counted in flight (the caller uncounts it), or None."""
        while True:
            with self._cond:
                now = time.monotonic()
                spare = self._book.take(key, timeout, now, time.time())
                if spare is not None:
                    self._flights[id(spare)] = now
                self._cond.notify_all()  # a slot to refill, maybe spares to retire
            if spare is None or alive(spare.handle):
                return spare
            with self._cond:
                self._flights.pop(id(spare), None)
            self._drop(spare)  # exited (idle, killed): it prints nothing while it waits

    def _run_warm(
        self, spare: Spare, request: RunRequest, create: Mapping[str, Any], *, writable: bool
    ) -> RunResult | None:
        """Run the job in ``spare``; None when the hook never ran (then run cold)."""
        handle: SpareHandle = spare.handle
        client = self.client
        began = time.monotonic()
        step = "stream from"
        let_exit = False
        try:
            try:
                write_overlays(handle, request.overlays)
            except OSError as exc:
                logger.warning("could not write overlay files for a pooled run: %s", exc)
                return None
            nonce = secrets.token_hex(NONCE_BYTES)
            # The command the cold path runs: it ends its container by itself past its timeout.
            counted = self.profile.counted_stdin  # over TLS: no half-close, the job counts its stdin
            # The bootstrap's watch ends the container past the timeout, as a cold run's script does.
            job = encode_job(nonce, create["working_dir"], request.command,
                             job_environment(create["environment"], handle.environment),
                             len(request.stdin) if counted else None, watch=watch_seconds(request.timeout),
                             protocol=handle.protocol)
            reader = JobReader(nonce)
            stdout = CappedBuffer(request.output_cap)
            stderr = CappedBuffer(request.output_cap)
            deadline = time.monotonic() + request.timeout
            if handle.sock is None:
                return None
            end = pump_job(
                handle.sock,
                job + request.stdin,
                deadline,
                reader,
                stdout,
                stderr,
                until_eof=writable,
                end_input=not counted,
            )
            # The bootstrap exits right after its markers: removing it once it
            # has costs the engine far less than removing it running.
            let_exit = end == "done"
            if not let_exit:
                # Before any other call about it: the engine may not finish
                # stopping a container while its output waits to be read.
                handle.close()
            step = "wait for"
            oom_killed = False
            if end == "done":
                timed_out = False
                exit_code: int | None = reader.status
                oom_kills = reader.oom_kills
                if oom_kills is None and exit_code == 137:
                    # No OOM count readable in the container: ask the engine.
                    let_exit = False
                    handle.close()
                    _, state = self._finish(client, spare.container, True, deadline)
                    oom_killed = state["oom_killed"]
                else:
                    oom_killed = bool(oom_kills)
            elif end == "eof" and not reader.acknowledged:
                return None
            else:
                timed_out, state = self._finish(client, spare.container, end == "eof", deadline)
                exit_code, oom_killed = state["exit_code"], state["oom_killed"]
                if end == "eof" and not timed_out and not oom_killed:
                    # The hook ran, and its run ended without the bootstrap's end marker on a
                    # stream (the bootstrap was killed): what it printed last may be lost.
                    if not reader.out.ended:
                        stdout.cut()
                    if not reader.err.ended:
                        stderr.cut()
            duration = time.monotonic() - began
        except BACKEND_ERRORS as exc:
            raise map_engine_error(
                exc,
                step=step,
                url=engine_url(client),
                image=request.options.image or self.profile.image,
                runtime=self.profile.runtime,
            ) from exc
        finally:
            self._drop(spare, let_exit=let_exit)
        return RunResult(
            exit_code=None if timed_out or oom_killed else exit_code,
            stdout=stdout.getvalue(),
            stderr=strip_engine_noise(self.profile.engine, stderr.getvalue()),
            duration=duration,
            timed_out=timed_out,
            oom_killed=oom_killed,
            stdout_truncated=stdout.truncated,
            stderr_truncated=stderr.truncated,
        )

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

    def _hold(self, now: float) -> float:
        """Seconds the pool's own engine work should still wait for the warm runs in flight (0: none).

        Call with ``self._cond`` held.
        """
        if self._closed or not self._flights or now - self._dry_at < DRY_WINDOW:
            # Runs going cold (the pool does not keep up, as under sustained load): refilling at
            # once costs the hooks in flight less than more runs starting their own containers.
            return 0.0
        return max(0.0, min(self._flights.values()) + self._refill_hold - now)

    def _await_quiet(self) -> None:
        """Wait (bounded by ``refill_hold``) until no warm run is in flight."""
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

            def create() -> tuple[str, float]:
                wall = time.time()
                name = f"hookcage-{secrets.token_hex(8)}"
                args, host = container_args(self.profile, request, name=name, now=wall)
                if pool_key(args, host, template.targets, template.executable) != key:
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


__all__ = [
    "BOOTSTRAP",
    "POOL_LABEL",
    "READY_LINE",
    "EndScanner",
    "JobReader",
    "Plan",
    "PoolBook",
    "PoolStats",
    "PooledDockerSandbox",
    "RunPath",
    "Spare",
    "await_ready",
    "bootstrap_command",
    "creation_key",
    "encode_job",
    "has_writable_bind",
    "mountinfo_escape",
    "pump_job",
]
