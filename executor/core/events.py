"""The event catalog: which events exist, what each carries and what it may do.

Pure data, no I/O. The Claude Code dialect is canonical; other agents' tool
names are folded in by :mod:`executor.core.matchers`.

The catalog is Claude Code's whole catalog, the 31 events of its hooks
reference (https://code.claude.com/docs/en/hooks: the "Matcher patterns"
table for what each event's matcher filters, each event's "input" section
for its fields, and the "Exit code 2 behavior per event" table for
:attr:`EventSpec.exit2`; checked against copies of the page dated
2026-07-14, 2026-09-18 and 2026-10-03 found with the project's ``search``
tool). Where the reference changed over that time, the newest wins:
PermissionRequest's exit 2 "isn't honored for this event and the permission
flow proceeds unchanged. Deny through the ``decision`` object instead";
WorktreeRemove's "any non-zero exit code causes worktree removal to fail if
the directory still exists afterward"; Notification's and Setup's "exit code
and stderr are ignored". The newest page also lists PreModelSwitch and
PostModelSwitch (33 events); they are not in this catalog yet.

What exit 2 does is data (:data:`Exit2`), and so is everything that follows
from it (:attr:`EventSpec.can_block`, :attr:`EventSpec.json_blocks`): an
event that cannot block never blocks, whatever a hook says.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from executor.errors import PayloadError

JsonType = type | tuple[type, ...]

Exit2 = Literal["blocks", "to_model", "fails", "user_only", "ignored", "not_honoured"]
"""What a hook's exit 2 does on an event (Claude Code's "Exit code 2 behavior per event").

- ``blocks``: stops what the agent was about to do (the tool call, the
  prompt, the stop, the compaction, the task, the elicitation, ...); stderr
  is the reason.
- ``to_model``: the action already happened (PostToolUse,
  PostToolUseFailure); stderr is fed to the model, which hookcage carries
  as a block (Claude Code reads it from ``decision: "block"`` + ``reason``).
- ``fails``: the hook *is* the operation (WorktreeCreate, WorktreeRemove):
  any non-zero exit, not only 2, and any hook that could not answer
  (timeout, crash) make it fail.
- ``user_only``: cannot block; stderr is shown to the user.
- ``ignored``: cannot block; Claude Code ignores the exit code (and its
  stderr). hookcage still shows the stderr to the user and notes that the
  exit 2 had no effect.
- ``not_honoured``: PermissionRequest: cannot block by exit code; only the
  JSON ``decision.behavior`` allows or denies. hookcage never turns its
  exit 2 into a deny: the stderr is shown and noted, as for ``ignored``.
"""

BLOCKING_EXIT2: frozenset[str] = frozenset({"blocks", "to_model", "fails"})
"""The :data:`Exit2` values whose exit 2 stops the agent (:attr:`EventSpec.can_block`)."""

MatcherStyle = Literal["names", "narrow", "filenames"]
"""How an event's matcher is read (:mod:`executor.core.matchers` implements them).

- ``names``: the usual rule: only letters, digits, ``_``, ``-``, space,
  ``,`` and ``|`` is an exact name or a list split on ``|`` and ``,``;
  anything else an unanchored regular expression.
- ``narrow``: StopFailure and FileChanged: "a narrower exact-match set of
  letters, digits, ``_``, and ``|`` only. A hyphen, space, or comma [...]
  keeps it on the regular-expression path, and only ``|`` separates
  alternatives."
- ``filenames``: FileChanged: the ``narrow`` rule tested against the
  changed file's basename, and each ``|``-separated part is also a literal
  file name (Claude Code watches exactly those files, so ``.envrc|.env``
  fires for ``.envrc`` and ``.env`` whatever the regular expression says).
"""


@dataclass(frozen=True)
class EventSpec:
    """One hook event.

    Attributes:
        name: the event's canonical name, e.g. ``PreToolUse``.
        matcher_field: the payload field a matcher is tested against, or
            ``None`` when the event ignores matchers.
        exit2: what a hook's exit 2 does on this event (:data:`Exit2`).
        permission: the event carries a permission decision (allow/deny/ask/defer).
        plain_text_context: plain (non-JSON) stdout of a successful hook
            becomes context for the model.
        required: payload fields the event needs, with their JSON types.
        fields: the event-specific fields the agent sends (documentation).
        matcher_style: how the matcher is read (:data:`MatcherStyle`).
        answers_path: the hook replaces the operation and answers with a
            path (WorktreeCreate: the last non-empty line of stdout, or
            ``hookSpecificOutput.worktreePath``); no path is a failure.
        per_chunk: the event fires once per streamed chunk of the
            assistant's text (MessageDisplay): many times per message, so a
            hook there runs many times per turn.
    """

    name: str
    matcher_field: str | None
    exit2: Exit2
    permission: bool = False
    plain_text_context: bool = False
    required: tuple[tuple[str, JsonType], ...] = ()
    fields: tuple[str, ...] = ()
    matcher_style: MatcherStyle = "names"
    answers_path: bool = False
    per_chunk: bool = False

    @property
    def can_block(self) -> bool:
        """A hook's exit 2 stops what the agent was doing (see :data:`Exit2`)."""
        return self.exit2 in BLOCKING_EXIT2

    @property
    def json_blocks(self) -> bool:
        """A hook's JSON ``decision: "block"`` blocks (elsewhere it is noted and ignored).

        The events whose exit 2 blocks or feeds the model; not PermissionRequest
        (only ``decision.behavior`` decides there), not the events whose hook
        is the operation (WorktreeCreate answers a path; WorktreeRemove's JSON is
        discarded), and never an event that cannot block.
        """
        return self.exit2 in ("blocks", "to_model")

    @property
    def errors_fail(self) -> bool:
        """A hook that could not answer (non-zero exit, timeout, crash) fails the operation."""
        return self.exit2 == "fails"

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
_TASK = ("task_id", "task_subject", "task_description", "teammate_name", "team_name")
_STOP = ("stop_hook_active", "last_assistant_message", "background_tasks", "session_crons")

