"""Codex's dialect: its files (JSON and TOML), matchers, payload and strict answers. No Docker.

Sources, named by each golden: D = developers.openai.com/codex/hooks; S = openai/codex codex-rs:
S/config = config/src/hook_config.rs, S/discovery = hooks/src/engine/discovery.rs,
S/common = hooks/src/events/common.rs, S/parser = hooks/src/engine/output_parser.rs,
S/schema = hooks/src/schema.rs.
"""

from __future__ import annotations

import json
import tomllib
from typing import Any

import pytest

from executor.core.events import get_event
from executor.core.hooks import Scope
from executor.core.protocol import HookOutcome, Verdict, fold, restrict
from executor.dialects import detect_dialect, selects
from executor.dialects.base import Where
from executor.dialects.codex import DIALECT as CODEX
from executor.dialects.codex import invalid_answer

PRE = get_event("PreToolUse")
POST = get_event("PostToolUse")
PERM = get_event("PermissionRequest")
STOP = get_event("Stop")
PROMPT = get_event("UserPromptSubmit")
COMPACT = get_event("PreCompact")

# S/schema PreToolUseCommandInput (session_id, turn_id, transcript_path, cwd, hook_event_name, model,
# permission_mode, tool_name, tool_input {command}, tool_use_id).
PRE_TOOL_USE = {
    "session_id": "019d-s", "turn_id": "019d-t", "transcript_path": None, "cwd": "/repo",
    "hook_event_name": "PreToolUse", "model": "gpt-5-codex", "permission_mode": "default",
    "tool_name": "Bash", "tool_input": {"command": "rm -rf build"}, "tool_use_id": "call_1",
}

# S/config hooks_tests.rs shape; D "config.toml" example.
CONFIG_TOML = """
model = "gpt-5-codex"

[features]
hooks = true

[[hooks.PreToolUse]]
matcher = "^Bash$"

[[hooks.PreToolUse.hooks]]
type = "command"
command = "python3 /tmp/pre.py"
timeout = 10
statusMessage = "checking"

[hooks.state."/repo/.codex/config.toml:pre_tool_use:0:0"]
enabled = true
trusted_hash = "abc"
"""


def js(value: Any) -> bytes:
    return json.dumps(value).encode()


def parse(data: Any, source: str = "/repo/.codex/hooks.json", scope: Scope = Scope.PROJECT) -> Any:
    return CODEX.parse(data, scope=scope, source=source, project_root="/repo")


def handler(**extra: Any) -> dict[str, Any]:
    return {"type": "command", "command": "echo hi", **extra}


def hooks_json(event: str = "PreToolUse", matcher: str | None = None, **extra: Any) -> dict[str, Any]:
    group: dict[str, Any] = {"hooks": [handler(**extra)]}
    if matcher is not None:
        group["matcher"] = matcher
    return {"description": "repo hooks", "hooks": {event: [group]}}


def answer(event: Any, stdout: bytes = b"", code: int | None = 0, stderr: bytes = b"") -> HookOutcome:
    return CODEX.read_answer(event, "h", code, stdout, stderr)


def rendered(event: Any, verdict: Verdict) -> Any:
    out = CODEX.render(event, verdict)
    assert (out.exit_code, out.stderr) == (0, "")
    return json.loads(out.stdout)


# -- files ------------------------------------------------------------------------------------


def test_sources_in_every_layer_and_codex_home() -> None:
    files = [(s.scope, s.path, s.format) for s in CODEX.sources(Where("/repo", "/home/u", {"CODEX_HOME": "/ch"}))]
    assert files == [
        (Scope.MANAGED, "/etc/codex/requirements.toml", "toml"),
        (Scope.MANAGED, "/etc/codex/managed_config.toml", "toml"),
        (Scope.MANAGED, "/etc/codex/config.toml", "toml"),
        (Scope.MANAGED, "/etc/codex/hooks.json", "json"),
        (Scope.USER, "/ch/hooks.json", "json"),
        (Scope.USER, "/ch/config.toml", "toml"),
        (Scope.PROJECT, "/repo/.codex/hooks.json", "json"),
        (Scope.PROJECT, "/repo/.codex/config.toml", "toml"),
    ]
    assert CODEX.sources(Where(None, "/home/u", {}))[4].path == "/home/u/.codex/hooks.json"


