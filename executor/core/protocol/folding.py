"""After the parse: on_error, the capabilities a hook was granted, the fold into one verdict, and the answers
hookcage gives when there is no verdict to render (a failure, WorktreeCreate's path).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from executor.core.events import EventSpec
from executor.core.protocol.values import (
    DECISION_RANK,
    NAME_CAP,
    UNSET,
    AgentAnswer,
    Decision,
    HookOutcome,
    Verdict,
    join,
)
from executor.core.text import MESSAGE_CAP, cap_text, one_line, redact, sanitize


def apply_on_error(event: EventSpec, outcome: HookOutcome, on_error: str) -> HookOutcome:
    """Turn a failed hook into a denial when its ``on_error`` is ``deny``."""
    if outcome.status != "error" or on_error != "deny":
        return outcome
    why = f"hook {one_line(outcome.hook, NAME_CAP)} could not answer ({outcome.error}) and its on_error is deny"
    if event.permission:
        return replace(outcome, status="ok", decision="deny", reason=why)
    if event.can_block:
        return replace(outcome, status="block", reason=why)
    return outcome


CAPABILITIES: Mapping[str, str] = {
    "approve": "pre-approve the tool call (permissionDecision: allow)",
    "rewrite_input": "rewrite the tool input (updatedInput)",
    "rewrite_output": "rewrite the tool output (updatedToolOutput)",
    "env_file": "set environment variables for the agent's later commands (CLAUDE_ENV_FILE)",
}
"""What a hook's answer may do beyond deny/block/ask/context, granted per hook at trust time."""


def restrict(
    outcome: HookOutcome, granted: frozenset[str], *, wrote_env_file: bool = False
) -> tuple[HookOutcome, tuple[str, ...]]:
    """Drop the parts of an answer that need a capability the hook was not granted.

    Args:
        outcome: the hook's parsed answer.
        granted: the capabilities its trust record grants.
        wrote_env_file: it wrote to the agent's environment file (``CLAUDE_ENV_FILE``),
            which the caller applies only when ``env_file`` is not among the dropped.

    Returns:
        The outcome without the unauthorised parts, and the names of the
        capabilities that were used without being granted.
    """
    dropped: list[str] = []
    changes: dict[str, Any] = {}
    if outcome.decision == "allow" and "approve" not in granted:
        dropped.append("approve")
        changes.update(decision=None, reason=None)
    if outcome.updated_input is not None and "rewrite_input" not in granted:
        dropped.append("rewrite_input")
        changes["updated_input"] = None
    if outcome.updated_output is not UNSET and "rewrite_output" not in granted:
        dropped.append("rewrite_output")
        changes["updated_output"] = UNSET
    if wrote_env_file and "env_file" not in granted:
        dropped.append("env_file")
    if not dropped:
        return outcome, ()
    notes = tuple(_drop_note(c) for c in dropped)
    return replace(outcome, notes=outcome.notes + notes, **changes), tuple(dropped)


def _drop_note(capability: str) -> str:
    return f"tried to {CAPABILITIES[capability]} without that capability (not granted at trust time); dropped"


_DROP_NOTES = frozenset(_drop_note(c) for c in CAPABILITIES)


def error_outcome(hook: str, error: str, *, hook_id: str = "") -> HookOutcome:
    """The outcome of a hook that could not be run at all (sandbox down, ...)."""
    return HookOutcome(hook=hook, status="error", exit_code=None, error=error, hook_id=hook_id)


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


NOTE_CAP = 1_000
"""Characters of one of hookcage's own lines in the system message."""
PROBLEM_NOTES = 20
"""Config problems named in the system message; the rest are counted (``hookcage validate`` lists them)."""
HOOK_MESSAGES_MIN = 200
"""Characters kept for the hooks' own system messages however long hookcage's lines are."""


