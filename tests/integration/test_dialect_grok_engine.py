"""grok-cli / code-buddy (phuetz, TypeScript) through the real CLI and the real engine.

A repository carries ``.codebuddy/hooks.json`` in the agent's lifecycle shape
(github.com/phuetz/grok-cli ``src/hooks/lifecycle-hooks.ts``): a ``pre-bash``
hook selected by ``commandPatterns`` and a built-in enabled by name. Before
``hookcage trust`` nothing runs; after it the hooks run in the container,
read the command from ``GROK_COMMAND`` (never pasted into their command
line) and hookcage answers in the agent's advanced-hook JSON
(``advanced-hooks.ts`` ``HookDecision``: ``{"action": ...}``, exit 0).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support import CliUser

pytestmark = pytest.mark.docker

# `${command}` as the author writes it; hookcage runs it as "$GROK_COMMAND".
GUARD = """[ "${command}" = "rm -rf x" ] && echo '{"action":"deny"}'"""
GUARD_RUNS = """[ "$GROK_COMMAND" = "rm -rf x" ] && echo '{"action":"deny"}'"""


class Repo(CliUser):
    def write(self, rel: str, data: Any) -> None:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.parent.chmod(0o755)
        path.write_text(data if isinstance(data, str) else json.dumps(data))
        path.chmod(0o644)

    def trust(self) -> None:
        proc = self.run("trust", "--all", "--yes")
        assert proc.returncode == 0, proc.stdout + proc.stderr

    def dispatch(self, payload: dict[str, Any]) -> subprocess.CompletedProcess[str]:
        return self.run("dispatch", "--agent", "grok", stdin=json.dumps(payload))  # type: ignore[no-any-return]

    def ran(self) -> list[str]:
        """The commands of the hooks that ran since the last call (from the run log)."""
        log = self.home / "runs.jsonl"
        lines = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
        log.unlink(missing_ok=True)
        return [r["command"] for r in lines if r["outcome"] == "ran"]


def answer(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert proc.returncode == 0, proc.stderr
    parsed: dict[str, Any] = json.loads(proc.stdout)
    return parsed


@pytest.fixture
def repo(tmp_path: Path, workspace: Path, runner_image: str) -> Repo:
    return Repo(tmp_path, workspace, "grok")


def bash(repo: Repo, command: str) -> dict[str, Any]:
    return {"session_id": repo.session, "cwd": str(repo.root), "hook_event_name": "PreToolUse",
            "tool_name": "Bash", "tool_input": {"command": command}}


def test_a_pre_bash_hook_runs_only_after_trust_reads_the_command_from_the_environment(repo: Repo) -> None:
    repo.write(".codebuddy/hooks.json", {"hooks": [
        {"name": "no-rm", "type": "pre-bash", "command": GUARD, "enabled": True, "commandPatterns": ["rm"]}]})
    repo.allow(GUARD_RUNS)  # an expansion needs the exact entry
    before = answer(repo.dispatch(bash(repo, "rm -rf x")))
    assert before["action"] == "allow" and "not trusted yet" in before["systemMessage"]
    assert repo.ran() == []
    repo.trust()
    denied = answer(repo.dispatch(bash(repo, "rm -rf x")))
    assert denied["action"] == "deny", denied
    assert repo.ran() == [GUARD_RUNS]
    assert answer(repo.dispatch(bash(repo, "ls"))) == {"action": "allow"}
    assert repo.ran() == []  # `ls` has no "rm": not selected


def test_a_builtin_recipe_enabled_by_name_runs_its_reviewed_command(repo: Repo) -> None:
    # BUILTIN_HOOKS pre-commit-test: `npm test`, failOnError: true; the project's test script fails.
    repo.write("package.json", {"name": "p", "version": "1.0.0", "scripts": {"test": "echo 2 failing >&2; exit 3"}})
    repo.write(".codebuddy/hooks.json", {"hooks": [{"name": "pre-commit-test", "enabled": True}]})
    repo.allow("npm test")
    repo.trust()
    # The agent's own HookContext (lifecycle-hooks.ts), recognised without a hook_event_name.
    context = {"type": "pre-bash", "timestamp": "2026-02-22T10:00:00.000Z", "workingDirectory": str(repo.root),
               "sessionId": repo.session}
    denied = answer(repo.dispatch({**context, "command": "git commit -m wip"}))
    assert denied["action"] == "deny", denied
    assert "pre-commit-test" in denied["additionalContext"] and "exited 3" in denied["additionalContext"]
    assert repo.ran() == ["npm test"]
    assert answer(repo.dispatch({**context, "command": "git status"})) == {"action": "allow"}
    assert repo.ran() == []
