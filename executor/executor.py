"""HookExecutor: load -> match -> gate -> run (in parallel) -> parse -> fold -> log.

How this works, for one event:

1. The event name and payload are checked against the catalog
   (:mod:`executor.events`); bad input is a :class:`PayloadError`.
2. Hook files of every scope are read for the project root
   (``$CLAUDE_PROJECT_DIR``, else the payload's ``cwd``) and merged
   (:mod:`executor.config`, :mod:`executor.policy`).
3. Hooks of the event whose matcher selects the payload are kept; identical
   handlers from several files run once.
4. Each hook passes the gates (valid config, enabled, supported type, ``once``);
   a hook that fails one is skipped, logged with its ``skip_reason`` and, where
   the user should know, named in the verdict's system message.
5. The rest run in parallel, each in the sandbox its config asks for, with
   its own timeout. ``async`` hooks are started and not awaited.
6. Each result is parsed (:func:`protocol.parse_outcome`), failures follow the
   hook's ``on_error``, and all outcomes fold into one :class:`Verdict`.
7. One JSON line per hook considered goes to the run log.

Sandboxes are injected (``sandboxes={"docker": ..., "host": ...}``) or built
on first use from the settings.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from executor.config import PROJECT_DIR_VARS, load_hooks, project_root
from executor.errors import HookcageError, SandboxError
from executor.events import EventSpec, check_payload, get_event
from executor.hooks import DOCKER_SOCKETS, HookSpec, dedupe
from executor.matchers import event_matches
from executor.policy import HookSet, Skip
from executor.protocol import (
    HookOutcome,
    Verdict,
    apply_on_error,
    build_stdin,
    error_outcome,
    fold,
    parse_outcome,
)
from executor.runlog import append_records, claim_once
from executor.sandbox.base import RunRequest, RunResult, Sandbox
from executor.settings import Settings, load_settings
from executor.text import redact

SandboxFactory = Callable[[str, Settings], Sandbox]


@dataclass(frozen=True)
class HookView:
    """One configured hook as ``hookcage list`` shows it."""

    hook: HookSpec
    skip: Skip | None

    def to_json(self) -> dict[str, Any]:
        """A plain dict for ``--json`` output."""
        h = self.hook
        return {
            "id": h.id, "event": h.event, "matcher": h.matcher.source, "type": h.type,
            "command": h.command, "name": h.name, "scope": h.scope.value, "source": h.source,
            "path": h.json_path, "sandbox": h.sandbox.describe(), "timeout": h.timeout,
            "async": h.is_async, "once": h.once, "on_error": h.on_error,
            "would_run": self.skip is None,
            "skip_reason": self.skip.reason if self.skip else None,
            "detail": self.skip.detail if self.skip else None,
        }


@dataclass
class _Run:
    hook: HookSpec
    request: RunRequest
    started: float = 0.0
    result: RunResult | None = None
    outcome: HookOutcome | None = None


def default_sandbox_factory(backend: str, settings: Settings) -> Sandbox:
    """Build a backend from the settings (imported lazily: only what is used is loaded)."""
    if backend == "host":
        from executor.sandbox.host import HostSandbox

        return HostSandbox()
    if backend == "docker":
        from executor.sandbox.docker import DockerSandbox

        return DockerSandbox(
            image=settings.image, runtime=settings.runtime, memory=settings.memory,
            cpus=settings.cpus, pids=settings.pids, tmpfs_size=settings.tmpfs_size,
        )
    raise SandboxError(f"unknown sandbox backend {backend!r}")


class HookExecutor:
    """Runs the hooks of one event and folds their answers into a verdict.

    Example::

        with HookExecutor(sandboxes={"docker": FakeSandbox()}) as ex:
            verdict = ex.dispatch("PreToolUse", payload)
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        sandboxes: Mapping[str, Sandbox] | None = None,
        sandbox_factory: SandboxFactory = default_sandbox_factory,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.settings = settings or load_settings()
        self._sandboxes: dict[str, Sandbox] = dict(sandboxes or {})
        self._owned: set[str] = set()
        self._factory = sandbox_factory
        self._environ = environ
        self._lock = threading.Lock()
        self._background: list[Future[None]] = []
        self._async_pool: ThreadPoolExecutor | None = None
        self.deferred: list[Callable[[], None]] = []

    # -- configuration -------------------------------------------------------

    def root_for(self, payload: Mapping[str, Any] | None) -> Path:
        """The project root for a payload."""
        return project_root(payload, self._environ)

    def load(self, root: Path | None) -> HookSet:
        """Every scope's hooks for a project root."""
        return load_hooks(self.settings, root)

    def inventory(self, root: Path | None, event: str | None = None) -> tuple[HookSet, list[HookView]]:
        """Every configured hook (optionally of one event) and whether it would run."""
        hookset = self.load(root)
        views = [
            HookView(h, hookset.skip(h))
            for h in hookset.hooks
            if event is None or h.event == event
        ]
        return hookset, views

    # -- dispatch ------------------------------------------------------------

    def dispatch(
        self, event: str | EventSpec, payload: Mapping[str, Any], *, defer_async: bool = False
    ) -> Verdict:
        """Run every matching hook of ``event`` and fold their answers.

        Args:
            event: the event (name or spec).
            payload: the agent's JSON payload.
            defer_async: leave ``async`` hooks in :attr:`deferred` instead of
                starting them on a background thread (the CLI runs them after
                it has answered the agent).

        Raises:
            PayloadError: the event is unknown or the payload lacks what it needs.
        """
        spec = get_event(event) if isinstance(event, str) else event
        check_payload(spec, payload)
        root = self.root_for(payload)
        hookset = self.load(root)
        session = payload.get("session_id") or ""
        stdin = build_stdin(spec, payload)

        notes = [str(p) for p in hookset.problems_for(spec.name)]
        considered: list[dict[str, Any] | _Run] = []  # config order, for the log
        runs: list[_Run] = []
        background: list[_Run] = []
        matching = [h for h in hookset.for_event(spec.name) if event_matches(spec, h.matcher, payload)]
        # Duplicates are folded among the hooks that may run, so a disabled or
        # invalid copy never shadows a runnable one.
        runnable = {id(h) for h in dedupe([h for h in matching if hookset.skip(h) is None])}
        for hook in matching:
            skip = hookset.skip(hook)
            if skip is None and id(hook) not in runnable:
                continue
            if skip is None:
                skip = self._check_mounts(hook, root)
            if skip is None and hook.once and session and not claim_once(self.settings.state_dir, session, hook.id):
                skip = Skip("disabled", "a once hook that already ran in this session")
            if skip is not None:
                if skip.reason == "unsupported_type":
                    notes.append(f"hook {hook.label} skipped: {skip.detail}")
                considered.append(self._record(spec, session, hook, skip=skip))
                continue
            run = _Run(hook, self._request(hook, payload, root, stdin, session))
            if hook.is_async:
                background.append(run)
            else:
                runs.append(run)
                considered.append(run)

        self._run_all(spec, runs)
        outcomes = [r.outcome for r in runs if r.outcome is not None]
        verdict = fold(spec, outcomes, notes)
        self._log([
            c if isinstance(c, dict) else self._record(spec, session, c.hook, run=c)
            for c in considered
        ])
        if background:
            job = self._background_job(spec, session, background)
            if defer_async:
                self.deferred.append(job)
            else:
                self._start_background(job)
        return verdict

    @staticmethod
    def _check_mounts(hook: HookSpec, root: Path) -> Skip | None:
        """Resolve extra mounts on disk: a symlink may not lead out of the project or to a socket."""
        for mount in hook.sandbox.mounts:
            real = os.path.realpath(mount)
            if any(real == s or real.startswith(s + "/") for s in DOCKER_SOCKETS):
                return Skip("invalid", f"mount {mount} resolves to the Docker socket ({real}): never allowed")
            if hook.scope.from_repository and not (real == str(root) or real.startswith(str(root) + "/")):
                return Skip("invalid", f"mount {mount} resolves outside the project ({real}): not allowed in {hook.scope.value} scope")
        return None

    def _request(
        self, hook: HookSpec, payload: Mapping[str, Any], root: Path, stdin: bytes, session: str
    ) -> RunRequest:
        cwd = payload.get("cwd") or str(root)
        env = {name: str(root) for name in PROJECT_DIR_VARS}
        env.update(hook.env)
        transcript = payload.get("transcript_path")
        return RunRequest(
            command=hook.command or "",
            stdin=stdin,
            cwd=str(cwd),
            env=env,
            timeout=hook.timeout,
            project_dir=str(root),
            transcript_path=transcript if isinstance(transcript, str) and transcript else None,
            options=hook.sandbox,
            labels={"hookcage.session": str(session)[:128], "hookcage.hook": hook.id},
            output_cap=self.settings.output_cap,
        )

    def _sandbox(self, backend: str) -> Sandbox:
        with self._lock:
            if backend not in self._sandboxes:
                self._sandboxes[backend] = self._factory(backend, self.settings)
                self._owned.add(backend)
            return self._sandboxes[backend]

    def _run_all(self, spec: EventSpec, runs: list[_Run]) -> None:
        if not runs:
            return
        if len(runs) == 1:
            self._run_one(spec, runs[0])
            return
        workers = min(len(runs), self.settings.max_parallel)
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="hookcage-run") as pool:
            list(pool.map(lambda r: self._run_one(spec, r), runs))

    def _run_one(self, spec: EventSpec, run: _Run) -> None:
        hook = run.hook
        run.started = time.monotonic()
        try:
            sandbox = self._sandbox(hook.sandbox.backend)
            run.result = sandbox.run(run.request)
            r = run.result
            outcome = parse_outcome(
                spec, hook.label, r.exit_code, r.stdout, r.stderr,
                timed_out=r.timed_out, oom_killed=r.oom_killed, timeout=hook.timeout, hook_id=hook.id,
            )
        except HookcageError as exc:
            outcome = error_outcome(hook.label, str(exc), hook_id=hook.id)
        except Exception as exc:  # a bug anywhere in a run must not cost the verdict
            outcome = error_outcome(hook.label, f"internal error: {type(exc).__name__}: {exc}", hook_id=hook.id)
        run.outcome = apply_on_error(spec, outcome, hook.on_error)

    def _background_job(self, spec: EventSpec, session: str, runs: list[_Run]) -> Callable[[], None]:
        def job() -> None:
            self._run_all(spec, runs)
            self._log([self._record(spec, session, r.hook, run=r) for r in runs])

        return job

    def _start_background(self, job: Callable[[], None]) -> None:
        with self._lock:
            if self._async_pool is None:
                self._async_pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="hookcage-async")
            self._background.append(self._async_pool.submit(job))

    def run_deferred(self) -> None:
        """Run the ``async`` hooks :meth:`dispatch` deferred, waiting for them."""
        jobs, self.deferred = self.deferred, []
        for job in jobs:
            job()

    # -- logging -------------------------------------------------------------

    def _record(
        self,
        spec: EventSpec,
        session: str,
        hook: HookSpec,
        *,
        skip: Skip | None = None,
        run: _Run | None = None,
    ) -> dict[str, Any]:
        record: dict[str, Any] = {
            "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "session": session,
            "event": spec.name,
            "hook_id": hook.id,
            "name": hook.name,
            "scope": hook.scope.value,
            "source": hook.source,
            "command": redact(hook.command or ""),
            "sandbox": hook.sandbox.describe(),
            "async": hook.is_async,
        }
        if skip is not None:
            record.update(outcome="skipped", skip_reason=skip.reason, detail=skip.detail)
            return record
        assert run is not None
        result, outcome = run.result, run.outcome
        record.update(
            outcome="ran",
            skip_reason=None,
            status=outcome.status if outcome else None,
            exit_code=result.exit_code if result else None,
            duration_ms=round((result.duration if result else time.monotonic() - run.started) * 1000, 1),
            timed_out=bool(result and result.timed_out),
            oom_killed=bool(result and result.oom_killed),
            truncated=bool(result and result.truncated),
            decision=(outcome.decision or ("block" if outcome.status == "block" else None)) if outcome else None,
            error=outcome.error if outcome else None,
            dropped_capabilities=[],
        )
        return record

    def _log(self, records: list[dict[str, Any]]) -> None:
        if not self.settings.log_runs or not records:
            return
        # The log is for people; an unwritable log must not cost the verdict.
        with contextlib.suppress(OSError):
            append_records(self.settings.run_log, records)

    # -- lifecycle -----------------------------------------------------------

    def close(self) -> None:
        """Wait for background hooks, then close the sandboxes this executor built."""
        for future in self._background:
            future.exception()
        if self._async_pool is not None:
            self._async_pool.shutdown(wait=True)
        for name in self._owned:
            self._sandboxes[name].close()

    def __enter__(self) -> HookExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