def _note_line(note: str) -> str:
    """One of hookcage's own lines: one line, escapes visible, secrets redacted, capped."""
    line = one_line(note, NOTE_CAP)
    shown = redact(line)
    if shown != line and "hookcage allow " in line:
        shown += " (secrets shown as ***: `hookcage list` in the project shows the exact line)"
    return shown


def _own_notes(
    outcomes: Sequence[HookOutcome], notes: Sequence[str], problems: Sequence[str], conflicts: Sequence[str]
) -> list[str]:
    """hookcage's own lines, most important first: dropped capabilities, hooks not run, config
    problems (at most :data:`PROBLEM_NOTES`), conflicting rewrites, hook failures, ignored fields."""
    drops: list[str] = []
    failures: list[str] = []
    for o in outcomes:
        name = one_line(o.hook, NAME_CAP)
        if o.status == "error":
            failures.append(f"hook {name} failed: {o.error}")
        for n in o.notes:
            (drops if n in _DROP_NOTES else failures).append(f"hook {name}: {n}")
    shown = list(problems[:PROBLEM_NOTES])
    if len(problems) > PROBLEM_NOTES:
        shown.append(f"{len(problems) - PROBLEM_NOTES} more config problem(s): `hookcage validate` lists them")
    return [_note_line(n) for n in (*drops, *notes, *shown, *conflicts, *failures)]


def _system_message(own: Sequence[str], messages: Iterable[str | None]) -> str | None:
    """hookcage's lines first, then the hooks' messages in the room left: a hook's long
    message can never cut hookcage's warnings off."""
    head = join(f"hookcage: {n}" for n in own)
    hooks = [m for m in messages if m]
    if not hooks:
        return head
    if head is not None and len(head) > MESSAGE_CAP - HOOK_MESSAGES_MIN:
        head = cap_text(head, MESSAGE_CAP - HOOK_MESSAGES_MIN)
    room = MESSAGE_CAP - (len(head) + 1 if head else 0)
    tail = cap_text(sanitize("\n".join(hooks), None), room)
    return f"{head}\n{tail}" if head else tail


