"""``if`` conditions: Claude Code's permission rules, parsed and evaluated (issue 22).

The expectations come from Claude Code's hooks reference (code.claude.com/docs/en/hooks,
"Common fields" and its Bash matching table) and permissions page
(code.claude.com/docs/en/permissions), snapshot 2026-08-22. Where hookcage
answers more often than Claude Code (never less), the test says so.
"""

from __future__ import annotations

from typing import Any

import pytest

from executor.core.conditions import (
    ConditionContext,
    ConditionError,
    parse_codebuddy_condition,
    parse_condition,
)
from executor.core.events import get_event
from executor.core.hookparse import parse_hook_file
from executor.core.hooks import HOOKCAGE_FILES, FileShape, Scope
from executor.core.policy import selects
from executor.dialects import DIALECTS
from executor.dialects import selects as dialect_selects

CWD = "/work/proj"
CTX = ConditionContext(root=CWD, home="/home/me")


def call(tool: str, **tool_input: Any) -> dict[str, Any]:
    return {"hook_event_name": "PreToolUse", "tool_name": tool, "tool_input": tool_input, "cwd": CWD,
            "session_id": "s"}


def holds(rule: str, payload: dict[str, Any], ctx: ConditionContext = CTX) -> bool:
    return parse_condition(rule).holds(payload, ctx)


def bash(rule: str, command: str) -> bool:
    return holds(rule, call("Bash", command=command))


# --- Bash: the reference's own table --------------------------------------------------------------

@pytest.mark.parametrize(("rule", "command", "runs"), [
    ("Bash(git *)", "FOO=bar git push", True),          # leading assignments are stripped
    ("Bash(git *)", "npm test && git push", True),      # each subcommand is checked
    ("Bash(rm *)", "echo $(rm -rf /)", True),           # commands inside $() count
    ("Bash(rm *)", "echo `rm -rf /`", True),            # ... and inside backticks
    ("Bash(rm *)", "echo $(date)", False),              # no subcommand matches rm *
    ("Bash(git push *)", "echo $(date)", True),         # more than the name: runs on $()
    ("Bash(git push *)", "echo $HOME", True),           # ... and on $VAR
])
def test_the_references_bash_table(rule: str, command: str, runs: bool) -> None:
    assert bash(rule, command) is runs


@pytest.mark.parametrize(("rule", "command", "runs"), [
    # the guard: runs for a push, not for everything else
    ("Bash(git push*)", "git push origin main", True),
    ("Bash(git push*)", "ls", False),
    ("Bash(git push*)", "git status", False),
    ("Bash(git push*)", "git pushx", True),             # no space before *: no word boundary
    ("Bash(git push *)", "git push", True),             # ` *` is followed by a space or the end
    ("Bash(git push *)", "git pushx", False),
    ("Bash(ls *)", "ls -la", True),
    ("Bash(ls *)", "lsof", False),
    ("Bash(ls*)", "lsof", True),
    ("Bash(ls:*)", "ls -la", True),                     # :* is a trailing ` *`
    ("Bash(ls:*)", "lsof", False),
    ("Bash(npm run build)", "npm run build", True),     # exact
    ("Bash(npm run build)", "npm run build:dev", False),
    ("Bash(* install)", "pnpm install", True),
    ("Bash(git * main)", "git push origin main", True),
    ("Bash(git * main)", "git push origin dev", False),
    ("Bash(safe-cmd *)", "safe-cmd && rm -rf x", True),  # any subcommand matching runs the hook
    ("Bash(rm *)", "ls | grep x; echo ok & wait", False),
    ("Bash(rm *)", "ls\nrm -rf build", True),           # a newline separates commands
    ("Bash(rm *)", "ls |& rm x", True),
    ("Bash(rm *)", "if true; then rm -rf x; fi", True),
    ("Bash(rm *)", "(cd /tmp && rm x)", True),
    ("Bash(npm test *)", "timeout 30 npm test", True),  # wrappers are stripped
    ("Bash(npm test *)", "nice -n 5 npm test", True),
    ("Bash(grep *)", "xargs grep pattern", True),
    ("Bash(git push *)", "git push origin main > /dev/null 2>&1", True),
    ("Bash", "anything at all", True),
    ("Bash(*)", "anything at all", True),
])
def test_bash_patterns(rule: str, command: str, runs: bool) -> None:
    assert bash(rule, command) is runs


