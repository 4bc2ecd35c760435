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

Where the parts live: the run side (steps 3 and 5) here; the pool's state,
its refill and removal threads and ``close`` (step 2) in
:mod:`executor.sandbox.poolrefill`; the bytes over a spare's attach socket
(``await_ready``, ``pump_job``) in :mod:`executor.sandbox.poolwire`; a
spare's connection and overlay files in :mod:`executor.sandbox.poolspare`;
a run's key and creation template (step 1) in
:mod:`executor.sandbox.poolkeys`; the job protocol (step 4, pure) in
:mod:`executor.sandbox.warmjob` and the bookkeeping (pure) in
:mod:`executor.sandbox.poolbook`.
"""

from __future__ import annotations

import logging
import os
import secrets
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Literal

from executor.errors import SandboxError
from executor.sandbox.base import RunRequest, RunResult
from executor.sandbox.docker import (
    BACKEND_ERRORS,
    POOL_LABEL,
    CappedBuffer,
    DockerSandbox,
    container_args,
    engine_url,
    map_engine_error,
)
from executor.sandbox.engines import strip_engine_noise
from executor.sandbox.pathcheck import WORKSPACE_PROBE_LABEL
from executor.sandbox.poolbook import Plan, PoolBook, Spare, creation_key
from executor.sandbox.poolkeys import (
    executable_targets,
    has_writable_bind,
    key_template,
    pool_key,
    transcript_folder_target,
)
from executor.sandbox.poolrefill import PoolStats, RefillingDockerSandbox
from executor.sandbox.poolspare import SpareHandle, alive, link_transcript, write_overlays
from executor.sandbox.poolwire import await_ready, pump_job
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

RunPath = Literal["warm", "cold", "fallback"]


# --------------------------------------------------------------------------
# The backend
# --------------------------------------------------------------------------


class PooledDockerSandbox(RefillingDockerSandbox):
    """The docker backend with a warm pool: same containers, one use each, started ahead.

    ``run`` uses a ready container of the request's creation key, else runs
    cold (never waiting) while the pool refills in the background. Use as a
    context manager or call ``close()``: it removes every pooled container.
    Its constructor, its refill side and ``close`` are
    :class:`executor.sandbox.poolrefill.RefillingDockerSandbox`'s.
    """

    name = "docker"

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
        targets = tuple(sorted(os.path.normpath(t) for t in request.overlays))
        executable = executable_targets(request.overlays)
        folder = transcript_folder_target(request)
        if folder is not None:
            # The key of a spare with a folder of its own over the transcript's: any session's.
            try:
                own = os.path.join(self._staging_folder(), "transcript")
                create, host = container_args(self.profile, replace(request, transcript_folder=own),
                                              name="hookcage-key", now=time.time())
            except SandboxError:  # the engine cannot see the pool's folder: the transcript is bound
                folder = None
        if folder is None:
            create, host = container_args(self.profile, request, name="hookcage-key", now=time.time())
        key = pool_key(create, host, targets, executable, folder)
        with self._cond:
            if self._closed:
                return None
            if key not in self._templates:
                self._templates[key] = key_template(request, targets, self.labels, executable, folder)
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
                link_transcript(handle, request.transcript_path)
            except OSError as exc:
                logger.warning("could not write overlay files or link the transcript for a pooled run (it runs cold): %s", exc)
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
