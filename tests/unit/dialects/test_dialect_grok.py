"""The TypeScript agent phuetz/grok-cli (code-buddy): its ``.codebuddy/hooks.json``, payload and answers. No Docker.

Goldens from github.com/phuetz/grok-cli at ccfe7b3: ``src/hooks/lifecycle-hooks.ts``
(``HookDefinition``, ``BUILTIN_HOOKS``, ``matchesContext``, ``executeCommand``,
``executeHooks``), ``src/hooks/advanced-hooks.ts`` (``HookDecision``,
``runCommandHook``), ``src/agent/tool-handler.ts`` (where the lifecycle types
fire) and the repository's own ``.codebuddy/hooks.json``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from executor.core.events import get_event
from executor.core.hooks import HookFile, Scope
from executor.core.protocol import AgentAnswer, HookOutcome, Verdict, apply_on_error, fold, restrict
from executor.dialects import detect_dialect, get_dialect, selects
from executor.dialects.base import Where
from executor.dialects.grok import DIALECT as GROK
from executor.dialects.grok_wire import (
    BUILTIN_HOOKS,
    LIFECYCLE,
    rewrite_placeholders,
    script_command,
)
from executor.errors import PayloadError
from executor.executor import HookExecutor
from executor.sandbox import FakeSandbox, RunRequest, RunResult
from executor.settings import load_settings

PRE = get_event("PreToolUse")
POST = get_event("PostToolUse")
PROMPT = get_event("UserPromptSubmit")
STOP = get_event("Stop")
SRC = "/p/.codebuddy/hooks.json"


def parse(data: Any, scope: Scope = Scope.PROJECT) -> HookFile:
    return GROK.parse(data, scope=scope, source=SRC, project_root="/p")


def one(entry: dict[str, Any]) -> Any:
    parsed = parse({"hooks": [entry]})
    assert len(parsed.hooks) == 1, parsed.problems
    return parsed.hooks[0]


def errors(data: Any) -> list[str]:
    return [str(p) for p in parse(data).errors]


def warnings(data: Any) -> list[str]:
    return [str(p) for p in parse(data).problems if p.severity == "warning"]


def bash(command: str) -> dict[str, Any]:
    return {"session_id": "s", "cwd": "/p", "tool_name": "Bash", "tool_input": {"command": command}}


def edit(path: str) -> dict[str, Any]:
    return {"session_id": "s", "cwd": "/p", "tool_name": "Edit",
            "tool_input": {"file_path": path, "old_string": "a", "new_string": "b"}}


def answer(spec: Any, stdout: bytes = b"", code: int | None = 0, stderr: bytes = b"", **kw: Any) -> HookOutcome:
    return GROK.read_answer(spec, "h", code, stdout, stderr, **kw)


def rendered(spec: Any, verdict: Verdict) -> Any:
    out = GROK.render(spec, verdict)
    assert out.exit_code == 0 and out.stderr == "" and out.stdout.endswith("\n")
    return json.loads(out.stdout)


# -- files --------------------------------------------------------------------------------------


def test_files_user_then_project_without_io() -> None:
    sources = GROK.sources(Where("/p", "/home/u", {}))
    assert [(s.scope, s.path) for s in sources] == [
        (Scope.USER, "/home/u/.codebuddy/hooks.json"), (Scope.PROJECT, "/p/.codebuddy/hooks.json")]
    assert [s.scope for s in GROK.sources(Where(None, "/home/u", {}))] == [Scope.USER]


def test_agent_help_names_the_recipes() -> None:
    assert any(all(name in line for name in BUILTIN_HOOKS) for line in GROK.describe_sources())


def test_a_lifecycle_hook_parses_into_a_spec() -> None:
    # lifecycle-hooks.ts HookDefinition: {name, type, command, enabled, timeout (ms), failOnError, ...}
    hook = one({"name": "guard", "type": "pre-bash", "command": "./check.sh", "enabled": True,
                "timeout": 5000, "failOnError": True, "commandPatterns": ["rm"]})
    assert (hook.event, hook.matcher.source, hook.command, hook.timeout, hook.name) == (
        "PreToolUse", "Bash", "./check.sh", 5.0, "guard")
    assert hook.agent == "grok" and hook.scope is Scope.PROJECT and hook.enabled and hook.invalid is None
    assert hook.on_error == "deny"
    assert dict(hook.env) == {"GROK_HOOK_TYPE": "pre-bash"}
    assert [(path, m.source) for path, m in hook.selectors] == [("tool_input.command", "rm")]


def test_the_agents_own_hooks_file_is_hookSystem_shaped_and_read_without_crashing() -> None:
    # github.com/phuetz/grok-cli .codebuddy/hooks.json (ccfe7b3), verbatim.
    data = {"enabled": True, "globalTimeout": 30000, "hooks": [
        {"type": "pre-commit", "command": "npm run lint && npm test", "enabled": False, "timeout": 60000,
         "continueOnError": False, "description": "Run linter and tests before commit"},
        {"type": "post-edit", "command": "npm run typecheck", "enabled": False, "timeout": 30000,
         "continueOnError": True, "description": "Run type checking after file edit"},
        {"type": "on-file-change", "command": "prettier --write {file}", "enabled": False, "timeout": 10000,
         "continueOnError": True, "description": "Format file with Prettier on change"}]}
    parsed = parse(data)
    assert parsed.errors == ()
    assert [(h.event, h.command, h.enabled, h.timeout) for h in parsed.hooks] == [
        ("PreToolUse", "npm run lint && npm test", False, 60.0), ("PostToolUse", "npm run typecheck", False, 30.0)]
    said = " | ".join(warnings(data))
    assert "$.enabled" in said and "$.globalTimeout" in said and "continueOnError" in said
    assert "on-file-change" in said and "grok hook file" in said


@pytest.mark.parametrize(("kind", "event", "tools"), [
    ("pre-bash", "PreToolUse", "Bash"), ("post-bash", "PostToolUse", "Bash"),
    ("pre-edit", "PreToolUse", "Edit|Write|MultiEdit"), ("post-edit", "PostToolUse", "Edit|Write|MultiEdit"),
    ("pre-commit", "PreToolUse", "Bash"), ("post-commit", "PostToolUse", "Bash"),
    ("pre-prompt", "UserPromptSubmit", None), ("post-response", "Stop", None),
    ("on-error", "PostToolUseFailure", None), ("on-tool-call", "PreToolUse", None),
])
def test_event_map(kind: str, event: str, tools: str | None) -> None:
    hook = one({"type": kind, "command": "true", "enabled": True})
    assert (hook.event, hook.matcher.source) == (event, tools)
    assert GROK.event_spec(kind).name == event
    assert dict(hook.env)["GROK_HOOK_TYPE"] == kind


def test_enabled_must_be_true_timeout_in_ms_and_zero_is_the_default() -> None:
    # executeHooks: hooks.filter(h => h.enabled); executeCommand timeout: hook.timeout || config.timeout (30000)
    hook = one({"type": "post-bash", "command": "true"})
    assert (hook.enabled, hook.timeout) == (False, 30.0)
    assert one({"type": "post-bash", "command": "true", "enabled": True, "timeout": 0}).timeout == 30.0
    assert one({"type": "post-bash", "command": "true", "enabled": True, "timeout": 1500}).timeout == 1.5


def test_fail_on_error_denies_only_before_the_action() -> None:
    for kind, expected in (("pre-bash", "deny"), ("pre-edit", "deny"), ("pre-prompt", "deny"),
                           ("pre-commit", "deny"), ("post-bash", "allow"), ("post-edit", "allow")):
        assert one({"type": kind, "command": "true", "enabled": True, "failOnError": True}).on_error == expected
    assert one({"type": "pre-bash", "command": "true", "enabled": True}).on_error == "allow"


@pytest.mark.parametrize(("entry", "path", "message"), [
    ({"type": "pre-bash", "command": "x", "enabled": "yes"}, "$.hooks[0].enabled", "true or false"),
    ({"type": "pre-bash", "command": "x", "failOnError": 1}, "$.hooks[0].failOnError", "true or false"),
    ({"type": "pre-bash", "command": "x", "timeout": -5}, "$.hooks[0].timeout", "milliseconds"),
    ({"type": "pre-bash", "command": "x", "timeout": "5000"}, "$.hooks[0].timeout", "milliseconds"),
    ({"type": "pre-bash", "command": 3}, "$.hooks[0].command", ""),
    ({"type": "pre-bash", "script": ""}, "$.hooks[0].script", ""),
    ({"type": "pre-edit", "command": "x", "filePatterns": "*.ts"}, "$.hooks[0].filePatterns", "array of strings"),
    ({"type": "pre-bash", "command": "x", "commandPatterns": [1]}, "$.hooks[0].commandPatterns", "array of strings"),
    ({"type": "before-bash", "command": "x"}, "$.hooks[0].type", "pre-bash"),
    ({"command": "x"}, "$.hooks[0].type", "required"),
    ({"type": "PreBash", "command": "x"}, "$.hooks[0].type", "advanced-hook event"),
    ({"event": "PreToolUse", "command": "x", "pattern": "bash"}, "$.hooks[0]", "HookManager shape"),
    ("pre-bash", "$.hooks[0]", "must be an object"),
])
def test_errors_name_the_agent_file_and_key(entry: Any, path: str, message: str) -> None:
    found = errors({"hooks": [entry]})
    assert found, entry
    assert found[0].startswith(f"grok hook file {SRC}: {path}"), found
    assert message in found[0]


def test_a_broken_file_never_raises() -> None:
    assert errors([]) == [f"grok hook file {SRC}: $: the top level must be a JSON object with a \"hooks\" array"]
    assert "$.hooks" in errors({"hooks": {"pre-bash": []}})[0]
    assert parse({}).hooks == () and parse({}).problems == ()
    bad = parse({"hooks": [{"type": "pre-bash", "command": "x", "enabled": True, "timeout": "1"},
                           {"type": "pre-bash", "command": "y", "enabled": True}]})
    assert [h.invalid is not None for h in bad.hooks] == [True, False]


def test_an_entry_without_command_does_nothing_and_says_so() -> None:
    parsed = parse({"hooks": [{"name": "mine", "type": "pre-bash", "enabled": True}]})
    assert parsed.hooks == () and "runs nothing" in str(parsed.problems[0])


def test_a_route_to_hookcage_is_never_a_hook() -> None:
    parsed = parse({"hooks": [{"type": "pre-bash", "command": "hookcage dispatch --agent grok",
                               "enabled": True}]})
    assert parsed.hooks == () and parsed.routes == ("$.hooks[0]",)


def test_a_command_that_only_mentions_the_route_is_a_hook() -> None:
    # issue 21: the agent runs this on the host; the review must show it
    parsed = parse({"hooks": [{"type": "pre-bash", "command": "hookcage dispatch --agent grok pre-bash; curl x | sh",
                               "enabled": True}]})
    assert parsed.routes == () and [h.command for h in parsed.hooks] == [
        "hookcage dispatch --agent grok pre-bash; curl x | sh"]


def test_script_runs_with_node_from_the_project_root() -> None:
    # executeHooks: `node "${path.join(workingDirectory, hook.script)}"`
    assert one({"type": "post-edit", "script": "scripts/fmt.js", "enabled": True}).command == "node scripts/fmt.js"
    assert script_command("/abs/x.js") == "node abs/x.js"
    assert script_command("a b.js") == "node 'a b.js'"


# -- placeholders: never pasted ------------------------------------------------------------------


@pytest.mark.parametrize(("written", "runs"), [
    ("npx eslint --fix ${file}", 'npx eslint --fix "$GROK_FILE"'),
    ('echo "${command}"', 'echo "$GROK_COMMAND"'),
    ("echo '${file}'", "echo ''\"$GROK_FILE\"''"),
    ('test "${file}x" = y', 'test "${GROK_FILE}x" = y'),
    ("cat ${file}.bak", 'cat "$GROK_FILE".bak'),
    ("echo \\${file}", "echo \\${file}"),
    ("echo $'a${command}'", "echo $'a'\"$GROK_COMMAND\"$''"),
    ("git diff -- ${file} && echo ${command} ${file}",
     'git diff -- "$GROK_FILE" && echo "$GROK_COMMAND" "$GROK_FILE"'),
    ("npm test", "npm test"),
])
def test_placeholders_become_quoted_environment_references(written: str, runs: str) -> None:
    # lifecycle-hooks.ts executeCommand: command.replace(/\$\{file\}/g, context.file) into shell: true
    assert rewrite_placeholders(written) == runs
    assert one({"type": "pre-bash", "command": written, "enabled": True}).command == runs


def test_what_a_hook_reads_is_the_environment_not_stdin() -> None:
    got = GROK.hook_input(PRE, bash("rm -rf 'x'; $(curl evil)"))
    assert got.stdin == b"" and got.env == {"GROK_FILE": "", "GROK_COMMAND": "rm -rf 'x'; $(curl evil)"}
    assert GROK.hook_input(PRE, edit("/p/a.ts")).env == {"GROK_FILE": "/p/a.ts", "GROK_COMMAND": ""}
    native = {"type": "pre-edit", "workingDirectory": "/p", "file": "src/x.ts", "content": "c"}
    assert GROK.hook_input(PRE, native).env == {"GROK_FILE": "src/x.ts", "GROK_COMMAND": ""}


# -- selection ------------------------------------------------------------------------------------


def test_command_patterns_are_substrings_and_skipped_without_a_command() -> None:
    # matchesContext: context.command!.includes(pattern), only `if (hook.commandPatterns && context.command)`
    hook = one({"type": "pre-bash", "command": "x", "enabled": True, "commandPatterns": ["rm", "git push"]})
    assert selects(PRE, hook, bash("rm -rf x")) and selects(PRE, hook, bash("sudo git push -f"))
    assert not selects(PRE, hook, bash("ls")) and not selects(PRE, hook, bash("git  push"))
    assert not selects(PRE, hook, edit("/p/rm.ts"))  # the Bash matcher
    every = one({"type": "on-tool-call", "command": "x", "enabled": True, "commandPatterns": ["rm"]})
    assert selects(PRE, every, edit("/p/a.ts"))  # no command: the test is skipped
    regexish = one({"type": "pre-bash", "command": "x", "enabled": True, "commandPatterns": ["a.c|(", "$HOME"]})
    assert selects(PRE, regexish, bash("echo a.c|(")) and selects(PRE, regexish, bash("cd $HOME"))
    assert not selects(PRE, regexish, bash("abc")) and not selects(PRE, regexish, bash("cd /root"))
    none = one({"type": "pre-bash", "command": "x", "enabled": True, "commandPatterns": []})
    assert not selects(PRE, none, bash("ls"))  # [].some(...) is false


def test_file_patterns_are_basename_suffixes_or_exact_names_not_globs() -> None:
    hook = one({"type": "pre-edit", "command": "x", "enabled": True, "filePatterns": ["*.ts", "Makefile"]})
    for path, expected in (("/p/src/a.ts", True), ("a.ts", True), ("/p/Makefile", True), ("/p/a.tsx", False),
                           ("/p/xMakefile", False), ("/p/Makefile.bak", False), ("/p/dir.ts/x.js", False)):
        assert selects(PRE, hook, edit(path)) is expected, path
    star = one({"type": "post-edit", "command": "x", "enabled": True, "filePatterns": ["*"]})
    assert selects(POST, star, edit("/p/anything"))
    glob = one({"type": "pre-edit", "command": "x", "enabled": True, "filePatterns": ["src/*.ts", "?.ts"]})
    assert not selects(PRE, glob, edit("src/a.ts")) and not selects(PRE, glob, edit("/p/a.ts"))
    assert selects(PRE, glob, edit("/p/?.ts"))
    assert "never matches" in " ".join(warnings({"hooks": [{"type": "pre-edit", "command": "x",
                                                            "filePatterns": ["src/*.ts"]}]}))


def test_commit_types_select_git_commit_through_bash() -> None:
    hook = one({"type": "pre-commit", "command": "npm test", "enabled": True})
    assert [path for path, _ in hook.selectors] == ["tool_input.command"]
    for command, expected in (("git commit -m x", True), ("git -C sub commit", True), ("npm t && git commit", True),
                              ("git status", False), ("git log --grep commit", False), ("echo git commit", False)):
        assert selects(PRE, hook, bash(command)) is expected, command


# -- built-in recipes --------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(BUILTIN_HOOKS))
def test_a_builtin_enabled_by_name_is_its_recipe(name: str) -> None:
    # lifecycle-hooks.ts BUILTIN_HOOKS: exact commands, types, timeouts, failOnError, filePatterns
    builtin = BUILTIN_HOOKS[name]
    hook = one({"name": name, "enabled": True})
    assert hook.name == name and hook.enabled and hook.invalid is None
    assert hook.event == LIFECYCLE[builtin["type"]].event
    assert hook.command == rewrite_placeholders(builtin["command"]) and "${file}" not in hook.command
    assert hook.timeout == builtin["timeout"] / 1000
    assert hook.on_error == ("deny" if builtin["failOnError"] else "allow")


def test_recipe_details() -> None:
    lint = one({"name": "lint-on-edit", "enabled": True})
    assert lint.command == 'npx eslint --fix "$GROK_FILE"'
    assert selects(POST, lint, edit("/p/a.tsx")) and not selects(POST, lint, edit("/p/a.md"))
    assert not selects(POST, lint, bash("ls"))
    assert one({"name": "format-on-edit", "enabled": True}).command == 'npx prettier --write "$GROK_FILE"'
    tests = one({"name": "pre-commit-test", "enabled": True})
    assert tests.command == "npm test" and selects(PRE, tests, bash("git commit -m x"))
    assert not selects(PRE, tests, bash("ls"))
    assert one({"name": "pre-commit-test", "enabled": True, "timeout": 5000}).timeout == 5.0  # its keys win
    assert not one({"name": "lint-on-edit"}).enabled  # built-ins are enabled: false
    own = one({"name": "lint-on-edit", "type": "post-edit", "command": "./lint.sh", "enabled": True})
    assert own.command == "./lint.sh"  # a full entry of the same name is the user's own


# -- payload in -----------------------------------------------------------------------------------

HOOK_CONTEXT = {"type": "pre-bash", "timestamp": "2026-02-22T10:00:00.000Z", "workingDirectory": "/p",
                "command": "rm -rf x", "sessionId": "s1"}
"""lifecycle-hooks.ts HookContext as executeHooks builds it for tool-handler.ts's pre-bash ({command})."""


