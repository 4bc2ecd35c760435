"""gVisor on the real engine: `hookcage setup runsc` against the real daemon.json, and trust across runtimes.

The set-up test edits the engine's real ``/etc/docker/daemon.json`` (as root; on
CI ``.ci/run`` has already run it, so here it must be a no-op that still checks
gVisor answers) and leaves runsc registered: that is the state CI runs in.
Nothing is ever restored by copying files back, so a failing test cannot leave
the engine without the keys it had.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from support import CliUser, allow, containers_created

from executor.provision.runsc import DEFAULT_DAEMON_JSON, LocalDockerd
from executor.sandbox.docker import engine_info

pytestmark = pytest.mark.docker


def _unavailable(message: str) -> None:
    if os.environ.get("CI") == "true" or os.environ.get("HOOKCAGE_REQUIRE_DOCKER"):
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


@pytest.fixture
def gvisor(docker_api: Any) -> None:
    if shutil.which("runsc") is None:
        _unavailable("runsc is not installed: apt-get install runsc")
    if "runsc" not in engine_info(docker_api)["runtimes"]:
        _unavailable("the engine has no runsc runtime: hookcage setup runsc")


def test_setup_runsc_registers_gvisor_keeps_the_file_and_a_second_run_changes_nothing(
    tmp_path: Path, docker_api: Any, runner_image: str
) -> None:
    if shutil.which("runsc") is None:
        _unavailable("runsc is not installed: apt-get install runsc")
    if os.geteuid() != 0:
        pytest.skip("hookcage setup runsc edits /etc/docker/daemon.json and signals dockerd: needs root")
    path = LocalDockerd(docker_api).config_file()
    if path != DEFAULT_DAEMON_JSON and not path.exists():
        _unavailable(f"dockerd's config file {path} does not exist")
    before_text = path.read_text() if path.exists() else "{}"
    before = json.loads(before_text or "{}")
    user = CliUser(tmp_path, tmp_path, "gvisor-setup")
    first = user.run("setup", "runsc")
    assert first.returncode == 0, first.stderr
    assert "runsc" in engine_info(docker_api)["runtimes"]
    assert "checked: a network-less container under runsc answers uname -r = " in first.stdout
    after = json.loads(path.read_text())
    # Every key the file had is kept as it was (runtimes only gains runsc).
    assert {k: v for k, v in after.items() if k != "runtimes"} == {k: v for k, v in before.items() if k != "runtimes"}
    assert {k: v for k, v in after["runtimes"].items() if k != "runsc"} == {
        k: v for k, v in before.get("runtimes", {}).items() if k != "runsc"}
    assert after["runtimes"]["runsc"] == {"path": os.path.realpath(shutil.which("runsc") or ""),
                                          "runtimeArgs": ["--network=none"]}
    if "runsc" not in before.get("runtimes", {}):  # this run registered it: a backup of what was there
        backups = sorted(path.parent.glob(path.name + ".hookcage-*.bak"))
        assert backups and json.loads(backups[-1].read_text() or "{}") == before
    text, mtime = path.read_text(), path.stat().st_mtime_ns
    backups = set(path.parent.glob(path.name + ".hookcage-*.bak"))
    second = user.run("setup", "runsc")
    assert second.returncode == 0, second.stderr
    assert "nothing changed" in second.stdout
    assert path.read_text() == text and path.stat().st_mtime_ns == mtime
    assert set(path.parent.glob(path.name + ".hookcage-*.bak")) == backups
    dry = user.run("setup", "runsc", "--dry-run")
    assert dry.returncode == 0 and path.stat().st_mtime_ns == mtime


def test_setup_runsc_refuses_a_file_it_cannot_parse_and_leaves_it(tmp_path: Path, docker_api: Any) -> None:
    if shutil.which("runsc") is None:
        _unavailable("runsc is not installed: apt-get install runsc")
    broken = tmp_path / "daemon.json"
    broken.write_text('{"storage-driver": "overlay2",\n')
    user = CliUser(tmp_path, tmp_path, "gvisor-setup")
    proc = user.run("setup", "runsc", "--daemon-json", str(broken))
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "not valid JSON" in proc.stderr and "left untouched" in proc.stderr
    assert broken.read_text() == '{"storage-driver": "overlay2",\n'
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("daemon.json")) == ["daemon.json"]


GUARD = "sh $CLAUDE_PROJECT_DIR/.hookcage/guard.sh"


class Project(CliUser):
    def __init__(self, tmp: Path, root: Path) -> None:
        super().__init__(tmp, root, "gvisor-trust")
        (self.hookdir / "guard.sh").write_text("uname -r >&2; exit 2\n")
        hooks = {"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": GUARD}]}]}}
        (self.hookdir / "hooks.json").write_text(json.dumps(hooks))
        allow(self.home, [GUARD])

    def dispatch(self, runtime: str) -> Any:
        payload = {"session_id": self.session, "cwd": str(self.root), "tool_name": "Bash",
                   "tool_input": {"command": "ls"}}
        return self.run("dispatch", "PreToolUse", stdin=json.dumps(payload), env={"HOOKCAGE_RUNTIME": runtime})


def test_a_hook_trusted_under_gvisor_does_not_run_when_gvisor_is_gone(
    tmp_path: Path, workspace: Path, runner_image: str, docker_api: Any, gvisor: None
) -> None:
    # The reviewer saw the hook contained by gVisor; then runsc is unregistered (here: the setting
    # picks runc, as `auto` would on an engine without runsc). The hook would reach the host's
    # kernel: it is not run, no container is even created, and `hookcage trust` asks again.
    project = Project(tmp_path, workspace)
    review = project.run("trust", "--all", "--yes", env={"HOOKCAGE_RUNTIME": "auto"})
    assert review.returncode == 0, review.stderr
    since = time.time()
    proc = project.dispatch("runc")
    assert proc.returncode == 0, proc.stderr
    assert "not trusted yet" in json.loads(proc.stdout)["systemMessage"]
    assert containers_created(docker_api, project.session, since) == 0
    listed = project.run("list", "--json", env={"HOOKCAGE_RUNTIME": "runc"})
    view = json.loads(listed.stdout)[0]
    assert view["trusted"] is False and view["runtime"] == "runc" and view["isolation"] == "shared kernel"
    # Under gVisor it runs, in gVisor's kernel.
    proc = project.dispatch("auto")
    assert json.loads(proc.stdout)["hookSpecificOutput"]["permissionDecisionReason"] == "4.4.0"


def test_a_hook_trusted_under_runc_runs_under_gvisor(
    tmp_path: Path, workspace: Path, runner_image: str, docker_api: Any, gvisor: None
) -> None:
    project = Project(tmp_path, workspace)
    assert project.run("trust", "--all", "--yes", env={"HOOKCAGE_RUNTIME": "runc"}).returncode == 0
    proc = project.dispatch("runsc")
    assert json.loads(proc.stdout)["hookSpecificOutput"]["permissionDecisionReason"] == "4.4.0"
    host = engine_info(docker_api)["kernel"]
    proc = project.dispatch("runc")
    assert json.loads(proc.stdout)["hookSpecificOutput"]["permissionDecisionReason"] == host


def test_a_configured_runtime_the_engine_lacks_is_one_line(tmp_path: Path, workspace: Path, runner_image: str) -> None:
    project = Project(tmp_path, workspace)
    proc = project.run("run", "--", "true", env={"HOOKCAGE_RUNTIME": "no-such-runtime"})
    assert proc.returncode != 0
    assert proc.stderr.count("\n") == 1 and "no runtime 'no-such-runtime'" in proc.stderr, proc.stderr
