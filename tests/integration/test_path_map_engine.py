"""path_map against the real engine (issue 14): hookcage sees paths the engine does not.

Playing hookcage-in-a-container without a container: hookcage runs in a
private mount namespace (``unshare -m``) where ``alias/`` is a bind of
``real/`` (the workspace) and ``home/`` a bind of ``home-real/`` (its
HOOKCAGE_HOME). The engine, outside, sees ``alias/`` and ``home/`` as the
EMPTY directories they are there: exactly what a sibling container would
mount if hookcage handed it its own paths. With the right ``path_map``
the hook reads the real workspace and its reviewed script from the staging
tree (the overlay's two layers translated); with a wrong one ``doctor``
says which entry and how to fix it, ``serve`` refuses to start, and a
dispatch never runs its hook in another directory.

The last test runs hookcage in a real container (the runner image with
this machine's Python and checkout mounted read-only, and the engine's
socket): it finds its own container, maps its mounts, and its hooks run in
sibling containers that see the workspace it sees.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from daemon_support import THROUGH_DAEMON_ONLY
from support import POOL_OWNERS, CliUser, agent_session

from executor.core.options import SandboxOptions
from executor.core.pathmap import PathMap, parse_path_map
from executor.errors import SandboxError
from executor.sandbox.base import RunRequest
from executor.sandbox.docker import DockerSandbox
from executor.service import client

pytestmark = pytest.mark.docker
HOOKCAGE = shutil.which("hookcage")
WHERE = '#!/bin/sh\ncat "$CLAUDE_PROJECT_DIR/here.txt"\n'


def _namespaces_work() -> bool:
    try:
        proc = subprocess.run(["unshare", "-m", "--propagation", "private", "true"], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


class Aliased(CliUser):
    """A workspace and a home that only hookcage's own mount namespace has at their paths."""

    def __init__(self, tmp: Path) -> None:
        tmp.chmod(0o755)
        self.tmp = tmp
        self.real, self.alias = tmp / "real", tmp / "alias"
        self.home_real, self.home_alias = tmp / "home-real", tmp / "home"
        self.decoy, self.empty = tmp / "decoy", tmp / "empty"
        for folder in (self.real, self.alias, self.home_real, self.home_alias, self.decoy, self.empty):
            folder.mkdir()
            folder.chmod(0o755)
        self.write(self.real / "here.txt", "the real workspace\n")
        self.write(self.decoy / "here.txt", "a decoy\n")
        super().__init__(tmp, self.alias, "pathmap", home=self.home_alias)
        # CliUser made .hookcage under the alias (still the empty outer folder): make it in the real one.
        (self.alias / ".hookcage").rmdir()
        self.write(self.real / ".hookcage" / "where.sh", WHERE, 0o755)
        group = {"hooks": [{"type": "command", "command": "./.hookcage/where.sh"}]}
        self.write(self.real / ".hookcage" / "hooks.json", json.dumps({"hooks": {"UserPromptSubmit": [group]}}))
        (self.home_real / "config.toml").write_text('[allowlist]\nallow = ["./.hookcage/where.sh"]\n')
        self.env["CLAUDE_PROJECT_DIR"] = str(self.alias)
        self.binds = {self.alias: self.real, self.home_alias: self.home_real}

    @staticmethod
    def write(path: Path, text: str, mode: int = 0o644) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.parent.chmod(0o755)
        path.write_text(text)
        path.chmod(mode)

    def path_map(self, workspace: Path, home: Path) -> str:
        return json.dumps({str(self.alias): str(workspace), str(self.home_alias): str(home)})

    def run(self, *args: str, stdin: str = "", env: dict[str, str] | None = None, cwd: Path | None = None,
            timeout: float = 180, program: tuple[str, ...] = ()) -> Any:
        """``hookcage ARGS`` (or ``PROGRAM ARGS``) in a private mount namespace holding the aliases."""
        assert HOOKCAGE is not None
        program = program or (HOOKCAGE,)
        mounts = " && ".join(f"mount --bind {shlex.quote(str(source))} {shlex.quote(str(target))}"
                             for target, source in self.binds.items())
        script = f'{mounts} && cd {shlex.quote(str(cwd or self.alias))} && exec "$@"'
        command = ["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", *program, *args]
        return subprocess.run(command, input=stdin, capture_output=True, text=True,
                              env={**self.env, **(env or {})}, timeout=timeout)

    def payload(self) -> str:
        return json.dumps({"session_id": self.session, "cwd": str(self.alias),
                           "hook_event_name": "UserPromptSubmit", "prompt": "hi"})

    def dispatch(self, path_map: str) -> subprocess.CompletedProcess[str]:
        proc: subprocess.CompletedProcess[str] = self.run(
            "dispatch", "UserPromptSubmit", stdin=self.payload(), env={"HOOKCAGE_PATH_MAP": path_map})
        return proc


