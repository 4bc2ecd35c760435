"""What a hook's stdout says on exit 0: its JSON answer, or WorktreeCreate's path.

:func:`parse_json` reads Claude Code's JSON answer (``decision``,
``hookSpecificOutput``, ``continue``, ...) into the fields of a
:class:`~executor.core.protocol.values.HookOutcome`, noting every part it
ignores and why; :func:`parse_path` reads a WorktreeCreate hook's plain answer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from executor.core.events import EventSpec
from executor.core.protocol.values import DECISION_RANK, NAME_CAP, Decision, HookOutcome
from executor.core.text import one_line, sanitize

_LEGACY_DECISIONS: Mapping[str, Decision] = {"approve": "allow", "block": "deny"}

MAX_JSON_DEPTH = 100
"""Nesting a hook's JSON answer may have: deeper could not be re-encoded on a deeper stack."""


def _depth(value: Any) -> int:
    """How deeply objects and arrays nest in ``value`` (iteratively: no recursion)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def _reject_constant(name: str) -> Any:
    # NaN and Infinity are not JSON: passed on, they would break the agent's parser.
    raise ValueError(f"{name} is not valid JSON")


PATH_CAP = 4096
"""Characters of a worktree path a hook may answer."""
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
"""Terminal escapes Claude Code strips from a WorktreeCreate hook's stdout before reading the path."""
_ABSOLUTE = re.compile(r"/|[A-Za-z]:[\\/]|\\\\")


def _path_problem(path: str) -> str | None:
    """Why ``path`` cannot be a worktree path, or None."""
    shown = one_line(path, NAME_CAP)
    if len(path) > PATH_CAP:
        return f"a worktree path longer than {PATH_CAP} characters ({shown})"
    if one_line(path, None) != path:
        return f"a worktree path holding control or invisible characters ({shown})"
    if not _ABSOLUTE.match(path):
        return f"a worktree path that is not absolute ({shown})"
    return None


def parse_path(base: HookOutcome, text: str) -> HookOutcome:
    """WorktreeCreate's plain answer: the last non-empty line of stdout, terminal escapes stripped.

    No line at all is no answer (the fold fails the creation when no hook answered).
    """
    lines = [line.strip() for line in _ANSI.sub("", text).splitlines() if line.strip()]
    if not lines:
        return base
    problem = _path_problem(lines[-1])
    if problem is not None:
        return replace(base, status="error", error=f"printed {problem}")
    return replace(base, worktree_path=lines[-1])


def parse_json(event: EventSpec, base: HookOutcome, text: str) -> HookOutcome:
    try:
        data = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        return replace(base, status="error", error=f"stdout starts with '{{' but is not valid JSON ({exc.msg} at line {exc.lineno})")
    except (ValueError, RecursionError) as exc:
        # NaN/Infinity, integers past Python's digit limit, nesting past the recursion limit.
        msg = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        return replace(base, status="error", error=f"stdout starts with '{{' but is not valid JSON ({sanitize(msg, 200)})")
    if not isinstance(data, dict):
        return replace(base, status="error", error="stdout JSON is not an object")
    if _depth(data) > MAX_JSON_DEPTH:
        return replace(base, status="error", error=f"stdout JSON nests deeper than {MAX_JSON_DEPTH} levels")
    notes: list[str] = []
    fields: dict[str, Any] = {}

    def text_field(source: Mapping[str, Any], key: str) -> str | None:
        value = source.get(key)
        if value is None:
            return None
        if not isinstance(value, str):
            notes.append(f"{key!r} must be a string; ignored")
            return None
        return sanitize(value) or None

    def bool_field(key: str) -> bool | None:
        value = data.get(key)
        if value is None:
            return None
        if not isinstance(value, bool):
            notes.append(f"{key!r} must be true or false; ignored")
            return None
        return value

    cont = bool_field("continue")
    if cont is False:
        fields["continue_"] = False
        fields["stop_reason"] = text_field(data, "stopReason")
    if bool_field("suppressOutput"):
        fields["suppress_output"] = True
    fields["system_message"] = text_field(data, "systemMessage")
    reason = text_field(data, "reason")

    decision = data.get("decision")
    if decision is not None:
        if decision == "block":
            if event.json_blocks:
                fields["status"] = "block"
                fields["reason"] = reason or f"blocked by hook {one_line(base.hook, NAME_CAP)}"
            else:
                notes.append(f"'decision: block' has no effect on {event.name}; ignored")
        elif decision == "approve" and event.permission:
            fields["decision"] = "allow"
            fields["reason"] = reason
        elif not (isinstance(decision, dict) and event.name == "PermissionRequest"):
            notes.append(f"unknown decision {decision!r}; ignored")

    specific = data.get("hookSpecificOutput")
    if specific is not None:
        if not isinstance(specific, dict):
            notes.append("'hookSpecificOutput' must be an object; ignored")
        elif specific.get("hookEventName", event.name) != event.name:
            notes.append(
                f"hookSpecificOutput is for {specific.get('hookEventName')!r}, not {event.name}; ignored"
            )
        else:
            _parse_specific(event, specific, fields, notes, text_field)
    if isinstance(decision, dict) and event.name == "PermissionRequest":
        _parse_permission_request(decision, fields, notes, text_field)
    # None is a valid output rewrite (UNSET marks "no rewrite"); elsewhere None means unset.
    fields = {k: v for k, v in fields.items() if v is not None or k == "updated_output"}
    return replace(base, notes=tuple(notes), **fields)


