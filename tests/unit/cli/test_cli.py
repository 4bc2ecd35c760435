"""The ``hookcage`` console script, run as an agent runs it (a real subprocess).

These hooks use the ``host`` backend (user scope, explicit opt-in), so the
tests need no Docker; the docker path is covered in tests/integration.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from support import allow, commands_in

from executor import in_hook
from executor.dialects import DIALECTS, agent_names

HOOKCAGE = shutil.which("hookcage")
pytestmark = [
    pytest.mark.spawns,
    pytest.mark.skipif(HOOKCAGE is None, reason="the hookcage console script is not installed (pip install -e .)"),
]


class Cli:
    def __init__(self, tmp: Path) -> None:
        self.home = tmp / "home"
        self.project = tmp / "project"
        self.home.mkdir()
        (self.project / ".hookcage").mkdir(parents=True)
        self.env = {
            "PATH": os.environ["PATH"],
            "HOME": str(tmp),
            "HOOKCAGE_HOME": str(self.home),
            "HOOKCAGE_MANAGED_DIR": str(tmp / "managed"),
            # the checkout under test, when it is not the installed one
            **{k: os.environ[k] for k in ("PYTHONPATH",) if k in os.environ},
        }

    def user_hooks(self, data: dict[str, Any] | str) -> Path:
        path = self.home / "hooks.json"
        path.write_text(data if isinstance(data, str) else json.dumps(data))
        allow(self.home, commands_in(data))  # as the user would, with `hookcage allow`
        return path

    def project_hooks(self, data: dict[str, Any] | str) -> Path:
        path = self.project / ".hookcage" / "hooks.json"
        path.write_text(data if isinstance(data, str) else json.dumps(data))
        return path

    def run(self, *args: str, stdin: str | bytes = b"", **env: str) -> subprocess.CompletedProcess[str]:
        assert HOOKCAGE is not None
        data = stdin.encode() if isinstance(stdin, str) else stdin
        proc = subprocess.run([HOOKCAGE, *args], input=data, capture_output=True,
                              env={**self.env, **env}, cwd=self.project, timeout=60)
        return subprocess.CompletedProcess(proc.args, proc.returncode,
                                           proc.stdout.decode(), proc.stderr.decode())

    def payload(self, **extra: Any) -> str:
        base: dict[str, Any] = {"session_id": "s1", "cwd": str(self.project),
                                "tool_name": "Bash", "tool_input": {"command": "ls"}}
        base.update(extra)
        return json.dumps(base)


def host_hook(event: str, command: str, matcher: str | None = None, **extra: Any) -> dict[str, Any]:
    group: dict[str, Any] = {"hooks": [{"type": "command", "command": command, "sandbox": "host", **extra}]}
    if matcher:
        group["matcher"] = matcher
    return {"hooks": {event: [group]}}


GUARD = ("jq -e '.tool_input.command | test(\"rm -rf\")' >/dev/null "
         "&& { echo 'rm -rf is not allowed here' >&2; exit 2; } || exit 0")


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path)


def assert_one_line_error(proc: subprocess.CompletedProcess[str], code: int, text: str) -> None:
    assert proc.returncode == code, proc
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert text in proc.stderr


@pytest.mark.skipif(shutil.which("jq") is None, reason="jq is not installed")
def test_dispatch_answers_a_guards_exit_2_with_claudes_json_deny(cli: Cli) -> None:
    cli.user_hooks(host_hook("PreToolUse", GUARD, matcher="Bash"))
    proc = cli.run("dispatch", "PreToolUse", stdin=cli.payload(tool_input={"command": "rm -rf /"}))
    assert (proc.returncode, proc.stderr) == (0, "")
    assert json.loads(proc.stdout) == {"hookSpecificOutput": {
        "hookEventName": "PreToolUse", "permissionDecision": "deny",
        "permissionDecisionReason": "rm -rf is not allowed here"}}
    proc = cli.run("dispatch", "PreToolUse", stdin=cli.payload())
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "{}\n", "")


def test_dispatch_stop_block_keeps_its_system_message(cli: Cli) -> None:
    ralph = {"decision": "block", "reason": "3 tasks left", "systemMessage": "ralph loop: iteration 4"}
    cli.user_hooks(host_hook("Stop", f"echo '{json.dumps(ralph)}'"))
    proc = cli.run("dispatch", "Stop", stdin=json.dumps({"session_id": "s", "stop_hook_active": False}))
    assert (proc.returncode, proc.stderr) == (0, "")
    assert json.loads(proc.stdout) == ralph


def test_dispatch_task_completed_block_is_still_exit_2(cli: Cli) -> None:
    cli.user_hooks(host_hook("TaskCompleted", "echo 'tests fail' >&2; exit 2"))
    proc = cli.run("dispatch", "TaskCompleted", stdin='{"session_id": "s"}')
    assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", "tests fail\n")


REWRITE = json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow",
                                             "updatedInput": {"command": "ls -l"}}})
CODEBUDDY_MARKS = {"client": "CLI", "version": "2.163.0", "generation_id": "g1", "model": "m"}


@pytest.mark.parametrize(
    ("args", "extra", "key"),
    [
        ([], {}, "updatedInput"),
        (["--agent", "claude"], {}, "updatedInput"),
        (["--agent", "codebuddy"], {}, "modifiedInput"),
        ([], CODEBUDDY_MARKS, "modifiedInput"),
        (["--agent=claude"], CODEBUDDY_MARKS, "updatedInput"),
    ],
)
def test_dispatch_answers_in_the_spelling_of_the_agent_that_asked(
    cli: Cli, args: list[str], extra: dict[str, str], key: str
) -> None:
    cli.user_hooks(host_hook("PreToolUse", f"echo '{REWRITE}'"))
    proc = cli.run("dispatch", *args, "PreToolUse", stdin=cli.payload(**extra))
    assert (proc.returncode, proc.stderr) == (0, "")
    assert json.loads(proc.stdout)["hookSpecificOutput"] == {
        "hookEventName": "PreToolUse", "permissionDecision": "allow", key: {"command": "ls -l"}}


def test_dispatch_agent_help_lists_the_agents(cli: Cli) -> None:
    proc = cli.run("dispatch", "--agent", "help")  # no stdin read, nothing run
    assert proc.returncode == 0 and proc.stderr == ""
    names = [line.split()[0] for line in proc.stdout.splitlines()
             if line[:1].isalpha() and not line.startswith(("Without", "hookcage"))]
    assert names == list(DIALECTS)
    assert "project: .claude/settings.json" in proc.stdout
    assert "client, version, generation_id" in proc.stdout


@pytest.mark.parametrize(("env", "code"), [({}, 1), ({"HOOKCAGE_FAIL_CLOSED": "1"}, 2)])
def test_dispatch_unknown_agent_is_one_line(cli: Cli, env: dict[str, str], code: int) -> None:
    proc = cli.run("dispatch", "--agent", "nosuchagent", "Stop", stdin='{"session_id": "s"}', **env)
    assert_one_line_error(proc, code, f"unknown agent 'nosuchagent'; known agents: {agent_names()}")
    assert proc.stdout == ""


def test_dispatch_missing_program_and_failed_redirection_are_findings_not_blocks(cli: Cli, tmp_path: Path) -> None:
    cli.user_hooks({"hooks": {"PreToolUse": [{"hooks": [
        {"type": "command", "command": "no-such-tool-hc --check", "sandbox": "host", "name": "lint"},
        {"type": "command", "command": f"echo log > {tmp_path}/missing/dir/log.txt", "sandbox": "host",
         "name": "logger"}]}]}})
    proc = cli.run("dispatch", "PreToolUse", stdin=cli.payload())
    assert (proc.returncode, proc.stderr) == (0, "")
    message = json.loads(proc.stdout)["systemMessage"]
    assert "hook lint failed: exited 127: `no-such-tool-hc` is not installed (not on PATH)" in message
    assert (f"hook logger failed: exited 2 because the shell could not write {tmp_path}/missing/dir/log.txt "
            "(Directory nonexistent), not as a verdict") in message


def test_dispatch_takes_the_event_from_the_payload(cli: Cli) -> None:
    cli.user_hooks(host_hook("UserPromptSubmit", "echo 'tests live in tests/'"))
    proc = cli.run("dispatch", stdin=json.dumps({"hook_event_name": "UserPromptSubmit",
                                                 "session_id": "s", "prompt": "hi"}))
    assert proc.returncode == 0
    assert json.loads(proc.stdout) == {"hookSpecificOutput": {
        "hookEventName": "UserPromptSubmit", "additionalContext": "tests live in tests/"}}


def test_dispatch_json_answer_is_folded(cli: Cli) -> None:
    answer = json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse",
                                                "permissionDecision": "ask",
                                                "permissionDecisionReason": "check"}})
    cli.user_hooks(host_hook("PreToolUse", f"echo '{answer}'"))
    proc = cli.run("dispatch", "PreToolUse", stdin=cli.payload())
    assert json.loads(proc.stdout)["hookSpecificOutput"]["permissionDecision"] == "ask"


def test_event_argument_and_payload_must_agree(cli: Cli) -> None:
    proc = cli.run("dispatch", "Stop", stdin=json.dumps({"hook_event_name": "PreToolUse"}))
    assert_one_line_error(proc, 1, "differs from the payload's hook_event_name")


@pytest.mark.parametrize(
    ("stdin", "text"),
    [
        ("", "no payload on stdin"),
        ("{not json", "stdin is not valid JSON (line 1, column 2)"),
        ("[1, 2]", "stdin must be a JSON object, not list"),
        (b"\xff\xfe{", "stdin is not valid JSON"),
        ('{"session_id": "s"}', "PreToolUse payload is missing the field 'tool_name'"),
    ],
)
def test_bad_input_is_one_line_and_non_blocking(cli: Cli, stdin: str | bytes, text: str) -> None:
    assert_one_line_error(cli.run("dispatch", "PreToolUse", stdin=stdin), 1, text)


def test_fail_closed_makes_bad_input_block(cli: Cli) -> None:
    proc = cli.run("dispatch", "PreToolUse", stdin="", HOOKCAGE_FAIL_CLOSED="1")
    assert_one_line_error(proc, 2, "no payload on stdin")
    proc = cli.run("dispatch", "--bogus", stdin="{}", HOOKCAGE_FAIL_CLOSED="1")
    assert_one_line_error(proc, 2, "No such option")


def test_unknown_event_lists_the_valid_ones(cli: Cli) -> None:
    proc = cli.run("dispatch", "BeforeLunch", stdin="{}")
    assert_one_line_error(proc, 1, "unknown event 'BeforeLunch'; valid events: SessionStart, ")


def test_broken_settings_file_is_one_line(cli: Cli) -> None:
    (cli.home / "config.toml").write_text("max_parallel = [")
    proc = cli.run("dispatch", "Stop", stdin='{"session_id": "s"}')
    assert_one_line_error(proc, 1, "config.toml: not valid TOML")


def test_malformed_project_file_is_reported_and_user_hooks_still_run(cli: Cli) -> None:
    cli.user_hooks(host_hook("Stop", "echo '{\"systemMessage\": \"user hook ran\"}'"))
    bad = cli.project_hooks('{"hooks": ')
    proc = cli.run("dispatch", "Stop", stdin=json.dumps({"session_id": "s", "cwd": str(cli.project)}))
    assert proc.returncode == 0 and "Traceback" not in proc.stderr
    message = json.loads(proc.stdout)["systemMessage"]
    assert "user hook ran" in message
    assert f"{bad}: $: not valid JSON" in message


def test_timeout_and_grandchild_holding_stdout_do_not_hang(cli: Cli) -> None:
    cli.user_hooks(host_hook("Stop", "sleep 30 & sleep 30", timeout=1))
    started = time.monotonic()
    proc = cli.run("dispatch", "Stop", stdin='{"session_id": "s"}')
    assert time.monotonic() - started < 10  # a hang detector, not a timing target
    assert proc.returncode == 0
    assert "timed out after 1 s" in json.loads(proc.stdout)["systemMessage"]


def test_async_hook_does_not_delay_the_answer(cli: Cli, tmp_path: Path) -> None:
    # The async hook waits for a file the test writes only once it has the answer: an answer
    # that waited for the hook would never come (the hook gives up after 60 s, unmarked).
    marker, go = tmp_path / "async-done", tmp_path / "go"
    wait = f"i=0; while [ ! -e {go} ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done"
    cli.user_hooks(host_hook("PostToolUse", f"{wait}; [ -e {go} ] && touch {marker}", **{"async": True}))
    proc = cli.run("dispatch", "PostToolUse", stdin=cli.payload(tool_response={}))
    assert proc.returncode == 0 and proc.stdout == "{}\n"
    assert not marker.exists()
    go.touch()
    deadline = time.monotonic() + 15
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert marker.exists()


def test_canary_environment_does_not_reach_host_hooks(cli: Cli) -> None:
    cli.user_hooks(host_hook("UserPromptSubmit", "env"))
    proc = cli.run("dispatch", "UserPromptSubmit", stdin='{"session_id": "s", "prompt": "x"}',
                   HOOKCAGE_CANARY="do-not-leak")
    context = json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "do-not-leak" not in context
    assert f"CLAUDE_PROJECT_DIR={cli.project}" in context


def test_list_shows_scope_source_and_whether_it_runs(cli: Cli) -> None:
    cli.user_hooks(host_hook("PreToolUse", "user-check", matcher="Bash"))
    cli.project_hooks({"hooks": {"Stop": [{"hooks": [{"type": "prompt", "prompt": "x"}]}]}})
    proc = cli.run("list", "--json")
    assert proc.returncode == 0
    rows = json.loads(proc.stdout)
    assert [(r["event"], r["scope"], r["would_run"], r["skip_reason"]) for r in rows] == [
        ("PreToolUse", "user", True, None), ("Stop", "project", False, "unsupported_type")]
    assert rows[0]["source"] == str(cli.home / "hooks.json")
    text = cli.run("list", "--event", "PreToolUse").stdout
    assert "user-check" in text and "[user]" in text and "Stop" not in text


def test_list_rejects_an_unknown_event(cli: Cli) -> None:
    assert_one_line_error(cli.run("list", "--event", "Nope"), 1, "unknown event 'Nope'")


def test_validate_reports_each_problem_with_file_and_path(cli: Cli) -> None:
    path = cli.project_hooks({"hooks": {"PreToolUse": [{"hooks": [
        {"type": "command", "command": "x", "timeout": "soon"}]}], "Nope": []}})
    proc = cli.run("validate", str(path))
    assert proc.returncode == 1
    assert f"{path}: $.hooks.PreToolUse[0].hooks[0].timeout: must be a number" in proc.stdout
    assert f"{path}: $.hooks.Nope: unknown event 'Nope'" in proc.stdout


def test_validate_without_paths_checks_every_scope(cli: Cli) -> None:
    cli.user_hooks(host_hook("Stop", "true"))
    proc = cli.run("validate")
    assert proc.returncode == 0
    assert f"{cli.home / 'hooks.json'}: ok (1 hook)" in proc.stdout


def test_validate_missing_file(cli: Cli) -> None:
    assert_one_line_error(cli.run("validate", "nope.json"), 1, "nope.json: no such file")


def test_version_and_help(cli: Cli) -> None:
    from executor import __version__

    assert cli.run("--version").stdout.strip() == f"hookcage, version {__version__}"
    assert "dispatch" in cli.run("--help").stdout


@pytest.mark.parametrize("command", ["dispatch", "list", "validate", "run", "image build", "doctor", "gc", "demo"])
def test_every_command_has_help_with_an_example(cli: Cli, command: str) -> None:
    proc = cli.run(*command.split(), "--help")
    assert proc.returncode == 0 and "Example" in proc.stdout


@pytest.mark.parametrize(("stdin", "code", "text"), [
    # Past the nesting bound the gate fails closed (issue 11): a block, whatever fail_closed says.
    ("[" * 100_000, 2, "stdin JSON nests deeper than 200 levels"),
    ('{"n": ' + "9" * 5000 + "}", 1, "stdin is not valid JSON"),
])
def test_hostile_payload_is_one_line_not_a_traceback(cli: Cli, stdin: str, code: int, text: str) -> None:
    # Regression: deep nesting and huge integers escaped read_payload as tracebacks.
    assert_one_line_error(cli.run("dispatch", "Stop", stdin=stdin), code, text)


def test_every_command_is_documented() -> None:
    import click

    from executor.cli import cli as group

    docs = (Path(__file__).resolve().parents[3] / "docs" / "cli.md").read_text()
    with click.Context(group) as ctx:  # the group imports its commands by name: ask it for each
        top = {name: group.get_command(ctx, name) for name in group.list_commands(ctx)}
    assert len(top) >= 16 and all(top.values()), top
    names = []
    for name, command in top.items():
        sub = getattr(command, "commands", None)
        names.extend(f"{name} {s}" for s in sub) if sub else names.append(name)
    missing = [n for n in names if f"## hookcage {n}\n" not in docs]
    assert not missing, f"commands without a section in docs/cli.md: {missing}"
    commands = [c for command in top.values()
                for c in getattr(command, "commands", {command.name: command}).values()]
    options = {o for c in commands for p in c.params for o in getattr(p, "opts", ()) if o.startswith("--")}
    undocumented = [o for o in sorted(options) if not re.search(rf"{re.escape(o)}(?![\w-])", docs)]
    assert not undocumented, f"options not in docs/cli.md: {undocumented}"


def test_dispatch_imports_no_other_command(tmp_path: Path) -> None:
    """The root group imports a command's module only when that command runs: an agent's event
    pays for dispatch's module and the shared helpers, not for `image build`, `trust` or `install`."""
    code = ("import sys\nfrom executor.cli import main\ntry:\n    main(['dispatch', '--agent', 'help'])\n"
            "except SystemExit:\n    print(sorted(m for m in sys.modules if m.startswith('executor.cli')))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "HOOKCAGE_HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "['executor.cli', 'executor.cli.common', 'executor.cli.dispatch']"



@pytest.mark.parametrize("args", [["--help"], ["-h"], []])
def test_the_command_list_imports_no_command(tmp_path: Path, args: list[str]) -> None:
    """`hookcage --help` (and `hookcage` alone) lists every command from the group's table: no command's
    module is imported, and each is listed with its one line."""
    code = (f"import sys\nfrom executor.cli import main\ntry:\n    main({args!r})\n"
            "except SystemExit:\n    print(sorted(m for m in sys.modules if m.startswith('executor.cli')))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "HOOKCAGE_HOME": str(tmp_path), "COLUMNS": "80"})
    assert proc.stdout.splitlines()[-1] == "['executor.cli', 'executor.cli.common']", proc.stderr
    shown = proc.stdout if args else proc.stderr  # no command: the help as a usage error (exit 1), not one line
    assert shown.startswith("Usage: hookcage [OPTIONS] COMMAND [ARGS]...\n")
    assert "  trust      Review the project's hooks and trust them (trust on first use).\n" in shown
    assert "  uninstall  Put back every file `hookcage install AGENT` changed, byte...\n" in shown  # as click cuts



def test_a_group_with_no_command_shows_its_help_not_one_escaped_line(cli: Cli) -> None:
    # Regression: under click 8.2+ `hookcage image` printed its help as one error line with literal \n.
    proc = cli.run("image")
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.startswith("Usage: hookcage image [OPTIONS] COMMAND [ARGS]...\n\n  Build and inspect")
    assert "\\n" not in proc.stderr and "hookcage: error" not in proc.stderr

def test_the_command_table_says_what_each_command_says() -> None:
    """The summary `hookcage --help` lists without importing a command is the first paragraph of that
    command's own help; the list is the one click writes from the commands themselves, at any width."""
    import copy

    import click

    from executor.cli import COMMANDS
    from executor.cli import cli as group

    def listed(listing: click.Group, width: int) -> str:
        formatter = click.HelpFormatter(width=width)
        with click.Context(listing) as ctx:
            click.Group.format_commands(listing, ctx, formatter) if listing is group else \
                listing.format_commands(ctx, formatter)
        return formatter.getvalue()

    lazy = copy.copy(group)
    lazy.commands = {}  # as in a fresh process: nothing imported
    with click.Context(group) as ctx:  # imports every command
        commands = {name: group.get_command(ctx, name) for name in COMMANDS}
    for name, command in commands.items():
        assert command is not None and command.name == name
        first = (command.help or "").split("\n\n")[0].split()
        assert COMMANDS[name][1] == " ".join(first), f"COMMANDS[{name!r}] is not {name}'s help"
        assert not command.short_help and not command.hidden and not command.deprecated
    assert sorted(COMMANDS) == group.list_commands(click.Context(group))
    for width in (40, 78, 100):
        assert listed(lazy, width) == listed(group, width), width


def test_allow_edits_the_user_config_and_keeps_comments(cli: Cli) -> None:
    config = cli.home / "config.toml"
    config.write_text("# my settings\nmax_parallel = 4\n")
    assert cli.run("allow", "npm test").returncode == 0
    assert cli.run("allow", "--deny", "curl *").returncode == 0
    assert "nothing to change" in cli.run("allow", "npm test").stdout
    text = config.read_text()
    assert text.startswith("# my settings\nmax_parallel = 4\n")
    listed = cli.run("allow", "--list").stdout
    assert "allow  npm test" in listed and "deny   curl *" in listed
    assert cli.run("allow", "--remove", "npm test").returncode == 0
    assert "npm test" not in cli.run("allow", "--list").stdout
    assert oct(config.stat().st_mode & 0o777) == "0o600"


def test_allow_rejects_an_entry_that_is_not_shell_words(cli: Cli) -> None:
    proc = cli.run("allow", "echo 'unterminated")
    assert proc.returncode == 1 and "not a command in shell words" in proc.stderr


def test_off_list_hook_is_reported_with_the_line_that_allows_it(cli: Cli) -> None:
    (cli.home / "hooks.json").write_text(json.dumps(host_hook("Stop", "echo linted")))
    proc = cli.run("dispatch", "Stop", stdin='{"session_id": "s"}')
    assert proc.returncode == 0
    assert "hookcage allow 'echo linted'" in json.loads(proc.stdout)["systemMessage"]
    assert cli.run("allow", "echo linted").returncode == 0
    proc = cli.run("dispatch", "Stop", stdin='{"session_id": "s"}')
    assert "systemMessage" not in json.loads(proc.stdout)


def test_a_host_hook_whose_script_calls_hookcage_dispatch_does_not_recurse(cli: Cli, tmp_path: Path) -> None:
    # A route hidden in a script is not recognised as a route when the file is read:
    # the nested dispatch sees HOOKCAGE_IN_HOOK and answers at once, running nothing.
    script = tmp_path / "recurse.sh"
    script.write_text(f"{HOOKCAGE} dispatch --agent claude Stop >&2; echo nested-exit=$? >&2\n")
    # The same installation inside, as for a user whose HOOKCAGE_HOME is the default one.
    cli.user_hooks(host_hook("Stop", f"sh {script}", timeout=10, env={"HOOKCAGE_HOME": str(cli.home)}))
    proc = cli.run("dispatch", "--agent", "claude", "Stop", stdin=json.dumps({"session_id": "s"}))
    assert (proc.returncode, proc.stdout) == (0, "{}\n"), proc.stderr
    runs = [json.loads(line) for line in (cli.home / "runs.jsonl").read_text().splitlines()]
    assert [r["outcome"] for r in runs] == ["ran"]  # once: the nested call ran nothing


def test_hookcage_dispatch_inside_a_hook_answers_at_once(cli: Cli) -> None:
    # This process stands for the hookcage that runs the hook: it holds the marker the value names.
    marker = in_hook.Marker()
    try:
        proc = cli.run("dispatch", "Stop", stdin=b"not even json", HOOKCAGE_IN_HOOK=marker.value())
    finally:
        marker.close()
    assert (proc.returncode, proc.stdout) == (0, "{}\n")
    assert "called from inside a hook" in proc.stderr


@pytest.mark.parametrize(
    "value", ["1", "true", f"{os.getpid()}:0:{'0' * 32}"], ids=["1", "true", "this-pid-marker"]
)
def test_in_hook_set_in_the_agents_environment_silences_no_hook(cli: Cli, tmp_path: Path, value: str) -> None:
    """The attack: a repository's `env` (applied by the agent) sets HOOKCAGE_IN_HOOK, or a hook's value
    is copied there, to switch hookcage off. The managed guard and the user's hook still run."""
    managed, marker = tmp_path / "managed", tmp_path / "marks"
    managed.mkdir()
    marker.mkdir()
    guard = host_hook("Stop", f"touch {marker}/managed")
    (managed / "hooks.json").write_text(json.dumps(guard))
    allow(cli.home, [f"touch {marker}/managed", f"touch {marker}/user"])
    (cli.home / "hooks.json").write_text(json.dumps(host_hook("Stop", f"touch {marker}/user")))
    proc = cli.run("dispatch", "Stop", stdin=json.dumps({"session_id": "s"}), HOOKCAGE_IN_HOOK=value)
    assert proc.returncode == 0 and "called from inside a hook" not in proc.stderr, proc.stderr
    assert proc.stderr.splitlines()[0] == ("hookcage: HOOKCAGE_IN_HOOK is set, but not by a hook hookcage runs: "
                                           "ignored, every hook runs")
    assert sorted(p.name for p in marker.iterdir()) == ["managed", "user"]


def test_a_hook_s_value_proves_nothing_once_its_hookcage_is_done(cli: Cli, tmp_path: Path) -> None:
    """A value leaked out of a hook's environment is dead when the run ends (the marker is closed)."""
    leak = tmp_path / "leaked"
    cli.user_hooks(host_hook("Stop", f"printenv HOOKCAGE_IN_HOOK > {leak}"))
    assert cli.run("dispatch", "Stop", stdin=json.dumps({"session_id": "s"})).returncode == 0
    value = leak.read_text().strip()
    assert value.count(":") == 2
    assert not in_hook.genuine(value)  # not an ancestor of this process, and closed
    proc = cli.run("dispatch", "Stop", stdin=json.dumps({"session_id": "s"}), HOOKCAGE_IN_HOOK=value)
    assert "not by a hook hookcage runs" in proc.stderr


@pytest.mark.parametrize("agent", ["gemini", "cursor", "copilot", "grok", "infer"])
def test_install_refuses_an_agent_it_cannot_take_over_and_writes_nothing(cli: Cli, tmp_path: Path, agent: str) -> None:
    home = tmp_path / "user"
    home.mkdir()
    proc = cli.run("install", agent, HOME=str(home))
    assert proc.returncode == 1 and proc.stdout == ""
    first = proc.stderr.splitlines()[0]
    assert first.startswith(f"hookcage: cannot take {agent} over") and "cannot be taken over" in first
    assert "outside hookcage" in first or "runs" in first
    assert list(home.iterdir()) == []  # refused: nothing written, no routing added unasked


def test_the_in_hook_proof_is_checked_piece_by_piece(tmp_path: Path) -> None:
    """What a forger could try: an ancestor's pid with a made-up fd or nonce, this process's own
    marker (not an ancestor of itself), a marker that is closed, garbage."""
    marker = in_hook.Marker()
    value = marker.value()
    pid, fd, nonce = value.split(":")
    child = "import sys; from executor import in_hook; print(in_hook.genuine(sys.argv[1]))"

    def in_child(v: str) -> str:
        return subprocess.run([sys.executable, "-c", child, v], capture_output=True, text=True, timeout=30,
                              check=True).stdout.strip()

    try:
        assert in_child(value) == "True"
        assert not in_hook.genuine(value)  # this process is not its own ancestor
        for forged in (f"{pid}:{fd}:{'0' * 32}", f"{pid}:{int(fd) + 1}:{nonce}", f"1:{fd}:{nonce}",
                       f"{os.getppid()}:{fd}:{nonce}", "1", "", f"{pid}:{fd}", f"{pid}:{fd}:{nonce}:x", "a:b:c"):
            assert in_child(forged) == "False", forged
    finally:
        marker.close()
    assert in_child(value) == "False"  # closed: the hooks are done
