"""The event catalog: which events exist, what each carries and what it may do.

Pure data, no I/O. The Claude Code dialect is canonical; other agents' tool
names are folded in by :mod:`executor.core.matchers`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from executor.errors import PayloadError

JsonType = type | tuple[type, ...]


@dataclass(frozen=True)
class EventSpec:
    """One hook event.

    Attributes:
        name: the event's canonical name, e.g. ``PreToolUse``.
        matcher_field: the payload field a matcher is tested against, or
            ``None`` when the event ignores matchers.
        can_block: exit 2 / ``decision: "block"`` stops what the agent was doing.
        permission: the event carries a permission decision (allow/deny/ask/defer).
        plain_text_context: plain (non-JSON) stdout of a successful hook
            becomes context for the model.
        required: payload fields the event needs, with their JSON types.
        fields: the event-specific fields the agent sends (documentation).
    """

    name: str
    matcher_field: str | None
    can_block: bool
    permission: bool = False
    plain_text_context: bool = False
    required: tuple[tuple[str, JsonType], ...] = ()
    fields: tuple[str, ...] = ()

    @property
    def rewrites_input(self) -> bool:
        """Hooks of this event may rewrite the tool's input."""
        return self.permission

    @property
    def rewrites_output(self) -> bool:
        """Hooks of this event may rewrite the tool's output."""
        return self.name == "PostToolUse"


COMMON_FIELDS = ("session_id", "transcript_path", "cwd", "hook_event_name", "permission_mode")
_TOOL = (("tool_name", str), ("tool_input", dict))

EVENTS: Mapping[str, EventSpec] = {
    spec.name: spec
    for spec in (
        EventSpec("SessionStart", "source", False, plain_text_context=True,
                  fields=("source", "model")),
        EventSpec("SessionEnd", "reason", False, fields=("reason",)),
        EventSpec("UserPromptSubmit", None, True, plain_text_context=True,
                  required=(("prompt", str),), fields=("prompt",)),
        EventSpec("PreToolUse", "tool_name", True, permission=True, required=_TOOL,
                  fields=("tool_name", "tool_input", "tool_use_id")),
        EventSpec("PermissionRequest", "tool_name", True, permission=True, required=_TOOL,
                  fields=("tool_name", "tool_input", "permission_suggestions")),
        EventSpec("PostToolUse", "tool_name", True, required=_TOOL,
                  fields=("tool_name", "tool_input", "tool_response", "tool_use_id")),
        EventSpec("PostToolUseFailure", "tool_name", False, required=_TOOL,
                  fields=("tool_name", "tool_input", "error", "is_interrupt", "tool_use_id")),
        EventSpec("Notification", "notification_type", False,
                  fields=("message", "title", "notification_type")),
        EventSpec("SubagentStart", "agent_type", False, fields=("agent_id", "agent_type")),
        EventSpec("SubagentStop", "agent_type", True,
                  fields=("stop_hook_active", "agent_id", "agent_type", "agent_transcript_path")),
        EventSpec("Stop", None, True, fields=("stop_hook_active",)),
        EventSpec("PreCompact", "trigger", True, fields=("trigger", "custom_instructions")),
        EventSpec("PostCompact", "trigger", False, fields=("trigger",)),
        EventSpec("TaskCompleted", None, True,
                  fields=("task_id", "task_subject", "task_description")),
        EventSpec("ConfigChange", "source", True, fields=("source", "file_path")),
    )
}

_JSON_NAMES = {str: "a string", dict: "an object", bool: "a boolean", list: "an array"}


def event_names() -> str:
    """The valid event names, comma-separated, for error messages."""
    return ", ".join(EVENTS)


def get_event(name: str) -> EventSpec:
    """Look up an event by its exact name.

    Raises:
        PayloadError: the name is not a known event; the message lists the valid ones.
    """
    try:
        return EVENTS[name]
    except KeyError:
        raise PayloadError(f"unknown event {name!r}; valid events: {event_names()}") from None


def resolve_event(arg: str | None, payload: Mapping[str, Any]) -> EventSpec:
    """Pick the event from the command-line argument and/or ``hook_event_name``.

    Raises:
        PayloadError: neither is given, they differ, or the name is unknown.
    """
    from_payload = payload.get("hook_event_name")
    if from_payload is not None and not isinstance(from_payload, str):
        raise PayloadError("payload field 'hook_event_name' must be a string")
    if arg and from_payload and arg != from_payload:
        raise PayloadError(
            f"event {arg!r} on the command line differs from the payload's "
            f"hook_event_name {from_payload!r}"
        )
    name = arg or from_payload
    if not name:
        raise PayloadError(
            "no event: give it as an argument (hookcage dispatch PreToolUse) "
            "or in the payload's 'hook_event_name'"
        )
    return get_event(name)


def check_payload(event: EventSpec, payload: Mapping[str, Any]) -> None:
    """Check the payload carries what the event needs, with the right types.

    Raises:
        PayloadError: a required field is missing or has the wrong type, or a
            common field (``session_id``, ``cwd``, ``transcript_path``) is not a string.
    """
    for name in ("session_id", "cwd", "transcript_path"):
        value = payload.get(name)
        if value is not None and not isinstance(value, str):
            raise PayloadError(f"payload field {name!r} must be a string")
    for name, json_type in event.required:
        if name not in payload:
            raise PayloadError(f"{event.name} payload is missing the field {name!r}")
        if not isinstance(payload[name], json_type):
            expected = _JSON_NAMES.get(json_type, str(json_type)) if isinstance(json_type, type) else "valid"
            raise PayloadError(f"{event.name} payload field {name!r} must be {expected}")