@pytest.fixture
def aliased(tmp_path: Path, runner_image: str) -> Aliased:
    if HOOKCAGE is None:
        pytest.fail("the hookcage console script is not installed")
    if not _namespaces_work():
        pytest.skip("no private mount namespaces here (unshare -m needs CAP_SYS_ADMIN)")
    user = Aliased(tmp_path)
    proc = user.run("trust", "--all", "--yes")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return user


def context(stdout: str) -> str:
    return str(json.loads(stdout).get("hookSpecificOutput", {}).get("additionalContext", ""))


def test_without_the_map_the_engine_mounts_what_its_host_has_at_hookcages_paths(aliased: Aliased) -> None:
    # Why path_map exists: the engine binds ITS alias/ (empty) and cannot find the staged tree.
    proc = aliased.run("dispatch", "UserPromptSubmit", stdin=aliased.payload())
    assert "the real workspace" not in proc.stdout
    assert "the Docker engine's host has no " in proc.stdout + proc.stderr  # loudly: the staged tree is not there


def test_with_the_right_map_the_hook_reads_the_real_workspace_through_the_staged_overlay(aliased: Aliased) -> None:
    proc = aliased.dispatch(aliased.path_map(aliased.real, aliased.home_real))
    assert proc.returncode == 0, proc.stderr
    assert context(proc.stdout).strip() == "the real workspace"
    log = [json.loads(line) for line in (aliased.home_real / "runs.jsonl").read_text().splitlines()]
    assert [(r["outcome"], r.get("exit_code")) for r in log if r.get("session") == aliased.session][-1] == ("ran", 0)


def test_doctor_says_each_right_entry_is_the_same_directory(aliased: Aliased) -> None:
    proc = aliased.run("doctor", env={"HOOKCAGE_PATH_MAP": aliased.path_map(aliased.real, aliased.home_real)})
    lines = proc.stdout.splitlines()
    assert f"[..] path_map path_map setting: {aliased.alias} -> {aliased.real}, {aliased.home_alias} -> " \
           f"{aliased.home_real}" in lines
    for service, engine in ((aliased.alias, aliased.real), (aliased.home_alias, aliased.home_real)):
        assert any(line.startswith(f"[ok] path_map {service} -> {engine}: same directory (inode ")
                   for line in lines), proc.stdout
    assert "[!!] path_map" not in proc.stdout


@pytest.mark.parametrize("wrong", ["decoy", "empty"])
def test_doctor_reports_an_entry_naming_another_directory_with_the_fix(aliased: Aliased, wrong: str) -> None:
    other = getattr(aliased, wrong)
    proc = aliased.run("doctor", env={"HOOKCAGE_PATH_MAP": aliased.path_map(other, aliased.home_real)})
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    bad = lines.index(next(line for line in lines if line.startswith(f"[!!] path_map {aliased.alias} -> {other}: ")))
    assert f"the engine's {other} is another directory than hookcage's {aliased.alias} (inode " in lines[bad]
    assert lines[bad + 1].startswith("     fix: correct HOOKCAGE_PATH_MAP (path_map)")
    assert any(line.startswith(f"[ok] path_map {aliased.home_alias} -> {aliased.home_real}: same") for line in lines)


