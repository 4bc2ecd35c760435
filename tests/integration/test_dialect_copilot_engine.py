"""GitHub Copilot CLI's hooks through the real CLI and the real engine.

A repository carries ``.github/hooks/guard.json`` (R: Copilot's hooks reference,
docs.github.com/en/copilot/reference/hooks-reference, github/docs
content/copilot/reference/hooks-reference.md at commit 05da5bc3, read 2026-11-27) with a
preToolUse hook; ``hookcage dispatch --agent copilot preToolUse`` gets Copilot's camelCase
payload (``toolArgs`` a JSON string, H: github/docs content/copilot/reference/hooks-configuration.md)
and must answer in Copilot's keys: ``permissionDecision: "deny"`` and ``permissionDecisionReason``,
exit 0. A guard that exits non-zero denies too (R: preToolUse command hooks are "fail-closed"):
github/awesome-copilot's ``tool-guardian`` blocks by exiting 1.
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


def dispatch(user: CliUser, command: str = "rm -rf dist") -> dict[str, Any]:
    payload = {"sessionId": user.session, "timestamp": 1704614600000, "cwd": str(user.root), "toolName": "bash",
               "toolArgs": json.dumps({"command": command, "description": "Clean build directory"},
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


# In the spirit of github/awesome-copilot hooks/tool-guardian/guard-tool.sh (commit df0a5a5c): it scans
# the call against threat patterns, prints its findings on stdout and, in block mode, exits 1.
TOOL_GUARDIAN = """#!/bin/bash
set -euo pipefail
INPUT=$(cat)
if printf '%s' "$INPUT" | grep -qiE 'git push (--force|-f).*(main|master)|rm -rf /'; then
  echo "Tool Guardian: 1 threat(s) detected in this invocation"
  echo "Operation blocked: resolve the threats above or adjust TOOL_GUARD_ALLOWLIST."
  exit 1
fi
exit 0
"""


def test_a_guard_that_exits_1_denies_the_call_as_copilot_does(user: CliUser) -> None:
    guard = user.root / "scripts" / "guard-tool.sh"
    guard.write_text(TOOL_GUARDIAN)
    guard.chmod(0o755)
    command = "scripts/guard-tool.sh"
    (user.root / ".github" / "hooks" / "tool-guardian.json").write_text(json.dumps({"version": 1, "hooks": {
        "preToolUse": [{"type": "command", "bash": command, "cwd": ".", "env": {"GUARD_MODE": "block"},
                        "timeoutSec": 10}]}}))
    user.allow(command)
    proc = user.run("trust", "--all", "--yes")
    assert proc.returncode == 0, proc.stdout + proc.stderr

    denied = dispatch(user, "git push --force origin main")
    assert denied["permissionDecision"] == "deny", denied
    assert denied["permissionDecisionReason"].startswith("Denied by preToolUse hook (hook errored): exited 1")
    assert "permissionDecision" not in dispatch(user, "git status")  # exit 0, no output: Copilot's default


def test_a_hook_given_as_command_with_a_timeout_alias_runs(user: CliUser) -> None:
    # 1Password/agent-hooks .github/hooks/hooks.json (commit 6d88e3c4): PascalCase PreToolUse, "command" and
    # "timeout" (R: the cross-platform key and the alias of timeoutSec); it denies with continue: false.
    hook = user.root / "scripts" / "run-hook.sh"
    hook.write_text("#!/bin/sh\ncat >/dev/null\n"
                    "printf '%s' '{\"continue\": false, \"stopReason\": \"mounted .env file is not valid\"}'\n")
    hook.chmod(0o755)
    command = "scripts/run-hook.sh validate-mounted-env-files"
    (user.root / ".github" / "hooks" / "hooks.json").write_text(json.dumps({"version": 1, "hooks": {
        "PreToolUse": [{"command": command, "timeout": 15}]}}))
    user.allow(command)
    proc = user.run("trust", "--all", "--yes")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert dispatch(user) == {"permissionDecision": "deny", "permissionDecisionReason": "mounted .env file is not valid"}
