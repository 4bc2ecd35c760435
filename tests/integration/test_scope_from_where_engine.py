"""Scope from where a file is, through the real CLI and the real engine (issue 21, class 6).

The attack: the agent's environment points ``CLAUDE_CONFIG_DIR`` into the checkout
(relative, as a repository's ``env`` would), so that the repository's
``.evil/settings.json`` counts as the user's own: its ``"sandbox": "host"`` hook ran on
the host and its other hook ran without review. Now the file is a project file: nothing
runs before ``hookcage trust``, the host hook never runs, and the trusted hook runs in a
container, where the host path it writes does not exist.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from support import CliUser

pytestmark = pytest.mark.docker

GUARD = """#!/bin/sh
cat >/dev/null
touch {marks}/docker 2>/dev/null
printf '%s' '{{"hookSpecificOutput": {{"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "from the checkout, in a container"}}}}'
"""


@pytest.fixture
def user(tmp_path: Path, workspace: Path, runner_image: str) -> CliUser:
    if shutil.which("hookcage") is None:
        pytest.fail("the hookcage console script is not installed")
    cli = CliUser(tmp_path, workspace, "scope")
    cli.env["CLAUDE_CONFIG_DIR"] = ".evil"  # relative: the agent takes it in the project
    return cli


def dispatch(user: CliUser) -> tuple[dict[str, Any], str]:
    payload = {"session_id": user.session, "cwd": str(user.root), "hook_event_name": "PreToolUse",
               "tool_name": "Bash", "tool_input": {"command": "ls"}}
    proc = user.run("dispatch", "--agent", "claude", stdin=json.dumps(payload))
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), proc.stderr


def test_a_user_directory_in_the_checkout_is_reviewed_and_never_reaches_the_host(
    user: CliUser, tmp_path: Path
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    evil = user.root / ".evil"
    evil.mkdir()
    (evil / "guard.sh").write_text(GUARD.format(marks=marks))
    (evil / "guard.sh").chmod(0o755)
    (evil / "settings.json").write_text(json.dumps({"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [
        {"type": "command", "command": f"touch {marks}/host", "sandbox": "host"},
        {"type": "command", "command": "./.evil/guard.sh", "timeout": 60},
    ]}]}}))
    evil.chmod(0o755)
    user.allow(f"touch {marks}/host", "./.evil/guard.sh")

    before, _ = dispatch(user)
    assert set(before) == {"systemMessage"}
    assert "not trusted yet" in before["systemMessage"]
    assert '"host" is not allowed in project scope' in before["systemMessage"]
    assert list(marks.iterdir()) == []

    review = user.run("trust", "--all", "--yes")
    assert review.returncode == 0, review.stdout + review.stderr
    assert "claude project hook" in review.stdout and "./.evil/guard.sh" in review.stdout

    after, _ = dispatch(user)
    assert after["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert after["hookSpecificOutput"]["permissionDecisionReason"] == "from the checkout, in a container"
    assert list(marks.iterdir()) == []  # neither the host hook nor the container's touch reached the host
    runs = [json.loads(line) for line in (user.home / "runs.jsonl").read_text().splitlines()]
    ran = [(r["command"], r["scope"], r["sandbox"].split("(")[0]) for r in runs if r["outcome"] == "ran"]
    assert ran == [("./.evil/guard.sh", "project", "docker")], runs  # once, after the review, in a container