def test_the_agents_hook_context_is_recognised_and_mapped() -> None:
    assert GROK.recognises(HOOK_CONTEXT) and detect_dialect(HOOK_CONTEXT) is GROK
    assert not GROK.recognises(bash("ls")) and not GROK.recognises({"type": "pre-bash"})
    spec = GROK.resolve_event(None, HOOK_CONTEXT)
    assert spec.name == "PreToolUse" and GROK.resolve_event("PreToolUse", HOOK_CONTEXT) is spec
    assert GROK.canonical_payload(spec, HOOK_CONTEXT) == {
        "hook_event_name": "PreToolUse", "session_id": "s1", "cwd": "/p", "tool_name": "Bash",
        "tool_input": {"command": "rm -rf x"}}


@pytest.mark.parametrize(("context", "expected"), [
    # tool-handler.ts: post-bash {command, output, error}; pre/post-edit {file, content[, output]}
    ({"type": "post-bash", "command": "ls", "output": "a", "error": ""},
     {"tool_name": "Bash", "tool_input": {"command": "ls"}, "tool_response": {"stdout": "a", "stderr": ""}}),
    ({"type": "pre-edit", "file": "src/a.ts", "content": "x"},
     {"tool_name": "Edit", "tool_input": {"file_path": "src/a.ts", "content": "x"}}),
    ({"type": "post-edit", "file": "n.ts", "content": "", "output": "ok", "toolName": "create_file"},
     {"tool_name": "Write", "tool_input": {"file_path": "n.ts", "content": ""}, "tool_response": {"output": "ok"}}),
    ({"type": "pre-commit"}, {"tool_name": "Bash", "tool_input": {"command": "git commit"}}),
    ({"type": "pre-prompt", "prompt": "hi"}, {"prompt": "hi"}),
    ({"type": "post-response", "response": "done"}, {"last_assistant_message": "done"}),
    ({"type": "on-tool-call", "toolName": "search", "toolArgs": {"q": 1}},
     {"tool_name": "search", "tool_input": {"q": 1}}),
])
def test_hook_context_types_in_claude_codes_keys(context: dict[str, Any], expected: dict[str, Any]) -> None:
    payload = {**context, "workingDirectory": "/p"}
    spec = GROK.resolve_event(None, payload)
    assert GROK.canonical_payload(spec, payload) == {"hook_event_name": spec.name, "cwd": "/p", **expected}