def test_hooks_json_golden() -> None:
    result = parse(hooks_json(matcher="Bash", timeout=30, statusMessage="checking", commandWindows="x.cmd"))
    assert result.problems == ()
    (hook,) = result.hooks
    assert (hook.event, hook.timeout, hook.command, hook.agent) == ("PreToolUse", 30.0, "echo hi", "codex")


def test_config_toml_hooks_table_skips_state_and_other_settings() -> None:
    result = parse(tomllib.loads(CONFIG_TOML), source="/repo/.codex/config.toml")
    assert result.problems == ()
    (hook,) = result.hooks
    assert (hook.command, hook.timeout, hook.matcher.source) == ("python3 /tmp/pre.py", 10.0, "^Bash$")


def test_requirements_toml_hooks_and_its_managed_dir() -> None:
    # S/config ManagedHooksRequirementsToml: managed_dir, windows_managed_dir, flattened events.
    data = {"allow_managed_hooks_only": True,
            "hooks": {"managed_dir": "/opt/hooks", "Stop": [{"hooks": [handler()]}]}}
    result = parse(data, source="/etc/codex/requirements.toml", scope=Scope.MANAGED)
    assert result.problems == () and [h.event for h in result.hooks] == ["Stop"]
    assert not result.managed_only  # Codex's switch for its own loader


def test_features_hooks_false_turns_the_scope_off() -> None:
    result = parse({"features": {"codex_hooks": False}, "hooks": {"Stop": [{"hooks": [handler()]}]}},
                   source="/home/u/.codex/config.toml", scope=Scope.USER)
    assert result.disable_all and result.disable_reason == "[features] codex_hooks = false"


def test_the_default_timeout_is_600_seconds_and_timeout_sec_is_read() -> None:
    # S/discovery: timeout_sec.unwrap_or(600).max(1).
    assert parse(hooks_json()).hooks[0].timeout == 600.0
    assert parse(hooks_json(timeoutSec=7)).hooks[0].timeout == 7.0
    zero = parse(hooks_json(timeout=0))
    assert zero.hooks[0].timeout == 1.0 and zero.hooks[0].invalid is None
    bad = parse(hooks_json(timeoutSec="soon"))
    assert [p.path for p in bad.errors] == ["$.hooks.PreToolUse[0].hooks[0].timeoutSec"]
    assert "seconds" in bad.errors[0].message


@pytest.mark.parametrize("event", [
    "PreToolUse", "PermissionRequest", "PostToolUse", "PreCompact", "PostCompact", "SessionStart",
    "UserPromptSubmit", "Stop", "SubagentStart", "SubagentStop", "SessionEnd", "Interrupt",
])
def test_codex_events(event: str) -> None:
    (hook,) = parse(hooks_json(event)).hooks
    assert hook.event == event
    assert CODEX.native_event(CODEX.event_spec(event)) == event


@pytest.mark.parametrize("event", ["Notification", "WorktreeCreate", "BeforeTool"])
def test_events_codex_never_fires_are_unknown(event: str) -> None:
    result = parse(hooks_json(event))
    assert result.hooks == ()
    assert str(result.errors[0]).startswith(f"codex hook file /repo/.codex/hooks.json: $.hooks.{event}: unknown event")


@pytest.mark.parametrize("data", [
    [], {"hooks": []}, {"hooks": {"Stop": {}}}, {"hooks": {"Stop": [1]}}, {"hooks": {"Stop": [{"matcher": 1}]}},
    {"hooks": {"Stop": [{"hooks": {}}]}}, {"hooks": {"Stop": [{"hooks": [handler(command="")]}]}},
    {"hooks": {"Stop": [{"hooks": [handler(env=[1])]}]}}, {"features": {"hooks": "no"}},
])
def test_bad_files_are_reported_never_raised(data: Any) -> None:
    assert parse(data, source="/repo/.codex/config.toml").errors


def test_a_bad_matcher_is_a_warning_and_never_fires() -> None:
    result = parse(hooks_json(matcher="["))
    assert [p.severity for p in result.problems] == ["warning"]
    assert "Codex skips the group" in result.problems[0].message
    assert not selects(PRE, result.hooks[0], PRE_TOOL_USE)


def test_prompt_and_agent_handlers_are_listed_not_run() -> None:
    (hook,) = parse({"hooks": {"Stop": [{"hooks": [{"type": "prompt", "prompt": "p"}]}]}}).hooks
    assert hook.type == "prompt"


