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
from support import CliUser, agent_session

from executor.sandbox.base import RunRequest
from executor.sandbox.pool import PooledDockerSandbox

pytestmark = pytest.mark.docker
HOOKCAGE = shutil.which("hookcage")


class Project(CliUser):
    """A repository with hooks, and a user (an isolated HOOKCAGE_HOME) who runs hookcage in it."""

    def __init__(self, tmp: Path, root: Path) -> None:
        super().__init__(tmp, root, "authored")

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


# --------------------------------------------------------------------------
# Dependencies: fetched at review, used offline at run
# --------------------------------------------------------------------------

UV_GUARD = """#!/usr/bin/env -S uv run --script
# /// script
# requires-python = ">=3.11"
# dependencies = ["python-dotenv==1.2.1", "pyyaml==6.0.2"%s]
# ///
import json, sys
import dotenv, yaml   # pyyaml's C extension must load from the read-only cache
data = json.load(sys.stdin)
command = data.get("tool_input", {}).get("command", "")
if "rm -rf" in command:
    print(f"refused by a guard with yaml {yaml.__version__}", file=sys.stderr)
    sys.exit(2)
print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse",
                  "additionalContext": f"yaml {yaml.__version__} C={yaml.__with_libyaml__}"}}))
"""


def bash(command: str) -> dict[str, Any]:
    return {"tool_name": "Bash", "tool_input": {"command": command}}


