"""The event catalog: names, resolution from argument and payload, payload checks."""

from __future__ import annotations

from typing import Any

import pytest

from executor.core.events import BLOCKING_EXIT2, EVENTS, check_payload, get_event, resolve_event
from executor.errors import PayloadError

# Claude Code's hooks reference (code.claude.com/docs/en/hooks): each event, the payload
# field its matcher filters (None: no matcher support), what exit 2 does there, and a
# payload of the shape the reference shows for it.
COMMON: dict[str, Any] = {"session_id": "s1", "cwd": "/work/p", "transcript_path": "/tmp/t.jsonl"}
TOOL: dict[str, Any] = {"tool_name": "Bash", "tool_input": {"command": "ls"}}
REFERENCE: tuple[tuple[str, str | None, str, dict[str, Any]], ...] = (
    ("SessionStart", "source", "user_only", {"source": "startup", "model": "claude-sonnet-5"}),
    ("Setup", "trigger", "ignored", {"trigger": "init"}),
    ("InstructionsLoaded", "load_reason", "ignored",
     {"file_path": "/work/p/CLAUDE.md", "memory_type": "Project", "load_reason": "session_start"}),
    ("UserPromptSubmit", None, "blocks", {"prompt": "hi"}),
    ("UserPromptExpansion", "command_name", "blocks",
     {"expansion_type": "slash_command", "command_name": "review", "command_args": "src",
      "command_source": "project", "prompt": "/review src"}),
    ("MessageDisplay", None, "ignored",
     {"turn_id": "t1", "message_id": "m1", "index": 0, "final": False, "delta": "Hel"}),
    ("PreToolUse", "tool_name", "blocks", {**TOOL, "tool_use_id": "toolu_1"}),
    ("PermissionRequest", "tool_name", "not_honoured", {**TOOL, "permission_suggestions": []}),
    ("PermissionDenied", "tool_name", "ignored", {**TOOL, "tool_use_id": "toolu_1", "reason": "auto mode"}),
    ("PostToolUse", "tool_name", "to_model",
     {**TOOL, "tool_response": {"stdout": ""}, "tool_use_id": "toolu_1", "duration_ms": 12}),
    ("PostToolUseFailure", "tool_name", "to_model",
     {**TOOL, "tool_use_id": "toolu_1", "error": "exit 1", "is_interrupt": False, "duration_ms": 12}),
    ("PostToolBatch", None, "blocks", {"tool_calls": [{"tool_name": "Bash", "tool_use_id": "toolu_1"}]}),
    ("Notification", "notification_type", "ignored",
     {"message": "Claude needs your permission", "title": "Claude Code", "notification_type": "permission_prompt"}),
    ("SubagentStart", "agent_type", "user_only", {"agent_id": "a1", "agent_type": "Explore"}),
    ("SubagentStop", "agent_type", "blocks",
     {"agent_id": "a1", "agent_type": "Explore", "stop_hook_active": False, "agent_transcript_path": "/tmp/a.jsonl",
      "last_assistant_message": "done", "background_tasks": [], "session_crons": []}),
    ("TaskCreated", None, "blocks",
     {"task_id": "1", "task_subject": "s", "task_description": "d", "teammate_name": "t", "team_name": "x"}),
    ("TaskCompleted", None, "blocks",
     {"task_id": "1", "task_subject": "s", "task_description": "d", "teammate_name": "t", "team_name": "x"}),
    ("Stop", None, "blocks",
     {"stop_hook_active": False, "last_assistant_message": "done", "background_tasks": [], "session_crons": []}),
    ("StopFailure", "error", "ignored",
     {"error": "rate_limit", "error_details": "429 Too Many Requests", "last_assistant_message": "API Error"}),
    ("TeammateIdle", None, "blocks", {"teammate_name": "t", "team_name": "x"}),
    ("ConfigChange", "source", "blocks", {"source": "project_settings", "file_path": "/work/p/.claude/settings.json"}),
    ("CwdChanged", None, "user_only", {"old_cwd": "/work/p", "new_cwd": "/work/p/src"}),
    ("DirectoryAdded", "source", "ignored", {"directory": "/work/q", "source": "slash_command"}),
    ("FileChanged", "file_path", "user_only", {"file_path": "/work/p/.envrc", "event": "change"}),
    ("WorktreeCreate", None, "fails", {"name": "feature-auth"}),
    ("WorktreeRemove", None, "fails", {"worktree_path": "/work/p/.claude/worktrees/feature-auth"}),
    ("PreCompact", "trigger", "blocks", {"trigger": "manual", "custom_instructions": ""}),
    ("PostCompact", "trigger", "user_only", {"trigger": "auto", "compact_summary": "..."}),
    ("SessionEnd", "reason", "user_only", {"reason": "other"}),
    ("Elicitation", "mcp_server_name", "blocks",
     {"mcp_server_name": "my-mcp-server", "message": "Please authenticate", "mode": "url",
      "url": "https://auth.example.com/login", "elicitation_id": "e1"}),
    ("ElicitationResult", "mcp_server_name", "blocks",
     {"mcp_server_name": "my-mcp-server", "action": "accept", "content": {"username": "alice"}, "mode": "form",
      "elicitation_id": "e1"}),
)
CLAUDE_CODE_EVENTS = tuple(name for name, *_ in REFERENCE)