def fold(
    event: EventSpec, outcomes: Sequence[HookOutcome], notes: Sequence[str] = (), problems: Sequence[str] = ()
) -> Verdict:
    """Fold the outcomes of all hooks of one event (in config order) into one verdict.

    The system message starts with hookcage's own lines (``hookcage: ...``,
    each one line, escaped, secrets redacted), most important first, then the
    hooks' messages in config order, cut to the room left under the cap.

    Args:
        event: the event.
        outcomes: one per hook that ran, in config order.
        notes: hookcage's own warnings for the user (hooks not run and why).
        problems: config problems (after the warnings; only the first
            :data:`PROBLEM_NOTES` are named).

    On an event whose hooks are the operation (:attr:`EventSpec.errors_fail`:
    WorktreeCreate, WorktreeRemove) a hook that could not answer (any
    non-zero exit, a timeout, a crash) fails it like a block. WorktreeCreate
    succeeds with the one path its hooks printed: hooks that print nothing
    are silent, two different paths are a conflict that fails the creation
    (naming both; hookcage never picks one, since each hook made its own
    directory), and no path at all fails it too.
    """
    conflicts: list[str] = []

    decision: Decision | None = None
    for o in outcomes:
        if o.decision and (decision is None or DECISION_RANK[o.decision] > DECISION_RANK[decision]):
            decision = o.decision
    decision_reason = join(o.reason for o in outcomes if decision and o.decision == decision)

    blockers = [o for o in outcomes if o.status == "block" or (o.status == "error" and event.errors_fail)]
    reasons = [o.reason if o.status == "block" else f"hook {one_line(o.hook, NAME_CAP)} failed: {o.error}"
               for o in blockers]
    stoppers = [o for o in outcomes if not o.continue_]

    worktree_path = None
    if event.answers_path:
        answered = [o for o in outcomes if o.worktree_path is not None]
        if len({o.worktree_path for o in answered}) > 1:
            names = " and ".join(f"{o.hook!r} ({o.worktree_path})" for o in answered)
            conflict = one_line(f"hooks {names} answered different worktree paths; failing instead of choosing",
                                NOTE_CAP)
            conflicts.append(conflict)
            reasons.append(conflict)
        elif not answered and not reasons:
            reasons.append(f"no {event.name} hook printed a worktree path")
        elif not reasons:
            worktree_path = answered[0].worktree_path

    updated_input = None
    rewrites = [o for o in outcomes if o.updated_input is not None]
    distinct_inputs = {_canonical(o.updated_input) for o in rewrites}
    if len(distinct_inputs) == 1:
        updated_input = rewrites[0].updated_input
    elif len(distinct_inputs) > 1:
        names = " and ".join(repr(o.hook) for o in rewrites)
        conflict = one_line(f"hooks {names} rewrote the tool input differently; asking instead of choosing", NOTE_CAP)
        conflicts.append(conflict)
        if decision is None or DECISION_RANK[decision] < DECISION_RANK["ask"]:
            decision = "ask"
            decision_reason = conflict
    if decision in ("deny", "defer"):
        updated_input = None

    updated_output: Any = UNSET
    out_rewrites = [o for o in outcomes if o.updated_output is not UNSET]
    if len({_canonical(o.updated_output) for o in out_rewrites}) == 1:
        updated_output = out_rewrites[0].updated_output
    elif out_rewrites:
        names = " and ".join(repr(o.hook) for o in out_rewrites)
        conflicts.append(f"hooks {names} rewrote the tool output differently; the output is left as it was")

    own = _own_notes(outcomes, notes, problems, conflicts)
    system_message = _system_message(own, (o.system_message for o in outcomes))
    return Verdict(
        event=event.name,
        outcomes=tuple(outcomes),
        blocked=bool(reasons),
        reason=join(reasons),
        decision=decision,
        decision_reason=decision_reason,
        continue_=not stoppers,
        stop_reason=stoppers[0].stop_reason if stoppers else None,
        suppress_output=any(o.suppress_output for o in outcomes),
        system_message=system_message,
        additional_context=join(o.additional_context for o in outcomes),
        updated_input=updated_input,
        updated_output=updated_output,
        notes=tuple(own),
        worktree_path=worktree_path,
    )


def fail_verdict(event_name: str, message: str, *, block: bool) -> AgentAnswer:
    """hookcage's answer when no verdict could be produced (bad input, ...)."""
    return AgentAnswer(2 if block else 1, "", f"hookcage: {redact(one_line(message, MESSAGE_CAP))}\n")


def worktree_answer(verdict: Verdict) -> AgentAnswer:
    """hookcage's answer to WorktreeCreate, whose hooks replace worktree creation.

    Claude Code reads a command hook's stdout as the worktree path (never as
    JSON) and fails the creation on any non-zero exit ("Any non-zero exit
    code causes worktree creation to fail", code.claude.com/docs/en/hooks).
    So: the verdict's path on stdout, exit 0, when there is one and nothing
    failed or stopped; else exit 2 with why on stderr (Claude Code shows a
    failing hook's stderr), the system message after it. On success the
    system message goes to stderr too: nothing else can carry it, and
    Claude Code does not show it.
    """
    message = sanitize(verdict.system_message) if verdict.system_message else None
    if verdict.worktree_path is not None and verdict.continue_ and not verdict.blocks:
        return AgentAnswer(0, verdict.worktree_path + "\n", f"{message}\n" if message else "")
    if not verdict.continue_:
        why = verdict.stop_reason or f"a {verdict.event} hook answered continue: false"
    else:
        why = verdict.reason or f"no {verdict.event} hook printed a worktree path"
    lines = [sanitize(why), *([message] if message else [])]
    return AgentAnswer(2, "", "\n".join(lines) + "\n")