@pytest.mark.parametrize("command", [
    "git  push origin main",         # two spaces: Claude Code's raw-text match would miss it
    'git "push" origin main',       # quoted words
    "g\\it push",                    # an escaped letter
    "sudo git push",                 # wrappers Claude Code does not strip
    "env GIT_TRACE=1 git push",
    "exec git push",
    "bash -c 'git push origin main'",
    'sh -lc "git push"',
    "eval git push",
    "$(echo git) push",              # a command word hookcage cannot read: every pattern runs
    "echo 'unterminated",            # unparseable: runs (Claude Code: "fails open")
])
def test_bash_runs_at_least_as_often_as_claude_code(command: str) -> None:
    assert bash("Bash(git push*)", command)


def test_a_bash_call_without_a_command_runs_the_hook() -> None:
    assert holds("Bash(git push*)", {"tool_name": "Bash", "tool_input": {}, "cwd": CWD})
    assert holds("Bash(git push*)", {"tool_name": "Bash", "tool_input": {"command": 7}, "cwd": CWD})
    assert holds("Bash(git push*)", {"tool_name": "Bash", "cwd": CWD})


def test_a_command_past_the_analysed_length_runs_the_hook() -> None:
    assert bash("Bash(git push*)", "ls " + "a" * 20_000)


def test_another_tool_never_meets_a_bash_rule() -> None:
    assert not holds("Bash(git push*)", call("Read", file_path="/work/proj/x"))
    assert not holds("Bash", call("Write", file_path="/work/proj/x", content=""))


def test_other_agents_names_for_the_tool_meet_the_rule() -> None:
    payload = call("run_shell_command", command="git push")
    hook = _hooks({"PreToolUse": [{"hooks": [{"type": "command", "command": "g", "if": "Bash(git push*)"}]}]})[0]
    assert dialect_selects(get_event("PreToolUse"), hook, payload, CTX)
    assert not dialect_selects(get_event("PreToolUse"), hook, call("run_shell_command", command="ls"), CTX)


# --- Bash: what a hostile rule or command does ----------------------------------------------------

@pytest.mark.parametrize("rule", [
    "Bash(" + "*a" * 64 + ")",              # many wildcards: RE2, linear
    "Bash(.*+?[](){}^$|\\\\)",               # regex metacharacters are literal
    "Bash(echo (a (b) c))",                  # nested parentheses
    "Bash(\u00e9ch\u03bf \U0001d54f \u2713 *)",  # unicode (a Greek omicron, not an o)
])
def test_hostile_rules_compile_and_answer_quickly(rule: str) -> None:
    condition = parse_condition(rule)
    assert condition.holds(call("Bash", command="a" * 9000 + "b"), CTX) in (True, False)


def test_regex_metacharacters_in_a_rule_are_literal() -> None:
    assert bash("Bash(echo a.b)", "echo a.b")
    assert not bash("Bash(echo a.b)", "echo axb")
    assert bash("Bash(echo (a (b) c))", "echo '(a (b) c)'")
    assert bash("Bash(echo [x]+)", "echo '[x]+'")
    assert not bash("Bash(echo [x]+)", "echo xx")


def test_unicode_commands_and_rules() -> None:
    assert bash("Bash(éch\u03bf *)", "éch\u03bf \U0001d54f")
    assert not bash("Bash(echo *)", "éch\u03bf \U0001d54f")
    assert bash("Bash(git push*)", "git push \ud800")  # a lone surrogate: unreadable, runs


# --- the rule itself ------------------------------------------------------------------------------