TOOL_PAYLOAD: dict[str, Any] = {
    "session_id": "s1", "cwd": "/work/p", "transcript_path": "/tmp/t.jsonl",
    "tool_name": "Bash", "tool_input": {"command": "ls"},
}


@pytest.mark.parametrize("name", CLAUDE_CODE_EVENTS)
def test_catalog_has_every_claude_code_event(name: str) -> None:
    assert get_event(name).name == name


def test_the_catalog_is_claude_codes_whole_catalog_and_nothing_else() -> None:
    assert len(CLAUDE_CODE_EVENTS) == 31
    assert set(EVENTS) == set(CLAUDE_CODE_EVENTS)


@pytest.mark.parametrize(("name", "matcher_field", "exit2", "payload"), REFERENCE)
def test_each_event_matches_on_its_field_and_exit_2_does_what_the_reference_says(
    name: str, matcher_field: str | None, exit2: str, payload: dict[str, Any]
) -> None:
    spec = get_event(name)
    assert spec.matcher_field == matcher_field
    assert spec.exit2 == exit2
    assert spec.can_block is (exit2 in ("blocks", "to_model", "fails"))
    assert spec.json_blocks is (exit2 in ("blocks", "to_model"))
    assert set(payload) <= set(spec.fields)  # the reference's fields are documented
    if matcher_field is not None:
        assert matcher_field in spec.fields


@pytest.mark.parametrize(("name", "matcher_field", "exit2", "payload"), REFERENCE)
def test_a_payload_shaped_as_the_reference_shows_passes(
    name: str, matcher_field: str | None, exit2: str, payload: dict[str, Any]
) -> None:
    check_payload(get_event(name), {**COMMON, "hook_event_name": name, **payload})


def test_the_events_that_can_never_block() -> None:
    cannot = sorted(n for n, s in EVENTS.items() if not s.can_block)
    assert cannot == sorted([
        "SessionStart", "Setup", "InstructionsLoaded", "MessageDisplay", "PermissionRequest",
        "PermissionDenied", "Notification", "SubagentStart", "StopFailure", "CwdChanged", "DirectoryAdded",
        "FileChanged", "PostCompact", "SessionEnd",
    ])
    assert all(s.exit2 not in BLOCKING_EXIT2 for n, s in EVENTS.items() if n in cannot)


def test_only_the_worktree_events_fail_on_any_non_zero_exit_and_only_worktree_create_answers_a_path() -> None:
    assert sorted(n for n, s in EVENTS.items() if s.errors_fail) == ["WorktreeCreate", "WorktreeRemove"]
    assert [n for n, s in EVENTS.items() if s.answers_path] == ["WorktreeCreate"]


