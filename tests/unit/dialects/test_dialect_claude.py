"""Claude Code's dialect (the canonical one): hookcage's answer, and which agent asked. No I/O.

Rendering rules from Claude Code's hooks reference (code.claude.com/docs/en/hooks,
"Decision control"); CodeBuddy's payload captured from CodeBuddy Code 2.163.
"""

from __future__ import annotations

from typing import Any

import pytest
from answers import js, parse, specific, strict_json

from executor.core.events import EVENTS, get_event
from executor.core.protocol import (
    AgentAnswer,
    HookOutcome,
    Verdict,
    fold,
)
from executor.dialects import DIALECTS, detect_dialect, get_dialect, resolve_dialect
from executor.dialects.base import CLAUDE_DECISION_EVENTS, Dialect
from executor.dialects.claude import DIALECT as CLAUDE
from executor.dialects.codebuddy import DIALECT as CODEBUDDY
from executor.errors import PayloadError


class ExitCodes(Dialect):
    """An agent that reads exit codes only: every block is exit 2."""

    name = "exit-codes"
    json_blocks = False


EXIT_CODES = ExitCodes()
PRE = get_event("PreToolUse")
POST = get_event("PostToolUse")
PERM = get_event("PermissionRequest")
STOP = get_event("Stop")
PROMPT = get_event("UserPromptSubmit")


def render(spec: Any, verdict: Verdict, dialect: Dialect = CLAUDE) -> AgentAnswer:
    return dialect.render(spec, verdict)


# -- render -----------------------------------------------------------------------------


def answer_json(answer: AgentAnswer) -> Any:
    assert answer.exit_code == 0
    assert answer.stderr == ""
    assert answer.stdout.endswith("\n")
    return strict_json(answer.stdout)


def test_worktree_create_is_answered_with_the_path_not_json() -> None:
    # code.claude.com/docs/en/hooks, WorktreeCreate: the hook prints the worktree's path on stdout.
    spec = get_event("WorktreeCreate")
    done = fold(spec, [parse("WorktreeCreate", b"/tmp/wt-1\n")])
    assert render(spec, done) == AgentAnswer(0, "/tmp/wt-1\n", "")
    failed = render(spec, fold(spec, [parse("WorktreeCreate", code=1, stderr=b"no space")]))
    assert failed.exit_code == 2 and failed.stdout == ""


def test_render_stop_block_is_json_and_keeps_system_message_and_context() -> None:
    # Issue 10: a "ralph loop" Stop hook blocks with a systemMessage; exit 2 lost it.
    o = parse("Stop", js({"decision": "block", "reason": "keep going: 3 tasks left",
                          "systemMessage": "ralph loop: iteration 4",
                          "hookSpecificOutput": {"hookEventName": "Stop", "additionalContext": "tasks.md"}}))
    assert answer_json(render(STOP, fold(STOP, [o]))) == {
        "decision": "block", "reason": "keep going: 3 tasks left", "systemMessage": "ralph loop: iteration 4",
        "hookSpecificOutput": {"hookEventName": "Stop", "additionalContext": "tasks.md"},
    }


def test_render_blocking_verdict_from_exit_2_is_a_json_block_for_claude() -> None:
    v = fold(STOP, [HookOutcome(hook="a", status="block", reason="tests fail")])
    assert render(STOP, v) == AgentAnswer(0, '{"decision": "block", "reason": "tests fail"}\n', "")


@pytest.mark.parametrize("event", ["UserPromptSubmit", "PostToolUse", "Stop", "SubagentStop", "ConfigChange"])
def test_render_top_level_decision_block_on_the_events_claude_reads_it(event: str) -> None:
    spec = get_event(event)
    v = fold(spec, [HookOutcome(hook="a", status="block", reason="r", system_message="m")])
    assert answer_json(render(spec, v)) == {"decision": "block", "reason": "r", "systemMessage": "m"}


def test_render_task_completed_block_stays_exit_2() -> None:
    # Claude Code reads TaskCompleted's block from exit 2 only (its JSON continue: false is another thing).
    spec = get_event("TaskCompleted")
    v = fold(spec, [HookOutcome(hook="a", status="block", reason="tests fail", system_message="lost")])
    assert render(spec, v) == AgentAnswer(2, "", "tests fail\n")


def test_claude_decision_events_follow_the_reference() -> None:
    reference = {"UserPromptSubmit", "UserPromptExpansion", "PostToolUse", "PostToolUseFailure", "PostToolBatch",
                 "Stop", "SubagentStop", "ConfigChange", "PreCompact", "TaskCreated"}
    assert reference == CLAUDE_DECISION_EVENTS
    expected = {"PreToolUse": "permission", "PermissionRequest": "permission_request",
                "TaskCompleted": "exit2", "TeammateIdle": "exit2", **dict.fromkeys(reference, "decision")}
    for name, form in expected.items():
        assert CLAUDE.block_form(EVENTS[name]) == form, name
    assert all(EXIT_CODES.block_form(spec) == "exit2" for spec in EVENTS.values())


