"""Claude Code's ``if`` through the real CLI and the real engine (issue 22).

A repository's ``.claude/settings.json`` carries a push guard with
``"if": "Bash(git push*)"`` (the shape published hooks use): reviewed with
``hookcage trust --all --yes``, it blocks ``git push origin main`` and stays
out of ``ls`` (before, ``if`` was ignored and the guard blocked every
command). A changed ``if`` is a changed hook (reviewed again); a rule
hookcage cannot evaluate is refused at review and named by ``list``, never
run on every call.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support import CliUser

pytestmark = pytest.mark.docker

GUARD = "sh $CLAUDE_PROJECT_DIR/.claude/hooks/push-guard.sh"


class Repo(CliUser):
    def __init__(self, tmp: Path, root: Path) -> None:
        super().__init__(tmp, root, "cond")
        hooks = root / ".claude" / "hooks"
        hooks.mkdir(parents=True)
        for folder in (root / ".claude", hooks):
            folder.chmod(0o755)
        script = hooks / "push-guard.sh"
        script.write_text("echo 'pushes are reviewed by hand' >&2; exit 2\n")
        script.chmod(0o644)
        self.allow(GUARD)

    def settings(self, *handlers: dict[str, Any]) -> None:
        path = self.root / ".claude" / "settings.json"
        path.write_text(json.dumps({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": list(handlers)}]}}))
        path.chmod(0o644)

    def bash(self, command: str) -> Any:
        payload = {"session_id": self.session, "cwd": str(self.root), "hook_event_name": "PreToolUse",
                   "tool_name": "Bash", "tool_input": {"command": command}, "tool_use_id": "t1"}
        return self.run("dispatch", "--agent", "claude", stdin=json.dumps(payload))

    def ran(self) -> int:
        log = self.home / "runs.jsonl"
        lines = log.read_text().splitlines() if log.exists() else []
        log.unlink(missing_ok=True)
        return sum(json.loads(line)["outcome"] == "ran" for line in lines)


def denied(proc: Any) -> str | None:
    """The reason of hookcage's deny in Claude Code's dialect (exit 0, JSON on stdout), or None."""
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout or "{}").get("hookSpecificOutput", {})
    return out.get("permissionDecisionReason") if out.get("permissionDecision") == "deny" else None


@pytest.fixture
def repo(tmp_path: Path, workspace: Path, runner_image: str) -> Repo:
    return Repo(tmp_path, workspace)


def test_a_push_guard_blocks_pushes_and_nothing_else(repo: Repo) -> None:
    repo.settings({"type": "command", "command": GUARD, "if": "Bash(git push*)"})
    trusted = repo.run("trust", "--all", "--yes")
    assert trusted.returncode == 0, trusted.stdout + trusted.stderr
    listed = repo.run("list", "--agent", "claude")
    assert "    if: Bash(git push*)" in listed.stdout, listed.stdout

    push = repo.bash("git push origin main")
    assert denied(push) == "pushes are reviewed by hand", (push.stdout, push.stderr)
    assert repo.ran() == 1

    for command in ("ls", "git status", "echo git push"):
        other = repo.bash(command)
        assert other.returncode == 0 and denied(other) is None, (command, other.stdout, other.stderr)
        assert repo.ran() == 0, command  # the guard was not even started

    compound = repo.bash("npm test && FOO=1 git push --force")
    assert denied(compound) == "pushes are reviewed by hand", compound.stdout


def test_a_changed_condition_is_reviewed_again(repo: Repo) -> None:
    repo.settings({"type": "command", "command": GUARD, "if": "Bash(git push*)"})
    assert repo.run("trust", "--all", "--yes").returncode == 0
    repo.settings({"type": "command", "command": GUARD, "if": "Bash(git commit*)"})
    push = repo.bash("git commit -m x")
    assert denied(push) is None
    assert repo.ran() == 0  # untrusted: not run
    assert "not trusted" in push.stdout + push.stderr or "untrusted" in push.stdout + push.stderr


def test_a_condition_hookcage_cannot_evaluate_is_refused_never_run_always(repo: Repo) -> None:
    repo.settings({"type": "command", "command": GUARD, "if": "Bash(git push *)|Bash(git commit *)"})
    trusted = repo.run("trust", "--all", "--yes")
    where = f"{repo.root}/.claude/settings.json: $.hooks.PreToolUse[0].hooks[0].if: holds more than one rule"
    assert where in trusted.stdout + trusted.stderr
    listed = repo.run("list", "--agent", "claude")
    assert "runs: no (invalid: holds more than one rule" in listed.stdout, listed.stdout
    assert denied(repo.bash("ls")) is None
    assert repo.ran() == 0