@pytest.mark.parametrize(("rule", "why"), [
    ("Bash(python *)|Bash(pytest *)", "exactly one permission rule"),
    ("Bash(a) || Bash(b)", "exactly one permission rule"),
    ("Edit(*.ts), Edit(*.js)", "exactly one permission rule"),
    ("Bash(git push", "not a permission rule"),
    ("", "not a permission rule"),
    ("Bash(rm\n*)", "control character"),
    ("Bash(" + "x" * 5000 + ")", "longer than"),
    ("Bash(" + "*a" * 65 + ")", "more than 64 wildcards"),
    ("PowerShell(Remove-Item *)", "cannot evaluate"),
    ("Skill(deploy *)", "cannot evaluate"),
    ("mcp__github__create_issue(foo)", "cannot evaluate"),
    ("Bash(command:rm *)", "ignored by Claude Code"),
    ("WebFetch(url:https://x)", "ignored by Claude Code"),
    ("WebFetch(example.com)", "domain:"),
    ("Read(!secret)", "negated"),
    ("Read(~secret)", "only ~/"),
    ("mcp__*(x)", "takes no specifier"),
    ("Read(a[z-a])", "cannot compile"),
])
def test_rules_hookcage_cannot_evaluate_are_refused(rule: str, why: str) -> None:
    with pytest.raises(ConditionError, match=why.replace("(", r"\(")):
        parse_condition(rule)


def test_a_non_string_rule_is_refused() -> None:
    with pytest.raises(ConditionError, match="must be a string"):
        parse_condition(["Bash(rm *)"])


def test_tool_names_and_globs() -> None:
    assert holds("mcp__github__create_issue", call("mcp__github__create_issue", title="x"))
    assert not holds("mcp__github__create_issue", call("mcp__github__close_issue"))
    assert holds("mcp__github__*", call("mcp__github__close_issue"))
    assert not holds("mcp__github__*", call("mcp__gitlab__close_issue"))
    assert holds("*", call("Anything"))
    assert holds("Task(Explore)", call("Agent", subagent_type="Explore"))
    assert not holds("Agent(Explore)", call("Agent", subagent_type="Plan"))
    assert holds("Agent(my-plugin:reviewer)", call("Agent", subagent_type="my-plugin:reviewer"))


def test_param_rules() -> None:
    assert holds("Bash(run_in_background:true)", call("Bash", command="sleep 9", run_in_background=True))
    assert not holds("Bash(run_in_background:true)", call("Bash", command="sleep 9"))  # omitted: never
    assert holds("Agent(model:opus)", call("Agent", model="opus", subagent_type="x"))
    assert not holds("Agent(model:opus)", call("Agent", model="claude-opus-4", subagent_type="x"))
    assert holds("Agent(isolation:*)", call("Agent", isolation="worktree"))
    assert holds("mcp__db__query(database : prod*)", call("mcp__db__query", database="prod-eu"))
    assert not holds("mcp__db__query(database:prod*)", call("mcp__db__query", database={"n": "prod"}))


# --- Read and Edit paths --------------------------------------------------------------------------

