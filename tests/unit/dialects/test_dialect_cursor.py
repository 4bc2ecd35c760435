"""Cursor's dialect: its files, events, payload and answers (no Docker, literal inputs).

Sources of the goldens (Cursor is closed source):
- C1: Cursor's hooks page, cursor.com/docs/agent/hooks; the earlier version as copied in
  github.com/pcomans/caruso reference/cursor_hooks.md, the current one as quoted in the
  CursorFleet ADR 0001 ("A. VERIFIED-FROM-DOCS", fetched 2026-10-04).
- T-cupcake: cupcake.eqtylab.io/reference/harnesses/cursor (payload examples).
- T-rskim: docs.rs/crate/rskim/2.3.1/source/src/cmd/hooks/cursor.rs (the updated_input answer).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from executor.core.hooks import Scope
from executor.core.protocol import AgentAnswer, HookOutcome, Verdict, fold, restrict
from executor.dialects import DIALECTS, detect_dialect, selects
from executor.dialects.base import Where
from executor.dialects.cursor import DIALECT as CURSOR
from executor.dialects.cursor import NativeEvent
from executor.executor import HookExecutor
from executor.sandbox import FakeSandbox, RunRequest, RunResult
from executor.settings import load_settings

# T-cupcake, "beforeShellExecution" (the common fields of C1's "Common schema").
SHELL = {"conversation_id": "conv-123", "generation_id": "gen-456", "hook_event_name": "beforeShellExecution",
         "workspace_roots": ["/path/to/project"], "command": "npm install express", "cwd": "/path/to/project"}
# T-cupcake, "beforeMCPExecution / afterMCPExecution": tool_input as a JSON string (C1: "<json params>").
MCP = {"conversation_id": "conv-123", "generation_id": "gen-456", "hook_event_name": "beforeMCPExecution",
       "workspace_roots": ["/path/to/project"], "tool_name": "database_query",
       "tool_input": "{\"query\": \"SELECT * FROM users\"}", "url": "http://localhost:3000"}
# T-cupcake, "beforeReadFile".
READ = {"conversation_id": "conv-123", "generation_id": "gen-456", "hook_event_name": "beforeReadFile",
        "workspace_roots": ["/path/to/project"], "file_path": "/path/to/project/secrets.env",
        "content": "API_KEY=...", "attachments": []}
# T-cupcake, "afterFileEdit".
EDIT = {"conversation_id": "conv-123", "generation_id": "gen-456", "hook_event_name": "afterFileEdit",
        "workspace_roots": ["/path/to/project"], "file_path": "/path/to/project/src/main.ts",
        "edits": [{"old_string": "const foo = 1", "new_string": "const foo = 2"}]}
# C1 "beforeSubmitPrompt" input.
PROMPT = {"conversation_id": "c", "generation_id": "g", "hook_event_name": "beforeSubmitPrompt",
          "workspace_roots": ["/repo"], "prompt": "Fix the bug in main.ts", "attachments": []}
# C1 "stop" input.
STOP = {"conversation_id": "c", "generation_id": "g", "hook_event_name": "stop", "workspace_roots": ["/repo"],
        "status": "completed", "loop_count": 0}
# C1 (current) preToolUse: tool_name is Cursor's tool type, tool_input an object.
PRE = {"conversation_id": "c", "generation_id": "g", "hook_event_name": "preToolUse", "workspace_roots": ["/repo"],
       "tool_name": "Shell", "tool_input": {"command": "rm -rf build"}, "tool_use_id": "t1", "cwd": "/repo"}


def spec_of(payload: dict[str, Any]) -> NativeEvent:
    spec = CURSOR.resolve_event(None, payload)
    assert isinstance(spec, NativeEvent)
    return spec


def answer(payload: dict[str, Any], verdict: Verdict) -> dict[str, Any]:
    out = CURSOR.render(spec_of(payload), verdict)
    assert out.exit_code == 0 and out.stderr == ""
    data: dict[str, Any] = json.loads(out.stdout)
    return data


def outcome(payload: dict[str, Any], stdout: bytes = b"", code: int = 0, stderr: bytes = b"") -> HookOutcome:
    return CURSOR.read_answer(spec_of(payload), "h", code, stdout, stderr)


# -- files ------------------------------------------------------------------------------


def test_files_and_scopes() -> None:
    sources = CURSOR.sources(Where("/repo", "/home/u", {}))
    assert [(s.scope, s.path) for s in sources] == [
        (Scope.MANAGED, "/etc/cursor/hooks.json"),  # C1 "Global (Enterprise-managed) ... Linux/WSL"
        (Scope.USER, "/home/u/.cursor/hooks.json"),
        (Scope.PROJECT, "/repo/.cursor/hooks.json"),
    ]
    assert [s.scope for s in CURSOR.sources(Where(None, "/home/u", {}))] == [Scope.MANAGED, Scope.USER]


def parse(data: Any, scope: Scope = Scope.PROJECT) -> Any:
    return CURSOR.parse(data, scope=scope, source="/repo/.cursor/hooks.json", project_root="/repo")


def test_a_flat_file_with_cursors_keys() -> None:
    # C1 "Configuration file" / ADR A3 per-script options.
    f = parse({"version": 1, "hooks": {
        "beforeShellExecution": [{"command": ".cursor/hooks/audit.sh", "timeout": 10, "failClosed": True,
                                  "matcher": "git push"}],
        "afterFileEdit": [{"command": ".cursor/hooks/format.sh"}],
        "stop": [{"command": ".cursor/hooks/stop.sh", "loop_limit": 5}],
    }})
    assert f.errors == () and f.agent == "cursor"
    shell, edit, stop = f.hooks
    assert (shell.event, shell.timeout, shell.on_error, shell.agent) == ("PreToolUse", 10.0, "deny", "cursor")
    assert [(p, m.source) for p, m in shell.selectors] == [("agent_event", "beforeShellExecution"),
                                                          ("agent_match", "git push")]
    assert edit.event == "PostToolUse" and edit.timeout == 60.0 and edit.on_error == "allow"
    assert stop.event == "Stop"


@pytest.mark.parametrize(
    ("data", "path", "words"),
    [
        ([], "$", "top level"),
        ({"version": 2, "hooks": {}}, "$.version", "must be 1"),
        ({"version": 1, "hooks": []}, "$.hooks", "must be an object"),
        ({"version": 1, "hooks": {"beforeShellExec": []}}, "$.hooks.beforeShellExec", "unknown event"),
        ({"version": 1, "hooks": {"stop": {}}}, "$.hooks.stop", "array"),
        ({"version": 1, "hooks": {"stop": [{"command": 3}]}}, "$.hooks.stop[0].command", "non-empty string"),
        ({"version": 1, "hooks": {"stop": [{"command": "x", "timeout": "5"}]}}, "$.hooks.stop[0].timeout",
         "seconds"),
        ({"version": 1, "hooks": {"stop": [{"command": "x", "timeout": -1}]}}, "$.hooks.stop[0].timeout",
         "seconds"),
        ({"version": 1, "hooks": {"stop": [{"command": "x", "failClosed": "yes"}]}},
         "$.hooks.stop[0].failClosed", "true or false"),
        ({"version": 1, "hooks": {"stop": [{"command": "x", "loop_limit": "5"}]}},
         "$.hooks.stop[0].loop_limit", "whole number"),
        ({"version": 1, "hooks": {"preToolUse": [{"command": "x", "matcher": 7}]}},
         "$.hooks.preToolUse[0].matcher", "string"),
    ],
)
def test_errors_name_the_agent_the_file_and_the_key(data: Any, path: str, words: str) -> None:
    f = parse(data)
    error = next(p for p in f.errors if p.path == path)
    assert words in error.message
    assert str(error).startswith("cursor hook file /repo/.cursor/hooks.json: ")
    assert all(h.invalid for h in f.hooks)


def test_a_bad_matcher_never_fires_and_is_reported() -> None:
    f = parse({"version": 1, "hooks": {"preToolUse": [{"command": "x", "matcher": "(a"}]}})
    (hook,) = f.hooks
    assert hook.invalid is None
    assert any("invalid regular expression" in p.message for p in f.problems)
    payload = CURSOR.canonical_payload(spec_of(PRE), PRE)
    assert not selects(spec_of(PRE), hook, payload)


def test_warnings_for_what_hookcage_does_not_read() -> None:
    f = parse({"hooks": {"beforeSubmitPrompt": [{"command": "x", "matcher": "foo", "shell": "zsh"}],
                         "preToolUse": [{"command": "y", "loop_limit": 3}]}})
    messages = {(p.path, p.severity) for p in f.problems}
    assert ("$.version", "warning") in messages
    assert ("$.hooks.beforeSubmitPrompt[0].matcher", "warning") in messages
    assert ("$.hooks.beforeSubmitPrompt[0].shell", "warning") in messages
    assert ("$.hooks.preToolUse[0].loop_limit", "warning") in messages
    assert all(h.invalid is None for h in f.hooks)


def test_prompt_hooks_are_kept_but_are_not_commands() -> None:
    f = parse({"version": 1, "hooks": {"stop": [{"type": "prompt", "prompt": "Is the task done?"}]}})
    assert f.errors == () and f.hooks[0].type == "prompt"


def test_a_route_to_hookcage_is_not_a_hook() -> None:
    f = parse({"version": 1, "hooks": {"preToolUse": [{"command": "hookcage dispatch --agent cursor"}]}})
    assert f.hooks == () and f.routes == ("$.hooks.preToolUse[0]",)


# -- events and payload -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("native", "canonical"),
    [("preToolUse", "PreToolUse"), ("beforeShellExecution", "PreToolUse"), ("beforeMCPExecution", "PreToolUse"),
     ("beforeReadFile", "PreToolUse"), ("postToolUse", "PostToolUse"), ("afterShellExecution", "PostToolUse"),
     ("afterMCPExecution", "PostToolUse"), ("afterFileEdit", "PostToolUse"),
     ("postToolUseFailure", "PostToolUseFailure"), ("beforeSubmitPrompt", "UserPromptSubmit"), ("stop", "Stop"),
     ("subagentStart", "SubagentStart"), ("subagentStop", "SubagentStop"), ("sessionStart", "SessionStart"),
     ("sessionEnd", "SessionEnd"), ("preCompact", "PreCompact"), ("afterAgentResponse", "afterAgentResponse"),
     ("afterAgentThought", "afterAgentThought"), ("beforeTabFileRead", "beforeTabFileRead"),
     ("afterTabFileEdit", "afterTabFileEdit"), ("workspaceOpen", "workspaceOpen")],
)
def test_event_map(native: str, canonical: str) -> None:
    spec = CURSOR.resolve_event(native, {})
    assert isinstance(spec, NativeEvent)
    assert (spec.name, spec.native, CURSOR.native_event(spec)) == (canonical, native, native)


def test_canonical_names_are_not_cursors() -> None:
    assert parse({"version": 1, "hooks": {"PreToolUse": []}}).errors


def test_recognised_by_conversation_id_and_workspace_roots() -> None:
    assert detect_dialect(SHELL) is CURSOR
    assert detect_dialect({"conversation_id": "c", "workspace_roots": "/repo"}) is not CURSOR
    # CodeBuddy's generation_id comes with client and version; Cursor's without.
    assert detect_dialect({"session_id": "s", "client": "CLI", "version": "2", "generation_id": "g"}).name == "codebuddy"
    assert "cursor" in DIALECTS


def test_shell_command_is_a_bash_pre_tool_use() -> None:
    payload = CURSOR.canonical_payload(spec_of(SHELL), SHELL)
    assert payload["hook_event_name"] == "PreToolUse"
    assert payload["tool_name"] == "Bash" and payload["tool_input"] == {"command": "npm install express"}
    assert payload["session_id"] == "conv-123" and payload["cwd"] == "/path/to/project"
    assert payload["agent_event"] == "beforeShellExecution" and "command" not in payload


def test_mcp_input_string_is_parsed_and_named_like_cursors_matcher() -> None:
    payload = CURSOR.canonical_payload(spec_of(MCP), MCP)
    assert payload["tool_name"] == "MCP:database_query"
    assert payload["tool_input"] == {"query": "SELECT * FROM users"}


def test_read_edit_prompt_stop_and_tools() -> None:
    assert CURSOR.canonical_payload(spec_of(READ), READ)["tool_input"] == {"file_path": READ["file_path"]}
    edit = CURSOR.canonical_payload(spec_of(EDIT), EDIT)
    assert (edit["tool_name"], edit["tool_input"]["file_path"]) == ("Edit", EDIT["file_path"])
    assert CURSOR.canonical_payload(spec_of(PROMPT), PROMPT)["prompt"] == "Fix the bug in main.ts"
    assert CURSOR.canonical_payload(spec_of(STOP), STOP)["stop_hook_active"] is False
    pre = CURSOR.canonical_payload(spec_of(PRE), PRE)
    assert (pre["tool_name"], pre["tool_input"]) == ("Bash", {"command": "rm -rf build"})


def test_cursors_hooks_read_cursors_payload() -> None:
    stdin = json.loads(CURSOR.hook_input(spec_of(SHELL), SHELL).stdin)
    assert stdin == SHELL


def test_a_hook_runs_only_for_the_event_it_was_filed_under() -> None:
    f = parse({"version": 1, "hooks": {"beforeShellExecution": [{"command": "a", "matcher": "^npm "}],
                                       "preToolUse": [{"command": "b", "matcher": "Shell"}]}})
    shell_hook, pre_hook = f.hooks
    shell = CURSOR.canonical_payload(spec_of(SHELL), SHELL)
    pre = CURSOR.canonical_payload(spec_of(PRE), PRE)
    assert selects(spec_of(SHELL), shell_hook, shell) and not selects(spec_of(SHELL), pre_hook, shell)
    assert selects(spec_of(PRE), pre_hook, pre) and not selects(spec_of(PRE), shell_hook, pre)
    other = {**SHELL, "command": "git push"}
    assert not selects(spec_of(other), shell_hook, CURSOR.canonical_payload(spec_of(other), other))


# -- answers ----------------------------------------------------------------------------


def test_deny_with_messages() -> None:
    # C1 "beforeShellExecution / beforeMCPExecution" output.
    o = outcome(SHELL, b'{"permission": "deny", "user_message": "Blocked", "agent_message": "use a narrower path"}')
    assert (o.decision, o.reason, o.system_message) == ("deny", "use a narrower path", "Blocked")


def test_exit_2_denies_and_other_failures_fail_open() -> None:
    # C1: "Exit code 2: block the action, same as returning deny"; other codes fail open.
    assert outcome(SHELL, code=2, stderr=b"no").status == "block"
    assert outcome(SHELL, code=1, stderr=b"boom").status == "error"


def test_a_permission_hook_that_answers_no_json_blocks() -> None:
    # ADR A3: "For permission hooks, invalid JSON or a schema-mismatching response blocks".
    o = outcome(SHELL, b"hello")
    assert o.decision == "deny" and "not a JSON object" in (o.reason or "")
    assert outcome(STOP, b"hello").decision is None


def test_rewrite_passes_when_granted_and_is_dropped_when_not() -> None:
    # T-rskim: {"permission": "allow", "updated_input": {"command": ...}} (preToolUse, C1).
    o = outcome(PRE, b'{"permission": "allow", "updated_input": {"command": "rm -rf ./build"}}')
    assert (o.decision, o.updated_input) == ("allow", {"command": "rm -rf ./build"})
    kept, dropped = restrict(o, frozenset({"approve", "rewrite_input"}))
    assert kept.updated_input == {"command": "rm -rf ./build"} and dropped == ()
    cut, dropped = restrict(o, frozenset())
    assert cut.updated_input is None and cut.decision is None and dropped == ("approve", "rewrite_input")


def test_updated_input_is_read_on_pre_tool_use_only() -> None:
    o = outcome(SHELL, b'{"permission": "allow", "updated_input": {"command": "ls"}}')
    assert o.updated_input is None and any("updated_input" in n for n in o.notes)


def test_prompt_continue_false_blocks_and_stop_followup_goes_on() -> None:
    o = outcome(PROMPT, b'{"continue": false, "user_message": "no secrets in prompts"}')
    assert (o.status, o.reason) == ("block", "no secrets in prompts")
    f = outcome(STOP, b'{"followup_message": "run the tests"}')
    assert (f.status, f.reason) == ("block", "run the tests")


def test_render_shell_allow_deny_ask_and_nothing() -> None:
    spec = spec_of(SHELL)
    assert answer(SHELL, Verdict(event="PreToolUse")) == {}
    assert answer(SHELL, Verdict(event="PreToolUse", decision="allow")) == {"permission": "allow"}
    denied = answer(SHELL, fold(spec, [HookOutcome("h", decision="deny", reason="no rm")]))
    assert denied == {"permission": "deny", "user_message": "no rm", "agent_message": "no rm"}
    blocked = answer(SHELL, Verdict(event="PreToolUse", blocked=True, reason="x\x1b[31m"))
    assert blocked["permission"] == "deny" and "\x1b" not in blocked["agent_message"]
    ask = answer(SHELL, Verdict(event="PreToolUse", decision="ask", decision_reason="sure?"))
    assert ask == {"permission": "ask", "agent_message": "sure?", "user_message": "sure?"}


def test_render_rewrite_on_pre_tool_use_and_never_silently_elsewhere() -> None:
    v = Verdict(event="PreToolUse", decision="allow", updated_input={"command": "ls"})
    assert answer(PRE, v) == {"permission": "allow", "updated_input": {"command": "ls"}}
    assert answer(SHELL, v)["permission"] == "ask"  # Cursor reads no rewrite there
    assert answer(READ, v) == {"permission": "deny"}


def test_render_read_file_is_permission_only() -> None:
    assert answer(READ, Verdict(event="PreToolUse", blocked=True, reason="secret")) == {"permission": "deny"}
    assert answer(READ, Verdict(event="PreToolUse", decision="ask")) == {"permission": "deny"}


def test_render_prompt_stop_context() -> None:
    assert answer(PROMPT, Verdict(event="UserPromptSubmit")) == {"continue": True}
    assert answer(PROMPT, Verdict(event="UserPromptSubmit", blocked=True, reason="no")) == {
        "continue": False, "user_message": "no"}
    assert answer(STOP, Verdict(event="Stop", blocked=True, reason="tests fail")) == {"followup_message": "tests fail"}
    assert answer(STOP, Verdict(event="Stop")) == {}
    start = {"conversation_id": "c", "hook_event_name": "sessionStart", "workspace_roots": ["/r"]}
    assert answer(start, Verdict(event="SessionStart", additional_context="ctx")) == {"additional_context": "ctx"}
    assert answer(EDIT, Verdict(event="PostToolUse", blocked=True, reason="x")) == {}


def test_subagent_start_can_deny() -> None:
    payload = {"conversation_id": "c", "hook_event_name": "subagentStart", "workspace_roots": ["/r"],
               "subagent_type": "explore"}
    o = outcome(payload, b'{"permission": "deny", "agent_message": "no subagents"}')
    assert o.status == "block"
    v = fold(spec_of(payload), [o])
    assert answer(payload, v)["permission"] == "deny"


# -- through the executor ---------------------------------------------------------------


def test_executor_runs_cursors_user_hook_with_cursors_payload(tmp_path: Path) -> None:
    home, hc, project = tmp_path / "u", tmp_path / "hc", tmp_path / "p"
    (home / ".cursor").mkdir(parents=True)
    hc.mkdir()
    project.mkdir()
    (hc / "config.toml").write_text('[allowlist]\nallow = ["*"]\n')
    (home / ".cursor" / "hooks.json").write_text(json.dumps({"version": 1, "hooks": {
        "beforeShellExecution": [{"command": "check.sh"}], "preToolUse": [{"command": "other.sh"}]}}))
    seen: list[RunRequest] = []

    def run(request: RunRequest) -> RunResult:
        seen.append(request)
        return RunResult(0, b'{"permission": "deny", "agent_message": "no npm"}')

    fake = FakeSandbox(run)
    with HookExecutor(load_settings(home=hc, managed_dir=tmp_path / "m"), sandboxes={"docker": fake},
                      environ={"HOME": str(home)}) as ex:
        raw = {**SHELL, "workspace_roots": [str(project)], "cwd": str(project)}
        spec = CURSOR.resolve_event(None, raw)
        verdict = ex.dispatch(spec, CURSOR.canonical_payload(spec, raw), dialect=CURSOR, raw=raw)
    assert [r.command for r in seen] == ["check.sh"]
    assert json.loads(seen[0].stdin)["hook_event_name"] == "beforeShellExecution"
    assert seen[0].env["CURSOR_PROJECT_DIR"] == str(project)
    out: AgentAnswer = CURSOR.render(spec, verdict)
    assert json.loads(out.stdout) == {"permission": "deny", "user_message": "no npm", "agent_message": "no npm"}
