"""HookExecutor: select -> gate -> run (in parallel) -> fold -> log.

How this works, for one event of one agent:

1. The event name and payload are checked against the catalog
   (:mod:`executor.core.events`); bad input is a :class:`PayloadError`. The
   payload is canonical (Claude Code's keys): the agent's dialect
   (:mod:`executor.dialects`) translated it, and keeps the agent's own.
2. hookcage's own hook files and the calling agent's are read for the project
   root (``$CLAUDE_PROJECT_DIR``, else the payload's ``cwd``) and merged
   (:mod:`executor.config`, :mod:`executor.core.policy`): a Claude Code
   session runs ``.claude/`` hooks, never ``.cursor/`` ones.
3. Hooks of the event whose matcher selects the payload are kept; identical
   handlers from several files run once.
4. Each hook passes the gates (valid config, enabled, supported type, ``once``;
   its mounts, the allow-list and trust: :mod:`executor.review`);
   a hook that fails one is skipped, logged with its ``skip_reason`` and, where
   the user should know, named in the verdict's system message.
5. The rest run in parallel (one after another for agents that run their
   hooks in order and stop at the first block), each in the sandbox its
   config asks for (what is made on the host for it: :mod:`executor.prepare`),
   with its own timeout, reading its own agent's payload.
   ``async`` hooks are started and not awaited.
6. Each result is parsed in its hook's dialect into the canonical outcome,
   failures follow the hook's ``on_error``, and all outcomes fold into one
   :class:`Verdict`, which the caller renders in the agent's dialect.
7. One JSON line per hook considered goes to the run log.

Sandboxes are injected (``sandboxes={"docker": ..., "host": ...}``) or built
on first use from the settings.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from executor import filecache, in_hook
from executor.config import load_hooks, project_root, refuse_own_dirs_in_project
from executor.core.conditions import ConditionContext
from executor.core.events import EventSpec, check_payload, get_event
from executor.core.hooks import HookSpec, dedupe
from executor.core.policy import HookSet, Skip
from executor.core.protocol import (
    HookOutcome,
    HookRun,
    Verdict,
    apply_on_error,
    error_outcome,
    fold,
    restrict,
)
from executor.core.text import redact
from executor.dialects import DEFAULT_DIALECT, DIALECTS, Dialect, selects
from executor.dialects.base import HookInput
from executor.errors import HookcageError, SandboxError
from executor.gates.allowlist import AllowCheck, AllowList
from executor.gates.trust import TrustStore, TrustSubject
from executor.prepare import homes, staging
from executor.prepare.depcache import DepCache, NeedState
from executor.prepare.request import run_request, unstage
from executor.prepare.staged_trees import StagedTrees
from executor.review import GateAnswer, HookReview, HookView
from executor.runlog import append_records, cap_event, claim_once
from executor.sandbox import backends, orphans
from executor.sandbox.base import RunRequest, RunResult, Sandbox
from executor.settings import Settings, load_settings

SandboxFactory = Callable[[str, Settings], Sandbox]
logger = logging.getLogger(__name__)

MAX_NOTES = 20
"""Lines of hookcage's own notes (hooks not run, and why) in one answer; the rest are counted."""


@dataclass
class _Run:
    hook: HookSpec
    request: RunRequest
    started: float = 0.0
    result: RunResult | None = None
    outcome: HookOutcome | None = None
    dropped: tuple[str, ...] = ()
    extras: homes.RunExtras | None = None  # persistent home, env file (executor.prepare.homes)


def _dialect_of(hook: HookSpec) -> Dialect:
    """The dialect a hook answers in: its agent's, or Claude Code's for hookcage's own files."""
    return DIALECTS.get(hook.agent, DEFAULT_DIALECT)