def verdict(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    out = answer(proc)
    return dict(out.get("hookSpecificOutput", {}), systemMessage=out.get("systemMessage", ""))


def pypi_reachable() -> None:
    probe = subprocess.run(["python", "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                            "-d", "/tmp/hookcage-pypi-probe", "python-dotenv==1.2.1"],
                           capture_output=True, text=True, timeout=120)
    if probe.returncode != 0:
        pytest.skip(f"PyPI cannot be reached from here: {probe.stderr.strip().splitlines()[-1:]}")


def test_a_uv_script_gets_its_dependencies_at_review_and_runs_offline(project: Project) -> None:
    pypi_reachable()
    project.script("guard.py", UV_GUARD % "")
    project.hooks("PreToolUse", {"command": "./.hookcage/guard.py"}, matcher="Bash")
    project.allow("./.hookcage/guard.py")
    review = project.trust()
    assert "dependencies: uv script .hookcage/guard.py: python-dotenv==1.2.1, pyyaml==6.0.2" in review.stdout
    assert "installing them for .hookcage/guard.py in a network-less sandbox" in review.stdout
    allowed = verdict(project.dispatch("PreToolUse", **bash("ls")))
    assert allowed["additionalContext"] == "yaml 6.0.2 C=True"
    denied = verdict(project.dispatch("PreToolUse", **bash("rm -rf /")))
    assert (denied["permissionDecision"], denied["permissionDecisionReason"]) == (
        "deny", "refused by a guard with yaml 6.0.2")


def test_dependencies_that_cannot_be_resolved_are_named_at_review_and_at_run(project: Project) -> None:
    pypi_reachable()
    project.script("guard.py", UV_GUARD % ', "hookcage-no-such-package==9.9"')
    project.hooks("PreToolUse", {"command": "./.hookcage/guard.py"}, matcher="Bash")
    project.allow("./.hookcage/guard.py")
    review = project.run("trust", "--all", "--yes")
    assert review.returncode == 1
    assert "NOT fetched" in review.stderr and "hookcage-no-such-package==9.9" in review.stderr
    # The guard would block `rm -rf /`; without its dependencies it neither blocks nor passes silently.
    out = verdict(project.dispatch("PreToolUse", **bash("rm -rf /")))
    assert "permissionDecision" not in out
    assert "hookcage-no-such-package==9.9" in out["systemMessage"] and "not run" in out["systemMessage"]


def test_a_deleted_cache_is_reported_and_fetched_again_by_trust(project: Project) -> None:
    pypi_reachable()
    project.script("guard.py", UV_GUARD % "")
    project.hooks("PreToolUse", {"command": "./.hookcage/guard.py"}, matcher="Bash")
    project.allow("./.hookcage/guard.py")
    project.trust()
    shutil.rmtree(project.home / "deps")
    out = verdict(project.dispatch("PreToolUse", **bash("ls")))
    assert "dependencies are not installed" in out["systemMessage"]
    again = project.trust()
    assert "fetching the dependencies of 1 trusted hook(s)" in again.stdout
    assert verdict(project.dispatch("PreToolUse", **bash("ls")))["additionalContext"] == "yaml 6.0.2 C=True"


def test_changing_the_dependency_list_needs_review_again(project: Project) -> None:
    pypi_reachable()
    script = project.script("guard.py", UV_GUARD % "")
    project.hooks("PreToolUse", {"command": "./.hookcage/guard.py"}, matcher="Bash")
    project.allow("./.hookcage/guard.py")
    project.trust()
    script.write_text(UV_GUARD.replace("pyyaml==6.0.2", "pyyaml==6.0.1") % "")
    out = verdict(project.dispatch("PreToolUse", **bash("ls")))
    assert "not trusted" in out["systemMessage"]


def _tarball(path: Path, name: str, index: str) -> None:
    """An npm-pack style tarball: package/package.json + package/index.js."""
    import io
    import tarfile

    with tarfile.open(path, "w:gz") as tar:
        for member, text in (("package/package.json", json.dumps({"name": name, "version": "1.0.0", "main": "index.js"})),
                             ("package/index.js", index)):
            data = text.encode()
            info = tarfile.TarInfo(member)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    path.chmod(0o644)


NODE_GUARD = """#!/usr/bin/env node
const shout = require('shout');
const words = require('words');
let input = '';
process.stdin.on('data', (d) => { input += d; });
process.stdin.on('end', () => {
  const command = (JSON.parse(input).tool_input || {}).command || '';
  if (words.dangerous(command)) {
    process.stderr.write(shout('blocked: ' + command));
    process.exit(2);
  }
  process.stdout.write(JSON.stringify({hookSpecificOutput: {hookEventName: 'PreToolUse',
    additionalContext: shout('ok')}}));
});
"""


def node_project(project: Project) -> Path:
    hooks = project.hookdir / "node"
    (hooks / "vendor").mkdir(parents=True)
    (hooks / "lib" / "words").mkdir(parents=True)
    for folder in (hooks, hooks / "vendor", hooks / "lib", hooks / "lib" / "words"):
        folder.chmod(0o755)
    _tarball(hooks / "vendor" / "shout-1.0.0.tgz", "shout", "module.exports = (s) => s.toUpperCase();\n")
    (hooks / "lib" / "words" / "package.json").write_text(json.dumps({"name": "words", "version": "1.0.0"}))
    (hooks / "lib" / "words" / "index.js").write_text(
        "exports.dangerous = (c) => /rm -rf|git push --force/.test(c);\n")
    manifest = hooks / "package.json"
    manifest.write_text(json.dumps({"name": "guards", "version": "1.0.0", "private": True, "dependencies": {
        "shout": "file:vendor/shout-1.0.0.tgz", "words": "file:lib/words"}}))
    guard = hooks / "guard.js"
    guard.write_text(NODE_GUARD)
    for path in (manifest, guard, hooks / "lib" / "words" / "package.json", hooks / "lib" / "words" / "index.js"):
        path.chmod(0o644)
    return manifest


def test_a_node_hook_gets_its_local_packages_at_review_and_runs_offline(project: Project) -> None:
    node_project(project)
    command = 'node "$CLAUDE_PROJECT_DIR"/.hookcage/node/guard.js'
    project.hooks("PreToolUse", {"command": command}, matcher="Bash")
    project.allow(command)
    review = project.trust()
    assert "Node package .hookcage/node/package.json: shout@file:vendor/shout-1.0.0.tgz, words@file:lib/words" in review.stdout
    assert "network-less" in review.stdout
    assert verdict(project.dispatch("PreToolUse", **bash("ls")))["additionalContext"] == "OK"
    denied = verdict(project.dispatch("PreToolUse", **bash("git push --force")))
    assert (denied["permissionDecision"], denied["permissionDecisionReason"]) == ("deny", "BLOCKED: GIT PUSH --FORCE")


def test_a_changed_local_package_needs_review_again(project: Project) -> None:
    node_project(project)
    command = 'node "$CLAUDE_PROJECT_DIR"/.hookcage/node/guard.js'
    project.hooks("PreToolUse", {"command": command}, matcher="Bash")
    project.allow(command)
    project.trust()
    # The attack: after review, make the dependency (not the hook) wave everything through.
    (project.hookdir / "node" / "lib" / "words" / "index.js").write_text("exports.dangerous = () => false;\n")
    out = verdict(project.dispatch("PreToolUse", **bash("rm -rf /")))
    assert "not trusted" in out["systemMessage"] and "permissionDecision" not in out


def test_a_node_package_outside_the_project_is_refused_at_review(project: Project, tmp_path: Path) -> None:
    manifest = node_project(project)
    manifest.write_text(json.dumps({"dependencies": {"x": "file:../../../../outside"}}))
    command = 'node "$CLAUDE_PROJECT_DIR"/.hookcage/node/guard.js'
    project.hooks("PreToolUse", {"command": command}, matcher="Bash")
    project.allow(command)
    review = project.run("trust", "--all", "--yes")
    assert review.returncode == 1
    assert "lies outside the project" in review.stdout + review.stderr


def test_a_uv_script_runs_warm_from_the_read_only_cache(
    project: Project, docker_api: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The daemon's path: the cache's bind is fixed per hook, so pooled containers serve it."""
    import time

    from executor.executor import HookExecutor
    from executor.settings import load_settings

    pypi_reachable()
    project.script("guard.py", UV_GUARD % "")
    project.hooks("PreToolUse", {"command": "./.hookcage/guard.py"}, matcher="Bash")
    project.allow("./.hookcage/guard.py")
    project.trust()
    monkeypatch.setenv("HOOKCAGE_HOME", str(project.home))
    monkeypatch.setenv("HOOKCAGE_MANAGED_DIR", project.env["HOOKCAGE_MANAGED_DIR"])
    settings = load_settings()
    pool = PooledDockerSandbox(client=docker_api, image=settings.image or None, idle_timeout=60,
                               labels={"hookcage.test-session": os.environ["HOOKCAGE_TEST_SESSION"]})
    payload = {"session_id": project.session, "cwd": str(project.root), **bash("ls")}
    try:
        with HookExecutor(settings, sandboxes={"docker": pool}) as executor:
            contexts = []
            for _ in range(3):
                verdict_ = executor.dispatch("PreToolUse", payload)
                contexts.append(verdict_.additional_context)
                time.sleep(1.5)  # the pool refills between tool calls
            assert contexts == ["yaml 6.0.2 C=True"] * 3
            assert pool.stats().warm >= 1
    finally:
        pool.close()