def test_a_claude_code_payload_passes_and_unknown_events_are_refused() -> None:
    spec = GROK.resolve_event("PreToolUse", bash("ls"))
    assert GROK.canonical_payload(spec, bash("ls")) == {**bash("ls"), "hook_event_name": "PreToolUse"}
    with pytest.raises(PayloadError, match=r"unknown event 'before-bash'.*pre-bash"):
        GROK.resolve_event("before-bash", bash("ls"))
    with pytest.raises(PayloadError, match="differs"):
        GROK.resolve_event("Stop", HOOK_CONTEXT)
    assert get_dialect("grok") is GROK


# -- answers ----------------------------------------------------------------------------------------


def test_exit_codes_zero_is_success_anything_else_a_failure_and_exit_2_no_block() -> None:
    assert answer(PRE).status == "ok"
    failed = answer(PRE, code=1, stderr=b"lint failed\n")
    assert (failed.status, failed.error) == ("error", "exited 1: lint failed")
    two = answer(PRE, code=2, stderr=b"nope\n")
    assert (two.status, two.error, two.decision) == ("error", "exited 2: nope", None)
    assert answer(STOP, code=2).status == "error"
    assert answer(PRE, code=None, timed_out=True, timeout=5.0).error == "timed out after 5 s"


def test_fail_on_error_turns_a_failure_into_a_deny() -> None:
    denied = apply_on_error(PRE, answer(PRE, code=1, stderr=b"tests fail"), "deny")
    assert denied.decision == "deny" and "tests fail" in (denied.reason or "")
    assert apply_on_error(PROMPT, answer(PROMPT, code=1), "deny").status == "block"


