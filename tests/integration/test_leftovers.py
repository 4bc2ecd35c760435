"""Nothing left behind: a dispatch killed mid-run (SIGTERM, SIGKILL), or whose caller hangs up
on the daemon, leaves no staging copy and no container (issue 11)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from support import POOL_OWNERS, CliUser, allow

pytestmark = pytest.mark.docker
HOOKCAGE = shutil.which("hookcage")
SLOW = "sh $CLAUDE_PROJECT_DIR/.hookcage/slow.sh .hookcage/blob.txt"


class Project(CliUser):
    def __init__(self, tmp: Path, workspace: Path) -> None:
        super().__init__(tmp, workspace, "leftover")
        hookdir = self.hookdir
        (hookdir / "slow.sh").write_text("sleep 90\n")
        (hookdir / "blob.txt").write_bytes(os.urandom(3 * 1024 * 1024))  # a large reviewed file, staged per run
        (hookdir / "hooks.json").write_text(json.dumps({"hooks": {"PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": SLOW, "timeout": 120}]}]}}))
        for path in hookdir.iterdir():
            path.chmod(0o644)
        self.env["HOOKCAGE_POOL_SIZE"] = "0"
        self.env.pop("HOOKCAGE_NO_DAEMON", None)
        allow(self.home, [SLOW])
        assert self.run("trust", "--all", "--yes").returncode == 0

    def start_dispatch(self, **env: str) -> subprocess.Popen[bytes]:
        assert HOOKCAGE is not None
        payload = {"session_id": self.session, "cwd": str(self.root), "tool_name": "Bash",
                   "tool_input": {"command": "ls"}}
        proc = subprocess.Popen([HOOKCAGE, "dispatch", "PreToolUse"], cwd=self.root, env={**self.env, **env},
                                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(payload).encode())
        proc.stdin.close()
        return proc

    def staged(self) -> list[str]:
        folder = self.home / "staging"
        return sorted(p.name for p in folder.iterdir()) if folder.exists() else []

    def containers(self, docker_api: Any) -> list[dict[str, Any]]:
        return list(docker_api.containers(all=True, filters={"label": f"hookcage.session={self.session}"}))

    def wait_running(self, docker_api: Any) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if any(c["State"] == "running" for c in self.containers(docker_api)) and \
                    any(n.startswith("run-") for n in self.staged()):
                return
            time.sleep(0.2)
        pytest.fail("the hook never started")


@pytest.fixture
def project(tmp_path: Path, workspace: Path, runner_image: str) -> Project:
    if HOOKCAGE is None:
        pytest.fail("the hookcage console script is not installed")
    return Project(tmp_path, workspace)


def test_sigterm_removes_staging_and_containers_at_once(project: Project, docker_api: Any) -> None:
    proc = project.start_dispatch(HOOKCAGE_NO_DAEMON="1")
    project.wait_running(docker_api)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 128 + signal.SIGTERM
    assert project.staged() == []  # was 7.7 MB per kill
    assert project.containers(docker_api) == []


def test_sigkill_leftovers_are_swept_by_gc(project: Project, docker_api: Any) -> None:
    proc = project.start_dispatch(HOOKCAGE_NO_DAEMON="1")
    project.wait_running(docker_api)
    proc.kill()
    proc.wait(30)
    assert any(n.startswith("run-") for n in project.staged())  # SIGKILL cannot be handled
    gc = project.run("gc")
    assert gc.returncode == 0, gc.stderr
    assert "removed 1 staging folder(s)" in gc.stdout
    assert project.staged() == []
    assert project.containers(docker_api) == []  # its owner is gone: removed, running or not


def test_sigkill_leftover_staging_is_swept_by_the_next_dispatch(project: Project, docker_api: Any) -> None:
    proc = project.start_dispatch(HOOKCAGE_NO_DAEMON="1")
    project.wait_running(docker_api)
    proc.kill()
    proc.wait(30)
    killed = [n for n in project.staged() if n.startswith("run-")]
    assert killed
    nothing = {"session_id": project.session, "cwd": str(project.root), "tool_name": "Read", "tool_input": {}}
    assert HOOKCAGE is not None
    subprocess.run([HOOKCAGE, "dispatch", "PreToolUse"], input=json.dumps(nothing).encode(), cwd=project.root,
                   env={**project.env, "HOOKCAGE_NO_DAEMON": "1"}, capture_output=True, timeout=60, check=True)
    assert project.staged() == []
    for container in project.containers(docker_api):  # left running until gc, or reaped at expiry
        docker_api.remove_container(container["Id"], force=True)


def test_the_daemon_cancels_a_dispatch_whose_caller_hung_up(project: Project, docker_api: Any) -> None:
    assert HOOKCAGE is not None
    serve = subprocess.Popen([HOOKCAGE, "serve", "--log-level", "info"], cwd=project.root, env=project.env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    POOL_OWNERS.add(str(serve.pid))
    try:
        deadline = time.monotonic() + 30
        while not (project.home / "hookcage.sock").exists():
            assert time.monotonic() < deadline and serve.poll() is None, "the daemon did not start"
            time.sleep(0.1)
        time.sleep(0.5)
        client = project.start_dispatch()
        project.wait_running(docker_api)
        assert next(n for n in project.staged() if n.startswith("run-")).startswith(f"run-{serve.pid}-")
        client.kill()  # the agent gives up on the hook
        client.wait(10)
        # The run's container goes at once; its staged tree of reviewed bytes may stay as the
        # daemon's cache for the next run of the same bytes (executor.prepare.staged_trees) and
        # goes when the daemon stops (below).
        deadline = time.monotonic() + 10
        while project.containers(docker_api):
            assert time.monotonic() < deadline, "the daemon kept working for a caller that is gone"
            time.sleep(0.2)
    finally:
        serve.send_signal(signal.SIGTERM)
        _, err = serve.communicate(timeout=60)
    assert b"the caller hung up" in err
    assert project.staged() == []
