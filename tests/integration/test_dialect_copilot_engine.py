"""GitHub Copilot CLI's hooks through the real CLI and the real engine.

A repository carries ``.github/hooks/guard.json`` (R: github/docs
content/copilot/reference/copilot-cli-reference/cli-hooks-reference.md) with a
preToolUse hook; ``hookcage dispatch --agent copilot preToolUse`` gets
Copilot's camelCase payload (``toolArgs`` a JSON string, H: github/docs
content/copilot/reference/hooks-configuration.md) and must answer in Copilot's
keys: ``permissionDecision: "deny"`` and ``permissionDecisionReason``, exit 0.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from support import CliUser

pytestmark = pytest.mark.docker

# R, preToolUse output; it answers only to Copilot's payload (toolArgs as a string).
GUARD = """#!/bin/sh
payload=$(cat)
case "$payload" in
  *'"toolName": "bash"'*'"toolArgs": "{'*'rm -rf'*)
    printf '%s' '{"permissionDecision": "deny", "permissionDecisionReason": "Dangerous command detected"}' ;;
  *) echo "not Copilot's payload: $payload" >&2; exit 1 ;;
esac
"""


@pytest.fixture
def user(tmp_path: Path, workspace: Path, runner_image: str) -> CliUser:
    if shutil.which("hookcage") is None:
        pytest.fail("the hookcage console script is not installed")
    cli = CliUser(tmp_path, workspace, "copilot")
    (workspace / ".github" / "hooks").mkdir(parents=True)
    (workspace / "scripts").mkdir()
    return cli


def dispatch(user: CliUser) -> dict[str, Any]:
    payload = {"sessionId": user.session, "timestamp": 1704614600000, "cwd": str(user.root), "toolName": "bash",
               "toolArgs": json.dumps({"command": "rm -rf dist", "description": "Clean build directory"},
                                      separators=(",", ":"))}
    proc = user.run("dispatch", "--agent", "copilot", "preToolUse", stdin=json.dumps(payload))
    assert proc.returncode == 0, proc.stderr
    answer: dict[str, Any] = json.loads(proc.stdout)
    return answer


def test_a_copilot_repository_hook_runs_only_after_trust_and_denies_in_copilots_words(user: CliUser) -> None:
    guard = user.root / "scripts" / "guard.sh"
    guard.write_text(GUARD)
    guard.chmod(0o755)
    command = "./scripts/guard.sh"
    (user.root / ".github" / "hooks" / "guard.json").write_text(json.dumps({"version": 1, "hooks": {
        "preToolUse": [{"type": "command", "bash": command, "powershell": "./scripts/guard.ps1", "cwd": ".",
                        "timeoutSec": 20, "comment": "block rm -rf"}]}}))
    assert "permissionDecision" not in dispatch(user)

    user.allow(command)
    proc = user.run("trust", "--all", "--yes")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert dispatch(user) == {"permissionDecision": "deny", "permissionDecisionReason": "Dangerous command detected"}