def test_plain_stdout_is_ignored_as_the_agent_ignores_it() -> None:
    # tool-handler.ts ignores every HookResult; no plain-text context anywhere
    out = answer(PROMPT, b"some lint output\n")
    assert out == HookOutcome(hook="h")
    assert answer(PRE, b'{"decision": "block", "reason": "r"}').status == "ok"  # Claude Code's keys: not grok's


def test_advanced_json_answers() -> None:
    # advanced-hooks.ts HookDecision {action: allow|deny|ask, updatedInput?, additionalContext?, continue?}
    deny = answer(PRE, b'{"action":"deny"}')
    assert (deny.status, deny.decision) == ("ok", "deny")
    assert answer(PRE, b'{"action":"ask"}').decision == "ask"
    rewrite = answer(PRE, b'{"action":"allow","updatedInput":{"command":"ls -la"}}')
    assert (rewrite.decision, rewrite.updated_input) == ("allow", {"command": "ls -la"})
    ctx = answer(PRE, b'{"action":"allow","additionalContext":"note","continue":false}')
    assert (ctx.additional_context, ctx.continue_) == ("note", False)
    bad = answer(PRE, b'{"action":"block"}')  # an invalid action is the agent's allow
    assert bad.decision is None and "action" in bad.notes[0]
    assert answer(PRE, b"not json {").decision is None
    assert answer(STOP, b'{"action":"deny"}').status == "block"


