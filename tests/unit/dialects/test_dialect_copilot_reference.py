"""Goldens for the rules of Copilot CLI's current hooks reference (issue 22): payload + the hook's
output + hookcage's answer, each citing the reference (no Docker).

R: docs.github.com/en/copilot/reference/hooks-reference (github/docs
content/copilot/reference/hooks-reference.md, stored version at commit 05da5bc3, read 2026-11-27),
which superseded cli-hooks-reference.md. Section names are R's.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from executor.core.hooks import Scope
from executor.core.policy import merge
from executor.core.protocol import HookOutcome, Verdict, fold, restrict
from executor.dialects import selects
from executor.dialects.copilot import DIALECT as COPILOT
from executor.dialects.cursor import NativeEvent
from executor.errors import SandboxUnavailable
from executor.executor import HookExecutor
from executor.sandbox import FakeSandbox, RunRequest, RunResult
from executor.settings import load_settings

PRE = {"sessionId": "s1", "timestamp": 1704614600000, "cwd": "/repo", "toolName": "bash",
       "toolArgs": "{\"command\":\"git push --force origin main\"}"}
POST = {"sessionId": "s1", "timestamp": 1704614700000, "cwd": "/repo", "toolName": "bash",
        "toolArgs": "{\"command\":\"ls\"}", "toolResult": {"resultType": "success", "textResultForLlm": "a b"}}
FAILURE = {"sessionId": "s1", "timestamp": 1704614700000, "cwd": "/repo", "toolName": "bash",
           "toolArgs": "{\"command\":\"make\"}", "error": "exit 2"}
START = {"sessionId": "s1", "timestamp": 1704614400000, "cwd": "/repo", "source": "new", "initialPrompt": "hi"}
NOTE = {"sessionId": "s1", "timestamp": 1704614400000, "cwd": "/repo", "hook_event_name": "Notification",
        "message": "Shell completed", "notification_type": "shell_completed"}
PERM = {"sessionId": "s1", "timestamp": 1704614600000, "cwd": "/repo", "toolName": "bash",
        "toolArgs": "{\"command\":\"git push\"}"}


def spec(name: str, payload: dict[str, Any]) -> NativeEvent:
    s = COPILOT.resolve_event(name, payload)
    assert isinstance(s, NativeEvent)
    return s


def parse(hooks: dict[str, Any], **top: Any) -> Any:
    return COPILOT.parse({"version": 1, "hooks": hooks, **top}, scope=Scope.PROJECT,
                         source="/repo/.github/hooks/a.json", project_root="/repo")


def read(name: str, payload: dict[str, Any], stdout: bytes = b"", code: int | None = 0, **facts: Any) -> HookOutcome:
    return COPILOT.read_answer(spec(name, payload), "guard.sh", code, stdout, facts.pop("stderr", b""), **facts)


def answer(name: str, payload: dict[str, Any], outcomes: list[HookOutcome]) -> Any:
    s = spec(name, payload)
    out = COPILOT.render(s, fold(s, outcomes))
    return out.exit_code, json.loads(out.stdout) if out.exit_code == 0 else out.stdout


# -- preToolUse fails closed (R "Exit codes for command hooks") ------------------------------------


def test_a_guard_that_exits_1_denies_the_call() -> None:
    # github/awesome-copilot hooks/tool-guardian: prints its findings on stdout and exits 1 in block mode.
    # R: "a non-zero exit (other than exit 2) denies the tool call with 'Denied by preToolUse hook (hook errored)'".
    o = read("preToolUse", PRE, b"Tool Guardian: 1 threat(s) detected\n", 1, stderr=b"blocked\n")
    assert o.decision == "deny"
    assert o.reason is not None and o.reason.startswith("Denied by preToolUse hook (hook errored): exited 1")
    code, out = answer("preToolUse", PRE, [o])
    assert code == 0 and out["permissionDecision"] == "deny"
    assert out["permissionDecisionReason"].startswith("Denied by preToolUse hook (hook errored)")


def test_a_non_zero_exit_denies_even_when_stdout_says_allow() -> None:
    # R: "even if the hook's stdout JSON reports permissionDecision: 'allow'".
    allow = b'{"permissionDecision": "allow", "modifiedArgs": {"command": "ls"}}'
    for code in (1, 2, 127):
        o = read("preToolUse", PRE, allow, code)
        assert (o.decision, o.updated_input) == ("deny", None), code


def test_exit_2_denies_with_the_reason_its_json_gives() -> None:
    # R: "exit 2 is treated as a deny: any stdout JSON is merged with the deny decision".
    o = read("preToolUse", PRE, b'{"permissionDecision": "deny", "permissionDecisionReason": "force push"}', 2)
    assert (o.decision, o.reason) == ("deny", "force push")
    bare = read("preToolUse", PRE, b"", 2, stderr=b"no force pushes\n")
    assert (bare.decision, bare.reason) == ("deny", "no force pushes")


@pytest.mark.parametrize("facts", [{"oom_killed": True}, {}])
def test_a_crash_denies(facts: dict[str, Any]) -> None:
    # R: "a crash ... denies the tool call" (killed for memory, or killed before it answered).
    o = read("preToolUse", PRE, b"", None, **facts)
    assert o.decision == "deny" and "hook errored" in (o.reason or "")


def test_a_timeout_lets_the_call_through_with_a_warning() -> None:
    # R: "Timeouts are always fail-open, including for preToolUse and admin-deployed policy hooks".
    o = read("preToolUse", PRE, b"", None, timed_out=True, timeout=10.0)
    assert (o.status, o.decision) == ("ok", None)
    assert "timed out after 10 s" in o.notes[0] and "fail-open" in o.notes[0]
    code, out = answer("preToolUse", PRE, [o])
    assert (code, out) == (0, {})


def test_other_events_fail_open_and_exit_2_is_a_warning() -> None:
    # R "Exit codes": 2 "Treated as a warning by default. stderr is surfaced to the user"; other non-zero
    # "Logged as a hook failure. The run continues (fail-open)".
    warned = read("postToolUse", POST, b"", 2, stderr=b"lint failed\n")
    assert (warned.status, warned.system_message) == ("ok", "lint failed")
    assert read("postToolUse", POST, b"", 1).status == "error"
    assert read("sessionStart", START, b"", 1).status == "error"


def hooks_file(tmp_path: Path, hooks: dict[str, Any]) -> tuple[Path, Path, Path]:
    home, hc, project = tmp_path / "u", tmp_path / "hc", tmp_path / "p"
    (home / ".copilot" / "hooks").mkdir(parents=True)
    hc.mkdir()
    project.mkdir()
    (hc / "config.toml").write_text('[allowlist]\nallow = ["*"]\n')
    (home / ".copilot" / "hooks" / "a.json").write_text(json.dumps({"version": 1, "hooks": hooks}))
    return home, hc, project


def dispatch(tmp_path: Path, hooks: dict[str, Any], run: Callable[[RunRequest], RunResult],
             event: str = "preToolUse", payload: dict[str, Any] = PRE) -> Any:
    home, hc, project = hooks_file(tmp_path, hooks)
    with HookExecutor(load_settings(home=hc, managed_dir=tmp_path / "m"), sandboxes={"docker": FakeSandbox(run)},
                      environ={"HOME": str(home)}) as ex:
        raw = {**payload, "cwd": str(project)}
        s = spec(event, raw)
        verdict = ex.dispatch(s, COPILOT.canonical_payload(s, raw), dialect=COPILOT, raw=raw)
    out = COPILOT.render(s, verdict)
    return json.loads(out.stdout) if out.exit_code == 0 else out


def test_through_the_executor_a_guard_that_errors_denies_and_one_that_times_out_does_not(tmp_path: Path) -> None:
    hooks = {"preToolUse": [{"bash": "guard.sh"}]}
    denied = dispatch(tmp_path / "a", hooks, lambda r: RunResult(1, b"threat\n"))
    assert denied["permissionDecision"] == "deny"
    allowed = dispatch(tmp_path / "b", hooks, lambda r: RunResult(None, timed_out=True))
    assert "permissionDecision" not in allowed


def test_a_guard_hookcage_cannot_run_denies(tmp_path: Path) -> None:
    # Copilot would have run it (and denied on a crash); hookcage failing to start it must not let the call by.
    def down(request: RunRequest) -> RunResult:
        raise SandboxUnavailable("the container engine is not running")

    out = dispatch(tmp_path, {"preToolUse": [{"bash": "guard.sh"}]}, down)
    assert out["permissionDecision"] == "deny" and "container engine" in out["permissionDecisionReason"]


# -- the command keys (R "Command hooks") --------------------------------------------------------


def test_one_passwords_file_runs_its_command_with_its_timeout() -> None:
    # 1Password/agent-hooks .github/hooks/hooks.json (commit 6d88e3c4): "command" + "timeout", no "type".
    f = parse({"PreToolUse": [{"command": "bin/run-hook.sh 1password-validate-mounted-env-files", "timeout": 15}]})
    assert f.problems == ()
    (hook,) = f.hooks
    assert (hook.command, hook.timeout, hook.on_error) == ("bin/run-hook.sh 1password-validate-mounted-env-files",
                                                           15.0, "deny")
    # Its adapters/github-copilot.sh denies with {"continue": false, "stopReason"}; the route is camelCase.
    o = read("preToolUse", PRE, b'{"continue": false, "stopReason": "x"}')
    assert answer("preToolUse", PRE, [o]) == (0, {"permissionDecision": "deny", "permissionDecisionReason": "x"})


def test_bash_wins_over_command_and_timeout_sec_over_timeout() -> None:
    # R: command is "Copied to both bash and powershell when those fields are absent"; timeout is used
    # "only when timeoutSec is absent".
    f = parse({"postToolUse": [{"bash": "a.sh", "command": "b.sh", "timeoutSec": 5, "timeout": 50}]})
    assert (f.hooks[0].command, f.hooks[0].timeout) == ("a.sh", 5.0)
    assert parse({"postToolUse": [{"command": "b.sh"}]}).hooks[0].timeout == 30.0  # R: default 30


def test_exec_and_args_run_without_a_shell() -> None:
    # R: "Arguments are passed directly to the executable without shell interpretation".
    f = parse({"preToolUse": [{"exec": "scripts/check", "args": ["--mode", "a b; rm -rf /"]}]})
    assert f.errors == () and f.hooks[0].command == "scripts/check --mode 'a b; rm -rf /'"
    mixed = parse({"preToolUse": [{"exec": "x", "bash": "y"}]})
    assert mixed.hooks[0].invalid and mixed.errors[0].path == "$.hooks.preToolUse[0].exec"
    bad = parse({"preToolUse": [{"exec": "x", "args": "--all"}]})
    assert bad.errors[0].path == "$.hooks.preToolUse[0].args"


def test_http_hooks_are_read_and_not_run() -> None:
    f = parse({"postToolUse": [{"type": "http", "url": "https://h.example/c", "headers": {}, "timeout": 5}]})
    assert f.problems == ()
    assert merge([f]).skip(f.hooks[0]) is not None


def test_an_event_list_that_is_not_an_array_rejects_the_file() -> None:
    # R: "Structural errors (invalid JSON, a bad version, or a non-array event list) still reject the entire file".
    f = parse({"preToolUse": [{"bash": "a.sh"}], "postToolUse": {"bash": "b.sh"}})
    assert f.hooks == () and f.errors[0].path == "$.hooks.postToolUse"


def test_disable_all_hooks_switches_off_that_file() -> None:
    # R "Disable all hooks": "Inside a single .github/hooks/*.json file — only the hooks declared in that file".
    f = parse({"preToolUse": [{"bash": "a.sh"}]}, disableAllHooks=True)
    assert merge([f]).skip(f.hooks[0]) is not None
    assert not any(p.path == "$.disableAllHooks" and "unknown" in p.message for p in f.problems)


# -- matchers (R "Matcher filtering", "Claude-format matchers") ------------------------------------


def fires(hook: Any, event: str, payload: dict[str, Any]) -> bool:
    s = spec(event, payload)
    return selects(s, hook, COPILOT.canonical_payload(s, payload))


def test_pre_and_post_tool_use_matchers_are_anchored_on_the_runtime_name() -> None:
    f = parse({"preToolUse": [{"bash": "a", "matcher": "bash|edit"}], "postToolUse": [{"bash": "b", "matcher": "edit"}]})
    pre, post = f.hooks
    assert fires(pre, "preToolUse", PRE) and not fires(pre, "preToolUse", {**PRE, "toolName": "view"})
    assert not fires(pre, "preToolUse", {**PRE, "toolName": "bash2"})
    assert not fires(post, "postToolUse", POST) and fires(post, "postToolUse", {**POST, "toolName": "edit"})


@pytest.mark.parametrize(
    ("matcher", "tools", "not_tools"),
    [
        ("Bash", ["bash", "powershell"], ["view"]),
        ("Edit|Write", ["edit", "str_replace_editor", "apply_patch", "create"], ["bash"]),
        ("bash", ["bash"], ["powershell"]),
        ("Task", ["task"], ["bash"]),
        ("Agent", ["task"], ["bash"]),
        ("Web.*", ["web_fetch", "web_search"], ["view"]),
        ("my_.*", ["my_tool"], ["bash"]),
        ("**", ["bash", "view"], []),
    ],
)
def test_a_pascal_case_pre_tool_use_matcher_reads_claudes_rule(matcher: str, tools: list[str],
                                                               not_tools: list[str]) -> None:
    hook = parse({"PreToolUse": [{"bash": "a", "matcher": matcher}]}).hooks[0]
    for tool in tools:
        assert fires(hook, "preToolUse", {**PRE, "toolName": tool}), tool
    for tool in not_tools:
        assert not fires(hook, "preToolUse", {**PRE, "toolName": tool}), tool


def test_pascal_case_pre_tool_use_reads_the_claude_tool_name() -> None:
    # R: "Payloads for PascalCase PreToolUse report tool_name as the Claude tool name (for example, Bash, not bash)".
    s = spec("preToolUse", PRE)
    snake = json.loads(COPILOT.form_input(s, PRE, "snake_case").stdin)
    assert (snake["hook_event_name"], snake["tool_name"]) == ("PreToolUse", "Bash")
    assert snake["tool_input"] == {"command": "git push --force origin main"}
    post = json.loads(COPILOT.form_input(spec("postToolUse", POST), POST, "snake_case").stdin)
    assert post["tool_result"] == {"result_type": "success", "text_result_for_llm": "a b"}


def test_subagent_start_matches_the_agent_name() -> None:
    hook = parse({"subagentStart": [{"bash": "a", "matcher": "explore|task"}]}).hooks[0]
    payload = {"sessionId": "s1", "timestamp": 1, "cwd": "/repo", "transcriptPath": "/t", "agentName": "explore"}
    assert fires(hook, "subagentStart", payload)
    assert not fires(hook, "subagentStart", {**payload, "agentName": "code-review"})


# -- stdout and context (R "Progress messages", "Hook events") ------------------------------------


def test_progress_lines_are_not_the_answer() -> None:
    out = b'{"type": "progress", "message": "Checking policy..."}\n{"permissionDecision": "deny", ' \
          b'"permissionDecisionReason": "policy"}\n'
    assert read("preToolUse", PRE, out).decision == "deny"
    two = b'{"permissionDecision": "deny"}\n{"permissionDecision": "deny"}\n'
    o = read("preToolUse", PRE, two)
    assert o.decision is None and "no output" in o.notes[0]  # R: two objects "will therefore ... be ignored"


def test_session_start_context() -> None:
    # R: sessionStart "can inject additionalContext into the session"; plain text is no output.
    o = read("sessionStart", START, b'{"additionalContext": "Use pnpm."}')
    assert o.additional_context == "Use pnpm."
    assert answer("sessionStart", START, [o]) == (0, {"additionalContext": "Use pnpm."})
    assert read("sessionStart", START, b"Use pnpm.\n").additional_context is None


def test_post_tool_use_context_and_result_rewrite() -> None:
    # R "postToolUse output": modifiedResult (must have resultType success) and additionalContext.
    out = b'{"modifiedResult": {"resultType": "success", "textResultForLlm": "[redacted]"}, "additionalContext": "n"}'
    o = read("postToolUse", POST, out)
    assert o.additional_context == "n"
    kept, _ = restrict(o, frozenset({"rewrite_output"}))
    cut, dropped = restrict(o, frozenset())
    assert dropped == ("rewrite_output",)
    assert answer("postToolUse", POST, [kept]) == (0, {
        "modifiedResult": {"resultType": "success", "textResultForLlm": "[redacted]"}, "additionalContext": "n"})
    assert answer("postToolUse", POST, [cut]) == (0, {"additionalContext": "n"})


def test_post_tool_use_failure_exit_2_is_context_on_stdout() -> None:
    # R: "For postToolUseFailure, exit 2 is treated as additionalContext and stdout is appended to the failure".
    o = read("postToolUseFailure", FAILURE, b"Run make clean first.\n", 2)
    assert (o.status, o.additional_context) == ("ok", "Run make clean first.")
    s = spec("postToolUseFailure", FAILURE)
    out = COPILOT.render(s, fold(s, [o]))
    assert (out.exit_code, out.stdout) == (2, "Run make clean first.\n")


def test_notification_payload_keeps_its_snake_case_keys_and_context() -> None:
    # R "notification hook": the camelCase payload carries hook_event_name and notification_type as they are.
    s = spec("notification", NOTE)
    assert s.native == "notification"
    assert json.loads(COPILOT.hook_input(s, NOTE).stdin) == NOTE
    hook = parse({"notification": [{"bash": "a", "matcher": "shell_.*"}]}).hooks[0]
    assert fires(hook, "notification", NOTE)
    o = read("notification", NOTE, b'{"additionalContext": "the build finished"}')
    assert answer("notification", NOTE, [o]) == (0, {"additionalContext": "the build finished"})


def test_user_prompt_submitted_output_is_dropped() -> None:
    # R: "Command and HTTP config-file userPromptSubmitted hooks have their output dropped".
    prompt = {"sessionId": "s1", "timestamp": 1, "cwd": "/repo", "prompt": "x"}
    o = read("userPromptSubmitted", prompt, b'{"additionalContext": "ctx", "continue": false}')
    assert (o.additional_context, o.continue_) == (None, True) and o.notes


def test_permission_request_interrupt_stops_the_agent() -> None:
    # R "permissionRequest decision control": "interrupt ... When true combined with 'deny', stops the agent".
    o = read("permissionRequest", PERM, b'{"behavior": "deny", "message": "no", "interrupt": true}')
    assert o.decision == "deny" and not o.continue_
    assert answer("permissionRequest", PERM, [o]) == (0, {"behavior": "deny", "message": "no", "interrupt": True})


def test_new_and_pascal_own_events() -> None:
    # R "Hook events": userPromptTransformed; "errorOccurred / ErrorOccurred".
    f = parse({"ErrorOccurred": [{"bash": "a"}], "userPromptTransformed": [{"bash": "b"}]})
    assert f.errors == () and [h.event for h in f.hooks] == ["errorOccurred", "userPromptTransformed"]
    payload = {"sessionId": "s1", "timestamp": 1, "cwd": "/repo", "prompt": "x", "transformedPrompt": "y"}
    o = read("userPromptTransformed", payload, b'{"modifiedTransformedPrompt": "z"}')
    assert "not pass" in o.notes[0]
    assert answer("userPromptTransformed", payload, [o]) == (0, {})


def test_hookcages_context_and_block_on_post_tool_use_failure_go_to_stdout() -> None:
    s = spec("postToolUseFailure", FAILURE)
    out = COPILOT.render(s, Verdict(event="PostToolUseFailure", additional_context="ctx", blocked=True, reason="r"))
    assert (out.exit_code, out.stdout) == (2, "ctx\nr\n")
