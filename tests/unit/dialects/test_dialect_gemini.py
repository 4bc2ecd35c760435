"""Gemini CLI's dialect: its files, events, payload and answers. No Docker, literal inputs.

Sources (google-gemini/gemini-cli at 5411f113, 2026-08-21), named by each golden:
G/docs = docs/hooks/reference.md, G/runner = packages/core/src/hooks/hookRunner.ts,
G/types = packages/core/src/hooks/types.ts, G/planner = packages/core/src/hooks/hookPlanner.ts,
G/handler = packages/core/src/hooks/hookEventHandler.ts, G/utils = packages/core/src/scheduler/hook-utils.ts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from executor.core.events import get_event
from executor.core.hooks import Scope
from executor.core.protocol import HookOutcome, Verdict, fold, restrict
from executor.dialects import detect_dialect, get_dialect
from executor.dialects.base import Where
from executor.dialects.gemini import DIALECT as GEMINI
from executor.errors import PayloadError
from executor.executor import HookExecutor
from executor.gates.trust import TrustSubject
from executor.sandbox import FakeSandbox, RunRequest, RunResult
from executor.settings import load_settings

PRE = get_event("PreToolUse")
POST = get_event("PostToolUse")
STOP = get_event("Stop")
PROMPT = get_event("UserPromptSubmit")

# G/docs "BeforeTool" input (base fields + tool_name, tool_input); tool per base-declarations.ts.
BEFORE_TOOL = {
    "session_id": "s1", "transcript_path": "/h/.gemini/tmp/x/chats/s1.json", "cwd": "/repo",
    "hook_event_name": "BeforeTool", "timestamp": "2026-08-21T10:00:00.000Z",
    "tool_name": "run_shell_command", "tool_input": {"command": "rm -rf build", "description": "clean"},
}


def js(value: Any) -> bytes:
    return json.dumps(value).encode()


def answer(event: Any, stdout: bytes = b"", code: int | None = 0, stderr: bytes = b"") -> HookOutcome:
    return GEMINI.read_answer(event, "h", code, stdout, stderr)


def rendered(event: Any, verdict: Verdict) -> Any:
    out = GEMINI.render(event, verdict)
    assert (out.exit_code, out.stderr) == (0, "")
    return json.loads(out.stdout)


def parse(data: Any, scope: Scope = Scope.PROJECT) -> Any:
    return GEMINI.parse(data, scope=scope, source="/repo/.gemini/settings.json", project_root="/repo")


def group(matcher: str | None = None, **handler: Any) -> dict[str, Any]:
    g: dict[str, Any] = {"hooks": [{"type": "command", "command": "echo hi", **handler}]}
    if matcher is not None:
        g["matcher"] = matcher
    return g


# -- files ------------------------------------------------------------------------------


def test_sources_follow_gemini_cli_home_and_name_the_trust_condition() -> None:
    # G packages/core/src/utils/paths.ts homedir(): GEMINI_CLI_HOME replaces the home, not ~/.gemini.
    where = Where("/repo", "/home/u", {"GEMINI_CLI_HOME": "/alt"})
    files = [(s.scope, s.path) for s in GEMINI.sources(where)]
    assert files == [
        (Scope.MANAGED, "/etc/gemini-cli/system-defaults.json"),
        (Scope.MANAGED, "/etc/gemini-cli/settings.json"),
        (Scope.USER, "/alt/.gemini/settings.json"),
        (Scope.PROJECT, "/repo/.gemini/settings.json"),
    ]
    assert GEMINI.sources(Where("/repo", "/home/u", {}))[2].path == "/home/u/.gemini/settings.json"
    assert "trusted folder" in GEMINI.sources(where)[3].condition


def test_a_settings_file_parses_with_milliseconds_names_env_and_native_events() -> None:
    # G/docs "Configuration" example (timeout 5000 ms, name, description, env; sequential on the group).
    hooks = parse({"theme": "dark", "hooks": {"BeforeTool": [{
        "matcher": "write_file|replace", "sequential": True,
        "hooks": [{"type": "command", "command": "$GEMINI_PROJECT_DIR/.gemini/hooks/x.sh", "name": "security-check",
                   "description": "checks", "timeout": 5000, "env": {"K": "V"}}]}]}})
    assert hooks.problems == ()
    (hook,) = hooks.hooks
    assert (hook.event, hook.timeout, hook.name, hook.env, hook.agent) == (
        "PreToolUse", 5.0, "security-check", (("K", "V"),), "gemini")


def test_the_default_timeout_is_sixty_seconds() -> None:
    # G/runner DEFAULT_HOOK_TIMEOUT = 60000 (ms).
    assert parse({"hooks": {"AfterAgent": [group()]}}).hooks[0].timeout == 60.0


@pytest.mark.parametrize(("native", "canonical"), [
    ("BeforeTool", "PreToolUse"), ("AfterTool", "PostToolUse"), ("BeforeAgent", "UserPromptSubmit"),
    ("AfterAgent", "Stop"), ("PreCompress", "PreCompact"), ("SessionStart", "SessionStart"),
    ("SessionEnd", "SessionEnd"), ("Notification", "Notification"),
    ("BeforeModel", "BeforeModel"), ("AfterModel", "AfterModel"), ("BeforeToolSelection", "BeforeToolSelection"),
])
def test_the_event_map(native: str, canonical: str) -> None:
    # G/types HookEventName; twins per packages/cli/src/commands/hooks/migrate.ts EVENT_MAPPING.
    assert parse({"hooks": {native: [group()]}}).hooks[0].event == canonical
    assert GEMINI.event_spec(native).name == canonical
    assert GEMINI.native_event(GEMINI.event_spec(native)) == native


@pytest.mark.parametrize("name", ["PreToolUse", "Stop", "PermissionRequest", "Nope"])
def test_canonical_names_gemini_never_fires_are_unknown_in_its_files(name: str) -> None:
    result = parse({"hooks": {name: [group()]}})
    assert result.hooks == ()
    (problem,) = result.errors
    assert problem.path == f"$.hooks.{name}" and "unknown event" in problem.message
    assert str(problem).startswith("gemini hook file /repo/.gemini/settings.json: ")


def test_hooks_config_fields_inside_hooks_are_not_events() -> None:
    # G/types HOOKS_CONFIG_FIELDS = enabled, disabled, notifications.
    result = parse({"hooks": {"enabled": True, "disabled": [], "notifications": True, "SessionStart": [group()]}})
    assert result.problems == () and len(result.hooks) == 1


def test_hooks_config_enabled_false_and_disabled_names() -> None:
    # packages/cli/src/config/settingsSchema.ts hooksConfig.enabled / hooksConfig.disabled (names or commands).
    off = parse({"hooksConfig": {"enabled": False}, "hooks": {"SessionStart": [group()]}})
    assert off.disable_all and off.disable_reason == "hooksConfig.enabled: false"
    some = parse({"hooksConfig": {"disabled": ["guard", "echo two"]}, "hooks": {"BeforeTool": [
        {"hooks": [{"type": "command", "command": "echo one", "name": "guard"},
                   {"type": "command", "command": "echo two"}, {"type": "command", "command": "echo three"}]}]}})
    assert [h.enabled for h in some.hooks] == [False, False, True]
    bad = parse({"hooksConfig": {"enabled": "no", "disabled": "x"}, "hooks": {}})
    assert [p.path for p in bad.errors] == ["$.hooksConfig.enabled", "$.hooksConfig.disabled"]


@pytest.mark.parametrize(("handler", "key", "message"), [
    ({"timeout": "5s"}, "timeout", "milliseconds"),
    ({"timeout": 0}, "timeout", "milliseconds"),
    ({"timeout": True}, "timeout", "milliseconds"),
    ({"command": 3}, "command", "non-empty string"),
    ({"env": ["K=V"]}, "env", "must be an object"),
    ({"name": 7}, "name", "must be a string"),
])
def test_bad_handler_keys_are_named(handler: dict[str, Any], key: str, message: str) -> None:
    result = parse({"hooks": {"BeforeTool": [group(**handler)]}})
    (hook,) = result.hooks
    assert hook.invalid
    paths = [p.path for p in result.errors]
    assert f"$.hooks.BeforeTool[0].hooks[0].{key}" in paths
    assert any(message in p.message for p in result.errors)


def test_bad_shapes_never_raise() -> None:
    for data in ([], {"hooks": []}, {"hooks": {"BeforeTool": {}}}, {"hooks": {"BeforeTool": [3]}},
                 {"hooks": {"BeforeTool": [{"matcher": 3, "hooks": []}]}}, {"hooksConfig": 3}):
        assert parse(data).errors
    warned = parse({"hooks": {"BeforeTool": [{**group(), "sequential": "yes"}]}})
    assert [p.path for p in warned.problems] == ["$.hooks.BeforeTool[0].sequential"]


# -- matchers (G/planner) ---------------------------------------------------------------------


def fires(matcher: str | None, event: str, **payload: Any) -> bool:
    from executor.dialects import selects

    (hook,) = parse({"hooks": {event: [group(matcher)]}}).hooks
    spec = GEMINI.event_spec(event)
    return selects(spec, hook, GEMINI.canonical_payload(spec, {"hook_event_name": event, **payload}))


def test_tool_matchers_are_unanchored_regular_expressions() -> None:
    # matchesToolName: new RegExp(matcher).test(toolName).
    assert fires("file", "BeforeTool", tool_name="write_file", tool_input={})
    assert fires("write_file|replace", "BeforeTool", tool_name="replace", tool_input={})
    assert not fires("^write", "BeforeTool", tool_name="run_shell_command", tool_input={})
    assert fires("  run_shell  ", "BeforeTool", tool_name="run_shell_command", tool_input={})  # trimmed
    assert fires("*", "AfterTool", tool_name="anything", tool_input={})


def test_an_invalid_regular_expression_is_an_exact_name_and_one_re2_refuses_is_reported() -> None:
    # G/planner: a RegExp that throws is compared with the tool name exactly.
    assert fires("mcp_x_(", "BeforeTool", tool_name="mcp_x_(", tool_input={})
    result = parse({"hooks": {"BeforeTool": [group("(?=x)")]}})
    assert [p.path for p in result.problems] == ["$.hooks.BeforeTool[0].matcher"]
    assert not fires("(?=x)", "BeforeTool", tool_name="x", tool_input={})


def test_trigger_matchers_are_exact_and_other_events_ignore_matchers() -> None:
    # matchesTrigger: matcher === trigger, for SessionStart (source), SessionEnd (reason), PreCompress (trigger).
    assert fires("startup", "SessionStart", source="startup")
    assert not fires("start", "SessionStart", source="startup")
    assert fires("auto", "PreCompress", trigger="auto")
    assert not fires("manual", "PreCompress", trigger="auto")
    # Notification passes no context: every hook runs (Claude Code's notification_type matcher does not apply).
    assert fires("idle_prompt", "Notification", notification_type="ToolPermission", message="m")


# -- payload in -------------------------------------------------------------------------------


def test_a_before_tool_payload_is_recognised_and_made_canonical() -> None:
    assert detect_dialect(BEFORE_TOOL) is GEMINI
    spec = GEMINI.resolve_event(None, BEFORE_TOOL)
    assert spec.name == "PreToolUse"
    canonical = GEMINI.canonical_payload(spec, BEFORE_TOOL)
    assert canonical["hook_event_name"] == "PreToolUse"
    assert canonical["tool_name"] == "Bash"
    assert canonical["tool_input"] == BEFORE_TOOL["tool_input"]
    # Gemini's own hooks read Gemini's payload as it was sent, with Gemini's variables.
    hook_input = GEMINI.hook_input(spec, BEFORE_TOOL)
    assert json.loads(hook_input.stdin) == BEFORE_TOOL
    assert hook_input.env == {"GEMINI_SESSION_ID": "s1", "GEMINI_CWD": "/repo"}


def test_recognition_needs_a_gemini_event_name() -> None:
    assert detect_dialect({"hook_event_name": "AfterAgent", "prompt": "p"}) is GEMINI
    assert detect_dialect({"hook_event_name": "SessionStart", "timestamp": "t", "source": "startup"}) is GEMINI
    assert detect_dialect({"hook_event_name": "SessionStart", "source": "startup"}) is not GEMINI
    assert detect_dialect({"hook_event_name": "PreToolUse", "timestamp": "t"}) is not GEMINI


def test_after_agent_carries_the_response_as_last_assistant_message() -> None:
    # G/handler fireAfterAgentEvent: prompt, prompt_response, stop_hook_active.
    payload = {"hook_event_name": "AfterAgent", "prompt": "p", "prompt_response": "done", "stop_hook_active": False}
    assert GEMINI.canonical_payload(STOP, payload)["last_assistant_message"] == "done"


def test_event_argument_and_payload_must_agree() -> None:
    assert GEMINI.resolve_event("BeforeTool", BEFORE_TOOL).name == "PreToolUse"
    assert GEMINI.resolve_event("PreToolUse", BEFORE_TOOL).name == "PreToolUse"
    with pytest.raises(PayloadError, match="differs"):
        GEMINI.resolve_event("AfterTool", BEFORE_TOOL)
    with pytest.raises(PayloadError, match=r"unknown event 'Nope' \(Gemini CLI\)"):
        GEMINI.resolve_event("Nope", {})


# -- answers in (G/runner, G/types) -------------------------------------------------------------


def test_golden_answers() -> None:
    # G/docs "BeforeTool" examples.
    assert answer(PRE, js({"decision": "allow"})).decision is None  # no approval in Gemini
    deny = answer(PRE, js({"decision": "deny", "reason": "rm -rf blocked by policy"}))
    assert (deny.decision, deny.reason) == ("deny", "rm -rf blocked by policy")
    rewrite = answer(PRE, js({"decision": "allow", "hookSpecificOutput": {
        "tool_input": {"command": "rm -rf ./build", "description": "clean"}}}))
    assert rewrite.updated_input == {"command": "rm -rf ./build", "description": "clean"}


def test_json_wins_over_the_exit_code_and_stderr_is_read_when_stdout_is_empty() -> None:
    # G/runner: textToParse = stdout.trim() || stderr.trim(); JSON parsed whatever the exit code.
    assert answer(PRE, js({"decision": "allow"}), code=2).decision is None
    assert answer(PRE, b"", code=0, stderr=js({"decision": "block", "reason": "r"})).decision == "deny"
    assert answer(PRE, js(json.dumps({"decision": "deny", "reason": "twice"}))).reason == "twice"  # double-encoded


@pytest.mark.parametrize("code", [2, 3, 42])
def test_plain_text_with_an_exit_code_from_two_up_is_a_deny(code: int) -> None:
    # G/runner convertPlainTextToHookOutput: "All other non-zero exit codes (including 2) are blocking".
    outcome = answer(PRE, b"", code=code, stderr=b"no deletes")
    assert (outcome.status, outcome.reason, outcome.exit_code) == ("block", "no deletes", code)
    v = fold(PRE, [outcome])
    assert rendered(PRE, v) == {"decision": "deny", "reason": "no deletes"}


def test_plain_text_at_zero_is_a_message_and_at_one_a_warning() -> None:
    ok = answer(PROMPT, b"hello there")
    assert (ok.status, ok.system_message, ok.additional_context) == ("ok", "hello there", None)
    warn = answer(PRE, b"careful", code=1)
    assert warn.status == "error" and "careful" in (warn.error or "")
    silent = answer(PRE, b"", code=3)
    assert silent.status == "error" and silent.decision is None  # no text: the hook failed, no decision


def test_a_missing_program_is_a_failure_not_a_deny() -> None:
    outcome = answer(PRE, b"", code=127, stderr=b"sh: 1: jq: not found")
    assert outcome.status == "error" and "jq" in (outcome.error or "")


def test_non_object_json_and_unsupported_keys_are_noted() -> None:
    assert answer(PRE, b"[1, 2]").notes
    outcome = answer(get_event("PreToolUse"), js({"hookSpecificOutput": {"llm_request": {}, "additionalContext": "c"}}))
    assert outcome.additional_context == "c"
    assert any("llm_request" in n for n in outcome.notes)
    assert any("tool_input" in n for n in answer(POST, js({"hookSpecificOutput": {"tool_input": {}}})).notes)


def test_ask_continue_context_and_blocks_elsewhere() -> None:
    assert answer(PRE, js({"decision": "ask"})).decision == "ask"
    stop = answer(PRE, js({"continue": False, "stopReason": "enough", "systemMessage": "m"}))
    assert (stop.continue_, stop.stop_reason, stop.system_message) == (False, "enough", "m")
    block = answer(STOP, js({"decision": "deny", "reason": "retry: tests fail"}))
    assert (block.status, block.reason) == ("block", "retry: tests fail")
    model = answer(GEMINI.event_spec("BeforeModel"), js({"decision": "block", "reason": "r"}))
    assert model.status == "block"


def test_the_rewrite_passes_only_when_granted() -> None:
    outcome = answer(PRE, js({"hookSpecificOutput": {"tool_input": {"command": "ls"}}}))
    kept, dropped = restrict(outcome, frozenset({"rewrite_input"}))
    assert (kept.updated_input, dropped) == ({"command": "ls"}, ())
    gone, dropped = restrict(outcome, frozenset())
    assert (gone.updated_input, dropped) == (None, ("rewrite_input",))


# -- render -----------------------------------------------------------------------------------


def test_render_allow_is_empty_and_deny_is_decision_and_reason() -> None:
    assert rendered(PRE, fold(PRE, [])) == {}
    assert rendered(PRE, fold(PRE, [HookOutcome(hook="a", decision="allow")])) == {}
    v = fold(PRE, [HookOutcome(hook="a", decision="deny", reason="no", system_message="guard ran")])
    assert rendered(PRE, v) == {"decision": "deny", "reason": "no", "systemMessage": "guard ran"}


def test_render_block_on_after_agent_and_before_model() -> None:
    v = fold(STOP, [HookOutcome(hook="a", status="block", reason="keep going")])
    assert rendered(STOP, v) == {"decision": "deny", "reason": "keep going"}
    model = GEMINI.event_spec("BeforeModel")
    assert rendered(model, fold(model, [HookOutcome(hook="a", status="block", reason="r")]))["decision"] == "deny"


def test_render_rewrite_context_ask_and_stop() -> None:
    v = fold(PRE, [HookOutcome(hook="a", updated_input={"command": "ls"}, additional_context="ctx")])
    assert rendered(PRE, v) == {"hookSpecificOutput": {
        "hookEventName": "BeforeTool", "additionalContext": "ctx", "tool_input": {"command": "ls"}}}
    ask = fold(PRE, [HookOutcome(hook="a", decision="ask", reason="sure?")])
    assert rendered(PRE, ask) == {"decision": "ask", "reason": "sure?"}
    stop = fold(PRE, [HookOutcome(hook="a", continue_=False, stop_reason="halt\x1b[31m")])
    assert rendered(PRE, stop) == {"continue": False, "stopReason": "halt\\x1b[31m"}


def test_render_context_uses_the_native_event_name() -> None:
    v = fold(PROMPT, [HookOutcome(hook="a", additional_context="more")])
    assert rendered(PROMPT, v) == {"hookSpecificOutput": {"hookEventName": "BeforeAgent", "additionalContext": "more"}}


# -- through the executor (FakeSandbox) --------------------------------------------------------


def test_a_repository_gemini_hook_waits_for_trust_and_its_rewrite_needs_the_capability(tmp_path: Path) -> None:
    user, hc, repo = tmp_path / "user", tmp_path / "hc", tmp_path / "repo"
    for d in (user, hc, repo / ".gemini"):
        d.mkdir(parents=True)
    (hc / "config.toml").write_text('[allowlist]\nallow = ["*"]\n')
    handlers = [{"type": "command", "command": "echo granted", "capabilities": ["rewrite_input"]},
                {"type": "command", "command": "echo plain"}]
    (repo / ".gemini" / "settings.json").write_text(json.dumps(
        {"hooks": {"BeforeTool": [{"matcher": "run_shell_command", "hooks": handlers}]}}))
    seen: list[RunRequest] = []

    def run(request: RunRequest) -> RunResult:
        seen.append(request)
        rewrite = "ls ./build" if "granted" in request.command else "rm -rf /"
        return RunResult(exit_code=0, stdout=js({"hookSpecificOutput": {"tool_input": {"command": rewrite}}}),
                         stderr=b"")

    fake = FakeSandbox(run)
    ex = HookExecutor(load_settings(home=hc, managed_dir=tmp_path / "managed"),
                      sandboxes={"docker": fake, "host": fake}, environ={"HOME": str(user)})
    gemini = get_dialect("gemini")
    payload = {**BEFORE_TOOL, "cwd": str(repo)}
    spec = gemini.resolve_event(None, payload)

    def dispatch() -> Verdict:
        return ex.dispatch(spec, gemini.canonical_payload(spec, payload), dialect=gemini, raw=payload)

    assert "not trusted yet" in (dispatch().system_message or "") and seen == []
    pending, refused = ex.pending_reviews(repo)
    assert not refused
    subjects: list[TrustSubject] = [s for _, s in pending]
    ex.grant(subjects)
    verdict = dispatch()
    assert sorted(r.command for r in seen) == ["echo granted", "echo plain"]
    assert all(json.loads(r.stdin)["hook_event_name"] == "BeforeTool" for r in seen)
    assert all(r.env["GEMINI_SESSION_ID"] == "s1" for r in seen)
    assert verdict.updated_input == {"command": "ls ./build"}  # the ungranted rewrite was dropped
    assert "without that capability" in (verdict.system_message or "")
    assert rendered(spec, verdict)["hookSpecificOutput"]["tool_input"] == {"command": "ls ./build"}
