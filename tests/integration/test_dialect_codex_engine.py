"""Codex's hooks through the real CLI and the real engine.

A repository carries ``.codex/hooks.json`` (or ``[hooks]`` in ``.codex/config.toml``)
with a PreToolUse hook; ``hookcage dispatch --agent codex`` gets Codex's payload
(openai/codex codex-rs/hooks/src/schema.rs ``PreToolUseCommandInput``) and must
answer with only the keys Codex reads: ``hookSpecificOutput.permissionDecision``
``deny`` and a non-empty ``permissionDecisionReason``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from support import CliUser

pytestmark = pytest.mark.docker

# developers.openai.com/codex/hooks: a PreToolUse deny in JSON.
GUARD = """#!/bin/sh
payload=$(cat)
case "$payload" in
  *turn_id*rm\\ -rf*) printf '%s' '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "no rm -rf"}}' ;;
  *) echo "not Codex's payload" >&2; exit 1 ;;
esac
"""

CONFIG_TOML = """
model = "gpt-5-codex"

[[hooks.PreToolUse]]
matcher = "^Bash$"

[[hooks.PreToolUse.hooks]]
type = "command"
command = "./.codex/hooks/exit2.sh"
timeout = 20
statusMessage = "checking"
"""


@pytest.fixture
def user(tmp_path: Path, workspace: Path, runner_image: str) -> CliUser:
    if shutil.which("hookcage") is None:
        pytest.fail("the hookcage console script is not installed")
    cli = CliUser(tmp_path, workspace, "codex")
    cli.env["CODEX_HOME"] = str(tmp_path / "codex-home")  # no user file of the machine's
    (workspace / ".codex" / "hooks").mkdir(parents=True)
    return cli


def script(user: CliUser, name: str, text: str) -> str:
    path = user.root / ".codex" / "hooks" / name
    path.write_text(text)
    path.chmod(0o755)
    return f"./.codex/hooks/{name}"


def dispatch(user: CliUser) -> dict[str, Any]:
    payload = {"session_id": user.session, "turn_id": "t1", "transcript_path": None, "cwd": str(user.root),
               "hook_event_name": "PreToolUse", "model": "gpt-5-codex", "permission_mode": "default",
               "tool_name": "Bash", "tool_input": {"command": "rm -rf build"}, "tool_use_id": "call_1"}
    proc = user.run("dispatch", "--agent", "codex", stdin=json.dumps(payload))
    assert proc.returncode == 0, proc.stderr
    answer: dict[str, Any] = json.loads(proc.stdout)
    return answer


def trust(user: CliUser) -> None:
    proc = user.run("trust", "--all", "--yes")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_hooks_json_hook_runs_only_after_trust_and_denies_in_codexs_words(user: CliUser) -> None:
    command = script(user, "guard.sh", GUARD)
    (user.root / ".codex" / "hooks.json").write_text(json.dumps({"hooks": {"PreToolUse": [{
        "matcher": "Bash", "hooks": [{"type": "command", "command": command, "timeout": 20}]}]}}))
    user.allow(command)
    before = dispatch(user)
    assert set(before) == {"systemMessage"} and "not trusted yet" in before["systemMessage"]
    trust(user)
    assert dispatch(user) == {"hookSpecificOutput": {
        "hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "no rm -rf"}}


def test_a_config_toml_hook_that_exits_2_with_a_reason_is_a_deny(user: CliUser) -> None:
    command = script(user, "exit2.sh", "#!/bin/sh\ncat >/dev/null\necho 'blocked by policy' >&2\nexit 2\n")
    (user.root / ".codex" / "config.toml").write_text(CONFIG_TOML)
    user.allow(command)
    trust(user)
    assert dispatch(user) == {"hookSpecificOutput": {
        "hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "blocked by policy"}}