def test_doctor_reports_an_entry_the_engine_does_not_have(aliased: Aliased) -> None:
    missing = aliased.tmp / "not-there"
    proc = aliased.run("doctor", env={"HOOKCAGE_PATH_MAP": aliased.path_map(missing, aliased.home_real)})
    assert proc.returncode == 1
    assert f"[!!] path_map {aliased.alias} -> {missing}: the engine cannot mount it: the Docker engine's host has " \
           f"no {missing} to mount" in proc.stdout
    # The engine refused the probe of both: each entry probed alone tells which one is wrong.
    assert any(line.startswith(f"[ok] path_map {aliased.home_alias} -> {aliased.home_real}: same directory")
               for line in proc.stdout.splitlines()), proc.stdout


@pytest.mark.parametrize("wrong", ["decoy", "empty", "not-there"])
def test_a_dispatch_never_runs_its_hook_in_another_directory(aliased: Aliased, wrong: str) -> None:
    other = aliased.tmp / wrong
    proc = aliased.dispatch(aliased.path_map(other, aliased.home_real))
    assert "the real workspace" not in proc.stdout and "a decoy" not in proc.stdout
    assert proc.returncode == 0  # a hook that could not run is a non-blocking error (on_error: allow)
    said = proc.stdout + proc.stderr
    assert f"wrong path_map {aliased.alias} -> {other}: " in said, said
    log = [json.loads(line) for line in (aliased.home_real / "runs.jsonl").read_text().splitlines()]
    mine = [r for r in log if r.get("session") == aliased.session]
    assert mine and all(r.get("exit_code") is None for r in mine), mine


def test_serve_refuses_a_wrong_home_entry_and_listens_nowhere(aliased: Aliased) -> None:
    proc = aliased.run("serve", env={"HOOKCAGE_PATH_MAP": aliased.path_map(aliased.real, aliased.empty)},
                       timeout=60)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"hookcage: error: wrong path_map {aliased.home_alias} -> {aliased.empty}: the engine's {aliased.empty} is "
        f"another directory than hookcage's {aliased.home_alias}"), proc.stderr
    assert "HOOKCAGE_PATH_MAP" in lines[0] and "Traceback" not in proc.stderr
    assert not (aliased.home_real / client.SOCKET_NAME).exists()


def test_serve_refuses_a_home_outside_the_map(aliased: Aliased) -> None:
    only_workspace = json.dumps({str(aliased.alias): str(aliased.real)})
    proc = aliased.run("serve", env={"HOOKCAGE_PATH_MAP": only_workspace}, timeout=60)
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"hookcage: error: hookcage's home {aliased.home_alias}: {aliased.home_alias} is "
                                  "outside every path_map entry"), proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def pool(socket_path: Path) -> dict[str, int]:
    """The daemon's pool counters, added up over its sandboxes."""
    total: dict[str, int] = {}
    for sandbox in (client.health(str(socket_path), timeout=5) or {}).get("sandboxes", []):
        for name, value in (sandbox.get("pool") or {}).items():
            total[name] = total.get(name, 0) + value
    return total


