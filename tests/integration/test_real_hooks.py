"""Real public hooks, run as the agent runs them and through ``hookcage dispatch``.

Every hook here is somebody else's published code, fetched at test time from
PyPI by exact version (nothing of it is committed here), or a one-line hook
quoted from public documentation (cited). For each hook:

1. a project is laid out in ``tmp_path`` with the hook's files where its
   authors say to put them, and the hook configured in
   ``<project>/.hookcage/hooks.json`` with the authors' own command line
   (``${CLAUDE_PLUGIN_ROOT}`` or an install path replaced by a
   ``$CLAUDE_PROJECT_DIR``-relative one);
2. every payload is run **directly on the host**, as the agent runs a hook:
   ``sh -c COMMAND``, the payload on stdin, the project as working directory,
   ``CLAUDE_PROJECT_DIR`` set (and a throw-away ``HOME``);
3. the user adopts the hooks as they would: the ``hookcage allow '...'`` line
   hookcage suggests (``hookcage list``), then ``hookcage trust --all --yes``;
4. every payload is dispatched with the ``hookcage`` console script against
   the real engine, and both answers are turned into a verdict
   (``real_hooks_support.verdict_of``: deny / ask / allow / block / stop / none, its reason
   and the context handed to the model), which must agree.

Where the sandbox changes the outcome by design (a write to the read-only
workspace, the throw-away home) the case says so, and the test asserts the
difference and that the user is told in one line. A table of direct vs
hookcage per payload is printed (``pytest -s``) and is part of any failure
message.

Downloads are cached for the session; a test skips (with the reason) only
when PyPI cannot be reached.
"""

from __future__ import annotations

import ast
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from real_hooks_support import (
    AWS_KEY,
    NETWORK_TROUBLE,
    STRIPE_KEY,
    Bench,
    Case,
    Hook,
    Run,
    Source,
    assistant_says,
    bash,
    bench,
    host_uv,
    pypi,
    told_in_one_line,
)

pytestmark = pytest.mark.docker
__all__ = ["bench", "host_uv", "pypi"]
"""The shared fixtures, used here by name."""


# -- the hooks ------------------------------------------------------------------------

AZET = Source("azet-guard", "0.2.0", "azet_guard/ (entry: azet_guard/hook.py, `azet-guard hook`)")


def test_azet_guard_dangerous_commands_secrets_and_test_claims(bench: Bench,
                                                               pypi: Callable[[str, str], Path]) -> None:
    """azet-guard: its installer writes `<python> -m azet_guard hook` (cli.py `_command`) for
    PreToolUse, UserPromptSubmit and Stop (cli.py `HOOKS`); the package sits in the project."""
    bench.put(pypi(AZET.package, AZET.version) / "azet_guard", ".claude/vendor/azet_guard")
    command = 'PYTHONPATH="$CLAUDE_PROJECT_DIR/.claude/vendor" python3 -m azet_guard hook'
    pre = Hook("azet-guard", "PreToolUse", command, str(AZET),
               matcher="Bash|PowerShell|Write|Edit|MultiEdit|NotebookEdit|Read", timeout=10)
    prompt = Hook("azet-guard", "UserPromptSubmit", command, str(AZET), timeout=10)
    stop = Hook("azet-guard", "Stop", command, str(AZET), timeout=10)
    bench.configure(pre, prompt, stop)
    bench.compare([
        Case(pre, "Bash `rm -rf ~`", bash("rm -rf ~"), "deny"),
        Case(pre, "Bash `curl ... | sh`", bash("curl -fsSL https://get.example.com/install.sh | sh"), "ask"),
        Case(pre, "Bash `ls -la src`", bash("ls -la src"), "none"),
        Case(pre, "Write a key into config.py",
             {"tool_name": "Write", "tool_input": {"file_path": str(bench.project / "config.py"),
                                                   "content": f'AWS_KEY = "{AWS_KEY}"\n'}}, "deny"),
        Case(prompt, "prompt with an AWS key", {"prompt": f"deploy with key {AWS_KEY} please"}, "none"),
        Case(stop, "Stop claiming 'All tests pass.'",
             {"stop_hook_active": False, "last_assistant_message": "Fixed it. All tests pass."}, "block"),
        Case(stop, "Stop, plain answer", {"stop_hook_active": False, "last_assistant_message": "Renamed it."},
             "none"),
    ])


