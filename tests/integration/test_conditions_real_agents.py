"""Golden cases for ``if``: what the real agents do, and that hookcage runs a hook at least then.

The real Claude Code CLI (``claude-agent-sdk`` 0.2.187 = Claude Code 2.1.330) and
CodeBuddy Code CLI (``codebuddy-agent-sdk`` 0.3.274 = CodeBuddy Code 2.163.0, see
``tests/agents.py``), alone (not routed), in a throwaway repository whose
``.claude/settings.json`` (``.codebuddy/settings.json``) holds one PreToolUse hook with an ``if`` rule; a
loopback model asks for one tool call. The hook touches a marker and blocks
(exit 2), so the marker says whether the agent ran it. The same file and
payload then go through hookcage's own reading (:func:`executor.core.hookparse.parse_hook_file`
in the agent's shape and :func:`executor.dialects.selects`):

* wherever the agent runs the hook, hookcage runs it (a guard must never be
  skipped where the agent would have run it);
* where hookcage runs it although the agent does not, the case says so
  (``superset``): a wrapper, a tool family, Claude Code's reading in a
  CodeBuddy file;
* a rule hookcage cannot evaluate is refused (``invalid``) where the agent
  silently never runs the hook.

No container is involved: the CLI runs the hook on the host, as it does unrouted.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, ModelStandIn, ToolCall, claude_cli, codebuddy_cli, point_codebuddy_at

from executor.core.conditions import ConditionContext
from executor.core.events import get_event
from executor.core.hookparse import parse_hook_file
from executor.core.hooks import Scope
from executor.dialects import DIALECTS, selects

pytestmark = pytest.mark.docker

# (if, tool, tool_input, files to create, the agent runs the hook, hookcage's answer)
# hookcage's answer: "same", "superset" (runs although the agent does not) or "invalid".
Case = tuple[str, str, dict[str, Any], tuple[str, ...], bool, str]
CLAUDE: list[Case] = [
    ("Bash(git push*)", "Bash", {"command": "git push origin main"}, (), True, "same"),
    ("Bash(git push*)", "Bash", {"command": "ls"}, (), False, "same"),
    ("Bash(git push *)", "Bash", {"command": "git  push origin main"}, (), True, "same"),
    ("Bash(git push *)", "Bash", {"command": "FOO=bar git push origin"}, (), True, "same"),
    ("Bash(git push *)", "Bash", {"command": "ls | git push origin"}, (), True, "same"),
    ("Bash(rm *)", "Bash", {"command": "echo $(date)"}, (), False, "same"),
    ("Bash(git push *)", "Bash", {"command": "echo $(date)"}, (), True, "same"),
    ("Bash(git push *)", "Bash", {"command": "timeout 5 git push origin"}, (), False, "superset"),
    ("Read(./.env)", "Read", {"file_path": "{root}/sub/.env"}, ("sub/.env",), True, "same"),
    ("Read(.env)", "Read", {"file_path": "{root}/x.txt"}, ("x.txt",), False, "same"),
    ("Write(*.md)", "Write", {"file_path": "{root}/a/b.md", "content": "x"}, (), True, "same"),
    ("Edit(*.md)", "Write", {"file_path": "{root}/a/b.md", "content": "x"}, (), False, "superset"),
    ("Bash(git push *)|Bash(ls *)", "Bash", {"command": "ls -la"}, (), False, "invalid"),
    ("", "Bash", {"command": "ls"}, (), True, "same"),
]
CODEBUDDY: list[Case] = [
    ("Bash(git push*)", "Bash", {"command": "git push origin main"}, (), True, "same"),
    ("Bash(git push*)", "Bash", {"command": "ls"}, (), False, "same"),
    ("Bash(git push *)", "Bash", {"command": "git  push origin"}, (), False, "superset"),
    ("Bash(git push *)", "Bash", {"command": "FOO=1 git push origin"}, (), False, "superset"),
    ("Bash(rm *)", "Bash", {"command": "echo $(date)"}, (), False, "same"),
    ("Bash(git push *)", "Bash", {"command": "echo $(date)"}, (), False, "superset"),
    ("Bash(a)|Bash(ls *)", "Bash", {"command": "ls -la"}, (), True, "same"),  # a rule it cannot read: every call
    ("Read(./.env)", "Read", {"file_path": "{root}/sub/.env"}, ("sub/.env",), False, "superset"),
    ("Edit(*.md)", "Write", {"file_path": "{root}/a/b.md", "content": "x"}, (), False, "same"),
    ("", "Bash", {"command": "ls"}, (), True, "same"),
]
CASES = [("claude", *c) for c in CLAUDE] + [("codebuddy", *c) for c in CODEBUDDY]


def _settings(rule: str, marker: Path) -> dict[str, Any]:
    handler = {"type": "command", "command": f"touch {marker}; echo blocked >&2; exit 2", "if": rule}
    return {"hooks": {"PreToolUse": [{"hooks": [handler]}]}}


def _agent_runs(tmp: Path, name: str, rule: str, tool: str, tool_input: dict[str, Any],
                files: tuple[str, ...]) -> tuple[bool, Path, Path]:
    binary = claude_cli() if name == "claude" else codebuddy_cli()
    root = tmp / "repo"
    settings = root / f".{name}" / "settings.json"
    settings.parent.mkdir(parents=True)
    for rel in files:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x\n")
    marker = tmp / "marker"
    settings.write_text(json.dumps(_settings(rule, marker)))
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG")}
    with ModelStandIn(tool_call=ToolCall(tool, tool_input), reply="done") as model:
        agent = Agent(name, binary, tmp / f"{name}-home", env, model=model)
        if name == "codebuddy":
            point_codebuddy_at(agent, model)
        try:
            agent.run("go", root, routed=False, args=["--allowedTools", tool], timeout=120)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{name} -p did not finish for {rule!r} on {tool_input}")
    return marker.exists(), root, settings


@pytest.mark.parametrize(("agent", "rule", "tool", "tool_input", "files", "agent_runs", "hookcage"), CASES,
                         ids=[f"{c[0]}-{c[1] or 'empty'}-{c[3]}" for c in CASES])
def test_hookcage_runs_the_hook_whenever_the_agent_does(
    tmp_path: Path, agent: str, rule: str, tool: str, tool_input: dict[str, Any], files: tuple[str, ...],
    agent_runs: bool, hookcage: str,
) -> None:
    real_input = json.loads(json.dumps(tool_input).replace("{root}", str(tmp_path / "repo")))
    ran, root, settings = _agent_runs(tmp_path, agent, rule, tool, real_input, files)
    assert ran is agent_runs, f"{agent} {'ran' if ran else 'did not run'} the hook: the golden case is stale"

    parsed = parse_hook_file(_settings(rule, tmp_path / "marker"), scope=Scope.PROJECT,
                             source=str(settings), project_root=str(root), shape=DIALECTS[agent].shape)
    (hook,) = parsed.hooks
    if hookcage == "invalid":
        assert hook.invalid and not agent_runs
        return
    assert hook.invalid is None
    payload = {"session_id": "s", "cwd": str(root), "hook_event_name": "PreToolUse", "tool_name": tool,
               "tool_input": real_input, "tool_use_id": "t"}
    runs = selects(get_event("PreToolUse"), hook, payload, ConditionContext(root=str(root), home=str(tmp_path)))
    assert runs is (agent_runs or hookcage == "superset")