class _HookInputs:
    """What each hook of one event reads, built once per form: hookcage's own hooks the
    canonical payload, the calling agent's hooks its payload as it sent it (in the form
    each was filed for: :meth:`Dialect.input_form`)."""

    def __init__(self, spec: EventSpec, dialect: Dialect, canonical: Mapping[str, Any],
                 native: Mapping[str, Any]) -> None:
        self.spec, self.dialect, self.canonical, self.native = spec, dialect, canonical, native
        self._built: dict[tuple[str, str], HookInput] = {}

    def of(self, hook: HookSpec) -> HookInput:
        form = self.dialect.input_form(hook) if hook.agent else ""
        key = (hook.agent, form)
        if key not in self._built:
            if not hook.agent:
                self._built[key] = DEFAULT_DIALECT.hook_input(self.spec, self.canonical)
            elif form:
                self._built[key] = self.dialect.form_input(self.spec, self.native, form)
            else:
                self._built[key] = self.dialect.hook_input(self.spec, self.native)
        return self._built[key]


def _untrusted_note(details: Sequence[str], root: Path) -> str:
    count = len(details)
    unsafe = [d for d in details if d != "new or changed since it was reviewed"]
    text = (f"{count} project hook{'s' if count != 1 else ''} not run: not trusted yet (new or changed). "
            f"Review with `hookcage trust` in {root}")
    reasons = list(dict.fromkeys(unsafe))
    if len(reasons) > MAX_NOTES:
        reasons[MAX_NOTES - 1:] = [f"and {len(reasons) - MAX_NOTES + 1} more reasons"]
    return text + ("; " + "; ".join(reasons) if reasons else "")


