"""jcode, ok and infer through the real CLI and the real engine.

Each repository carries that agent's own hook file with a project hook:
``.jcode/hooks.json`` (cnjack/jcode, Claude Code's shape), ``.ok/settings.json``
(NB-Agent/ok, flat entries with an anchored ``match``) and ``.infer/hooks.yaml``
(inference-gateway/cli, observe-only). Before ``hookcage trust`` nothing
runs; after it the hook runs in the container, reads the agent's own payload,
and hookcage answers in the agent's dialect: jcode's JSON
(``permissionDecision``, ``modifiedResult``), ok's exit code, infer's nothing.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support import CliUser

pytestmark = pytest.mark.docker

JCODE_GUARD = """#!/bin/sh
cat >/dev/null
if [ "$JCODE_TOOL_NAME" = execute ]; then echo "no $JCODE_TOOL_NAME here" >&2; exit 2; fi
"""
JCODE_REDACT = """#!/bin/sh
cat >/dev/null
echo '{"hookSpecificOutput":{"hookEventName":"PostToolUse","modifiedResult":"REDACTED"}}'
"""
OK_GUARD = """#!/bin/sh
case "$(cat)" in *'"toolName": "bash"'*'rm -rf'*) echo "no rm" >&2; exit 2;; esac
exit 0
"""
# Exit 3 only for infer's exact stdin (hookCommandStdin): the run log shows it was read.
INFER_OBSERVER = """#!/bin/sh
case "$(cat)" in '{"hook":"post_tool","session_id":"'*'","turn":3}') echo seen; exit 3;; esac
exit 4
"""


class Repo(CliUser):
    def write(self, rel: str, text: str, mode: int = 0o644) -> None:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.parent.chmod(0o755)
        path.write_text(text)
        path.chmod(mode)

    def trust(self) -> None:
        proc = self.run("trust", "--all", "--yes")
        assert proc.returncode == 0, proc.stdout + proc.stderr

    def dispatch(self, agent: str, payload: dict[str, Any],
                 env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return self.run("dispatch", "--agent", agent, stdin=json.dumps(payload), env=env)  # type: ignore[no-any-return]

    def ran(self) -> list[tuple[str, int | None]]:
        """(command, exit code) of the hooks that ran since the last call (from the run log)."""
        log = self.home / "runs.jsonl"
        lines = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
        log.unlink(missing_ok=True)
        return [(r["command"], r["exit_code"]) for r in lines if r["outcome"] == "ran"]


@pytest.fixture
def repo(tmp_path: Path, workspace: Path, runner_image: str) -> Repo:
    return Repo(tmp_path, workspace, "jok")


def test_jcode_project_hooks_deny_and_rewrite_the_result_after_trust(repo: Repo) -> None:
    repo.write(".jcode/guard.sh", JCODE_GUARD, 0o755)
    repo.write(".jcode/redact.sh", JCODE_REDACT, 0o755)
    repo.write(".jcode/hooks.json", json.dumps({"hooks": {
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "./.jcode/guard.sh"}]}],
        "PostToolUse": [{"matcher": "execute", "hooks": [
            {"type": "command", "command": "./.jcode/redact.sh", "capabilities": ["rewrite_output"]}]}],
    }}))
    repo.allow("./.jcode/guard.sh", "./.jcode/redact.sh")
    # cnjack/jcode internal/hooks/types.go Payload, as jcode sends it (tool "execute").
    pre = {"session_id": repo.session, "cwd": str(repo.root), "hook_event_name": "PreToolUse",
           "tool_name": "execute", "tool_input": {"command": "rm -rf build"}}
    before = repo.dispatch("jcode", pre)
    assert before.returncode == 0 and "not trusted yet" in json.loads(before.stdout)["systemMessage"]
    assert repo.ran() == []
    repo.trust()
    denied = repo.dispatch("jcode", pre)
    assert denied.returncode == 0, denied.stderr
    specific = json.loads(denied.stdout)["hookSpecificOutput"]
    assert specific == {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                        "permissionDecisionReason": "no execute here"}
    assert repo.ran() == [("./.jcode/guard.sh", 2)]
    post = {**pre, "hook_event_name": "PostToolUse", "tool_response": "secret output"}
    rewritten = repo.dispatch("jcode", post)
    assert rewritten.returncode == 0, rewritten.stderr
    assert json.loads(rewritten.stdout)["hookSpecificOutput"] == {
        "hookEventName": "PostToolUse", "modifiedResult": "REDACTED"}


def test_ok_project_hook_blocks_by_exit_code_after_trust(repo: Repo) -> None:
    repo.write(".ok/guard.sh", OK_GUARD, 0o755)
    repo.write(".ok/settings.json", json.dumps({"hooks": {"PreToolUse": [
        {"match": "bash", "command": "./.ok/guard.sh", "description": "no rm", "timeout": 5000}]}}))
    repo.allow("./.ok/guard.sh")
    # NB-Agent/ok internal/hook/hook.go Payload (sessionId: the Reasonix family's, read when present).
    rm = {"event": "PreToolUse", "cwd": str(repo.root), "toolName": "bash", "toolArgs": {"command": "rm -rf x"},
          "sessionId": repo.session}
    before = repo.dispatch("ok", rm)
    assert (before.returncode, before.stdout) == (0, "")
    assert repo.ran() == []
    repo.trust()
    blocked = repo.dispatch("ok", rm)
    assert (blocked.returncode, blocked.stdout, blocked.stderr) == (2, "", "no rm\n")
    assert repo.ran() == [("./.ok/guard.sh", 2)]
    passed = repo.run("dispatch", stdin=json.dumps({**rm, "toolArgs": {"command": "ls"}}))  # recognised
    assert (passed.returncode, passed.stdout, passed.stderr) == (0, "", "")
    assert repo.ran() == [("./.ok/guard.sh", 0)]


def test_infer_project_hook_is_observed_only(repo: Repo) -> None:
    repo.write(".infer/observe.sh", INFER_OBSERVER, 0o755)
    repo.write(".infer/hooks.yaml", "enabled: true\nhooks:\n"
               "  - name: observe\n    hook: post_tool\n    command: ./.infer/observe.sh\n    timeout: 10\n")
    repo.allow("./.infer/observe.sh")
    # inference-gateway/cli internal/agent/hook_commands.go hookCommandStdin
    payload = {"hook": "post_tool", "session_id": repo.session, "turn": 3}
    before = repo.dispatch("infer", payload)
    assert (before.returncode, before.stdout) == (0, "")
    assert repo.ran() == []
    repo.trust()
    off = repo.dispatch("infer", payload, env={"INFER_HOOKS_ENABLED": "false"})
    assert (off.returncode, off.stdout) == (0, "") and repo.ran() == []
    after = repo.dispatch("infer", payload)
    assert (after.returncode, after.stdout, after.stderr) == (0, "", "")
    assert repo.ran() == [("./.infer/observe.sh", 3)]