def _parse_specific(
    event: EventSpec,
    specific: Mapping[str, Any],
    fields: dict[str, Any],
    notes: list[str],
    text_field: Any,
) -> None:
    context = text_field(specific, "additionalContext")
    if context is not None:
        fields["additional_context"] = context
    if event.permission:
        raw = specific.get("permissionDecision")
        if raw is not None:
            decision = _LEGACY_DECISIONS.get(raw, raw) if isinstance(raw, str) else None
            if decision in DECISION_RANK:
                fields["decision"] = decision
                fields["reason"] = text_field(specific, "permissionDecisionReason")
            else:
                notes.append(f"unknown permissionDecision {raw!r}; ignored")
        if isinstance(specific.get("decision"), dict) and event.name == "PermissionRequest":
            _parse_permission_request(specific["decision"], fields, notes, text_field)
    elif specific.get("permissionDecision") is not None:
        notes.append(f"'permissionDecision' has no effect on {event.name}; ignored")
    for key in ("updatedInput", "modifiedInput"):
        if key in specific:
            value = specific[key]
            if not event.rewrites_input:
                notes.append(f"{key!r} has no effect on {event.name}; ignored")
            elif not isinstance(value, dict):
                notes.append(f"{key!r} must be an object; ignored")
            elif "updated_input" in fields and fields["updated_input"] != value:
                notes.append("both 'updatedInput' and 'modifiedInput' given and they differ; both ignored")
                fields["updated_input"] = None
            else:
                fields["updated_input"] = value
    for key in ("updatedToolOutput", "updatedMCPToolOutput"):
        if key in specific:
            if event.rewrites_output:
                fields["updated_output"] = specific[key]
            else:
                notes.append(f"{key!r} has no effect on {event.name}; ignored")
    if "worktreePath" in specific:
        path = specific["worktreePath"]
        if not event.answers_path:
            notes.append(f"'worktreePath' has no effect on {event.name}; ignored")
        elif not isinstance(path, str):
            notes.append("'worktreePath' must be a string; ignored")
        elif (problem := _path_problem(path)) is not None:
            notes.append(f"'worktreePath' is {problem}; ignored")
        else:
            fields["worktree_path"] = path


def _parse_permission_request(
    decision: Mapping[str, Any], fields: dict[str, Any], notes: list[str], text_field: Any
) -> None:
    behavior = decision.get("behavior")
    if behavior in ("allow", "deny", "ask"):
        fields["decision"] = behavior
        fields["reason"] = text_field(decision, "message")
    else:
        notes.append(f"unknown decision behavior {behavior!r}; ignored")
    if isinstance(decision.get("updatedInput"), dict):
        fields["updated_input"] = decision["updatedInput"]
    elif decision.get("updatedInput") is not None:
        notes.append("'decision.updatedInput' must be an object; ignored")