def test_message_display_fires_per_streamed_chunk_and_has_no_matcher() -> None:
    assert [n for n, s in EVENTS.items() if s.per_chunk] == ["MessageDisplay"]
    assert get_event("MessageDisplay").matcher_field is None


def test_matcher_styles_follow_the_reference() -> None:
    styles = {n: s.matcher_style for n, s in EVENTS.items() if s.matcher_style != "names"}
    assert styles == {"StopFailure": "narrow", "FileChanged": "filenames"}


def test_catalog_keys_are_the_spec_names() -> None:
    assert all(key == spec.name for key, spec in EVENTS.items())


@pytest.mark.parametrize("name", ["Nope", "pretooluse", "PRETOOLUSE", "PreToolUse ", ""])
def test_unknown_event_is_an_error_listing_the_valid_ones(name: str) -> None:
    with pytest.raises(PayloadError) as info:
        get_event(name)
    message = str(info.value)
    assert repr(name) in message
    for valid in CLAUDE_CODE_EVENTS:
        assert valid in message


@pytest.mark.parametrize(
    ("name", "can_block", "permission"),
    [
        ("PreToolUse", True, True),
        # Claude Code's reference: "Exit code 2 isn't honored for this event and the permission flow
        # proceeds unchanged. Deny through the decision object instead" (it was True here before).
        ("PermissionRequest", False, True),
        ("PostToolUse", True, False),
        ("UserPromptSubmit", True, False),
        ("Stop", True, False),
        ("SubagentStop", True, False),
        ("Notification", False, False),
        ("SessionStart", False, False),
        ("SessionEnd", False, False),
        ("PreCompact", True, False),
    ],
)
def test_what_each_event_may_do(name: str, can_block: bool, permission: bool) -> None:
    spec = get_event(name)
    assert spec.can_block is can_block
    assert spec.permission is permission


def test_only_post_tool_use_rewrites_output_and_only_permission_events_rewrite_input() -> None:
    assert [n for n, s in EVENTS.items() if s.rewrites_output] == ["PostToolUse"]
    assert sorted(n for n, s in EVENTS.items() if s.rewrites_input) == ["PermissionRequest", "PreToolUse"]


def test_plain_text_becomes_context_only_on_prompt_and_session_start() -> None:
    # The reference: plain stdout is context on UserPromptSubmit, UserPromptExpansion and SessionStart.
    assert sorted(n for n, s in EVENTS.items() if s.plain_text_context) == [
        "SessionStart", "UserPromptExpansion", "UserPromptSubmit"]


# -- resolve_event -----------------------------------------------------------------


def test_resolve_from_argument_only() -> None:
    assert resolve_event("Stop", {}).name == "Stop"


def test_resolve_from_payload_only() -> None:
    assert resolve_event(None, {"hook_event_name": "PreToolUse"}).name == "PreToolUse"


def test_resolve_with_both_agreeing() -> None:
    assert resolve_event("Stop", {"hook_event_name": "Stop"}).name == "Stop"


def test_resolve_with_both_differing_is_an_error_naming_both() -> None:
    with pytest.raises(PayloadError) as info:
        resolve_event("Stop", {"hook_event_name": "PreToolUse"})
    assert "'Stop'" in str(info.value)
    assert "'PreToolUse'" in str(info.value)


def test_resolve_with_neither_is_an_error() -> None:
    with pytest.raises(PayloadError, match="no event"):
        resolve_event(None, {})


def test_resolve_with_empty_argument_and_no_payload_name_is_an_error() -> None:
    with pytest.raises(PayloadError, match="no event"):
        resolve_event("", {"hook_event_name": ""})


def test_resolve_unknown_name_lists_valid_ones() -> None:
    with pytest.raises(PayloadError, match=r"valid events: .*PreToolUse"):
        resolve_event(None, {"hook_event_name": "BeforeTool"})