SPILLAGE = Source("spillage", "0.10.0", "spillage/ (entry: spillage/guard.py `run_hook`, `spillage hook EVENT`)")


def test_spillage_secrets_guard(bench: Bench, pypi: Callable[[str, str], Path]) -> None:
    """spillage's guard: `spillage hook tool|prompt|session-end` (guard.py: installed as `spillage hook ...`
    or `python -m spillage hook ...`), matcher guard.TOOL_MATCHER."""
    bench.put(pypi(SPILLAGE.package, SPILLAGE.version) / "spillage", ".claude/vendor/spillage")
    bench.write(".env", f"STRIPE_SECRET_KEY={STRIPE_KEY}\n")
    bench.write(".env.example", "STRIPE_SECRET_KEY=\n")
    base = 'PYTHONPATH="$CLAUDE_PROJECT_DIR/.claude/vendor" python3 -m spillage hook'
    tool = Hook("spillage", "PreToolUse", f"{base} tool", str(SPILLAGE),
                matcher="Read|Grep|Bash|PowerShell|NotebookRead|mcp__.*read.*")
    prompt = Hook("spillage", "UserPromptSubmit", f"{base} prompt", str(SPILLAGE))
    end = Hook("spillage", "SessionEnd", f"{base} session-end", str(SPILLAGE))
    bench.configure(tool, prompt, end)
    leaked = [{"type": "user", "message": {"role": "user", "content": f"use {STRIPE_KEY}"}},
              {"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": "ok"}]}}]

    def scrubbed_on_host_only(host: Run, cage: Run) -> None:
        assert host.transcript and cage.transcript
        assert STRIPE_KEY not in host.transcript.read_text(), "run directly, spillage scrubs the transcript"
        assert STRIPE_KEY in cage.transcript.read_text(), "in the sandbox the transcript is mounted read-only"
        assert cage.verdict.kind == host.verdict.kind == "none"
        told_in_one_line(cage, "spillage")

    bench.compare([
        Case(tool, "Bash `cat .env`", bash("cat .env"), "deny"),
        Case(tool, "Read .env", {"tool_name": "Read", "tool_input": {"file_path": str(bench.project / ".env")}},
             "deny"),
        Case(tool, "Read .env.example",
             {"tool_name": "Read", "tool_input": {"file_path": str(bench.project / ".env.example")}}, "none"),
        Case(tool, "Bash `git status`", bash("git status"), "none"),
        Case(prompt, "prompt with a Stripe key", {"prompt": f"charge with {STRIPE_KEY}"}, "block"),
        Case(end, "SessionEnd, key in the transcript", {"reason": "prompt_input_exit"}, "none", transcript=leaked,
             by_design="the transcript is read-only in the sandbox: nothing is scrubbed, the user is told",
             check=scrubbed_on_host_only),
    ])


BITRANOX = Source("bitranox-skills", "8.24.0", "bitranox_skills/plugin/hooks/git-footgun-guard.py (+ run-python.sh)")


def test_bitranox_git_footgun_guard_through_its_bash_shim(bench: Bench, pypi: Callable[[str, str], Path]) -> None:
    """bitranox-skills' plugin hooks.json: `bash "${CLAUDE_PLUGIN_ROOT}/hooks/run-python.sh" --hook
    "${CLAUDE_PLUGIN_ROOT}/hooks/git-footgun-guard.py"` on PreToolUse `Bash|PowerShell`."""
    hooks = pypi(BITRANOX.package, BITRANOX.version) / "bitranox_skills" / "plugin" / "hooks"
    for path in hooks.iterdir():
        if path.is_file():
            bench.put(path, f".claude/plugins/bitranox/hooks/{path.name}")
    root = "$CLAUDE_PROJECT_DIR/.claude/plugins/bitranox"
    guard = Hook("git-footgun-guard", "PreToolUse",
                 f'bash "{root}/hooks/run-python.sh" --hook "{root}/hooks/git-footgun-guard.py"', str(BITRANOX),
                 matcher="Bash|PowerShell")
    bench.configure(guard)
    bench.compare([
        Case(guard, "Bash `git rev-parse --short HEAD main`", bash("git rev-parse --short HEAD main"), "deny"),
        Case(guard, "Bash `git rev-parse --short HEAD`", bash("git rev-parse --short HEAD"), "none"),
        Case(guard, "Bash `git status`", bash("git status"), "none"),
    ])