# -- matchers (S/common tests) --------------------------------------------------------------------


def matches(matcher: str | None, tool: str) -> bool:
    (hook,) = parse(hooks_json(matcher=matcher)).hooks
    return selects(PRE, hook, {**PRE_TOOL_USE, "tool_name": tool})


@pytest.mark.parametrize(("matcher", "tool", "expected"), [
    (None, "Bash", True), ("*", "Write", True), ("", "Edit", True),
    ("Edit|Write", "Edit", True), ("Edit|Write", "Bash", False),
    ("Bash", "BashOutput", False), ("mcp__memory", "mcp__memory__create_entities", False),
    ("^Bash", "BashOutput", True), ("^Bash$", "BashOutput", False),
    ("mcp__memory__.*", "mcp__memory__create_entities", True),
    ("mcp__.*__write.*", "mcp__filesystem__read_file", False),
    # apply_patch is also matched as Edit and Write (D "apply_patch ... Edit|Write").
    ("Write", "apply_patch", True), ("^Edit$", "apply_patch", True), ("Edit, Write", "apply_patch", False),
])
def test_matchers(matcher: str | None, tool: str, expected: bool) -> None:
    assert matches(matcher, tool) is expected


# -- payload --------------------------------------------------------------------------------------


def test_a_codex_payload_is_recognised_and_passed_through() -> None:
    assert detect_dialect(PRE_TOOL_USE) is CODEX
    assert detect_dialect({**PRE_TOOL_USE, "turn_id": None}) is not CODEX
    spec = CODEX.resolve_event(None, PRE_TOOL_USE)
    assert CODEX.canonical_payload(spec, PRE_TOOL_USE) == PRE_TOOL_USE
    assert json.loads(CODEX.hook_input(spec, PRE_TOOL_USE).stdin) == PRE_TOOL_USE


# -- answers in (S/parser) ------------------------------------------------------------------------


def test_golden_answers() -> None:
    # D "PreToolUse" examples.
    assert answer(PRE, b"{}").decision is None
    deny = answer(PRE, js({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                                  "permissionDecisionReason": "rm -rf blocked"}}))
    assert (deny.decision, deny.reason) == ("deny", "rm -rf blocked")
    rewrite = answer(PRE, js({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow",
                                                     "updatedInput": {"command": "rm -rf ./build"}}}))
    assert (rewrite.decision, rewrite.updated_input) == ("allow", {"command": "rm -rf ./build"})
    legacy = answer(PRE, js({"decision": "block", "reason": "no"}))
    assert legacy.status == "block"


def test_exit_2_blocks_only_with_a_reason_on_stderr() -> None:
    assert answer(PRE, code=2, stderr=b"no deletes").status == "block"
    silent = answer(PRE, code=2)
    assert silent.status == "error" and "Codex does not block" in (silent.error or "")
    assert answer(PRE, code=1, stderr=b"oops").status == "error"


@pytest.mark.parametrize(("event", "data", "why"), [
    ("PreToolUse", {"continue": False}, "unsupported continue:false"),
    ("PreToolUse", {"suppressOutput": True}, "unsupported suppressOutput"),
    ("PreToolUse", {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "ask"}},
     "unsupported permissionDecision:ask"),
    ("PreToolUse", {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow"}},
     "unsupported permissionDecision:allow"),
    ("PreToolUse", {"hookSpecificOutput": {"hookEventName": "PreToolUse", "updatedInput": {}}},
     "updatedInput without permissionDecision:allow"),
    ("PreToolUse", {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny"}},
     "without a non-empty permissionDecisionReason"),
    ("PreToolUse", {"decision": "approve"}, "unsupported decision:approve"),
    ("PreToolUse", {"reason": "x"}, "reason without decision"),
    ("PermissionRequest", {"hookSpecificOutput": {"hookEventName": "PermissionRequest",
                                                  "decision": {"behavior": "allow", "updatedInput": {}}}},
     "unsupported updatedInput"),
    ("PostToolUse", {"suppressOutput": True}, "unsupported suppressOutput"),
])
def test_what_codex_refuses_is_a_failed_hook(event: str, data: dict[str, Any], why: str) -> None:
    assert why in (invalid_answer(event, data) or "")
    outcome = answer(get_event(event), js(data))
    assert outcome.status == "error" and why in (outcome.error or "")
    assert outcome.decision is None and outcome.updated_input is None and outcome.continue_


def test_a_block_without_a_reason_does_not_block() -> None:
    outcome = answer(STOP, js({"decision": "block", "systemMessage": "m"}))
    assert (outcome.status, outcome.system_message) == ("ok", "m")
    assert outcome.notes
    assert answer(STOP, js({"decision": "block", "reason": "keep going"})).status == "block"


def test_the_rewrite_passes_only_when_granted() -> None:
    outcome = answer(PRE, js({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow",
                                                     "updatedInput": {"command": "ls"}}}))
    kept, _ = restrict(outcome, frozenset({"rewrite_input", "approve"}))
    assert (kept.decision, kept.updated_input) == ("allow", {"command": "ls"})
    gone, dropped = restrict(outcome, frozenset())
    assert (gone.decision, gone.updated_input, dropped) == (None, None, ("approve", "rewrite_input"))