@pytest.mark.parametrize(("rule", "tool", "path", "runs"), [
    ("Read(./.env)", "Read", "/work/proj/.env", True),
    ("Read(./.env)", "Read", ".env", True),                         # relative to cwd
    ("Read(.env)", "Read", "/work/proj/sub/dir/.env", True),        # a bare name: any depth
    ("Read(.env)", "Read", "/work/.env", False),                    # not above cwd
    ("Read(.env)", "Read", "/work/proj/.env.local", False),
    ("Read(.env.*)", "Read", "/work/proj/.env.local", True),
    ("Read(./secrets/**)", "Read", "/work/proj/secrets/a/b.key", True),
    ("Read(./secrets/**)", "Read", "/work/proj/vendor/secrets/a", False),
    ("Read(secrets)", "Read", "/work/proj/x/secrets/id_rsa", True),  # a folder matches what is in it
    ("Read(secrets/)", "Read", "/work/proj/x/secrets", False),       # folders only
    ("Read(secrets/)", "Read", "/work/proj/x/secrets/k", True),
    ("Read(../x/**)", "Read", "/work/x/y", False),
    ("Read(//etc/passwd)", "Read", "/etc/passwd", True),
    ("Read(//etc/**)", "Read", "/work/proj/etc/passwd", False),
    ("Read(~/.ssh/**)", "Read", "/home/me/.ssh/id_rsa", True),
    ("Read(~/.ssh/**)", "Read", "~/.ssh/id_rsa", True),
    ("Read(~/.ssh/**)", "Read", "/root/.ssh/id_rsa", False),
    ("Edit(/src/**/*.ts)", "Edit", "/work/proj/src/a/b.ts", True),   # /path: the project root
    ("Edit(/src/**/*.ts)", "Edit", "/src/a.ts", False),
    ("Edit(*.ts)", "Write", "/work/proj/a/b.ts", True),              # Edit covers every file-editing tool
    ("Edit(*.ts)", "NotebookEdit", "/work/proj/a/b.ts", True),
    ("Edit(*.ts)", "Edit", "/work/proj/a/b.tsx", False),
    ("Edit(src/*.ts)", "Edit", "/work/proj/src/deep/a.ts", False),   # * stays in one segment
    ("Edit(src/**)", "Edit", "/work/proj/lib/src/a.ts", False),      # anchored: only cwd/src
    ("Edit(**/src/**)", "Edit", "/work/proj/lib/src/a.ts", True),
    ("Edit(file[0-9].txt)", "Edit", "/work/proj/file7.txt", True),
    ("Edit(file[!0-9].txt)", "Edit", "/work/proj/file7.txt", False),
    ("Write(*.md)", "Write", "/work/proj/a/b.md", True),             # a path rule meets the tool it names
    ("Write(*.md)", "Write", "/work/proj/a/b.txt", False),
    ("Write(*.md)", "Edit", "/work/proj/a/b.md", False),
    ("Read(./.env)", "Grep", "/work/proj/.env", True),              # Read covers Grep and Glob
    ("Read(./.env)", "Edit", "/work/proj/.env", False),
    ("Read(./src/../.env)", "Read", "/work/proj/.env", False),      # the rule is not normalised
    ("Read(.env)", "Read", "/work/proj/src/../.env", True),          # the path is
])
def test_path_rules(rule: str, tool: str, path: str, runs: bool) -> None:
    field = {"NotebookEdit": "notebook_path", "Grep": "path"}.get(tool, "file_path")
    assert holds(rule, call(tool, **{field: path})) is runs


def test_folder_searches_run_when_the_folders_overlap() -> None:
    assert holds("Read(//work/proj/**)", call("Grep", pattern="x"))       # no path: the cwd
    assert holds("Read(./.env)", call("Grep", pattern="x"))               # .env may be under it
    assert holds("Read(//work/proj/secrets/**)", call("Glob", pattern="*", path="/work"))
    assert not holds("Read(//elsewhere/**)", call("Grep", pattern="x"))
    assert not holds("Read(//work/proj/secrets/**)", call("Glob", pattern="*", path="/work/proj/src"))


def test_unknown_anchors_and_paths_run_the_hook() -> None:
    assert holds("Read(~/.ssh/**)", call("Read", file_path="/x"), ConditionContext(root=CWD))  # no home
    assert holds("Read(.env)", {"tool_name": "Read", "tool_input": {"file_path": "/x"}})       # no cwd
    assert holds("Read(.env)", call("Read"))                                                   # no path


def test_symlinks_are_followed_when_the_caller_can() -> None:
    ctx = ConditionContext(root=CWD, home="/home/me", realpath=lambda p: "/work/proj/.env" if p.endswith("link") else p)
    assert holds("Read(./.env)", call("Read", file_path="/work/proj/link"), ctx)
    assert not holds("Read(./.env)", call("Read", file_path="/work/proj/link"))


def test_root_anchored_paths_only_in_repository_files() -> None:
    with pytest.raises(ConditionError, match="//absolute"):
        parse_condition("Edit(/src/**)", root_anchor=False)


