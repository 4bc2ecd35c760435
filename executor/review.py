"""What the gates say of one hook, and the review behind ``hookcage trust``.

:meth:`HookReview.gate` is the one place gates 2-3 are written for a hook
that passed the hook file's own checks: its extra mounts resolved on disk
(never the Docker socket; a repository's hook never outside the project),
the allow-list (:mod:`executor.gates.allowlist`), and for a repository's hook
its trust: what trusting it covers (:meth:`HookReview.trust_subject`: the
command, the files it references and what they load, its sandbox profile,
capabilities), whether the trust store holds that (:mod:`executor.gates.trust`),
and whether its dependencies are in the cache (:mod:`executor.prepare.depcache`).
:class:`~executor.executor.HookExecutor` runs what passes and ``hookcage list``
shows every answer (:class:`HookView`). The review (``hookcage trust``) lists
the hooks to review, fetches their dependencies and writes the records.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from executor import filecache
from executor.core.deps import find_needs, own_need
from executor.core.files import FileState
from executor.core.hooks import DOCKER_SOCKETS, HookSpec
from executor.core.policy import HookSet, Skip
from executor.core.protocol import HookOutcome, error_outcome
from executor.dialects import Dialect
from executor.errors import HookcageError, TrustStoreError
from executor.gates.allowlist import AllowCheck, AllowList, check_command, literal_words
from executor.gates.trust import (
    TrustRecord,
    TrustStore,
    TrustSubject,
    UnsafeReference,
    collect_loaded,
    collect_references,
    command_words,
)
from executor.prepare.depcache import DepCache, NeedState, RunSetup, package_words, run_setup
from executor.prepare.request import staging_root
from executor.sandbox import backends
from executor.sandbox.base import Sandbox
from executor.settings import Settings


@dataclass(frozen=True)
class HookView:
    """One configured hook as ``hookcage list`` shows it: every gate's answer.

    ``skip`` is the first gate that stops it (``None``: it would run);
    ``trusted`` is ``None`` for the user's own hooks (no review needed).
    """

    hook: HookSpec
    skip: Skip | None
    allow: AllowCheck | None = None
    trusted: bool | None = None
    trust_detail: str = ""
    dependencies: tuple[NeedState, ...] = ()
    """Each script's (or package's) dependencies the hook covers, and where their cache stands."""

    def to_json(self) -> dict[str, Any]:
        """A plain dict for ``--json`` output."""
        h = self.hook
        return {
            "id": h.id, "agent": h.agent or None, "event": h.event, "matcher": h.matcher.source,
            "if": h.condition.source if h.condition is not None else None, "type": h.type,
            "command": h.command, "name": h.name, "scope": h.scope.value, "source": h.source,
            "path": h.json_path, "sandbox": h.sandbox.describe(), "timeout": h.timeout,
            "async": h.is_async, "once": h.once, "on_error": h.on_error,
            "capabilities": sorted(h.capabilities),
            "would_run": self.skip is None,
            "skip_reason": self.skip.reason if self.skip else None,
            "detail": self.skip.detail if self.skip else None,
            "allowlisted": self.allow.allowed if self.allow else None,
            "allowlist_suggestion": self.allow.suggestion if self.allow else None,
            "trusted": self.trusted,
            "trust_detail": self.trust_detail or None,
            "dependencies": [
                {**st.need.to_json(), "own": st.own, "ready": st.ready, "failure": st.failure}
                for st in self.dependencies
            ],
        }


@dataclass(frozen=True)
class GateAnswer:
    """What the gates decided for one hook: skip it, fail it, or run it (with its reviewed files).

    ``allow`` and ``trusted`` are the allow-list's and the trust store's
    answers, for ``hookcage list`` (``trusted`` is None for the user's own hooks).
    """

    skip: Skip | None = None
    outcome: HookOutcome | None = None
    files: tuple[FileState, ...] = ()
    deps: RunSetup | None = None
    allow: AllowCheck | None = None
    trusted: bool | None = None
    dependencies: tuple[NeedState, ...] = ()


def _inside_project(path: Path, root: str) -> bool:
    """Whether ``path`` (symlinks resolved) is the project root ``root`` or under it."""
    real, project = filecache.realpath(path), filecache.realpath(root)
    return os.path.commonpath([real, project]) == project


def _refused_dependencies(files: Sequence[FileState], direct: Sequence[str]) -> str | None:
    """Why a hook's own dependencies are refused (one line, naming the file and the dependency), if they are.

    Such a hook cannot be trusted: what its script names is never fetched (a URL, a
    path, git, ...). A script it only covers (a helper beside it) with refused
    dependencies does not stop it: that script fails if the hook runs it.
    """
    bad = [need for need in find_needs(files) if need.problem and own_need(need, direct)]
    if not bad:
        return None
    more = f" (and {len(bad) - 1} more file(s) naming dependencies refused)" if len(bad) > 1 else ""
    return f"dependencies refused: {bad[0].where()}: {bad[0].problem}{more}"


class HookReview:
    """The gates of one executor's hooks, and the review of a project's hooks.

    Args:
        settings: the executor's settings (the trust store, the dependency cache, the home).
        allowlist: the executor's allow-list.
        sandbox: the executor's sandbox for a backend (a hook's profile names its image).
        load: the executor's hooks of a project root for some agents (every agent's when None).
        lock: the executor's lock (the trust store is opened under it, as before).
    """

    def __init__(self, settings: Settings, allowlist: AllowList, *, sandbox: Callable[[str], Sandbox],
                 load: Callable[[Path | None, Sequence[Dialect] | None], HookSet], lock: threading.Lock) -> None:
        self.settings = settings
        self.allowlist = allowlist
        self._sandbox = sandbox
        self._load = load
        self._lock = lock
        self._trust: TrustStore | None = None
        self._dep_cache: DepCache | None = None

    def view(self, hookset: HookSet, hook: HookSpec, root: Path | None) -> HookView:
        """One hook as ``hookcage list`` shows it: every gate's answer (nothing fetched, nothing run)."""
        skip = hookset.skip(hook)
        if skip is not None or root is None:
            return HookView(hook, skip)
        gate = self.gate(hook, root, check_cache=False)
        detail = gate.skip.detail if gate.skip is not None and gate.skip.reason == "untrusted" else ""
        if gate.outcome is not None and gate.outcome.error:
            detail = gate.outcome.error
        return HookView(hook, gate.skip, gate.allow, gate.trusted, detail, gate.dependencies)

    def gate(self, hook: HookSpec, root: Path, *, check_cache: bool = True) -> GateAnswer:
        """Gates 2-3 for one hook: extra mounts on disk, the allow-list, trust (and its dependency cache).

        The one place the gates are written:
        :meth:`~executor.executor.HookExecutor.dispatch` runs what passes,
        ``hookcage list`` shows what each said (``check_cache=False``: only
        whether it would run).
        """
        skip = self._check_mounts(hook, root)
        if skip is not None:
            return GateAnswer(skip=skip)
        check = check_command(hook.command or "", self.allowlist, str(root))
        if not check.allowed:
            how = f"; to allow it: {check.suggestion}" if check.suggestion else ""
            return GateAnswer(skip=Skip("not_allowlisted", check.reason + how), allow=check)
        if not hook.scope.from_repository:
            return GateAnswer(allow=check)
        try:
            subject = self.trust_subject(hook, root)
            trusted = self.is_trusted(subject)
        except (UnsafeReference, TrustStoreError) as exc:
            return GateAnswer(skip=Skip("untrusted", str(exc)), allow=check, trusted=False)
        except HookcageError as exc:  # the image cannot be resolved: the hook cannot run
            return GateAnswer(outcome=error_outcome(hook.label, str(exc), hook_id=hook.id), allow=check, trusted=False)
        if not trusted:
            refused = _refused_dependencies(subject.files, subject.direct)
            return GateAnswer(skip=Skip("untrusted", refused or "new or changed since it was reviewed"),
                         allow=check, trusted=False)
        states = self.dependency_states(subject)
        if not check_cache:
            return GateAnswer(allow=check, trusted=True, dependencies=tuple(states))
        if not states:
            return GateAnswer(files=subject.files, allow=check, trusted=True)
        # Only the hook's own scripts stop it: a helper whose dependencies cannot be had
        # is left out of the run and fails if the hook runs it, as it would offline.
        missing = [state for state in states if state.own and not state.ready]
        if missing:
            failed = [state for state in missing if state.failure]
            why = (f"its dependencies could not be fetched at review ({failed[0].failure})" if failed else
                   "its dependencies are not installed (" + "; ".join(st.need.describe() for st in missing) + ")")
            message = f"{why}: not run; run `hookcage trust --fetch-only` in {root} to fetch them"
            return GateAnswer(outcome=error_outcome(hook.label, message, hook_id=hook.id), allow=check, trusted=True)
        cache = self.dep_cache()
        ready = [(cache.path(state.key), state.need) for state in states if state.ready]
        return GateAnswer(files=subject.files, deps=run_setup(ready) if ready else None, allow=check, trusted=True)

    def trust_store(self) -> TrustStore:
        """The trust store (``$HOOKCAGE_HOME/trust.json`` plus ``HOOKCAGE_TRUST_FILE``)."""
        with self._lock:
            if self._trust is None:
                extra = [self.settings.trust_file] if self.settings.trust_file else []
                self._trust = TrustStore(self.settings.trust_store_file, extra=extra)
            return self._trust

    def is_trusted(self, subject: TrustSubject) -> bool:
        """Whether ``subject`` is in the trust store or ``HOOKCAGE_TRUST_FILE``.

        Raises:
            TrustStoreError: the store or the trust file cannot be read, or one
                of them lies inside the subject's project: a change to the
                project (a pull request adding ``trust.json`` there) could then
                trust itself, so neither is read.
        """
        store = self.trust_store()
        # A "project" that holds the user's home folder (an agent started in ~) is no checkout:
        # the default store under ~ is not a stranger's file there.
        checkout = not _inside_project(Path(os.path.expanduser("~")), subject.root)
        for path in (*([store.path] if checkout else []), *store.extra):
            if _inside_project(path, subject.root):
                what = "trust store" if path == store.path else "trust file"
                fix = ("set HOOKCAGE_HOME to a folder outside it" if path == store.path else
                       "write the export outside the checkout (e.g. $RUNNER_TEMP) and point HOOKCAGE_TRUST_FILE there")
                raise TrustStoreError(f"{what} {path} is inside the project {subject.root}, where a change to the "
                                      f"project could trust itself: not read; {fix}")
        return store.is_trusted(subject.covering_digests())

    def trust_subject(self, hook: HookSpec, root: Path) -> TrustSubject:
        """What trusting ``hook`` covers: command, referenced files, full profile, capabilities.

        Raises:
            UnsafeReference: a referenced path leaves the project.
            SandboxError: the hook's image cannot be resolved to an id.
        """
        command = hook.command or ""
        files = collect_references(command_words(literal_words(command, str(root))), str(root))
        direct = tuple(state.path for state in files)
        files = collect_loaded(files, str(root), shell_words=lambda text: literal_words(text, str(root)))
        files = self._with_dependency_files(files, root)
        options = hook.sandbox
        sandbox = self._sandbox(options.backend)
        profile: dict[str, Any] = {
            "backend": options.backend, "workspace": options.workspace,
            "network": options.network, "mounts": list(options.mounts), "env": dict(hook.env),
            "memory": options.memory, "cpus": options.cpus, "pids": options.pids,
            "timeout": hook.timeout,
            # The backend's own keys (backends.trust_profile): the image's id; for docker under
            # gVisor, "isolation" (absent under a shared kernel, so those hashes are as before).
            **backends.trust_profile(options.backend, sandbox, options),
        }
        if options.home != "tmp":  # only when asked: records of hooks without it keep their hash
            profile["home"] = options.home
        needs = find_needs(files)
        if needs:
            profile["dependencies"] = [n.to_json() for n in needs]
        return TrustSubject(
            root=str(root), source=hook.source, event=hook.event, matcher=hook.matcher.source,
            type=hook.type, command=command, files=files, profile=profile,
            capabilities=tuple(sorted(hook.capabilities)), agent=hook.agent,
            selectors=tuple((path, m.source) for path, m in hook.selectors), direct=direct,
            condition=hook.condition.source if hook.condition is not None else None,
        )

    @staticmethod
    def _with_dependency_files(files: tuple[FileState, ...], root: Path) -> tuple[FileState, ...]:
        """``files`` plus what names a Node script's dependencies: its ``package.json``,
        the lock file, and the local ``file:`` packages they name (all hashed, all reviewed)."""
        words = package_words(files, root)
        if not words:
            return files
        manifests = collect_references(words, str(root))
        local = [
            "./" + path for need in find_needs(manifests) if need.kind == "node" for path in need.local
        ]
        extra = manifests + (collect_references(local, str(root)) if local else ())
        merged = {f.path: f for f in (*files, *extra)}
        return tuple(merged[path] for path in sorted(merged))

    def dep_cache(self) -> DepCache:
        """The dependency cache (``$HOOKCAGE_HOME/deps``; one per executor: it remembers each image's Python)."""
        if self._dep_cache is None:
            self._dep_cache = DepCache(self.settings.home / "deps")
        return self._dep_cache

    def dependency_states(self, subject: TrustSubject) -> list[NeedState]:
        """Where each script's (or package's) dependencies of a hook stand in the cache."""
        needs = find_needs(subject.files)
        if not needs:
            return []
        return self.dep_cache().states(needs, subject.files, image=str(subject.profile.get("image")),
                                       root=subject.root, direct=subject.direct)

    def fetch_dependencies(
        self, hook: HookSpec, subject: TrustSubject, log: Callable[[str], None], *,
        retry: bool = True, seen: set[str] | None = None,
    ) -> list[NeedState]:
        """Fetch what a reviewed hook's scripts need (the only step that may use network).

        Each script (or package) is fetched on its own, into a cache of its own
        shared by every hook that covers it: one that cannot be fetched stands
        in no other's way.

        Args:
            retry: fetch again what failed before (``trust --fetch-only``);
                otherwise such a need is reported with its recorded failure.
            seen: keys already handled in this review (each is fetched once).

        Returns:
            The needs that are not ready after this (each with its failure).
        """
        seen = set() if seen is None else seen
        root = Path(subject.root)
        cache = self.dep_cache()
        left = []
        for state in self.dependency_states(subject):
            if state.ready:
                continue
            if state.key in seen or state.need.problem or (state.failure and not retry):
                left.append(state)
                continue
            seen.add(state.key)
            sandbox = self._sandbox(hook.sandbox.backend)
            problem = cache.fetch(
                state.key, state.need, subject.files, root=root, image=hook.sandbox.image, run=sandbox.run,
                staging=staging_root(self.settings.home), log=log,
                labels={"hookcage.session": "review", "hookcage.hook": hook.id},
            )
            if problem:
                left.append(replace(state, failure=problem))
        return left

    def unfetched(
        self, root: Path, agents: Sequence[Dialect] | None = None, *, retry: bool = True
    ) -> list[tuple[HookSpec, TrustSubject]]:
        """The trusted repository hooks with a script whose dependencies are not in the cache
        (yet, or any more; with ``retry``, also those whose fetch failed or that are refused,
        so that they are named)."""
        hookset = self._load(root, agents)
        missing = []
        for hook in hookset.hooks:
            if not hook.scope.from_repository or hookset.skip(hook) is not None:
                continue
            try:
                subject = self.trust_subject(hook, root)
            except HookcageError:
                continue
            states = self.dependency_states(subject)
            if not states or not self.is_trusted(subject):
                continue
            if any(not st.ready and (retry or not st.failure) for st in states):
                missing.append((hook, subject))
        return missing

    def pending_reviews(
        self, root: Path, hook_ids: Sequence[str] = (), agents: Sequence[Dialect] | None = None
    ) -> tuple[list[tuple[HookSpec, TrustSubject]], list[tuple[HookSpec, str]]]:
        """The repository hooks that need review, and those that cannot be reviewed (and why).

        Args:
            root: the project root.
            hook_ids: only these hooks (all when empty).
            agents: only these agents' files (and hookcage's own); every agent's when None.
        """
        hookset = self._load(root, agents)
        pending: list[tuple[HookSpec, TrustSubject]] = []
        refused: list[tuple[HookSpec, str]] = []
        for hook in hookset.hooks:
            if not hook.scope.from_repository or hookset.skip(hook) is not None:
                continue
            if hook_ids and hook.id not in hook_ids:
                continue
            try:
                subject = self.trust_subject(hook, root)
            except HookcageError as exc:
                refused.append((hook, str(exc)))
                continue
            if self.is_trusted(subject):
                continue
            # A dependency that is not a package from an index or registry (a URL, a path,
            # git, a pip option) is never fetched, so the hook cannot be trusted: refused
            # here, at review, naming it; only the hooks whose files name it are affected.
            why = _refused_dependencies(subject.files, subject.direct)
            if why:
                refused.append((hook, why))
                continue
            pending.append((hook, subject))
        return pending, refused

    def grant(self, subjects: Sequence[TrustSubject]) -> int:
        """Trust these hooks as they are now; returns how many records were written."""
        now = datetime.now(UTC).isoformat(timespec="seconds")
        self.trust_store().add(TrustRecord.of(subject, now) for subject in subjects)
        return len(subjects)

    def allowlist_check(self, hook: HookSpec, root: Path) -> AllowCheck:
        """The allow-list's answer for one hook's command."""
        return check_command(hook.command or "", self.allowlist, str(root))

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
