"""Which configured hooks may run at all (pure): scopes, switches, types.

The config loader hands in parsed :class:`~executor.core.hooks.HookFile` objects;
this module merges them in scope order and answers, per hook, why it must be
skipped (or ``None`` when it may go on to the next gates).

``disableAllHooks`` never lets a repository switch off the user's guards: set
in the managed file it disables everything; in the user file, user, project
and local hooks; in a project or local file, only project and local hooks.
``allowManagedHooksOnly`` (managed file only) disables every other scope.
An agent's file (``.claude/settings.json``...) switches off only that
agent's hooks; hookcage's own files switch off every agent's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from executor.core.conditions import TOOL_EVENTS, ConditionContext
from executor.core.events import EventSpec
from executor.core.hooks import HookFile, HookSpec, Problem, Scope
from executor.core.matchers import Aliases, event_matches

SkipReason = Literal["invalid", "disabled", "unsupported_type", "untrusted", "not_allowlisted"]

SUPPORTED_TYPES = frozenset({"command"})

_SCOPE_ORDER = {scope: i for i, scope in enumerate(Scope)}
_DISABLES: dict[Scope, frozenset[Scope]] = {
    Scope.MANAGED: frozenset(Scope),
    Scope.USER: frozenset({Scope.USER, Scope.PROJECT, Scope.LOCAL}),
    Scope.PROJECT: frozenset({Scope.PROJECT, Scope.LOCAL}),
    Scope.LOCAL: frozenset({Scope.PROJECT, Scope.LOCAL}),
}


@dataclass(frozen=True)
class Skip:
    """Why one hook does not run."""

    reason: SkipReason
    detail: str


@dataclass(frozen=True)
class HookSet:
    """Every hook of every scope, in config order, with the switches applied."""

    files: tuple[HookFile, ...]
    hooks: tuple[HookSpec, ...]
    disabled: dict[tuple[str | None, Scope], str]
    """(agent, scope) -> why its hooks are off; agent None: every agent's and hookcage's."""

    @property
    def problems(self) -> tuple[Problem, ...]:
        """All problems of all files, in config order."""
        return tuple(p for f in self.files for p in f.problems)

    def problems_for(self, event: str) -> tuple[Problem, ...]:
        """Errors that concern ``event``: its own, and those of no event in particular."""
        return tuple(
            p for p in self.problems if p.severity == "error" and p.event in (None, event)
        )

    def for_event(self, event: str) -> list[HookSpec]:
        """The hooks configured for ``event``, in config order."""
        return [h for h in self.hooks if h.event == event]

    def skip(self, hook: HookSpec) -> Skip | None:
        """Why ``hook`` must not run (before trust and allow-list), or ``None``."""
        if hook.invalid:
            return Skip("invalid", hook.invalid)
        why = self.disabled.get((None, hook.scope)) or self.disabled.get((hook.agent, hook.scope))
        if why:
            return Skip("disabled", why)
        if not hook.enabled:
            return Skip("disabled", "\"enabled\": false")
        if hook.type not in SUPPORTED_TYPES:
            return Skip("unsupported_type", f"hook type {hook.type!r} is not supported; only \"command\" hooks run")
        return None


def merge(files: Iterable[HookFile]) -> HookSet:
    """Merge hook files of all scopes: lists are appended in scope order, never replaced."""
    ordered = tuple(sorted(files, key=lambda f: _SCOPE_ORDER[f.scope]))
    disabled: dict[tuple[str | None, Scope], str] = {}
    for f in ordered:
        agent = f.agent or None
        if f.disable_all:
            for scope in _DISABLES[f.scope]:
                disabled.setdefault((agent, scope), f"{f.disable_reason or 'disableAllHooks'} in {f.source}")
        if f.managed_only and f.scope is Scope.MANAGED and not f.agent:
            for scope in (Scope.USER, Scope.PROJECT, Scope.LOCAL):
                disabled.setdefault((None, scope), f"allowManagedHooksOnly in {f.source}")
    hooks = tuple(h for f in ordered for h in f.hooks)
    return HookSet(ordered, hooks, disabled)


def _field(payload: Mapping[str, Any], path: str) -> Any:
    value: Any = payload
    for part in path.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


def selects(
    event: EventSpec, hook: HookSpec, payload: Mapping[str, Any], aliases: Aliases | None = None,
    context: ConditionContext | None = None,
) -> bool:
    """Does ``hook`` fire for this payload: its matcher (tool names with every agent's
    ``aliases``), every further field it matches on, and its ``if`` condition (evaluated
    with ``context``: the project root, home and symlink resolution)."""
    if not (event_matches(event, hook.matcher, payload, aliases) if aliases else
            event_matches(event, hook.matcher, payload)):
        return False
    for path, matcher in hook.selectors:
        value = _field(payload, path)
        if not matcher.matches(value if isinstance(value, str) else None):
            return False
    if hook.condition is not None:
        if event.name not in TOOL_EVENTS:
            return False  # Claude Code never runs a handler with `if` elsewhere (hooks.py refuses it too)
        if aliases is not None:
            return hook.condition.holds(payload, context or ConditionContext(), aliases)
        return hook.condition.holds(payload, context or ConditionContext())
    return True