# --- WebFetch -------------------------------------------------------------------------------------

@pytest.mark.parametrize(("rule", "url", "runs"), [
    ("WebFetch(domain:example.com)", "https://example.com/x", True),
    ("WebFetch(domain:example.com)", "https://EXAMPLE.com./x", True),
    ("WebFetch(domain:example.com)", "https://api.example.com/x", False),
    ("WebFetch(domain:*.example.com)", "https://a.b.example.com/", True),
    ("WebFetch(domain:*.example.com)", "https://example.com/", False),
    ("WebFetch(domain:example.*)", "https://example.org/", True),
    ("WebFetch(domain:example.*)", "https://example.evil.com/", False),
    ("WebFetch(domain:*)", "https://anything.test/", True),
    ("WebFetch(domain:example.com)", "not a url", True),          # no host to judge: runs
])
def test_webfetch_domains(rule: str, url: str, runs: bool) -> None:
    assert holds(rule, call("WebFetch", url=url, prompt="p")) is runs


# --- in hook files ------------------------------------------------------------------------------

def _file(hooks: dict[str, Any], shape: FileShape = HOOKCAGE_FILES, scope: Scope = Scope.PROJECT) -> Any:
    return parse_hook_file({"hooks": hooks}, scope=scope, source="/p/.claude/settings.json", project_root="/p",
                           shape=shape)


def _hooks(hooks: dict[str, Any], shape: FileShape = HOOKCAGE_FILES) -> list[Any]:
    return list(_file(hooks, shape).hooks)


def test_a_handler_with_a_rule_hookcage_cannot_evaluate_is_invalid_and_named() -> None:
    f = _file({"PreToolUse": [{"matcher": "Bash", "hooks": [
        {"type": "command", "command": "guard", "if": "Bash(git push *)|Bash(git commit *)"}]}]})
    (hook,) = f.hooks
    assert hook.invalid and "exactly one permission rule" in hook.invalid
    (problem,) = f.errors
    assert str(problem).startswith("/p/.claude/settings.json: $.hooks.PreToolUse[0].hooks[0].if: ")
    assert "\n" not in str(problem)


def test_if_on_an_event_without_a_tool_is_invalid() -> None:
    f = _file({"SessionStart": [{"hooks": [{"type": "command", "command": "x", "if": "Bash(rm *)"}]}]})
    assert f.hooks[0].invalid and "never runs a handler with 'if' on SessionStart" in f.hooks[0].invalid


def test_an_empty_if_is_no_condition_as_in_claude_code() -> None:
    f = _file({"PreToolUse": [{"hooks": [{"type": "command", "command": "x", "if": ""}]}]})
    assert f.hooks[0].invalid is None and f.hooks[0].condition is None
    assert any("empty" in p.message for p in f.problems if p.severity == "warning")


def test_selects_applies_the_condition_after_the_matcher() -> None:
    (hook,) = _hooks({"PreToolUse": [{"matcher": "Bash", "hooks": [
        {"type": "command", "command": "guard", "if": "Bash(git push*)"}]}]})
    event = get_event("PreToolUse")
    assert selects(event, hook, call("Bash", command="git push origin main"), context=CTX)
    assert not selects(event, hook, call("Bash", command="ls"), context=CTX)


def test_the_condition_is_part_of_the_identity_only_when_set() -> None:
    plain, guarded, other = _hooks({"PreToolUse": [{"hooks": [
        {"type": "command", "command": "guard"},
        {"type": "command", "command": "guard", "if": "Bash(git push*)"},
        {"type": "command", "command": "guard", "if": "Bash(git commit*)"}]}]})
    assert len({plain.id, guarded.id, other.id}) == 3
    assert plain.identity() == ["command", "guard", plain.identity()[2], []]  # as before conditions