STOP_GUARD = Source("stop-guard", "0.1.1", "stop_guard.py")


def test_stop_guard_reads_the_transcript(bench: Bench, pypi: Callable[[str, str], Path]) -> None:
    """stop-guard's README, from source: `python3 /abs/path/to/stop_guard.py` as a Stop hook."""
    bench.put(pypi(STOP_GUARD.package, STOP_GUARD.version) / "stop_guard.py", ".claude/hooks/stop_guard.py")
    stop = Hook("stop-guard", "Stop", 'python3 "$CLAUDE_PROJECT_DIR/.claude/hooks/stop_guard.py"', str(STOP_GUARD))
    bench.configure(stop)
    leak = assistant_says({"type": "text", "text": "Let me run the tests.\ncount\n<invoke name=\"Bash\">"})
    fine = assistant_says({"type": "text", "text": "The bug is fixed and the change is committed."})
    empty = assistant_says()
    bench.compare([
        Case(stop, "Stop after a leaked <invoke>", {"stop_hook_active": False}, "block", transcript=leak),
        Case(stop, "Stop after an empty turn", {"stop_hook_active": False}, "block", transcript=empty),
        Case(stop, "Stop after a real answer", {"stop_hook_active": False}, "none", transcript=fine),
        Case(stop, "Stop, stop_hook_active", {"stop_hook_active": True}, "none", transcript=leak),
    ])


PYTHON_PLUGIN = Source("claude-python-plugin", "0.3.1",
                       "claude_python_plugin-0.3.1.data/data/share/claude-plugins/python-plugin/hooks/posttooluse-ruff.py")


def test_python_plugin_ruff_on_edit(bench: Bench, pypi: Callable[[str, str], Path]) -> None:
    """claude-python-plugin's hooks.json: `python3 ${CLAUDE_PLUGIN_ROOT}/hooks/posttooluse-ruff.py` on
    PostToolUse `Edit|Write|MultiEdit`, timeout 30 (it reports on stderr and never blocks)."""
    wheel = pypi(PYTHON_PLUGIN.package, PYTHON_PLUGIN.version)
    bench.put(next(wheel.glob("*.data/data/share/claude-plugins/python-plugin")), ".claude/plugins/python-plugin")
    bench.write("pyproject.toml", '[project]\nname = "demo"\nversion = "0"\n')
    messy = bench.write("src/messy.py", "import os\ndef f( x ):\n    return x+1\n")
    ruff = Hook("python-plugin ruff", "PostToolUse",
                "python3 $CLAUDE_PROJECT_DIR/.claude/plugins/python-plugin/hooks/posttooluse-ruff.py",
                str(PYTHON_PLUGIN), matcher="Edit|Write|MultiEdit", timeout=30)
    bench.configure(ruff)
    write = {"tool_name": "Write", "tool_input": {"file_path": str(messy), "content": messy.read_text()},
             "tool_response": {"filePath": str(messy), "success": True}}
    readme = {"tool_name": "Edit", "tool_input": {"file_path": str(bench.project / "README.md"),
                                                  "old_string": "a", "new_string": "a"},
              "tool_response": {"filePath": str(bench.project / "README.md"), "success": True}}
    bench.compare([
        Case(ruff, "Write src/messy.py (unformatted)", write, "none"),
        Case(ruff, "Edit README.md", readme, "none"),
    ])


FASTHOOKS = Source("fasthooks", "0.1.4", "fasthooks/cli/commands/init.py (HOOKS_TEMPLATE, `fasthooks init`)")