# -- render: only what Codex reads (S/schema, deny_unknown_fields) ---------------------------------


def test_render_nothing_and_a_bare_allow_are_empty() -> None:
    assert rendered(PRE, fold(PRE, [])) == {}
    assert rendered(PRE, fold(PRE, [HookOutcome(hook="a", decision="allow", suppress_output=True)])) == {}


def test_render_deny_rewrite_and_context_on_pre_tool_use() -> None:
    v = fold(PRE, [HookOutcome(hook="a", status="block", reason="no deletes", system_message="m",
                               additional_context="ctx")])
    assert rendered(PRE, v) == {"systemMessage": "m", "hookSpecificOutput": {
        "hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "no deletes",
        "additionalContext": "ctx"}}
    r = fold(PRE, [HookOutcome(hook="a", updated_input={"command": "ls"})])
    assert rendered(PRE, r) == {"hookSpecificOutput": {
        "hookEventName": "PreToolUse", "permissionDecision": "allow", "updatedInput": {"command": "ls"}}}


def test_render_ask_and_stop_on_pre_tool_use_are_denies() -> None:
    ask = rendered(PRE, fold(PRE, [HookOutcome(hook="a", decision="ask", reason="really?")]))["hookSpecificOutput"]
    assert ask["permissionDecision"] == "deny" and "really?" in ask["permissionDecisionReason"]
    stop = rendered(PRE, fold(PRE, [HookOutcome(hook="a", continue_=False, stop_reason="halt")]))
    assert stop == {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                           "permissionDecisionReason": "halt"}}


def test_render_permission_request() -> None:
    deny = rendered(PERM, fold(PERM, [HookOutcome(hook="a", decision="deny", reason="no")]))
    assert deny == {"hookSpecificOutput": {"hookEventName": "PermissionRequest",
                                           "decision": {"behavior": "deny", "message": "no"}}}
    allow = rendered(PERM, fold(PERM, [HookOutcome(hook="a", decision="allow", updated_input={"command": "x"})]))
    assert allow == {"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "allow"}}}
    assert rendered(PERM, fold(PERM, [HookOutcome(hook="a", decision="ask")])) == {}


def test_render_blocks_on_decision_events_and_stop_has_no_specific_output() -> None:
    v = fold(STOP, [HookOutcome(hook="a", status="block", reason="keep going", additional_context="lost")])
    assert rendered(STOP, v) == {"decision": "block", "reason": "keep going"}
    p = fold(PROMPT, [HookOutcome(hook="a", status="block", reason="no", additional_context="ctx",
                                  suppress_output=True)])
    assert rendered(PROMPT, p) == {"decision": "block", "reason": "no", "suppressOutput": True,
                                   "hookSpecificOutput": {"hookEventName": "UserPromptSubmit",
                                                          "additionalContext": "ctx"}}
    post = fold(POST, [HookOutcome(hook="a", status="block", reason="bad", suppress_output=True)])
    assert rendered(POST, post) == {"decision": "block", "reason": "bad"}


def test_render_pre_compact_block_is_continue_false() -> None:
    v = fold(COMPACT, [HookOutcome(hook="a", status="block", reason="not now")])
    assert rendered(COMPACT, v) == {"continue": False, "stopReason": "not now"}


def test_render_sanitises() -> None:
    v = fold(STOP, [HookOutcome(hook="a", status="block", reason="x\x1b[2Jy", system_message="\u202em")])
    out = rendered(STOP, v)
    assert "\x1b" not in out["reason"] and "\u202e" not in out["systemMessage"]