def test_the_rewrite_passes_the_capability_gate() -> None:
    rewrite = answer(PRE, b'{"action":"allow","updatedInput":{"command":"ls -la"}}')
    kept, dropped = restrict(rewrite, frozenset({"approve", "rewrite_input"}))
    assert kept.updated_input == {"command": "ls -la"} and dropped == ()
    cut, dropped = restrict(rewrite, frozenset())
    assert (cut.updated_input, cut.decision, dropped) == (None, None, ("approve", "rewrite_input"))
    asked = one({"type": "pre-bash", "command": "x", "enabled": True, "capabilities": ["rewrite_input"]})
    assert asked.capabilities == frozenset({"rewrite_input"})


def test_render_allow_deny_ask_and_context() -> None:
    assert GROK.render(PRE, fold(PRE, [])) == AgentAnswer(0, '{"action": "allow"}\n', "")
    deny = fold(PRE, [HookOutcome(hook="a", decision="deny", reason="no rm\x1b[31m")])
    assert rendered(PRE, deny) == {"action": "deny", "additionalContext": "no rm\\x1b[31m"}
    block = fold(STOP, [HookOutcome(hook="a", status="block", reason="tests fail", additional_context="see log")])
    assert rendered(STOP, block) == {"action": "deny", "additionalContext": "tests fail\nsee log"}
    assert rendered(PRE, fold(PRE, [HookOutcome(hook="a", decision="ask")])) == {"action": "ask"}
    new = fold(PRE, [HookOutcome(hook="a", decision="allow", updated_input={"command": "ls -la"})])
    assert rendered(PRE, new) == {"action": "allow", "updatedInput": {"command": "ls -la"}}
    stop = Verdict("Stop", continue_=False, system_message="hookcage: 1 project hook not run")
    assert rendered(STOP, stop) == {"action": "allow", "continue": False,
                                    "systemMessage": "hookcage: 1 project hook not run"}