def test_render_deny_is_a_json_permission_decision() -> None:
    v = fold(PRE, [HookOutcome(hook="a", decision="deny", reason="no rm -rf", system_message="guard ran")])
    assert answer_json(render(PRE, v)) == {"systemMessage": "guard ran", "hookSpecificOutput": {
        "hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "no rm -rf"}}


def test_render_exit_2_on_pre_tool_use_becomes_a_deny_and_drops_other_rewrites() -> None:
    v = fold(PRE, [HookOutcome(hook="a", status="block", reason="no deletes"),
                   HookOutcome(hook="b", decision="allow", reason="fine", updated_input={"command": "ls"},
                               additional_context="ctx")])
    assert answer_json(render(PRE, v)) == {"hookSpecificOutput": {
        "hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "no deletes",
        "additionalContext": "ctx"}}


def test_render_deny_without_reason_still_says_something() -> None:
    out = answer_json(render(PRE, fold(PRE, [HookOutcome(hook="a", decision="deny")])))
    assert out["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert out["hookSpecificOutput"]["permissionDecisionReason"].strip()


def test_render_block_and_deny_gives_both_reasons() -> None:
    v = fold(PRE, [HookOutcome(hook="a", status="block", reason="blocked"),
                   HookOutcome(hook="b", decision="deny", reason="denied")])
    reason = answer_json(render(PRE, v))["hookSpecificOutput"]["permissionDecisionReason"]
    assert "blocked" in reason and "denied" in reason


# The exit-code rendering (agents that read no JSON verdict) stays available.


def test_exit_codes_dialect_blocks_with_exit_2_and_reason_on_stderr() -> None:
    v = fold(STOP, [HookOutcome(hook="a", status="block", reason="tests fail", system_message="lost")])
    assert render(STOP, v, EXIT_CODES) == AgentAnswer(2, "", "tests fail\n")
    v = fold(PRE, [HookOutcome(hook="a", decision="deny", reason="no rm -rf")])
    assert render(PRE, v, EXIT_CODES) == AgentAnswer(2, "", "no rm -rf\n")
    assert render(PERM, fold(PERM, [HookOutcome(hook="a", decision="deny", reason="no")]), EXIT_CODES) == (
        AgentAnswer(2, "", "no\n"))


def test_exit_codes_dialect_deny_without_reason_and_both_reasons() -> None:
    answer = render(PRE, fold(PRE, [HookOutcome(hook="a", decision="deny")]), EXIT_CODES)
    assert answer.exit_code == 2 and answer.stdout == "" and answer.stderr.strip()
    v = fold(PRE, [HookOutcome(hook="a", status="block", reason="blocked"),
                   HookOutcome(hook="b", decision="deny", reason="denied")])
    answer = render(PRE, v, EXIT_CODES)
    assert answer.exit_code == 2 and "blocked" in answer.stderr and "denied" in answer.stderr


def test_exit_codes_dialect_answers_non_blocking_verdicts_as_json() -> None:
    v = fold(PRE, [HookOutcome(hook="a", decision="ask", reason="check")])
    assert render(PRE, v, EXIT_CODES) == render(PRE, v)


@pytest.mark.parametrize("dialect", [CLAUDE, CODEBUDDY, EXIT_CODES])
def test_continue_false_wins_over_a_block_in_every_dialect(dialect: Dialect) -> None:
    v = fold(STOP, [HookOutcome(hook="a", status="block", reason="r"),
                    HookOutcome(hook="b", continue_=False, stop_reason="halt")])
    assert answer_json(render(STOP, v, dialect)) == {"continue": False, "stopReason": "halt"}
    v = fold(PRE, [HookOutcome(hook="a", decision="deny", reason="no"),
                   HookOutcome(hook="b", continue_=False, stop_reason="halt")])
    assert answer_json(render(PRE, v, dialect)) == {"continue": False, "stopReason": "halt", "hookSpecificOutput": {
        "hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "no"}}


def test_the_verdict_is_the_same_whatever_the_dialect() -> None:
    # The dialect changes the spelling of the answer, never what was decided.
    outcomes = [HookOutcome(hook="a", status="block", reason="r"), HookOutcome(hook="b", decision="ask")]
    v = fold(PRE, outcomes)
    assert v.blocks and v.reason == "r" and v.decision == "ask"


def test_render_continue_false() -> None:
    v = fold(STOP, [HookOutcome(hook="a", status="block", reason="r"),
                    HookOutcome(hook="b", continue_=False, stop_reason="halt")])
    assert answer_json(render(STOP, v)) == {"continue": False, "stopReason": "halt"}


def test_render_nothing_to_say() -> None:
    assert render(STOP, fold(STOP, [])) == AgentAnswer(0, "{}\n", "")
    assert render(PRE, fold(PRE, [HookOutcome(hook="a")])) == AgentAnswer(0, "{}\n", "")


def test_render_pre_tool_use_allow_with_updated_input() -> None:
    v = fold(PRE, [HookOutcome(hook="a", decision="allow", reason="ok", updated_input={"command": "ls"})])
    assert answer_json(render(PRE, v)) == {"hookSpecificOutput": {
        "hookEventName": "PreToolUse", "permissionDecision": "allow",
        "permissionDecisionReason": "ok", "updatedInput": {"command": "ls"},
    }}


def test_render_ask_from_conflicting_rewrites() -> None:
    v = fold(PRE, [HookOutcome(hook="a", updated_input={"n": 1}), HookOutcome(hook="b", updated_input={"n": 2})])
    out = answer_json(render(PRE, v))
    assert out["hookSpecificOutput"]["permissionDecision"] == "ask"
    assert "updatedInput" not in out["hookSpecificOutput"]
    assert "'a'" in out["hookSpecificOutput"]["permissionDecisionReason"]


def test_render_permission_request_allow() -> None:
    v = fold(PERM, [HookOutcome(hook="a", decision="allow", updated_input={"command": "ls"})])
    assert answer_json(render(PERM, v)) == {"hookSpecificOutput": {
        "hookEventName": "PermissionRequest",
        "decision": {"behavior": "allow", "updatedInput": {"command": "ls"}},
    }}


def test_render_permission_request_deny_is_the_json_behavior() -> None:
    v = fold(PERM, [HookOutcome(hook="a", decision="deny", reason="no", system_message="m")])
    assert answer_json(render(PERM, v)) == {"systemMessage": "m", "hookSpecificOutput": {
        "hookEventName": "PermissionRequest", "decision": {"behavior": "deny", "message": "no"}}}
    v = fold(PERM, [HookOutcome(hook="a", status="block", reason="exit 2 said no")])
    assert answer_json(render(PERM, v))["hookSpecificOutput"]["decision"] == {
        "behavior": "deny", "message": "exit 2 said no"}


def test_codebuddy_spells_the_input_rewrite_modified_input() -> None:
    v = fold(PRE, [HookOutcome(hook="a", decision="allow", updated_input={"command": "ls"})])
    assert answer_json(render(PRE, v, CODEBUDDY)) == {"hookSpecificOutput": {
        "hookEventName": "PreToolUse", "permissionDecision": "allow", "modifiedInput": {"command": "ls"}}}
    assert "updatedInput" in answer_json(render(PRE, v))["hookSpecificOutput"]
    # PermissionRequest's rewrite sits in decision.updatedInput for both agents.
    v = fold(PERM, [HookOutcome(hook="a", decision="allow", updated_input={"command": "ls"})])
    assert render(PERM, v, CODEBUDDY) == render(PERM, v)


def test_codebuddy_reads_blocks_from_the_same_json() -> None:
    v = fold(PROMPT, [HookOutcome(hook="a", status="block", reason="no secrets", system_message="m")])
    assert render(PROMPT, v, CODEBUDDY) == render(PROMPT, v)
    assert answer_json(render(PROMPT, v, CODEBUDDY))["decision"] == "block"


def test_render_additional_context_and_system_message() -> None:
    v = fold(PROMPT, [HookOutcome(hook="a", additional_context="ctx", system_message="msg", suppress_output=True)])
    assert answer_json(render(PROMPT, v)) == {
        "suppressOutput": True, "systemMessage": "msg",
        "hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": "ctx"},
    }


def test_render_updated_tool_output() -> None:
    v = fold(POST, [HookOutcome(hook="a", updated_output={"stdout": "[redacted]"})])
    assert answer_json(render(POST, v)) == {"hookSpecificOutput": {
        "hookEventName": "PostToolUse", "updatedToolOutput": {"stdout": "[redacted]"},
    }}


def test_render_updated_tool_output_null() -> None:
    v = fold(POST, [parse("PostToolUse", specific("PostToolUse", updatedToolOutput=None))])
    assert answer_json(render(POST, v)) == {"hookSpecificOutput": {
        "hookEventName": "PostToolUse", "updatedToolOutput": None,
    }}


def test_render_hook_errors_reach_the_user() -> None:
    v = fold(STOP, [HookOutcome(hook="x", status="error", error="timed out after 60 s")])
    assert "timed out after 60 s" in answer_json(render(STOP, v))["systemMessage"]


def test_render_from_raw_hook_output_end_to_end() -> None:
    outcomes = [
        parse("PreToolUse", specific("PreToolUse", permissionDecision="ask", permissionDecisionReason="check")),
        parse("PreToolUse", b"chatter that is not context"),
        parse("PreToolUse", code=1, stderr=b"oops"),
    ]
    out = answer_json(render(PRE, fold(PRE, outcomes)))
    assert out["hookSpecificOutput"]["permissionDecision"] == "ask"
    assert "oops" in out["systemMessage"]


def test_render_keeps_non_ascii_readable() -> None:
    v = Verdict(event="Stop", system_message="héllo ✓")
    assert render(STOP, v).stdout == '{"systemMessage": "héllo ✓"}\n'


def test_render_output_can_always_be_written_as_utf8() -> None:
    # Regression: a hook answering {"systemMessage": "\ud800"} (a lone surrogate,
    # valid JSON escape) made render() return text that could not be encoded,
    # and writing it to stdout crashed dispatch.
    o = parse("PreToolUse", b'{"systemMessage": "x\\ud800", "hookSpecificOutput": {"updatedInput": {"c": "\\udfff"}}}')
    answer = render(PRE, fold(PRE, [o]))
    answer.stdout.encode("utf-8")
    out = answer_json(answer)
    assert out["systemMessage"] == "x\\ud800"  # shown, not passed on raw
    assert out["hookSpecificOutput"]["updatedInput"] == {"c": "\udfff"}


# -- which agent asked --------------------------------------------------------------------

CODEBUDDY_PAYLOAD = {  # what CodeBuddy Code 2.163 sent a UserPromptSubmit hook (captured)
    "session_id": "01a20a95-fd05-7c6d-8e81-e972a7eb127f", "cwd": "/tmp/cbproj",
    "transcript_path": "/tmp/cbhome/.codebuddy/projects/tmp-cbproj/01a20a95.jsonl",
    "hook_event_name": "UserPromptSubmit", "prompt": "hello", "is_internal_continuation": False,
    "permission_mode": "default", "client": "CLI", "version": "2.163.0",
    "generation_id": "01a20a95febc7bb3a7768f88f1eeddcc", "model": "default-model",
}
CLAUDE_PAYLOAD = {
    "session_id": "abc123", "transcript_path": "/h/.claude/projects/p/abc123.jsonl", "cwd": "/p",
    "permission_mode": "default", "hook_event_name": "SessionStart", "source": "startup", "model": "claude-x",
}


def test_the_registry_knows_claude_and_codebuddy() -> None:
    assert next(iter(DIALECTS)) == "claude" and "codebuddy" in DIALECTS  # other agents follow, sorted
    assert get_dialect("claude") is CLAUDE and get_dialect("codebuddy") is CODEBUDDY


def test_an_unknown_agent_lists_the_known_ones() -> None:
    with pytest.raises(PayloadError, match=r"unknown agent 'nope'; known agents: claude, codebuddy"):
        get_dialect("nope")


def test_codebuddy_is_recognised_from_its_payload() -> None:
    assert detect_dialect(CODEBUDDY_PAYLOAD) is CODEBUDDY
    assert detect_dialect(CLAUDE_PAYLOAD) is CLAUDE
    assert detect_dialect({}) is CLAUDE


@pytest.mark.parametrize("missing", ["client", "version", "generation_id"])
def test_codebuddy_needs_every_key_it_is_recognised_by(missing: str) -> None:
    payload = {k: v for k, v in CODEBUDDY_PAYLOAD.items() if k != missing}
    assert detect_dialect(payload) is CLAUDE
    assert detect_dialect({**CODEBUDDY_PAYLOAD, missing: 1}) is CLAUDE  # not a string: not CodeBuddy's


def test_cursor_like_payload_with_generation_id_alone_is_not_codebuddy() -> None:
    assert detect_dialect({"conversation_id": "c", "generation_id": "g", "hook_event_name": "stop",
                           "workspace_roots": ["/p"]}) is DIALECTS["cursor"]  # Cursor's own


def test_agent_option_wins_over_recognition() -> None:
    assert resolve_dialect("claude", CODEBUDDY_PAYLOAD) is CLAUDE
    assert resolve_dialect("codebuddy", CLAUDE_PAYLOAD) is CODEBUDDY
    assert resolve_dialect(None, CODEBUDDY_PAYLOAD) is CODEBUDDY
    with pytest.raises(PayloadError):
        resolve_dialect("", CLAUDE_PAYLOAD)


