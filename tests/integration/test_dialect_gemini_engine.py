"""Gemini CLI's hooks through the real CLI and the real engine.

A repository carries ``.gemini/settings.json`` with a BeforeTool hook; ``hookcage
dispatch --agent gemini`` gets Gemini's payload (docs/hooks/reference.md of
google-gemini/gemini-cli) and must answer in Gemini's words: exit 0 and JSON
``decision``/``reason`` (packages/core/src/hooks/types.ts).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from support import CliUser

pytestmark = pytest.mark.docker

# Plain text on stderr with exit 3: a deny in Gemini (hookRunner.ts convertPlainTextToHookOutput).
GUARD = """#!/bin/sh
payload=$(cat)
case "$payload" in
  *BeforeTool*run_shell_command*) echo "no rm -rf (session $GEMINI_SESSION_ID)" >&2; exit 3 ;;
esac
echo "not Gemini's payload: $payload" >&2
exit 1
"""


@pytest.fixture
def user(tmp_path: Path, workspace: Path, runner_image: str) -> CliUser:
    if shutil.which("hookcage") is None:
        pytest.fail("the hookcage console script is not installed")
    cli = CliUser(tmp_path, workspace, "gemini")
    cli.env["GEMINI_CLI_HOME"] = str(tmp_path / "gemini-home")  # no user file of the machine's
    hooks = workspace / ".gemini" / "hooks"
    hooks.mkdir(parents=True)
    (hooks / "guard.sh").write_text(GUARD)
    (hooks / "guard.sh").chmod(0o755)
    (workspace / ".gemini" / "settings.json").write_text(json.dumps({"hooks": {"BeforeTool": [{
        "matcher": "run_shell_command",
        "hooks": [{"type": "command", "command": "./.gemini/hooks/guard.sh", "name": "guard", "timeout": 20000}],
    }]}}))
    return cli


def dispatch(user: CliUser) -> dict[str, Any]:
    payload = {"session_id": user.session, "transcript_path": "/tmp/t.json", "cwd": str(user.root),
               "hook_event_name": "BeforeTool", "timestamp": "2026-08-21T10:00:00.000Z",
               "tool_name": "run_shell_command", "tool_input": {"command": "rm -rf build"}}
    proc = user.run("dispatch", "--agent", "gemini", stdin=json.dumps(payload))
    assert proc.returncode == 0, proc.stderr
    answer: dict[str, Any] = json.loads(proc.stdout)
    return answer


def test_a_repository_gemini_hook_runs_only_after_trust_and_denies_in_geminis_words(user: CliUser) -> None:
    user.allow("./.gemini/hooks/guard.sh")
    before = dispatch(user)
    assert "decision" not in before
    assert "not trusted yet" in before["systemMessage"]
    trust = user.run("trust", "--all", "--yes")
    assert trust.returncode == 0, trust.stdout + trust.stderr
    after = dispatch(user)
    assert after["decision"] == "deny"
    assert after["reason"] == f"no rm -rf (session {user.session})"
