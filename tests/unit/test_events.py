"""The event catalog: names, resolution from argument and payload, payload checks."""

from __future__ import annotations

from typing import Any

import pytest

from executor.core.events import EVENTS, check_payload, get_event, resolve_event
from executor.errors import PayloadError

CLAUDE_CODE_EVENTS = (
    "SessionStart", "SessionEnd", "UserPromptSubmit", "PreToolUse", "PermissionRequest",
    "PostToolUse", "PostToolUseFailure", "Notification", "SubagentStart", "SubagentStop",
    "Stop", "PreCompact", "PostCompact", "TaskCompleted", "ConfigChange",
)

TOOL_PAYLOAD: dict[str, Any] = {
    "session_id": "s1", "cwd": "/work/p", "transcript_path": "/tmp/t.jsonl",
    "tool_name": "Bash", "tool_input": {"command": "ls"},
}


@pytest.mark.parametrize("name", CLAUDE_CODE_EVENTS)
def test_catalog_has_every_claude_code_event(name: str) -> None:
    assert get_event(name).name == name


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
        ("PermissionRequest", True, True),
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
    assert sorted(n for n, s in EVENTS.items() if s.plain_text_context) == ["SessionStart", "UserPromptSubmit"]


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


@pytest.mark.parametrize("event", ["PreToolUse", "PermissionRequest", "PostToolUse", "PostToolUseFailure"])
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