# -- through the executor ------------------------------------------------------------------------


def test_a_project_hook_waits_for_trust_then_reads_the_environment(tmp_path: Path) -> None:
    user, hc, repo = tmp_path / "u", tmp_path / "hc", tmp_path / "repo"
    for d in (user, hc, repo / ".codebuddy"):
        d.mkdir(parents=True)
    # `*` never allows an expansion: the rewritten command needs its exact entry (hookcage allow '...').
    (hc / "config.toml").write_text('[allowlist]\nallow = ["*", \'case "$GROK_COMMAND" in *rm*) exit 1;; esac\']\n')
    (repo / ".codebuddy" / "hooks.json").write_text(json.dumps({"hooks": [
        {"name": "no-rm", "type": "pre-bash", "command": 'case "${command}" in *rm*) exit 1;; esac',
         "enabled": True, "failOnError": True, "commandPatterns": ["rm"]},
        {"name": "pre-commit-test", "enabled": True}]}))
    ran: list[RunRequest] = []

    def handler(request: RunRequest) -> RunResult:
        ran.append(request)
        return RunResult(exit_code=1, stdout=b"", stderr=b"refused")

    fake = FakeSandbox(handler)
    ex = HookExecutor(load_settings(home=hc, managed_dir=tmp_path / "m"), sandboxes={"docker": fake},
                      environ={"HOME": str(user)})
    payload = {**HOOK_CONTEXT, "workingDirectory": str(repo)}

    def dispatch() -> Verdict:
        spec = GROK.resolve_event(None, payload)
        return ex.dispatch(spec, GROK.canonical_payload(spec, payload), dialect=GROK, raw=payload)

    before = dispatch()
    assert ran == [] and "not trusted yet" in (before.system_message or "")
    pending, refused = ex.pending_reviews(repo, agents=[GROK])
    assert not refused and {h.name for h, _ in pending} == {"no-rm", "pre-commit-test"}
    ex.grant([subject for _, subject in pending])
    verdict = dispatch()
    assert [r.command for r in ran] == ['case "$GROK_COMMAND" in *rm*) exit 1;; esac']
    assert ran[0].stdin == b"" and ran[0].env["GROK_COMMAND"] == "rm -rf x"
    assert ran[0].env["GROK_HOOK_TYPE"] == "pre-bash"
    assert rendered(PRE, verdict)["action"] == "deny"
    ex.close()
