"""Hooks as their authors wrote them, through the real CLI and the real engine (issue 10).

Each test plays a user: hooks in ``.hookcage/hooks.json`` with their authors'
own command lines, ``hookcage allow`` entries, ``hookcage trust --all --yes``,
then ``hookcage dispatch`` with the agent's payload on stdin.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support import agent_session, allow

from executor.sandbox.base import RunRequest
from executor.sandbox.pool import PooledDockerSandbox

pytestmark = pytest.mark.docker
HOOKCAGE = shutil.which("hookcage")


class Project:
    """A repository with hooks, and a user (an isolated HOOKCAGE_HOME) who runs hookcage in it."""

    def __init__(self, tmp: Path, root: Path) -> None:
        self.home = tmp / "hookcage-home"
        self.home.mkdir()
        self.root = root
        self.hookdir = root / ".hookcage"
        self.hookdir.mkdir(exist_ok=True)
        self.hookdir.chmod(0o755)
        self.env = {**os.environ, "HOOKCAGE_HOME": str(self.home),
                    "HOOKCAGE_MANAGED_DIR": str(tmp / "managed")}
        self.env.pop("CLAUDE_PROJECT_DIR", None)
        self.env.pop("CLAUDE_ENV_FILE", None)
        self.session = agent_session("authored")

    def script(self, name: str, text: str, mode: int = 0o755) -> Path:
        path = self.hookdir / name
        path.write_text(text)
        path.chmod(mode)
        return path

    def hooks(self, event: str, *handlers: dict[str, Any], matcher: str = "") -> None:
        path = self.hookdir / "hooks.json"
        group: dict[str, Any] = {"hooks": [{"type": "command", **h} for h in handlers]}
        if matcher:
            group["matcher"] = matcher
        path.write_text(json.dumps({"hooks": {event: [group]}}))
        path.chmod(0o644)

    def run(self, *args: str, stdin: str = "", env: dict[str, str] | None = None,
            timeout: float = 180) -> subprocess.CompletedProcess[str]:
        assert HOOKCAGE is not None
        return subprocess.run([HOOKCAGE, *args], input=stdin, capture_output=True, text=True,
                              cwd=self.root, env={**self.env, **(env or {})}, timeout=timeout)

    def allow(self, *entries: str) -> None:
        allow(self.home, entries)

    def trust(self) -> subprocess.CompletedProcess[str]:
        proc = self.run("trust", "--all", "--yes")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc

    def dispatch(self, event: str, env: dict[str, str] | None = None, **fields: Any) -> subprocess.CompletedProcess[str]:
        payload = {"session_id": self.session, "cwd": str(self.root), "hook_event_name": event, **fields}
        return self.run("dispatch", event, stdin=json.dumps(payload), env=env)


def answer(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert proc.returncode == 0, proc.stderr
    parsed: dict[str, Any] = json.loads(proc.stdout)
    return parsed


@pytest.fixture
def project(tmp_path: Path, workspace: Path, runner_image: str) -> Project:
    if HOOKCAGE is None:
        pytest.fail("the hookcage console script is not installed")
    return Project(tmp_path, workspace)


# --------------------------------------------------------------------------
# Scripts run directly keep their execute bit
# --------------------------------------------------------------------------

CONTEXT_SCRIPT = "#!/bin/sh\ncat >/dev/null\necho \"context from $(basename \"$0\")\"\n"


@pytest.mark.parametrize("command", [
    "./.hookcage/ctx.sh",
    '"$CLAUDE_PROJECT_DIR"/.hookcage/ctx.sh',
    "$CLAUDE_PROJECT_DIR/.hookcage/ctx.sh",
])
def test_an_executable_script_runs_as_its_author_wrote_it(project: Project, command: str) -> None:
    project.script("ctx.sh", CONTEXT_SCRIPT, 0o755)
    project.hooks("UserPromptSubmit", {"command": command})
    project.allow(command)
    project.trust()
    out = answer(project.dispatch("UserPromptSubmit", prompt="hi"))
    assert out["hookSpecificOutput"]["additionalContext"] == "context from ctx.sh"


def test_a_script_without_its_execute_bit_fails_as_it_would_on_the_host(project: Project) -> None:
    project.script("ctx.sh", CONTEXT_SCRIPT, 0o644)
    project.hooks("UserPromptSubmit", {"command": "./.hookcage/ctx.sh"})
    project.allow("./.hookcage/ctx.sh")
    project.trust()
    out = answer(project.dispatch("UserPromptSubmit", prompt="hi"))
    assert "additionalContext" not in out.get("hookSpecificOutput", {})
    assert "126" in out["systemMessage"]  # a hook error, never a block


def test_a_chmod_after_review_needs_review_again(project: Project) -> None:
    script = project.script("ctx.sh", CONTEXT_SCRIPT, 0o644)
    project.hooks("UserPromptSubmit", {"command": "./.hookcage/ctx.sh"})
    project.allow("./.hookcage/ctx.sh")
    project.trust()
    script.chmod(0o755)
    out = answer(project.dispatch("UserPromptSubmit", prompt="hi"))
    assert "not trusted" in out["systemMessage"]
    review = project.run("trust", "--all", "--yes")
    assert "execute bit added since the last review" in review.stdout
    out = answer(project.dispatch("UserPromptSubmit", prompt="hi"))
    assert out["hookSpecificOutput"]["additionalContext"] == "context from ctx.sh"


def test_warm_runs_keep_the_execute_bit_of_the_reviewed_copy(
    docker_api: Any, runner_image: str, workspace: Path, tmp_path: Path
) -> None:
    hook = workspace / "hook.sh"
    hook.write_text("echo unreviewed\n")
    hook.chmod(0o644)
    staging = tmp_path / "staging"
    staging.mkdir()
    runnable, plain = staging / "a", staging / "b"
    runnable.write_bytes(b"#!/bin/sh\necho reviewed\n")
    runnable.chmod(0o555)
    plain.write_bytes(b"#!/bin/sh\necho reviewed\n")
    plain.chmod(0o444)
    labels = {"hookcage.test-session": os.environ["HOOKCAGE_TEST_SESSION"],
              "hookcage.session": agent_session("xbit")}
    pool = PooledDockerSandbox(client=docker_api, image=runner_image, idle_timeout=60,
                               labels={"hookcage.test-session": os.environ["HOOKCAGE_TEST_SESSION"]})
    try:
        for staged, expected in ((runnable, (0, b"reviewed\n")), (plain, (126, b""))):
            req = RunRequest(command="./hook.sh", cwd=str(workspace), project_dir=str(workspace),
                             timeout=10.0, labels=labels, overlays={str(hook): str(staged)})
            assert pool.prewarm(req, wait=30), "the pool did not fill"
            result, path = pool.run_with_path(req)
            assert path == "warm"
            assert (result.exit_code, result.stdout) == expected
    finally:
        pool.close()