EVENTS: Mapping[str, EventSpec] = {
    spec.name: spec
    for spec in (
        # -- session ---------------------------------------------------------------------
        EventSpec("SessionStart", "source", "user_only", plain_text_context=True,
                  fields=("source", "model")),
        EventSpec("Setup", "trigger", "ignored", fields=("trigger",)),
        EventSpec("InstructionsLoaded", "load_reason", "ignored",
                  fields=("file_path", "memory_type", "load_reason")),
        EventSpec("SessionEnd", "reason", "user_only", fields=("reason",)),
        # -- the prompt and the assistant's text -----------------------------------------
        EventSpec("UserPromptSubmit", None, "blocks", plain_text_context=True,
                  required=(("prompt", str),), fields=("prompt",)),
        EventSpec("UserPromptExpansion", "command_name", "blocks", plain_text_context=True,
                  fields=("expansion_type", "command_name", "command_args", "command_source", "prompt")),
        EventSpec("MessageDisplay", None, "ignored", per_chunk=True,
                  fields=("turn_id", "message_id", "index", "final", "delta")),
        # -- tools -----------------------------------------------------------------------
        EventSpec("PreToolUse", "tool_name", "blocks", permission=True, required=_TOOL,
                  fields=("tool_name", "tool_input", "tool_use_id")),
        EventSpec("PermissionRequest", "tool_name", "not_honoured", permission=True, required=_TOOL,
                  fields=("tool_name", "tool_input", "permission_suggestions")),
        EventSpec("PermissionDenied", "tool_name", "ignored", required=_TOOL,
                  fields=("tool_name", "tool_input", "tool_use_id", "reason")),
        EventSpec("PostToolUse", "tool_name", "to_model", required=_TOOL,
                  fields=("tool_name", "tool_input", "tool_response", "tool_use_id", "duration_ms")),
        EventSpec("PostToolUseFailure", "tool_name", "to_model", required=_TOOL,
                  fields=("tool_name", "tool_input", "tool_use_id", "error", "is_interrupt", "duration_ms")),
        EventSpec("PostToolBatch", None, "blocks", fields=("tool_calls",)),
        # -- notifications, subagents, tasks, stopping -----------------------------------
        EventSpec("Notification", "notification_type", "ignored",
                  fields=("message", "title", "notification_type")),
        EventSpec("SubagentStart", "agent_type", "user_only", fields=("agent_id", "agent_type")),
        EventSpec("SubagentStop", "agent_type", "blocks",
                  fields=("agent_id", "agent_type", "agent_transcript_path", *_STOP)),
        EventSpec("TaskCreated", None, "blocks", fields=_TASK),
        EventSpec("TaskCompleted", None, "blocks", fields=_TASK),
        EventSpec("Stop", None, "blocks", fields=_STOP),
        EventSpec("StopFailure", "error", "ignored", matcher_style="narrow",
                  fields=("error", "error_details", "last_assistant_message")),
        EventSpec("TeammateIdle", None, "blocks", fields=("teammate_name", "team_name")),
        # -- configuration, directories, files, worktrees --------------------------------
        EventSpec("ConfigChange", "source", "blocks", fields=("source", "file_path")),
        EventSpec("CwdChanged", None, "user_only", fields=("old_cwd", "new_cwd")),
        EventSpec("DirectoryAdded", "source", "ignored", fields=("directory", "source")),
        EventSpec("FileChanged", "file_path", "user_only", matcher_style="filenames",
                  fields=("file_path", "event")),
        EventSpec("WorktreeCreate", None, "fails", answers_path=True, fields=("name",)),
        EventSpec("WorktreeRemove", None, "fails", fields=("worktree_path",)),
        # -- compaction ------------------------------------------------------------------
        EventSpec("PreCompact", "trigger", "blocks", fields=("trigger", "custom_instructions")),
        EventSpec("PostCompact", "trigger", "user_only", fields=("trigger", "compact_summary")),
        # -- MCP elicitations ------------------------------------------------------------
        EventSpec("Elicitation", "mcp_server_name", "blocks",
                  fields=("mcp_server_name", "message", "mode", "requested_schema", "url", "elicitation_id")),
        EventSpec("ElicitationResult", "mcp_server_name", "blocks",
                  fields=("mcp_server_name", "action", "content", "mode", "elicitation_id")),
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


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_payload(event: EventSpec, payload: Mapping[str, Any]) -> None:
    """Check the payload carries what the event needs, with the right types.

    Raises:
        PayloadError: a required field is missing or has the wrong type, or a
            common field (``session_id``, ``cwd``, ``transcript_path``) is not a string,
            or one of them holds a NUL byte or a lone surrogate.
    """
    for name in ("session_id", "cwd", "transcript_path"):
        value = payload.get(name)
        if value is not None and not isinstance(value, str):
            raise PayloadError(f"payload field {name!r} must be a string")
        if isinstance(value, str) and ("\x00" in value or not _utf8(value)):
            # No file system, label or file name takes it: it would only fail deeper, as an internal error.
            raise PayloadError(f"payload field {name!r} holds a NUL byte or a lone surrogate")
    for name, json_type in event.required:
        if name not in payload:
            raise PayloadError(f"{event.name} payload is missing the field {name!r}")
        if not isinstance(payload[name], json_type):
            expected = _JSON_NAMES.get(json_type, str(json_type)) if isinstance(json_type, type) else "valid"
            raise PayloadError(f"{event.name} payload field {name!r} must be {expected}")