def test_serve_starts_with_the_right_map_and_answers_through_it_cold_and_warm(aliased: Aliased) -> None:
    assert HOOKCAGE is not None
    env = {**aliased.env, "HOOKCAGE_PATH_MAP": aliased.path_map(aliased.real, aliased.home_real)}
    mounts = " && ".join(f"mount --bind {shlex.quote(str(s))} {shlex.quote(str(t))}" for t, s in aliased.binds.items())
    # serve and its caller in ONE namespace (the socket is in the aliased home).
    script = (f"{mounts} && ( {shlex.quote(HOOKCAGE)} serve --log-level info & echo $! > {aliased.tmp}/serve.pid; "
              f"wait ) ")
    log = (aliased.tmp / "serve.log").open("wb")
    server = subprocess.Popen(["unshare", "-m", "--propagation", "private", "sh", "-c", script],
                              env=env, stdout=log, stderr=log)
    socket_path = aliased.home_real / client.SOCKET_NAME
    try:
        deadline = time.monotonic() + 60
        while client.health(str(socket_path), timeout=0.5) is None:
            assert server.poll() is None, (aliased.tmp / "serve.log").read_text()
            assert time.monotonic() < deadline, "the daemon did not start"
            time.sleep(0.1)
        POOL_OWNERS.add((aliased.tmp / "serve.pid").read_text().strip())
        # The caller in another namespace with the same aliases, answered by the daemon only.
        proc = aliased.run("dispatch", "UserPromptSubmit", stdin=aliased.payload(),
                           env={"HOOKCAGE_PATH_MAP": env["HOOKCAGE_PATH_MAP"]},
                           program=(sys.executable, "-c", THROUGH_DAEMON_ONLY))
        assert proc.returncode == 0, proc.stderr + (aliased.tmp / "serve.log").read_text()
        assert context(proc.stdout).strip() == "the real workspace"
        # Warm: a pooled container made ahead binds its overlay files from the (translated) staging folder.
        while pool(socket_path).get("ready", 0) < 1:
            assert time.monotonic() < deadline + 60, f"the pool never got ready: {pool(socket_path)}"
            time.sleep(0.1)
        proc = aliased.run("dispatch", "UserPromptSubmit", stdin=aliased.payload(),
                           env={"HOOKCAGE_PATH_MAP": env["HOOKCAGE_PATH_MAP"]},
                           program=(sys.executable, "-c", THROUGH_DAEMON_ONLY))
        assert proc.returncode == 0, proc.stderr + (aliased.tmp / "serve.log").read_text()
        assert context(proc.stdout).strip() == "the real workspace"
        stats = pool(socket_path)
        assert (stats["cold"], stats["warm"], stats["fallbacks"]) == (1, 1, 0), stats
    finally:
        pid = int((aliased.tmp / "serve.pid").read_text() or 0) if (aliased.tmp / "serve.pid").exists() else 0
        if pid:
            os.kill(pid, 15)
        server.wait(timeout=60)
        log.close()


def test_a_missing_source_is_refused_by_the_engine_never_created_empty(
    docker_api: Any, runner_image: str, tmp_path: Path, workspace: Path
) -> None:
    # The Mount API, unlike `docker run -v`, does not create a missing source on the host.
    missing = tmp_path / "not-there"
    paths = PathMap(parse_path_map({str(workspace): str(missing)}), "detected")  # detected: not probed first
    sandbox = DockerSandbox(path_map=paths, client=docker_api, reap_on_start=False)
    request = RunRequest(command="cat README.md", cwd=str(workspace), project_dir=str(workspace),
                         options=SandboxOptions(), labels={"hookcage.test-session": os.environ[
                             "HOOKCAGE_TEST_SESSION"]})
    with pytest.raises(SandboxError) as caught:
        sandbox.run(request)
    # Said by the workspace check (a map in force: the engine's host must show the workspace).
    assert f"the Docker engine's host has no {missing} to mount" in str(caught.value)
    assert not missing.exists()


# --------------------------------------------------------------------------
# hookcage in a real container, its map detected
# --------------------------------------------------------------------------

PYTHON_HOME = Path(sys.prefix)