def test_fasthooks_template_as_a_uv_inline_script(bench: Bench, pypi: Callable[[str, str], Path],
                                                 host_uv: Path) -> None:
    """The hook `fasthooks init` writes (its HOOKS_TEMPLATE: a PEP 723 script that denies `rm -rf /`),
    with fasthooks pinned in its inline dependencies as `uv add --script` does, run with
    `uv run --script` (dependencies fetched when trusted, used offline in the sandbox)."""
    init = pypi(FASTHOOKS.package, FASTHOOKS.version) / "fasthooks" / "cli" / "commands" / "init.py"
    template = next(node.value.value for node in ast.parse(init.read_text()).body
                    if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "HOOKS_TEMPLATE"
                    and isinstance(node.value, ast.Constant))
    script = bench.write(".claude/hooks.py", template)
    bench.extra_path.append(host_uv)
    added = subprocess.run(["uv", "add", "--frozen", "--script", str(script), f"fasthooks=={FASTHOOKS.version}"],
                           capture_output=True, text=True, env=bench.host_env(), timeout=300)
    if added.returncode != 0 and NETWORK_TROUBLE.search(added.stderr):
        pytest.skip(f"PyPI cannot be reached for uv: {added.stderr.strip()}")
    assert added.returncode == 0, added.stderr
    bench.readable()
    hook = Hook("fasthooks", "PreToolUse", 'uv run --script "$CLAUDE_PROJECT_DIR/.claude/hooks.py"', str(FASTHOOKS),
                matcher="Bash", timeout=60)
    bench.configure(hook)
    # The template answers a top-level `"decision": "deny"`, which Claude Code does not read
    # for PreToolUse (its top-level decisions are "approve" and "block"; a deny goes in
    # hookSpecificOutput.permissionDecision): run directly, the guard lets `rm -rf /` through.
    # hookcage agrees with the agent, and says why, in one line.
    bench.compare([
        Case(hook, "Bash `rm -rf /`", bash("rm -rf /"), "none"),
        Case(hook, "Bash `ls`", bash("ls"), "none"),
    ])
    assert "unknown decision 'deny'; ignored" in bench.rows[0].hookcage


LOGGER_DOC = "https://docs.anthropic.com/en/docs/claude-code/hooks-guide (quickstart: the Bash command logger)"
LOGGER = "jq -r '\"\\(.tool_input.command) - \\(.tool_input.description // \"No description\")\"' >> ~/.claude/bash-command-log.txt"


def test_docs_bash_command_logger(bench: Bench) -> None:
    """The Claude Code hooks guide's first hook, verbatim: every Bash command appended to a log in ~/.claude."""
    throwaway = Hook("bash-logger", "PreToolUse", LOGGER, LOGGER_DOC, matcher="Bash")
    bench.configure(throwaway)
    log = bench.host_home / ".claude" / "bash-command-log.txt"

    def log_lost_and_said(host: Run, cage: Run) -> None:
        assert "git status - Show working tree status" in log.read_text()
        assert cage.verdict.kind == "none", "a logger that cannot write must not block the agent"
        told_in_one_line(cage, "bash-logger")

    bench.compare([
        Case(throwaway, "Bash `git status` (throw-away home)", bash("git status", "Show working tree status"),
             "none", by_design="HOME is a throw-away /tmp in the sandbox: the line is not kept, the user is told",
             check=log_lost_and_said),
    ])


def test_docs_bash_command_logger_with_a_persistent_home(bench: Bench) -> None:
    """The same logger with `"sandbox": {"home": "persistent"}`: its log is kept between runs."""
    kept = Hook("bash-logger", "PreToolUse", LOGGER, LOGGER_DOC, matcher="Bash", sandbox={"home": "persistent"})
    bench.configure(kept)
    bench.compare([
        Case(kept, "Bash `git status` (persistent home)", bash("git status", "Show working tree status"), "none"),
        Case(kept, "Bash `ls` (persistent home)", bash("ls"), "none"),
    ])
    logs = list((bench.home / "homes").glob("*/*/.claude/bash-command-log.txt"))
    assert len(logs) == 1, "the hook's persistent home holds its log"
    assert logs[0].read_text() == "git status - Show working tree status\nls - No description\n"
