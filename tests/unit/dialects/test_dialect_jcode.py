"""jcode's dialect (github.com/cnjack/jcode): files, matchers, payload, answers. No I/O but tmp files.

Goldens from cnjack/jcode ``internal/hooks/{types,match,exec,dispatcher,hooks_test}.go``
(indexed commits 5a3b4a9, 1421488, a2a3b66) and its "Hooks" user doc.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from executor.core.events import get_event
from executor.core.hooks import HookFile, Scope
from executor.core.protocol import UNSET, Verdict, restrict
from executor.dialects import DIALECTS, detect_dialect, selects
from executor.dialects.base import Where
from executor.dialects.jcode import DIALECT as JCODE
from executor.dialects.jcode import compile_jcode_matcher
from executor.executor import HookExecutor
from executor.sandbox import FakeSandbox, RunRequest, RunResult
from executor.settings import load_settings

PRE = get_event("PreToolUse")
POST = get_event("PostToolUse")
STOP = get_event("Stop")
PROMPT = get_event("UserPromptSubmit")
START = get_event("SessionStart")

# cnjack/jcode internal/hooks/types.go Payload; the user doc's PreToolUse example.
GOLDEN_PRE = {"session_id": "sess-1", "cwd": "/w", "hook_event_name": "PreToolUse", "tool_name": "execute",
              "tool_input": {"command": "rm -rf build"}}


def js(value: Any) -> bytes:
    return json.dumps(value).encode()


def parse_file(data: Any, scope: Scope = Scope.PROJECT) -> HookFile:
    return JCODE.parse(data, scope=scope, source="/r/.jcode/hooks.json", project_root="/r")


def group(event: str, command: str = "./h.sh", matcher: str | None = None, **handler: Any) -> dict[str, Any]:
    g: dict[str, Any] = {"hooks": [{"type": "command", "command": command, **handler}]}
    if matcher is not None:
        g["matcher"] = matcher
    return {"hooks": {event: [g]}}


# -- files ---------------------------------------------------------------------------------


def test_registered_and_files_per_scope() -> None:
    assert DIALECTS["jcode"] is JCODE
    files = JCODE.sources(Where("/r", "/h", {}))
    assert [(f.scope, f.path) for f in files] == [
        (Scope.USER, "/h/.jcode/hooks.json"), (Scope.PROJECT, "/r/.jcode/hooks.json"),
        (Scope.LOCAL, "/r/.jcode/hooks.local.json")]
    # config.go: project/local only with JCODE_HOOKS_TRUST_PROJECT=1 (hookcage reads them anyway)
    assert all("JCODE_HOOKS_TRUST_PROJECT=1" in f.condition for f in files[1:])
    assert not files[0].condition


def test_parse_cc_shape_seconds_and_default_timeout() -> None:
    f = parse_file(group("PreToolUse", matcher="execute", timeout=5))
    assert not f.problems
    (hook,) = f.hooks
    assert (hook.event, hook.timeout, hook.agent) == ("PreToolUse", 5.0, "jcode")
    # exec.go: timeout 0 or absent -> defaultTimeout 60 s
    assert parse_file(group("Stop", timeout=0)).hooks[0].timeout == 60.0
    assert parse_file(group("Stop")).hooks[0].timeout == 60.0


@pytest.mark.parametrize(("data", "path", "message"), [
    (group("Bogus"), "$.hooks.Bogus", "unknown event 'Bogus'"),
    (group("Notification"), "$.hooks.Notification", "unknown event"),  # a CC event jcode lacks
    (group("Stop", timeout=-1), "$.hooks.Stop[0].hooks[0].timeout", "seconds"),
    (group("Stop", timeout="5"), "$.hooks.Stop[0].hooks[0].timeout", "seconds"),
    (group("Stop", command=""), "$.hooks.Stop[0].hooks[0].command", "required"),
    ({"hooks": {"Stop": [{"matcher": 3, "hooks": []}]}}, "$.hooks.Stop[0].matcher", "string"),
    ({"hooks": []}, "$.hooks", "must be an object"),
    ([], "$", "JSON object"),
])
def test_parse_errors_name_agent_file_and_key(data: Any, path: str, message: str) -> None:
    f = parse_file(data)
    errors = [p for p in f.problems if p.path == path]
    assert errors and message in errors[0].message
    assert str(errors[0]).startswith("jcode hook file /r/.jcode/hooks.json: ")


def test_bad_regex_part_is_a_warning_and_never_matches() -> None:
    f = parse_file(group("PreToolUse", matcher="Bash|mcp__(("))
    (warning,) = f.problems
    assert warning.severity == "warning" and warning.path == "$.hooks.PreToolUse[0].matcher"
    assert "mcp__((" in warning.message
    hook = f.hooks[0]
    assert selects(PRE, hook, {"tool_name": "Bash", "tool_input": {}})  # the good part still works


def test_async_only_on_events_that_cannot_block() -> None:
    f = parse_file(group("PreToolUse", **{"async": True}))
    assert not f.hooks[0].is_async and f.problems[0].severity == "warning"
    post = parse_file(group("PostToolUse", timeout=120, **{"async": True})).hooks[0]
    assert post.is_async and post.timeout == 30.0  # dispatcher.go asyncHardCap


def test_self_route_is_no_hook() -> None:
    f = parse_file(group("PreToolUse", command="hookcage dispatch --agent jcode"), Scope.USER)
    assert not f.hooks and f.routes


# -- matchers (match.go matchesTool; goldens from hooks_test.go TestMatchesTool) ---------------


@pytest.mark.parametrize(("matcher", "tool", "fires"), [
    ("write", "todowrite", False),     # exact by default
    ("write", "Write", True),          # jcode's write, canonically Write
    ("Bash", "Bash", True),            # Bash matches execute (alias)
    ("execute", "Bash", True),
    ("run_shell", "Bash", True),
    ("mcp__.*", "mcp__github__list", True),
    ("^execute$", "Bash", True),
    ("^execute$", "execute_something", False),
    ("Edit|Write", "Write", True),
    ("Edit,Write", "Write", False),    # no comma split in jcode
    ("*", "anything", True),
    ("", "anything", True),
    ("|", "Bash", False),
    ("shell", "Bash", False),          # hookcage's own alias, not jcode's
])
def test_matchers(matcher: str, tool: str, fires: bool) -> None:
    m = compile_jcode_matcher(matcher)
    assert m.matches(tool, tool=True) is fires


def test_events_without_a_tool_test_the_empty_name() -> None:
    # dispatcher.go selectSpecs(event, p.ToolName): "" on Stop, SessionStart...
    stop_bash = parse_file(group("Stop", matcher="Bash")).hooks[0]
    stop_all = parse_file(group("Stop", matcher="*")).hooks[0]
    stop_empty_re = parse_file(group("Stop", matcher="^$")).hooks[0]
    payload = JCODE.canonical_payload(STOP, {"hook_event_name": "Stop", "session_id": "s"})
    assert not selects(STOP, stop_bash, payload)
    assert selects(STOP, stop_all, payload) and selects(STOP, stop_empty_re, payload)
    start = parse_file(group("SessionStart", matcher="startup")).hooks[0]
    assert not selects(START, start, {"hook_event_name": "SessionStart", "source": "startup"})


# -- payload in ----------------------------------------------------------------------------


def test_canonical_payload_maps_jcode_tool_names() -> None:
    spec = JCODE.resolve_event(None, GOLDEN_PRE)
    assert spec.name == "PreToolUse"
    data = JCODE.canonical_payload(spec, GOLDEN_PRE)
    assert data["tool_name"] == "Bash" and data["tool_input"] == {"command": "rm -rf build"}
    assert JCODE.canonical_payload(spec, {**GOLDEN_PRE, "tool_name": "mcp__gh__x"})["tool_name"] == "mcp__gh__x"


def test_hook_input_is_jcode_payload_and_env() -> None:
    got = JCODE.hook_input(PRE, GOLDEN_PRE)
    assert json.loads(got.stdin) == GOLDEN_PRE  # the agent's payload as it sent it (execute)
    # exec.go hookEnv
    assert got.env == {"JCODE_SESSION_ID": "sess-1", "JCODE_TOOL_NAME": "execute", "JCODE_CWD": "/w",
                       "JCODE_TRANSCRIPT_PATH": "", "JCODE_HOOK_EVENT": "PreToolUse"}


def test_not_recognised_from_the_payload() -> None:
    # jcode sends Claude Code's keys and nothing of its own: only --agent jcode selects it.
    assert detect_dialect(GOLDEN_PRE).name == "claude"


# -- answers (exec.go parseOutcome) ----------------------------------------------------------


def answer(spec: Any, stdout: bytes = b"", code: int = 0, stderr: bytes = b"") -> Any:
    return JCODE.read_answer(spec, "h", code, stdout, stderr)


def test_golden_answers() -> None:
    allow = answer(PRE, js({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow"}}))
    assert allow.decision == "allow"
    blocked = answer(PRE, code=2, stderr=b"blocked")
    assert (blocked.status, blocked.reason) == ("block", "blocked")
    deny = answer(PRE, js({"hookSpecificOutput": {"permissionDecision": "deny", "permissionDecisionReason": "no"}}))
    assert (deny.decision, deny.reason) == ("deny", "no")
    stop = answer(STOP, js({"continue": False, "reason": "finish tests"}))  # jcode: continue false = block
    assert (stop.status, stop.reason, stop.continue_) == ("block", "finish tests", True)
    ctx = answer(POST, js({"hookSpecificOutput": {"additionalContext": "note"}}))
    assert ctx.additional_context == "note"


def test_events_jcode_cannot_block() -> None:
    post = answer(POST, code=2, stderr=b"nope")
    assert post.status == "ok" and post.reason is None and "jcode ignores" in post.notes[0]
    assert answer(START, js({"decision": "block", "reason": "x"})).status == "ok"
    assert answer(get_event("PreCompact"), js({"continue": False})).continue_ is True
    # plain stdout is no context in jcode (CC would add it on SessionStart/UserPromptSubmit)
    assert answer(START, b"hello").additional_context is None


def test_rewrites_pass_only_when_granted() -> None:
    rewrite = answer(PRE, js({"hookSpecificOutput": {"updatedInput": {"path": "safe.txt"}}}))
    assert rewrite.updated_input == {"path": "safe.txt"}
    assert restrict(rewrite, frozenset({"rewrite_input"}))[0].updated_input == {"path": "safe.txt"}
    dropped, why = restrict(rewrite, frozenset())
    assert dropped.updated_input is None and why == ("rewrite_input",)
    result = answer(POST, js({"hookSpecificOutput": {"modifiedResult": "REDACTED"}}))
    assert result.updated_output == "REDACTED"
    assert restrict(result, frozenset({"rewrite_output"}))[0].updated_output == "REDACTED"
    assert restrict(result, frozenset())[0].updated_output is UNSET


# -- render --------------------------------------------------------------------------------


def rendered(spec: Any, **verdict: Any) -> tuple[int, dict[str, Any], str]:
    got = JCODE.render(spec, Verdict(spec.name, **verdict))
    return got.exit_code, json.loads(got.stdout) if got.stdout.strip() else {}, got.stderr


def test_render_allow_deny_block_context() -> None:
    assert rendered(PRE) == (0, {}, "")
    code, out, _ = rendered(PRE, decision="deny", decision_reason="no rm")
    assert code == 0 and out["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert out["hookSpecificOutput"]["permissionDecisionReason"] == "no rm"
    code, out, _ = rendered(PRE, decision="allow", updated_input={"command": "ls"})
    assert out["hookSpecificOutput"] == {"hookEventName": "PreToolUse", "permissionDecision": "allow",
                                         "updatedInput": {"command": "ls"}}
    assert rendered(PROMPT, blocked=True, reason="no")[1] == {"decision": "block", "reason": "no"}
    assert rendered(STOP, blocked=True, reason="go on")[1] == {"decision": "block", "reason": "go on"}
    code, out, _ = rendered(START, additional_context="ctx\x1b[31m")
    assert out["hookSpecificOutput"]["additionalContext"] == "ctx\\x1b[31m"  # sanitised


def test_render_result_rewrite_as_modified_result() -> None:
    _, out, _ = rendered(POST, updated_output="REDACTED")
    assert out["hookSpecificOutput"] == {"hookEventName": "PostToolUse", "modifiedResult": "REDACTED"}
    _, out, _ = rendered(POST, updated_output={"a": 1})
    assert out["hookSpecificOutput"]["modifiedResult"] == '{"a": 1}'  # jcode reads a string only


def test_render_what_jcode_cannot_do() -> None:
    # A block on PostToolUse reaches the model as context and the user as a message.
    code, out, _ = rendered(POST, blocked=True, reason="secret in output")
    assert code == 0 and "decision" not in out
    assert out["hookSpecificOutput"]["additionalContext"] == "secret in output"
    assert out["systemMessage"] == "secret in output"
    # continue: false means "block" to jcode: on Stop it would keep the agent going, so dropped.
    assert "continue" not in rendered(STOP, continue_=False, stop_reason="halt")[1]
    assert "decision" not in rendered(STOP, continue_=False, stop_reason="halt")[1]
    assert rendered(PROMPT, continue_=False, stop_reason="halt")[1] == {"decision": "block", "reason": "halt"}
    assert rendered(PRE, continue_=False, stop_reason="halt")[1]["hookSpecificOutput"]["permissionDecision"] == "deny"


# -- the executor: serial, first deny stops (dispatcher.go Fire) -------------------------------


def test_hooks_run_in_order_and_stop_at_the_first_deny(tmp_path: Path) -> None:
    home, userhome, project = tmp_path / "hc", tmp_path / "u", tmp_path / "p"
    for d in (home, userhome / ".jcode", project):
        d.mkdir(parents=True)
    (home / "config.toml").write_text('[allowlist]\nallow = ["*"]\n')
    (userhome / ".jcode" / "hooks.json").write_text(json.dumps({"hooks": {"PreToolUse": [
        {"matcher": "execute", "hooks": [{"type": "command", "command": "first"},
                                         {"type": "command", "command": "second"}]}]}}))

    def handler(req: RunRequest) -> RunResult:
        return RunResult(2, stderr=b"denied") if req.command == "first" else RunResult(0)

    fake = FakeSandbox(handler)
    with HookExecutor(load_settings(home=home, managed_dir=tmp_path / "m"), sandboxes={"docker": fake},
                      environ={"HOME": str(userhome)}) as ex:
        payload = {**GOLDEN_PRE, "cwd": str(project)}
        verdict = ex.dispatch(PRE, JCODE.canonical_payload(PRE, payload), dialect=JCODE, raw=payload)
    assert [r.command for r in fake.requests] == ["first"]
    assert json.loads(fake.requests[0].stdin)["tool_name"] == "execute"
    assert fake.requests[0].env["JCODE_TOOL_NAME"] == "execute"
    assert JCODE.render(PRE, verdict).stdout.count('"deny"') == 1