def test_in_a_container_hookcage_finds_its_mounts_and_its_hooks_see_its_workspace(
    docker_api: Any, runner_image: str, tmp_path: Path, workspace: Path
) -> None:
    """The compose topology, minus compose: hookcage's container has the engine's socket, the
    workspace at ANOTHER path than on the host, and its home in a named volume."""
    if not str(PYTHON_HOME).startswith("/") or not (PYTHON_HOME / "bin" / "hookcage").exists():
        pytest.skip(f"hookcage is not installed in {PYTHON_HOME}/bin (needed inside the container)")
    Aliased.write(workspace / "here.txt", "the host's workspace\n")
    Aliased.write(workspace / ".hookcage" / "where.sh", WHERE, 0o755)
    group = {"hooks": [{"type": "command", "command": "./.hookcage/where.sh"}]}
    Aliased.write(workspace / ".hookcage" / "hooks.json", json.dumps({"hooks": {"UserPromptSubmit": [group]}}))
    payload = json.dumps({"session_id": agent_session("pathmap"), "cwd": "/inside/ws",
                          "hook_event_name": "UserPromptSubmit", "prompt": "hi"})
    session = os.environ["HOOKCAGE_TEST_SESSION"]
    volume = f"hookcage-test-{session}-{uuid.uuid4().hex[:6]}"
    docker_api.create_volume(volume, labels={"hookcage.test-session": session})
    volume_path = docker_api.inspect_volume(volume)["Mountpoint"]
    repo = Path(__file__).resolve().parents[2]
    # The hook lists the workspace with the shell's glob (a directory read), not coreutils' ls: under
    # Debian's runsc 20221219 ls and stat fail with EINVAL (its statx refuses AT_NO_AUTOMOUNT; doctor
    # and setup runsc warn of it), which is not what this test is about.
    script = (
        "set -e\n"
        "hookcage run --project /inside/ws -- 'cat /inside/ws/here.txt; printf \"%s\\n\" /inside/ws/*'\n"
        "echo ---\n"
        "printf '[allowlist]\\nallow = [\"./.hookcage/where.sh\"]\\n' > /state/config.toml\n"
        "cd /inside/ws && hookcage trust --all --yes > /dev/null\n"
        f"echo {shlex.quote(payload)} | CLAUDE_PROJECT_DIR=/inside/ws hookcage dispatch UserPromptSubmit\n"
        "echo; echo ---\n"
        "hookcage doctor || true\n"
    )
    host_config = docker_api.create_host_config(
        network_mode="none",
        mounts=[
            {"Type": "bind", "Source": "/var/run/docker.sock", "Target": "/var/run/docker.sock"},
            {"Type": "bind", "Source": str(PYTHON_HOME), "Target": str(PYTHON_HOME), "ReadOnly": True},
            {"Type": "bind", "Source": str(repo), "Target": str(repo), "ReadOnly": True},
            {"Type": "bind", "Source": str(workspace), "Target": "/inside/ws", "ReadOnly": True},
            {"Type": "volume", "Source": volume, "Target": "/state"},
        ],
    )
    created = docker_api.create_container(
        runner_image, command=["sh", "-c", script], user="0:0", host_config=host_config,
        environment={"HOOKCAGE_HOME": "/state", "PATH": f"{PYTHON_HOME}/bin:/usr/bin:/bin",
                     "PYTHONDONTWRITEBYTECODE": "1"},
        labels={"hookcage.test-session": session, "hookcage.managed": "true"},
    )
    container = created["Id"]
    try:
        docker_api.start(container)
        status = docker_api.wait(container, timeout=240)
        output = docker_api.logs(container).decode("utf-8", "replace")
    finally:
        docker_api.remove_container(container, force=True, v=True)
        docker_api.remove_volume(volume, force=True)
    ran, dispatched, doctor = output.split("---\n")
    assert status["StatusCode"] == 0, output
    assert ran.splitlines()[0] == "the host's workspace", output
    assert "README.md" in ran and "src" in ran
    # The reviewed script came from the staging tree in the named volume, laid over the workspace.
    assert context(dispatched).strip() == "the host's workspace", output
    assert f"[..] path_map detected from container {container[:12]}: " in doctor, doctor
    assert f"/inside/ws -> {workspace}" in doctor and f"/state -> {volume_path}" in doctor, doctor
    assert any(line.startswith(f"[ok] path_map /inside/ws -> {workspace}: same directory") for line in
               doctor.splitlines()), doctor
    assert any(line.startswith(f"[ok] path_map /state -> {volume_path}: same directory") for line in
               doctor.splitlines()), doctor
