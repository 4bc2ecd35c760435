"""Cursor's hooks through the real CLI and the real engine.

A repository carries ``.cursor/hooks.json`` (Cursor's flat shape, C1:
cursor.com/docs/agent/hooks) with a beforeShellExecution hook;
``hookcage dispatch --agent cursor`` gets Cursor's payload (cupcake's
beforeShellExecution example) and must answer in Cursor's keys:
``permission: "deny"`` with ``user_message`` and ``agent_message``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from support import CliUser

pytestmark = pytest.mark.docker

# C1, beforeShellExecution output; it answers only to Cursor's payload (a command at the top level).
GUARD = """#!/bin/sh
payload=$(cat)
case "$payload" in
  *'"hook_event_name": "beforeShellExecution"'*'"command": "rm -rf'*)
    printf '%s' '{"permission": "deny", "user_message": "Blocked rm -rf", "agent_message": "use a narrower path"}' ;;
  *) echo "not Cursor's payload: $payload" >&2; exit 1 ;;
esac
"""


@pytest.fixture
def user(tmp_path: Path, workspace: Path, runner_image: str) -> CliUser:
    if shutil.which("hookcage") is None:
        pytest.fail("the hookcage console script is not installed")
    cli = CliUser(tmp_path, workspace, "cursor")
    (workspace / ".cursor" / "hooks").mkdir(parents=True)
    return cli


def dispatch(user: CliUser, command: str) -> dict[str, Any]:
    payload = {"conversation_id": user.session, "generation_id": "g1", "hook_event_name": "beforeShellExecution",
               "workspace_roots": [str(user.root)], "command": command, "cwd": str(user.root),
               "cursor_version": "2.0.77"}
    proc = user.run("dispatch", "--agent", "cursor", stdin=json.dumps(payload))
    assert proc.returncode == 0, proc.stderr
    answer: dict[str, Any] = json.loads(proc.stdout)
    return answer


def test_a_cursor_project_hook_runs_only_after_trust_and_denies_in_cursors_words(user: CliUser) -> None:
    guard = user.root / ".cursor" / "hooks" / "guard.sh"
    guard.write_text(GUARD)
    guard.chmod(0o755)
    command = "./.cursor/hooks/guard.sh"  # project hooks run at the project root (C1)
    (user.root / ".cursor" / "hooks.json").write_text(json.dumps({"version": 1, "hooks": {
        "beforeShellExecution": [{"command": command, "timeout": 20, "matcher": "rm"}]}}))
    before = dispatch(user, "rm -rf build")
    assert "permission" not in before
    assert "not run" in before["user_message"]

    user.allow(command)
    proc = user.run("trust", "--all", "--yes")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    after = dispatch(user, "rm -rf build")
    assert after["permission"] == "deny"
    assert after["agent_message"] == "use a narrower path"
    assert "Blocked rm -rf" in after["user_message"]
    assert dispatch(user, "ls") == {}  # the matcher tests the command text: the hook does not run
