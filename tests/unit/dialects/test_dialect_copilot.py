"""GitHub Copilot CLI's dialect: files, both payload forms, answers (no Docker, literal inputs).

Sources of the goldens:
- R: Copilot's hooks reference, docs.github.com/en/copilot/reference/hooks-reference
  (github/docs content/copilot/reference/hooks-reference.md, stored version at commit 05da5bc3,
  read 2026-11-27; it superseded cli-hooks-reference.md and hooks-configuration.md).
- H: github/docs content/copilot/reference/hooks-configuration.md (toolArgs as a JSON string).
The goldens of the rules R changed are in test_dialect_copilot_reference.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from executor.core.hooks import Scope
from executor.core.protocol import HookOutcome, Verdict, fold, restrict
from executor.dialects import detect_dialect, selects
from executor.dialects.base import Where
from executor.dialects.copilot import DIALECT as COPILOT
from executor.dialects.cursor import NativeEvent
from executor.executor import HookExecutor
from executor.sandbox import FakeSandbox, RunRequest, RunResult
from executor.settings import load_settings

# H, "preToolUse" input example (toolArgs is a JSON string).
PRE = {"timestamp": 1704614600000, "cwd": "/repo", "toolName": "bash",
       "toolArgs": "{\"command\":\"rm -rf dist\",\"description\":\"Clean build directory\"}"}
# R, the VS Code-compatible form a PascalCase key gets.
PRE_SNAKE = {"hook_event_name": "PreToolUse", "session_id": "s1", "timestamp": "2024-01-07T08:03:20Z",
             "cwd": "/repo", "tool_name": "bash", "tool_input": {"command": "rm -rf dist"}}
# R, "userPromptSubmitted" and "agentStop".
PROMPT = {"sessionId": "s1", "timestamp": 1704614500000, "cwd": "/repo", "prompt": "Fix the tests"}
STOP = {"sessionId": "s1", "timestamp": 1704614700000, "cwd": "/repo", "transcriptPath": "/t.jsonl",
        "stopReason": "end_turn"}
PERM = {"sessionId": "s1", "timestamp": 1704614600000, "cwd": "/repo", "toolName": "bash",
        "toolArgs": "{\"command\":\"git push\"}"}


def spec(name: str, payload: dict[str, Any]) -> NativeEvent:
    s = COPILOT.resolve_event(name, payload)
    assert isinstance(s, NativeEvent)
    return s


def parse(data: Any, scope: Scope = Scope.PROJECT) -> Any:
    return COPILOT.parse(data, scope=scope, source="/repo/.github/hooks/a.json", project_root="/repo")


def outcome(name: str, payload: dict[str, Any], stdout: bytes = b"", code: int = 0) -> HookOutcome:
    return COPILOT.read_answer(spec(name, payload), "h", code, stdout, b"")


def answer(name: str, payload: dict[str, Any], verdict: Verdict) -> Any:
    out = COPILOT.render(spec(name, payload), verdict)
    assert out.exit_code == 0
    return json.loads(out.stdout)


# -- files ------------------------------------------------------------------------------


def test_files_and_scopes() -> None:
    sources = COPILOT.sources(Where("/repo", "/home/u", {}))
    assert [(s.scope, s.path, s.glob) for s in sources] == [
        (Scope.USER, "/home/u/.copilot/hooks/*.json", True),
        (Scope.PROJECT, "/repo/.github/hooks/*.json", True),  # R: loaded automatically
    ]
    moved = COPILOT.sources(Where("/repo", "/home/u", {"COPILOT_HOME": "/c"}))
    assert moved[0].path == "/c/hooks/*.json"


def test_the_documented_shape() -> None:
    # R "Hook configuration": type, bash, powershell, cwd, env, timeoutSec; H: comment.
    f = parse({"version": 1, "hooks": {"preToolUse": [
        {"type": "command", "bash": "./scripts/pre.sh", "powershell": "./scripts/pre.ps1", "cwd": ".",
         "env": {"LOG_LEVEL": "debug"}, "timeoutSec": 10, "comment": "guard"},
        {"type": "command", "bash": "scripts/log.sh"},
    ]}})
    assert f.errors == ()
    first, second = f.hooks
    assert (first.event, first.command, first.timeout, first.env) == (
        "PreToolUse", "./scripts/pre.sh", 10.0, (("LOG_LEVEL", "debug"),))
    assert second.timeout == 30.0  # R: default 30 seconds
    assert COPILOT.serial  # R, H: hooks of one event run in order


@pytest.mark.parametrize(
    ("data", "path", "words"),
    [
        ("x", "$", "top level"),
        ({"version": 3, "hooks": {}}, "$.version", "must be 1"),
        ({"version": 1, "hooks": {"beforeTool": []}}, "$.hooks.beforeTool", "unknown event"),
        ({"version": 1, "hooks": {"preToolUse": [{"bash": ""}]}}, "$.hooks.preToolUse[0].bash", "non-empty"),
        ({"version": 1, "hooks": {"preToolUse": [{"bash": "x", "timeoutSec": "30"}]}},
         "$.hooks.preToolUse[0].timeoutSec", "seconds"),
        ({"version": 1, "hooks": {"preToolUse": [{"powershell": "x.ps1"}]}}, "$.hooks.preToolUse[0].powershell",
         "bash"),
        ({"version": 1, "hooks": {"preToolUse": [{"bash": "./pre.sh", "cwd": "scripts"}]}},
         "$.hooks.preToolUse[0].cwd", "project root"),
        ({"version": 1, "hooks": {"preToolUse": [{"bash": "x", "env": {"PATH": "/evil"}}]}},
         "$.hooks.preToolUse[0].env.PATH", "not allowed"),
        ({"version": 1, "hooks": {"permissionRequest": [{"bash": "x", "matcher": 1}]}},
         "$.hooks.permissionRequest[0].matcher", "string"),
    ],
)
def test_errors_name_the_agent_the_file_and_the_key(data: Any, path: str, words: str) -> None:
    f = parse(data)
    error = next(p for p in f.errors if p.path == path)
    assert words in error.message
    assert str(error).startswith("copilot hook file /repo/.github/hooks/a.json: ")
    assert all(h.invalid for h in f.hooks)


def test_matchers_are_anchored_where_documented_and_ignored_elsewhere() -> None:
    f = parse({"version": 1, "hooks": {"permissionRequest": [{"bash": "x", "matcher": "bash|edit"}],
                                       "sessionStart": [{"bash": "y", "matcher": "startup"}],
                                       "notification": [{"bash": "z", "matcher": "(a"}]}})
    perm, start, note = f.hooks
    assert any(p.path == "$.hooks.sessionStart[0].matcher" and p.severity == "warning" for p in f.problems)
    assert start.selectors == ()
    assert any("invalid regular expression" in p.message for p in f.problems) and note.invalid is None
    s = spec("permissionRequest", PERM)
    payload = COPILOT.canonical_payload(s, PERM)
    assert selects(s, perm, payload)
    other = {**PERM, "toolName": "bashful"}
    assert not selects(s, perm, COPILOT.canonical_payload(s, other))  # anchored: ^(?:bash|edit)$


# -- events and payload -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("native", "canonical"),
    [("sessionStart", "SessionStart"), ("sessionEnd", "SessionEnd"), ("userPromptSubmitted", "UserPromptSubmit"),
     ("preToolUse", "PreToolUse"), ("postToolUse", "PostToolUse"), ("postToolUseFailure", "PostToolUseFailure"),
     ("agentStop", "Stop"), ("subagentStart", "SubagentStart"), ("subagentStop", "SubagentStop"),
     ("preCompact", "PreCompact"), ("permissionRequest", "PermissionRequest"), ("notification", "Notification"),
     ("errorOccurred", "errorOccurred"), ("PreToolUse", "PreToolUse"), ("Stop", "Stop")],
)
def test_event_map(native: str, canonical: str) -> None:
    assert COPILOT.resolve_event(native, {}).name == canonical


def test_recognised_without_agent() -> None:
    assert detect_dialect(PRE) is COPILOT
    assert detect_dialect({"toolName": "bash", "timestamp": 1}) is COPILOT
    assert detect_dialect(PROMPT) is not COPILOT  # nothing tells it from another agent's


def test_camel_payload_to_canonical() -> None:
    s = spec("preToolUse", PRE)
    assert s.native == "preToolUse"
    payload = COPILOT.canonical_payload(s, {**PRE, "sessionId": "s1"})
    assert payload["hook_event_name"] == "PreToolUse" and payload["session_id"] == "s1"
    assert payload["tool_name"] == "Bash"
    assert payload["tool_input"] == {"command": "rm -rf dist", "description": "Clean build directory"}
    stop = COPILOT.canonical_payload(spec("agentStop", STOP), STOP)
    assert stop["transcript_path"] == "/t.jsonl" and stop["hook_event_name"] == "Stop"
    assert COPILOT.canonical_payload(spec("userPromptSubmitted", PROMPT), PROMPT)["prompt"] == "Fix the tests"


def test_tool_args_that_hold_no_object_stay_visible() -> None:
    payload = COPILOT.canonical_payload(spec("preToolUse", PRE), {**PRE, "toolArgs": "ls -la"})
    assert payload["tool_input"] == {"raw": "ls -la"}


def test_snake_payload_to_canonical() -> None:
    s = spec("PreToolUse", PRE_SNAKE)
    assert s.native == "PreToolUse"
    payload = COPILOT.canonical_payload(s, PRE_SNAKE)
    assert (payload["tool_name"], payload["tool_input"]) == ("Bash", {"command": "rm -rf dist"})


def test_each_hook_reads_the_form_its_key_chose() -> None:
    f = parse({"version": 1, "hooks": {"preToolUse": [{"bash": "a"}], "PreToolUse": [{"bash": "b"}]}})
    camel_hook, pascal_hook = f.hooks
    assert (COPILOT.input_form(camel_hook), COPILOT.input_form(pascal_hook)) == ("", "snake_case")
    s = spec("preToolUse", PRE)
    assert json.loads(COPILOT.hook_input(s, PRE).stdin) == PRE
    snake = json.loads(COPILOT.form_input(s, PRE, "snake_case").stdin)
    assert snake["hook_event_name"] == "PreToolUse" and snake["tool_input"]["command"] == "rm -rf dist"
    assert snake["timestamp"] == "2024-01-07T08:03:20Z"
    back = json.loads(COPILOT.hook_input(spec("PreToolUse", PRE_SNAKE), PRE_SNAKE).stdin)
    assert back["toolName"] == "bash" and json.loads(back["toolArgs"]) == {"command": "rm -rf dist"}
    assert back["timestamp"] == 1704614600000 and "hook_event_name" not in back


# -- answers ----------------------------------------------------------------------------


def test_deny_and_reason() -> None:
    # R, preToolUse output: permissionDecision, permissionDecisionReason.
    o = outcome("preToolUse", PRE, b'{"permissionDecision": "deny", "permissionDecisionReason": "Dangerous"}')
    assert (o.decision, o.reason) == ("deny", "Dangerous")


def test_modified_args_is_the_gated_rewrite() -> None:
    o = outcome("preToolUse", PRE, b'{"permissionDecision": "allow", "modifiedArgs": {"command": "rm -rf ./dist"}}')
    assert o.updated_input == {"command": "rm -rf ./dist"}
    kept, _ = restrict(o, frozenset({"approve", "rewrite_input"}))
    assert kept.updated_input == {"command": "rm -rf ./dist"}
    cut, dropped = restrict(o, frozenset())
    assert cut.updated_input is None and dropped == ("approve", "rewrite_input")


def test_vs_code_form_answer_is_read_too() -> None:
    # github/copilot-cli issue #2643: hookSpecificOutput accepted since CLI 1.0.24.
    o = outcome("PreToolUse", PRE_SNAKE, json.dumps({"hookSpecificOutput": {
        "hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "no"}}).encode())
    assert (o.decision, o.reason) == ("deny", "no")


def test_exit_codes_deny_on_pre_tool_use_and_permission_request_only() -> None:
    # R "Exit codes for command hooks": preToolUse fails closed; exit 2 denies a permission request;
    # elsewhere exit 2 is a warning and other exits are logged and skipped.
    o = outcome("preToolUse", PRE, code=2)
    assert o.decision == "deny"
    warned = outcome("agentStop", STOP, code=2)
    assert (warned.status, warned.decision) == ("ok", None)
    assert outcome("agentStop", STOP, code=1).status == "error"
    assert outcome("permissionRequest", PERM, code=2).decision == "deny"
    assert outcome("permissionRequest", PERM, b'{"behavior": "allow"}').decision == "allow"


def test_prompt_submitted_cannot_block_and_stop_can() -> None:
    o = outcome("userPromptSubmitted", PROMPT, b'{"decision": "block", "reason": "x"}')
    assert o.status == "ok"
    stop = outcome("agentStop", STOP, b'{"decision": "block", "reason": "run the tests"}')
    assert (stop.status, stop.reason) == ("block", "run the tests")


def test_render() -> None:
    assert answer("preToolUse", PRE, Verdict(event="PreToolUse")) == {}
    deny = answer("preToolUse", PRE, fold(spec("preToolUse", PRE), [HookOutcome("h", decision="deny", reason="no")]))
    assert deny == {"permissionDecision": "deny", "permissionDecisionReason": "no"}
    blocked = answer("preToolUse", PRE, Verdict(event="PreToolUse", blocked=True, reason="bad\x1b[0m"))
    assert blocked["permissionDecision"] == "deny" and "\x1b" not in blocked["permissionDecisionReason"]
    rewrite = answer("preToolUse", PRE, Verdict(event="PreToolUse", decision="allow", updated_input={"command": "ls"},
                                                additional_context="ctx"))
    assert rewrite == {"permissionDecision": "allow", "modifiedArgs": {"command": "ls"}, "additionalContext": "ctx"}
    assert answer("agentStop", STOP, Verdict(event="Stop", blocked=True, reason="go on")) == {
        "decision": "block", "reason": "go on"}
    assert answer("permissionRequest", PERM, Verdict(event="PermissionRequest", decision="deny",
                                                     decision_reason="no")) == {"behavior": "deny", "message": "no"}
    assert answer("userPromptSubmitted", PROMPT, Verdict(event="UserPromptSubmit", blocked=True, reason="x")) == {}
    snake = answer("PreToolUse", PRE_SNAKE, Verdict(event="PreToolUse", blocked=True, reason="no"))
    assert snake["hookSpecificOutput"]["permissionDecision"] == "deny"
    failure = COPILOT.render(spec("postToolUseFailure", PRE), Verdict(event="PostToolUseFailure", blocked=True,
                                                                      reason="retry with --force"))
    assert (failure.exit_code, failure.stdout) == (2, "retry with --force\n")  # R: stdout appended
    noted = COPILOT.render(spec("preToolUse", PRE), Verdict(event="PreToolUse", system_message="hookcage: x"))
    assert (noted.stdout, noted.stderr) == ("{}\n", "hookcage: x\n")  # Copilot shows no message: logged


# -- through the executor ---------------------------------------------------------------


def test_executor_gives_each_hook_its_form_and_stops_at_the_first_deny(tmp_path: Path) -> None:
    home, hc, project = tmp_path / "u", tmp_path / "hc", tmp_path / "p"
    (home / ".copilot" / "hooks").mkdir(parents=True)
    hc.mkdir()
    project.mkdir()
    (hc / "config.toml").write_text('[allowlist]\nallow = ["*"]\n')
    (home / ".copilot" / "hooks" / "a.json").write_text(json.dumps({"version": 1, "hooks": {
        "preToolUse": [{"bash": "camel.sh"}], "PreToolUse": [{"bash": "pascal.sh"}, {"bash": "never.sh"}]}}))
    seen: list[RunRequest] = []

    def run(request: RunRequest) -> RunResult:
        seen.append(request)
        if request.command == "pascal.sh":
            return RunResult(0, b'{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny"}}')
        return RunResult(0, b"{}")

    with HookExecutor(load_settings(home=hc, managed_dir=tmp_path / "m"), sandboxes={"docker": FakeSandbox(run)},
                      environ={"HOME": str(home)}) as ex:
        raw = {**PRE, "cwd": str(project)}
        s = spec("preToolUse", raw)
        verdict = ex.dispatch(s, COPILOT.canonical_payload(s, raw), dialect=COPILOT, raw=raw)
    assert [r.command for r in seen] == ["camel.sh", "pascal.sh"]
    assert "toolArgs" in json.loads(seen[0].stdin)
    assert json.loads(seen[1].stdin)["tool_input"]["command"] == "rm -rf dist"
    assert json.loads(COPILOT.render(s, verdict).stdout)["permissionDecision"] == "deny"