@pytest.mark.parametrize("value", [1, ["Stop"], {"name": "Stop"}, True])
def test_resolve_rejects_a_non_string_hook_event_name(value: Any) -> None:
    with pytest.raises(PayloadError, match="hook_event_name"):
        resolve_event("Stop", {"hook_event_name": value})


# -- check_payload -----------------------------------------------------------------


def test_a_complete_tool_payload_passes() -> None:
    check_payload(get_event("PreToolUse"), TOOL_PAYLOAD)


def test_events_without_required_fields_accept_an_empty_payload() -> None:
    for name in ("Stop", "SessionStart", "Notification", "SessionEnd"):
        check_payload(get_event(name), {})


def test_only_tool_events_and_user_prompt_submit_require_fields() -> None:
    # A field that is missing from a newer or older agent's payload must not refuse the event.
    required = {n: [f for f, _ in s.required] for n, s in EVENTS.items() if s.required}
    tool = ["tool_name", "tool_input"]
    assert required == {"UserPromptSubmit": ["prompt"], "PreToolUse": tool, "PermissionRequest": tool,
                        "PermissionDenied": tool, "PostToolUse": tool, "PostToolUseFailure": tool}


@pytest.mark.parametrize("event", ["PreToolUse", "PermissionRequest", "PermissionDenied", "PostToolUse",
                                   "PostToolUseFailure"])
@pytest.mark.parametrize("missing", ["tool_name", "tool_input"])
def test_tool_events_need_tool_name_and_input(event: str, missing: str) -> None:
    payload = {k: v for k, v in TOOL_PAYLOAD.items() if k != missing}
    with pytest.raises(PayloadError, match=f"missing the field '{missing}'"):
        check_payload(get_event(event), payload)


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("tool_name", 3, "a string"),
        ("tool_name", None, "a string"),
        ("tool_name", ["Bash"], "a string"),
        ("tool_input", "ls", "an object"),
        ("tool_input", ["ls"], "an object"),
        ("tool_input", None, "an object"),
    ],
)
def test_tool_fields_with_the_wrong_type(field: str, value: Any, expected: str) -> None:
    with pytest.raises(PayloadError, match=f"'{field}' must be {expected}"):
        check_payload(get_event("PreToolUse"), {**TOOL_PAYLOAD, field: value})


def test_user_prompt_submit_needs_a_string_prompt() -> None:
    spec = get_event("UserPromptSubmit")
    check_payload(spec, {"prompt": "hi"})
    with pytest.raises(PayloadError, match="missing the field 'prompt'"):
        check_payload(spec, {})
    with pytest.raises(PayloadError, match="'prompt' must be a string"):
        check_payload(spec, {"prompt": {"text": "hi"}})


@pytest.mark.parametrize("field", ["session_id", "cwd", "transcript_path"])
@pytest.mark.parametrize("value", [1, ["x"], {"x": 1}, False])
def test_common_fields_must_be_strings(field: str, value: Any) -> None:
    with pytest.raises(PayloadError, match=f"'{field}' must be a string"):
        check_payload(get_event("Stop"), {field: value})


def test_common_fields_are_checked_on_tool_events_too() -> None:
    with pytest.raises(PayloadError, match="'cwd' must be a string"):
        check_payload(get_event("PreToolUse"), {**TOOL_PAYLOAD, "cwd": ["/etc"]})


@pytest.mark.parametrize("field", ["cwd", "transcript_path", "session_id"])
@pytest.mark.parametrize("odd", ["/work\x00/app", "/work/\ud800"])
def test_a_path_no_file_system_has_is_a_payload_error_not_an_internal_one(field: str, odd: str) -> None:
    # issue 21: a NUL byte or a lone surrogate in the payload's cwd was an internal error
    # (ValueError, UnicodeEncodeError from realpath; the session's once-file name) in-process
    # and on the daemon's socket.
    with pytest.raises(PayloadError, match=f"payload field '{field}' holds a NUL byte or a lone surrogate"):
        check_payload(get_event("Stop"), {field: odd})