def test_claude_and_codebuddy_read_if_codex_gemini_jcode_do_not() -> None:
    hooks = {"PreToolUse": [{"matcher": "Bash", "hooks": [
        {"type": "command", "command": "guard", "if": "Bash(git push*)"}]}]}
    for agent in ("claude", "codebuddy"):
        (hook,) = _hooks(hooks, DIALECTS[agent].shape)
        assert hook.condition is not None, agent
    for agent in ("codex", "jcode"):
        f = _file(hooks, DIALECTS[agent].shape)
        assert f.hooks[0].condition is None and f.hooks[0].invalid is None  # runs on every Bash call, as there
        assert any(p.path.endswith(".if") and f"{agent} does not read 'if'" in p.message for p in f.problems)


# --- CodeBuddy Code 2.163's reading (measured: tests/integration/test_conditions_real_agents.py) ---------

def cb(rule: str, payload: dict[str, Any]) -> bool | None:
    condition = parse_codebuddy_condition(rule)
    return None if condition is None else condition.holds(payload, CTX)


@pytest.mark.parametrize(("rule", "command", "runs"), [
    ("Bash(git push*)", "git push origin main", True),
    ("Bash(git push*)", "ls", False),
    ("Bash(git push*)", "GIT PUSH origin", True),           # CodeBuddy's globs ignore case
    ("Bash(npm run test:*)", "npm run test --watch", True),
    ("Bash(npm run test:*)", "npm run testing", False),
    ("Bash(git push)", "ls; git push", True),               # each subcommand
    ("Bash(git push *)", "FOO=1 git push origin", True),    # CodeBuddy: no; Claude Code: yes (hookcage: both)
])
def test_codebuddy_bash_rules(rule: str, command: str, runs: bool) -> None:
    assert cb(rule, call("Bash", command=command)) is runs


def test_codebuddy_runs_every_call_for_rules_it_does_not_read() -> None:
    assert parse_codebuddy_condition("Bash(a)|Bash(b)") is None      # CodeBuddy runs it always
    assert parse_codebuddy_condition("Bash(echo (x))") is None
    f = _file({"PreToolUse": [{"hooks": [{"type": "command", "command": "g", "if": "Bash(a)|Bash(b)"}]}]},
              DIALECTS["codebuddy"].shape)
    assert f.hooks[0].condition is None and f.hooks[0].invalid is None
    assert any("CodeBuddy Code runs the hook on every call" in p.message for p in f.problems)
    f = _file({"SessionStart": [{"hooks": [{"type": "command", "command": "g", "if": "Bash(rm *)"}]}]},
              DIALECTS["codebuddy"].shape)
    assert f.hooks[0].condition is None and f.hooks[0].invalid is None  # no tool to compare: it runs


def test_codebuddy_globs_hookcage_does_not_evaluate_are_refused() -> None:
    for rule in ("Bash(rm -rf {a,b})", "Edit(src/[ab].ts)", "Read(!x)", "Bash(ls ?)"):
        with pytest.raises(ConditionError, match="glob character"):
            parse_codebuddy_condition(rule)


def test_codebuddy_file_and_other_tools() -> None:
    assert cb("Edit(*.MD)", call("Edit", file_path="/work/proj/a/b.md"))      # case-insensitive
    assert not cb("Edit(*.md)", call("Write", file_path="/work/proj/a/b.md"))  # exact tool name
    assert cb("WebFetch(domain:x.com)", call("WebFetch", url="https://y.com"))  # any call of the tool
    assert not cb("WebFetch(domain:x.com)", call("Bash", command="ls"))


def test_the_condition_is_in_the_trust_hash_only_when_set() -> None:
    from executor.gates.trust import TrustSubject

    base = TrustSubject(root="/p", source="/p/.claude/settings.json", event="PreToolUse", matcher="Bash",
                        type="command", command="guard", files=(), profile={}, capabilities=(), agent="claude")
    assert "\"if\"" not in base.canonical()  # hooks without `if`: the hash they always had
    push = TrustSubject(**{**base.__dict__, "condition": "Bash(git push*)"})
    commit = TrustSubject(**{**base.__dict__, "condition": "Bash(git commit*)"})
    assert len({base.digest(), push.digest(), commit.digest()}) == 3  # a changed `if` needs review again