def default_sandbox_factory(backend: str, settings: Settings) -> Sandbox:
    """Build a backend from the settings (:func:`executor.sandbox.backends.build_sandbox`; only what is used is loaded).

    The docker backend is cold here (a fresh container per run): a warm pool
    pays off only in a long-lived process (the daemon builds its own).

    Raises:
        UnknownBackend: ``backend`` names no backend.
    """
    return backends.build_sandbox(backend, settings)


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
        cancel: threading.Event | None = None,
        on_records: Callable[[Sequence[Mapping[str, Any]]], None] | None = None,
        transcripts: Mapping[str, str] | None = None,
    ) -> None:
        self.settings = settings or load_settings()
        self.cancelled = cancel or threading.Event()
        """Set when the caller has gone (:meth:`abort`): nothing more is started."""
        self.token = secrets.token_hex(8)
        """This executor's ``hookcage.dispatch`` label: its containers, for :meth:`abort`."""
        self._engine_used = False
        self._sandboxes: dict[str, Sandbox] = dict(sandboxes or {})
        self._owned: set[str] = set()
        self._factory = sandbox_factory
        self._environ = environ
        self._lock = threading.Lock()
        self.allowlist = AllowList(self.settings.allow_entries, tuple(self.settings.allowlist.deny))
        self.review = HookReview(self.settings, self.allowlist, sandbox=self._sandbox, load=self.load,
                                 lock=self._lock)
        """The gates of these hooks and ``hookcage trust``'s review (:mod:`executor.review`)."""
        self._background: list[Future[None]] = []
        self.unstage_at_close = False
        """Remove the runs' staged files in :meth:`close` rather than before :meth:`dispatch`
        returns (the daemon closes an executor after its answer has gone)."""
        self._staged: list[_Run] = []
        self.staged_trees: StagedTrees | None = None
        """The daemon's staged trees, shared by runs of the same reviewed bytes (None: each run
        writes its own, removed after it)."""
        self._async_pool: ThreadPoolExecutor | None = None
        self.deferred: list[Callable[[], None]] = []
        self._in_hook = in_hook.Marker()
        """What proves to a ``hookcage dispatch`` inside one of these hooks that it is in one."""
        self._on_records = on_records
        """Called with the run-log records of each batch (the daemon's metrics), whether or not
        the run log is written."""
        self._transcripts = transcripts
        """The service's remote mode: the only transcripts mounted (the payload's path -> the real
        file the keep-out judged, :mod:`executor.service.keepout`); None: the payload's, as given."""

    # -- configuration -------------------------------------------------------

    def root_for(self, payload: Mapping[str, Any] | None) -> Path:
        """The project root for a payload."""
        return project_root(payload, self._environ)

    def load(self, root: Path | None, agents: Sequence[Dialect] | None = None) -> HookSet:
        """hookcage's own hooks and those of ``agents`` (every agent's when None) for a project root."""
        return load_hooks(self.settings, root, list(DIALECTS.values()) if agents is None else agents,
                          self._environ)

    def inventory(
        self, root: Path | None, event: str | None = None, *, agents: Sequence[Dialect] | None = None
    ) -> tuple[HookSet, list[HookView]]:
        """Every configured hook (optionally of one event) and whether it would run."""
        hookset = self.load(root, agents)
        views = [self.review.view(hookset, h, root) for h in hookset.hooks if event is None or h.event == event]
        return hookset, views

    # -- dispatch ------------------------------------------------------------

    def dispatch(
        self, event: str | EventSpec, payload: Mapping[str, Any], *, defer_async: bool = False,
        dialect: Dialect = DEFAULT_DIALECT, raw: Mapping[str, Any] | None = None,
    ) -> Verdict:
        """Run every matching hook of ``event`` and fold their answers.

        Args:
            event: the event (name or spec).
            payload: the payload in canonical (Claude Code) keys.
            defer_async: leave ``async`` hooks in :attr:`deferred` instead of
                starting them on a background thread (the CLI runs them after
                it has answered the agent).
            dialect: the agent that asked: its files are read, its hooks run.
            raw: the agent's payload as it sent it (what its own hooks read;
                ``payload`` when None).

        Raises:
            PayloadError: the event is unknown or the payload lacks what it needs.
        """
        with filecache.one_look():  # one event sees one state of the paths' symlinks
            return self._dispatch(event, payload, defer_async=defer_async, dialect=dialect, raw=raw)

    def _dispatch(
        self, event: str | EventSpec, payload: Mapping[str, Any], *, defer_async: bool,
        dialect: Dialect, raw: Mapping[str, Any] | None,
    ) -> Verdict:
        spec = get_event(event) if isinstance(event, str) else event
        check_payload(spec, payload)
        root = self.root_for(payload)
        refuse_own_dirs_in_project(self.settings.home, self.settings.managed_dir, root)
        with contextlib.suppress(OSError):  # what a killed dispatch left (executor.prepare.staging)
            staging.sweep_once(self.settings.home)
        hookset = self.load(root, [dialect])
        session = str(payload.get("session_id") or "")
        reads = _HookInputs(spec, dialect, payload, raw if raw is not None else payload)
        # select
        context = self.condition_context(root)
        matching = [h for h in hookset.for_event(spec.name) if selects(spec, h, payload, context)]
        # gate
        runs, background, considered, notes = self._gate_all(spec, hookset, matching, root, session, payload, reads)
        # run
        try:
            self._run_all(spec, runs, serial=dialect.serial)
        finally:
            if self.unstage_at_close:
                self._staged.extend(runs)
            else:
                unstage([(r.request, r.extras) for r in runs], self.staged_trees)
        # fold
        outcomes = [r.outcome for r in runs if r.outcome is not None]
        problems = [str(p) for p in hookset.problems_for(spec.name)]
        verdict = fold(spec, outcomes, notes, problems)
        # log
        self._log(cap_event([c if isinstance(c, dict) else self._record(spec, session, c.hook, run=c,
                                                                        agent=dialect.name)
                             for c in considered]))
        if background:
            job = self._background_job(spec, session, background, dialect.name)
            if defer_async:
                self.deferred.append(job)
            else:
                self._start_background(job)
        return verdict

    def condition_context(self, root: Path) -> ConditionContext:
        """What ``if`` rules are evaluated with: the project root, the caller's home, symlinks followed."""
        environ = self._environ if self._environ is not None else os.environ
        home = environ.get("HOME") or os.path.expanduser("~")
        return ConditionContext(root=str(root), home=home, realpath=os.path.realpath)

    def _gate_all(
        self, spec: EventSpec, hookset: HookSet, matching: Sequence[HookSpec], root: Path, session: str,
        payload: Mapping[str, Any], reads: _HookInputs,
    ) -> tuple[list[_Run], list[_Run], list[dict[str, Any] | _Run], list[str]]:
        """Every gate for every matching hook: the runs to start now, those in the background,
        every hook considered (config order, for the log) and hookcage's notes for the user."""
        notes: list[str] = []
        untrusted: list[str] = []
        considered: list[dict[str, Any] | _Run] = []
        runs: list[_Run] = []
        background: list[_Run] = []
        # Duplicates are folded among the hooks that may run, so a disabled or
        # invalid copy never shadows a runnable one.
        runnable = {id(h) for h in dedupe([h for h in matching if hookset.skip(h) is None])}
        for hook in matching:
            if self.cancelled.is_set():
                break  # the caller has gone: judge and start nothing more
            skip = hookset.skip(hook)
            if skip is None and id(hook) not in runnable:
                continue
            gate = GateAnswer(skip=skip) if skip is not None else self.review.gate(hook, root)
            if gate.skip is None and hook.once and session and not claim_once(self.settings.state_dir, session, hook.id):
                gate = GateAnswer(skip=Skip("disabled", "a once hook that already ran in this session"))
            if gate.skip is not None:
                if gate.skip.reason in ("unsupported_type", "not_allowlisted"):
                    notes.append(f"hook {hook.label} not run: {gate.skip.detail}")
                elif gate.skip.reason == "untrusted":
                    untrusted.append(gate.skip.detail)
                considered.append(self._record(spec, session, hook, skip=gate.skip, agent=reads.dialect.name))
                continue
            request = run_request(hook, payload, root, reads.of(hook), session, gate.files, gate.deps,
                                  settings=self.settings, in_hook=self._in_hook.value(),
                                  transcripts=self._transcripts, trees=self.staged_trees)
            run = _Run(hook, request, outcome=gate.outcome)
            if hook.is_async:
                background.append(run)
            else:
                runs.append(run)
                considered.append(run)
        if len(notes) > MAX_NOTES:  # one line per hook, but not a thousand in the agent's message
            notes[MAX_NOTES - 1:] = [f"{len(notes) - MAX_NOTES + 1} more hooks not run for the same reasons "
                                     "(`hookcage list` shows every one)"]
        if untrusted:
            notes.append(_untrusted_note(untrusted, root))
        return runs, background, considered, notes

    # -- review (executor.review) --------------------------------------------

    def trust_store(self) -> TrustStore:
        """The trust store (:meth:`HookReview.trust_store <executor.review.HookReview.trust_store>`)."""
        return self.review.trust_store()

    def is_trusted(self, subject: TrustSubject) -> bool:
        """Whether ``subject`` is trusted (:meth:`executor.review.HookReview.is_trusted`)."""
        return self.review.is_trusted(subject)

    def trust_subject(self, hook: HookSpec, root: Path) -> TrustSubject:
        """What trusting ``hook`` covers (:meth:`executor.review.HookReview.trust_subject`)."""
        return self.review.trust_subject(hook, root)

    def dep_cache(self) -> DepCache:
        """The dependency cache (:meth:`executor.review.HookReview.dep_cache`)."""
        return self.review.dep_cache()

    def dependency_states(self, subject: TrustSubject) -> list[NeedState]:
        """Where a hook's dependencies stand (:meth:`executor.review.HookReview.dependency_states`)."""
        return self.review.dependency_states(subject)

    def fetch_dependencies(
        self, hook: HookSpec, subject: TrustSubject, log: Callable[[str], None], *,
        retry: bool = True, seen: set[str] | None = None,
    ) -> list[NeedState]:
        """Fetch what a reviewed hook needs (:meth:`executor.review.HookReview.fetch_dependencies`)."""
        return self.review.fetch_dependencies(hook, subject, log, retry=retry, seen=seen)

    def unfetched(
        self, root: Path, agents: Sequence[Dialect] | None = None, *, retry: bool = True
    ) -> list[tuple[HookSpec, TrustSubject]]:
        """Trusted hooks whose dependencies are not cached (:meth:`executor.review.HookReview.unfetched`)."""
        return self.review.unfetched(root, agents, retry=retry)

    def pending_reviews(
        self, root: Path, hook_ids: Sequence[str] = (), agents: Sequence[Dialect] | None = None
    ) -> tuple[list[tuple[HookSpec, TrustSubject]], list[tuple[HookSpec, str]]]:
        """The hooks to review, and those that cannot be (:meth:`executor.review.HookReview.pending_reviews`)."""
        return self.review.pending_reviews(root, hook_ids, agents)

    def grant(self, subjects: Sequence[TrustSubject]) -> int:
        """Trust these hooks as they are now (:meth:`executor.review.HookReview.grant`)."""
        return self.review.grant(subjects)

    def allowlist_check(self, hook: HookSpec, root: Path) -> AllowCheck:
        """The allow-list's answer for one hook's command."""
        return self.review.allowlist_check(hook, root)

    def runtime_of(self, backend: str) -> str | None:
        """The runtime ``backend``'s containers get (``auto`` resolved), None for no container.

        Raises:
            SandboxUnavailable: the engine cannot be reached to resolve ``auto``.
        """
        return self._sandbox(backend).runtime()

    def _sandbox(self, backend: str) -> Sandbox:
        with self._lock:
            if backend not in self._sandboxes:
                self._sandboxes[backend] = self._factory(backend, self.settings)
                self._owned.add(backend)
            return self._sandboxes[backend]

    def _run_all(self, spec: EventSpec, runs: list[_Run], *, serial: bool = False) -> None:
        if not runs:
            return
        if serial or len(runs) == 1:
            # In order, stopping at the first block (agents that run their hooks so: ok).
            for i, run in enumerate(runs):
                self._run_one(spec, run)
                if serial and run.outcome is not None and (run.outcome.status == "block" or run.outcome.decision == "deny"):
                    del runs[i + 1:]
                    break
            return
        workers = min(len(runs), self.settings.max_parallel)
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="hookcage-run") as pool:
            list(pool.map(lambda r: self._run_one(spec, r), runs))

    def _run_one(self, spec: EventSpec, run: _Run) -> None:
        hook = run.hook
        run.started = time.monotonic()
        if run.outcome is not None:  # decided by the gates (e.g. the image could not be resolved)
            run.outcome = apply_on_error(spec, run.outcome, hook.on_error)
            return
        try:
            if self.cancelled.is_set():
                raise SandboxError("not run: the dispatch was cancelled (its caller has gone)")
            sandbox = self._sandbox(hook.sandbox.backend)
            # Who started it, stamped in the process that runs it (an async hook runs in a forked child).
            labels = {**run.request.labels, orphans.DISPATCH_LABEL: self.token, orphans.OWNER_LABEL: orphans.owner_value()}
            run.request = replace(run.request, labels=labels)
            # A sandbox of an engine backend (a test's FakeSandbox is none): abort() asks that engine.
            self._engine_used = self._engine_used or backends.on_engine(sandbox.name)
            run.request, run.extras = homes.prepare(run.request, hook_id=hook.id, sandbox=sandbox,
                                                    settings=self.settings, environ=self._environ)
            run.result = sandbox.run(run.request)
            r = run.result
            outcome = _dialect_of(hook).parse_answer(spec, HookRun(
                hook.label, r.exit_code, r.stdout, r.stderr,
                timed_out=r.timed_out, oom_killed=r.oom_killed, timeout=hook.timeout, hook_id=hook.id,
                sandbox=hook.sandbox, image=hook.sandbox.image or self.settings.image,
                project_dir=run.request.project_dir, stdout_truncated=r.stdout_truncated,
            ))
        except HookcageError as exc:
            outcome = error_outcome(hook.label, str(exc), hook_id=hook.id)
        except Exception as exc:  # a bug anywhere in a run must not cost the verdict
            outcome = error_outcome(hook.label, f"internal error: {type(exc).__name__}: {exc}", hook_id=hook.id)
        wrote_env_file = homes.collect_env_file(run.extras)
        if hook.scope.from_repository:
            # Gate 5: a repository's hook may not pre-approve or rewrite unless granted at trust.
            outcome, run.dropped = restrict(outcome, hook.capabilities, wrote_env_file=wrote_env_file)
        outcome = homes.finish(run.extras, outcome, allowed="env_file" not in run.dropped)
        run.outcome = apply_on_error(spec, outcome, hook.on_error)

    def _background_job(self, spec: EventSpec, session: str, runs: list[_Run], agent: str) -> Callable[[], None]:
        def job() -> None:
            try:
                self._run_all(spec, runs)
            finally:
                unstage([(r.request, r.extras) for r in runs], self.staged_trees)
            self._log([self._record(spec, session, r.hook, run=r, agent=agent) for r in runs])

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
        agent: str = "",
    ) -> dict[str, Any]:
        record: dict[str, Any] = {
            "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "session": session,
            "event": spec.name,
            "agent": agent or None,  # the agent that dispatched the event
            "hook_id": hook.id,
            "name": hook.name,
            "scope": hook.scope.value,
            "source": hook.source,
            "command": redact(hook.command or ""),
            "sandbox": hook.sandbox.describe(),
            "async": hook.is_async,
        }
        if skip is not None:
            record.update(outcome="skipped", skip_reason=skip.reason, detail=redact(skip.detail))
            return record
        assert run is not None
        result, outcome = run.result, run.outcome
        record.update(
            outcome="ran",
            skip_reason=None,
            status=outcome.status if outcome else None,
            exit_code=result.exit_code if result else None,
            # A run never started (a serial agent stopped at an earlier block) has no duration.
            duration_ms=(round((result.duration if result else time.monotonic() - run.started) * 1000, 1)
                         if result or run.started else None),
            timed_out=bool(result and result.timed_out),
            oom_killed=bool(result and result.oom_killed),
            truncated=bool(result and result.truncated),
            decision=(outcome.decision or ("block" if outcome.status == "block" else None)) if outcome else None,
            reason=redact(outcome.reason) if outcome and outcome.reason else None,
            error=redact(outcome.error) if outcome and outcome.error else None,
            dropped_capabilities=list(run.dropped),
            env_file=homes.log_entry(run.extras),
        )
        return record

    def _log(self, records: list[dict[str, Any]]) -> None:
        if records and self._on_records is not None:
            try:
                self._on_records(records)
            except Exception:  # an observer's bug must not cost the verdict (nor the log)
                logger.exception("observing the run-log records failed")
        if not self.settings.log_runs or not records:
            return
        # The log is for people; an unwritable log must not cost the verdict.
        with contextlib.suppress(OSError):
            append_records(self.settings.run_log, records,
                           max_bytes=self.settings.log_max_bytes, keep=self.settings.log_keep)

    # -- lifecycle -----------------------------------------------------------

    def abort(self) -> int:
        """Stop this executor's work: start nothing more, remove the containers it started.

        For a caller that has gone (``hookcage dispatch`` on SIGTERM, the
        daemon when its client hangs up). A run whose container is removed
        ends at once as an error; staged files go with their runs (or, in a
        process about to exit, :func:`executor.prepare.staging.remove_mine`). Runs in
        a warm pool's containers are not reached: they end at their timeout.

        Returns:
            How many containers were removed.
        """
        self.cancelled.set()
        if not self._engine_used:
            return 0
        from executor.sandbox.docker import default_client

        try:
            client = default_client()
        except HookcageError:
            return 0
        try:
            return orphans.remove_labelled(client, orphans.DISPATCH_LABEL, self.token)
        except Exception:  # the engine is gone too: reap() removes them at expiry
            return 0
        finally:
            client.close()

    def close(self) -> None:
        """Remove what is still staged, wait for background hooks, then close the sandboxes this executor built."""
        staged, self._staged = self._staged, []
        if staged:
            unstage([(r.request, r.extras) for r in staged], self.staged_trees)
        for future in self._background:
            future.exception()
        if self._async_pool is not None:
            self._async_pool.shutdown(wait=True)
        for name in self._owned:
            self._sandboxes[name].close()
        self._in_hook.close()

    def __enter__(self) -> HookExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
