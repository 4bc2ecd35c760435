"""A repository carrying hooks for several agents: each agent's session runs exactly its hooks.

Through the real CLI and the real engine: the repository has hooks in
hookcage's own file and in Claude Code's, CodeBuddy Code's, Gemini CLI's,
Cursor's and Copilot's files; the user trusts them all (`hookcage trust
--all --yes`); then each agent's `hookcage dispatch --agent NAME`, fed that
agent's own payload, runs hookcage's hooks and that agent's, never another's
(read from the run log: which hook files the hooks that ran came from).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support import CliUser

from executor.dialects import DIALECTS

pytestmark = pytest.mark.docker


def cc_file(event: str, matcher: str, command: str) -> dict[str, Any]:
    return {"hooks": {event: [{"matcher": matcher, "hooks": [{"type": "command", "command": command}]}]}}


# Each agent: its project file, that file's content (a hook that echoes the agent's
# name), and a payload of that agent for its twin of PreToolUse on a shell command.
AGENTS: dict[str, tuple[str, Any, dict[str, Any]]] = {
    "claude": (".claude/settings.json", cc_file("PreToolUse", "Bash", "echo claude"),
               {"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "ls"}}),
    "codebuddy": (".codebuddy/settings.json", cc_file("PreToolUse", "Bash", "echo codebuddy"),
                  {"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "ls"},
                   "client": "CLI", "version": "2.163.0", "generation_id": "g1", "model": "m"}),
    # Gemini CLI: docs/hooks (geminicli.com), BeforeTool on run_shell_command, timeout in ms.
    "gemini": (".gemini/settings.json",
               {"hooks": {"BeforeTool": [{"matcher": "run_shell_command", "hooks": [
                   {"type": "command", "command": "echo gemini", "timeout": 30000}]}]}},
               {"hook_event_name": "BeforeTool", "tool_name": "run_shell_command",
                "tool_input": {"command": "ls"}, "timestamp": "2026-01-01T00:00:00Z"}),
    # Cursor: cursor.com/docs/agent/hooks, beforeShellExecution with the command.
    "cursor": (".cursor/hooks.json",
               {"version": 1, "hooks": {"beforeShellExecution": [{"command": "echo cursor"}]}},
               {"hook_event_name": "beforeShellExecution", "command": "ls", "cwd": "",
                "conversation_id": "c1", "generation_id": "g1"}),
    # Copilot CLI: docs.github.com hooks reference, preToolUse with toolArgs as a JSON string.
    "copilot": (".github/hooks/guard.json",
                {"version": 1, "hooks": {"preToolUse": [{"type": "command", "bash": "echo copilot"}]}},
                {"timestamp": 1704614600000, "toolName": "bash", "toolArgs": "{\"command\": \"ls\"}"}),
}


class Repo(CliUser):
    def write(self, rel: str, data: Any) -> None:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.parent.chmod(0o755)
        path.write_text(json.dumps(data))
        path.chmod(0o644)

    def ran_from(self) -> set[str]:
        log = self.home / "runs.jsonl"
        lines = log.read_text().splitlines() if log.exists() else []
        log.unlink(missing_ok=True)
        return {Path(json.loads(line)["source"]).relative_to(self.root).as_posix()
                for line in lines if json.loads(line)["outcome"] == "ran"}


@pytest.fixture
def repo(tmp_path: Path, workspace: Path, runner_image: str) -> Repo:
    return Repo(tmp_path, workspace, "agents")


def test_each_agents_session_runs_exactly_its_own_hooks(repo: Repo) -> None:
    agents = {name: spec for name, spec in AGENTS.items() if name in DIALECTS}
    assert {"claude", "codebuddy"} <= set(agents)
    repo.write(".hookcage/hooks.json", cc_file("PreToolUse", "Bash", "echo hookcage"))
    for rel, data, _ in agents.values():
        repo.write(rel, data)
    repo.allow("echo *")
    before = repo.run("dispatch", "--agent", "claude", "PreToolUse", stdin=json.dumps(
        {"session_id": repo.session, "cwd": str(repo.root), **agents["claude"][2]}))
    assert before.returncode == 0, before.stderr
    assert repo.ran_from() == set()  # nothing trusted yet: nothing ran
    trusted = repo.run("trust", "--all", "--yes")
    assert trusted.returncode == 0, trusted.stdout + trusted.stderr
    listed = json.loads(repo.run("list", "--json").stdout)
    assert {h["agent"] for h in listed} == {None, *agents}
    for name, (rel, _, payload) in agents.items():
        proc = repo.run("dispatch", "--agent", name, stdin=json.dumps(
            {"session_id": repo.session, "cwd": str(repo.root), **payload}))
        assert proc.returncode == 0, (name, proc.stderr)
        assert repo.ran_from() == {".hookcage/hooks.json", rel}, name


def test_list_and_validate_name_the_agent(repo: Repo) -> None:
    repo.write(".claude/settings.json", {"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
        {"type": "command", "command": "echo ok"},
        {"type": "command", "command": "echo bad", "timeout": -1},
        {"type": "command", "command": "hookcage dispatch --agent claude"}]}]}})
    proc = repo.run("validate", "--agent", "claude")
    assert proc.returncode == 1
    assert (f"claude hook file {repo.root}/.claude/settings.json: $.hooks.PreToolUse[0].hooks[1].timeout: "
            "must be a number of seconds") in proc.stdout
    listed = repo.run("list", "--agent", "claude")
    assert listed.returncode == 0, listed.stderr
    assert "[claude project]  echo ok" in listed.stdout
    assert "hookcage dispatch --agent claude" not in listed.stdout.replace("routes to", "")
    assert "1 route to hookcage dispatch" in listed.stdout
