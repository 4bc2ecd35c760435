"""The relay of a hook's output under gVisor (executor.sandbox.relay), as shell text and create arguments.

What it does in a real container (a 10 MB write arrives whole, leftovers are
killed, the run ends at once) is proven against the engine under both
runtimes in tests/integration/test_docker_sandbox.py; here: where it is used,
and that outside a container's own pid namespace it kills nothing.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from executor.core.options import SandboxOptions
from executor.sandbox.base import RunRequest
from executor.sandbox.docker.profile import (
    DockerProfile,
    container_args,
    relays_output,
    self_ending,
)
from executor.sandbox.relay import RELAY_FUNCTION, RELAY_VARIABLES, relayed_script
from executor.sandbox.warmjob import BOOTSTRAP, bootstrap_command

pytestmark = pytest.mark.spawns

SHELLS = [s for s in ("dash", "bash", "busybox") if shutil.which(s)]


def _script(tmp_path: Path, runtime: str) -> str:
    request = RunRequest(command="echo hi", project_dir=str(tmp_path), cwd=str(tmp_path),
                         options=SandboxOptions(workspace="none"))
    create, _ = container_args(DockerProfile(runtime=runtime), request, name="hookcage-x", now=1.0)
    return str(create["command"][2])


def test_only_gvisor_relays_the_hooks_output(tmp_path: Path) -> None:
    assert relays_output(DockerProfile(runtime="runsc"))
    assert not relays_output(DockerProfile(runtime="runc"))
    assert not relays_output(DockerProfile())  # auto, not resolved yet: nothing assumed
    assert "_hc_relay" in _script(tmp_path, "runsc")
    runc = _script(tmp_path, "runc")
    assert "_hc_relay" not in runc and runc.endswith("exec /bin/sh -c 'echo hi'")


def test_the_pool_bootstrap_relays_only_when_told() -> None:
    assert RELAY_FUNCTION in BOOTSTRAP
    assert bootstrap_command(60, relay=True)[5] == "relay"
    assert bootstrap_command(60)[5] == "direct"


def test_every_relay_variable_is_unset_first() -> None:
    names = set(re.findall(r"_hc_[a-z0-9_]+", RELAY_FUNCTION)) - {"_hc_job", "_hc_relay", "_hc_relay_start"}
    assert names <= set(RELAY_VARIABLES.split())
    assert relayed_script("true").startswith(f"unset {RELAY_VARIABLES};")


@pytest.mark.parametrize("shell", SHELLS)
def test_the_relay_is_valid_posix_sh(shell: str) -> None:
    argv = [shell, "sh", "-n"] if shell == "busybox" else [shell, "-n"]
    for text in (self_ending("printf '%s' \"it's\"; exit 3", 5, relay=True), BOOTSTRAP):
        proc = subprocess.run([*argv, "-c", text], capture_output=True, text=True, timeout=30)
        assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("shell", SHELLS)
def test_outside_a_containers_own_pid_namespace_it_runs_the_job_directly_and_kills_nothing(
    shell: str, tmp_path: Path
) -> None:
    # Here pid 1 is not the engine's init: the relay must neither make FIFOs nor sweep /proc.
    if Path("/proc/1/comm").read_text().strip() in ("docker-init", "podman-init"):
        pytest.skip("these tests run in a container whose init is the engine's: the relay would sweep it")
    bystander = subprocess.Popen(["sleep", "60"])
    try:
        argv = [shell, "sh"] if shell == "busybox" else [shell]
        proc = subprocess.run([*argv, "-c", relayed_script("echo out; echo err >&2; exit 7")],
                              capture_output=True, text=True, timeout=30, cwd=tmp_path)
        assert (proc.returncode, proc.stdout, proc.stderr) == (7, "out\n", "err\n")
        assert bystander.poll() is None  # still alive
    finally:
        os.kill(bystander.pid, signal.SIGKILL)
        bystander.wait()
