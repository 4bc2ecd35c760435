"""A repository carrying hooks for every agent: each agent's session runs exactly its hooks.

Through the real CLI and the real engine: the repository has hooks in
hookcage's own file and in every agent's file; the user trusts them all (`hookcage trust
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


# Each agent: its project file, that file's content (a hook that echoes the agent's name),
# the EVENT argument (None: the payload names it), and a payload of that agent for its twin
# of PreToolUse on a shell command (infer: its post_tool point, which has no twin).
SESSION = "{session}"
AGENTS: dict[str, tuple[str, Any, str | None, dict[str, Any]]] = {
    "claude": (".claude/settings.json", cc_file("PreToolUse", "Bash", "echo claude"), None,
               {"session_id": SESSION, "hook_event_name": "PreToolUse", "tool_name": "Bash",
                "tool_input": {"command": "ls"}}),
    # CodeBuddy Code 2.163, captured (tests/integration/test_real_agents.py).
    "codebuddy": (".codebuddy/settings.json", cc_file("PreToolUse", "Bash", "echo codebuddy"), None,
                  {"session_id": SESSION, "hook_event_name": "PreToolUse", "tool_name": "Bash",
                   "tool_input": {"command": "ls"}, "client": "CLI", "version": "2.163.0",
                   "generation_id": "g1", "model": "m"}),
    # developers.openai.com/codex/hooks: Claude Code's keys plus turn_id and model.
    "codex": (".codex/hooks.json", cc_file("PreToolUse", "Bash", "echo codex"), None,
              {"session_id": SESSION, "turn_id": "t1", "model": "gpt-5-codex", "hook_event_name": "PreToolUse",
               "tool_name": "Bash", "tool_input": {"command": "ls"}, "tool_use_id": "call_1"}),
    # github/docs cli-hooks-reference: preToolUse with toolArgs as a JSON string.
    "copilot": (".github/hooks/guard.json",
                {"version": 1, "hooks": {"preToolUse": [{"type": "command", "bash": "echo copilot"}]}},
                "preToolUse",
                {"sessionId": SESSION, "timestamp": 1704614600000, "toolName": "bash",
                 "toolArgs": "{\"command\": \"ls\"}"}),
    # cursor.com/docs/agent/hooks: beforeShellExecution with the command.
    "cursor": (".cursor/hooks.json",
               {"version": 1, "hooks": {"beforeShellExecution": [{"command": "echo cursor"}]}}, None,
               {"conversation_id": SESSION, "generation_id": "g1", "hook_event_name": "beforeShellExecution",
                "command": "ls", "workspace_roots": ["{root}"]}),
    # google-gemini/gemini-cli hooks/types.ts: BeforeTool on run_shell_command, timeout in ms.
    "gemini": (".gemini/settings.json",
               {"hooks": {"BeforeTool": [{"matcher": "run_shell_command", "hooks": [
                   {"type": "command", "command": "echo gemini", "timeout": 30000}]}]}}, None,
               {"session_id": SESSION, "hook_event_name": "BeforeTool", "tool_name": "run_shell_command",
                "tool_input": {"command": "ls"}, "timestamp": "2026-01-01T00:00:00Z"}),
    # phuetz/grok-cli src/hooks/lifecycle-hooks.ts: a pre-bash lifecycle hook.
    "grok": (".codebuddy/hooks.json",
             {"hooks": [{"name": "g", "type": "pre-bash", "command": "echo grok", "enabled": True}]}, None,
             {"session_id": SESSION, "hook_event_name": "PreToolUse", "tool_name": "Bash",
              "tool_input": {"command": "ls"}}),
    # inference-gateway/cli internal/agent/hook_commands.go: {hook, session_id, turn}.
    "infer": (".infer/hooks.yaml",
              "enabled: true\nhooks:\n  - name: i\n    hook: post_tool\n    command: echo infer\n", None,
              {"hook": "post_tool", "session_id": SESSION, "turn": 1}),
    # cnjack/jcode internal/hooks/types.go: Claude Code's keys, its tool named execute.
    "jcode": (".jcode/hooks.json", cc_file("PreToolUse", "Bash", "echo jcode"), None,
              {"session_id": SESSION, "hook_event_name": "PreToolUse", "tool_name": "execute",
               "tool_input": {"command": "ls"}}),
    # NB-Agent/ok internal/hook/hook.go: event + camelCase keys, exit codes only.
    "ok": (".ok/settings.json", {"hooks": {"PreToolUse": [{"match": "bash", "command": "echo ok"}]}}, None,
           {"event": "PreToolUse", "toolName": "bash", "toolArgs": {"command": "ls"}}),
}
NO_TWIN = {"infer"}  # its point has no canonical twin: hookcage's own PreToolUse hook is not for it


class Repo(CliUser):
    def write(self, rel: str, data: Any) -> None:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.parent.chmod(0o755)
        path.write_text(data if isinstance(data, str) else json.dumps(data))
        path.chmod(0o644)

    def payload(self, agent: str) -> str:
        text = json.dumps(AGENTS[agent][3]).replace(SESSION, self.session).replace("{root}", str(self.root))
        data = json.loads(text)
        if "cwd" not in data and agent not in ("cursor", "infer"):
            data["cwd"] = str(self.root)
        return json.dumps(data)

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
    assert set(AGENTS) == set(DIALECTS)  # a new agent gets a row here
    repo.write(".hookcage/hooks.json", cc_file("PreToolUse", "*", "echo hookcage"))
    for rel, data, _, _ in AGENTS.values():
        repo.write(rel, data)
    repo.allow("echo *")
    before = repo.run("dispatch", "--agent", "claude", stdin=repo.payload("claude"))
    assert before.returncode == 0, before.stderr
    assert repo.ran_from() == set()  # nothing trusted yet: nothing ran
    trusted = repo.run("trust", "--all", "--yes")
    assert trusted.returncode == 0, trusted.stdout + trusted.stderr
    listed = json.loads(repo.run("list", "--json").stdout)
    assert {h["agent"] for h in listed} == {None, *AGENTS}
    for name, (rel, _, event, _) in AGENTS.items():
        proc = repo.run("dispatch", "--agent", name, *([event] if event else []), stdin=repo.payload(name),
                        env={"INFER_HOOKS_ENABLED": "true"})
        assert proc.returncode == 0, (name, proc.stdout, proc.stderr)
        expected = {rel} if name in NO_TWIN else {".hookcage/hooks.json", rel}
        assert repo.ran_from() == expected, name


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
