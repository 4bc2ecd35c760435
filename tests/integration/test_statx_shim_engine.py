"""coreutils' ls and stat in the runner image under gVisor and runc (the statx shim, images/runner/statx-shim.c).

Debian bookworm's runsc 20221219 refuses statx() with AT_NO_AUTOMOUNT, which
coreutils 9.1 always passes: without the shim every ``ls`` in a hook failed
with "Invalid argument" under the default runtime (auto = runsc). The runner
image preloads hookcage's shim (retry without the flag on that EINVAL only);
these hooks list and stat the workspace and ``/`` under both runtimes, cold and
warm, and compare with what the host and python (no statx) see.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from executor.sandbox.base import RunRequest, RunResult
from executor.sandbox.docker import DockerSandbox, engine_info
from executor.sandbox.docker.imagefacts import STATX_SHIM_LABEL
from executor.sandbox.pool import PooledDockerSandbox

pytestmark = pytest.mark.docker

LABELS = {"hookcage.hook": "statx-shim", "hookcage.test-session": os.environ["HOOKCAGE_TEST_SESSION"]}
STAT = "stat -c '%n|%s|%F|%a' README.md src src/main.py"


def _unavailable(message: str) -> None:
    if os.environ.get("CI") == "true" or os.environ.get("HOOKCAGE_REQUIRE_DOCKER"):
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


@pytest.fixture(params=["runc-cold", "runsc-cold", "runsc-warm"])
def sandbox(request: pytest.FixtureRequest, docker_api: Any, runner_image: str) -> Iterator[DockerSandbox]:
    runtime, path = request.param.split("-")
    if runtime not in engine_info(docker_api)["runtimes"]:
        _unavailable(f"the engine has no {runtime} runtime: apt-get install runsc && hookcage setup runsc")
    labels = docker_api.inspect_image(runner_image)["Config"].get("Labels") or {}
    if labels.get(STATX_SHIM_LABEL) != "1":
        _unavailable(f"{runner_image} was built without the statx shim (no C compiler): "
                     "apt-get install gcc, then hookcage image build")
    backend: DockerSandbox
    if path == "warm":
        backend = PooledDockerSandbox(client=docker_api, image=runner_image, runtime=runtime,
                                      labels={"hookcage.test-session": os.environ["HOOKCAGE_TEST_SESSION"]},
                                      idle_timeout=120)
    else:
        backend = DockerSandbox(client=docker_api, image=runner_image, runtime=runtime)
    with backend:
        yield backend


def hook(sandbox: DockerSandbox, workspace: Path, command: str) -> RunResult:
    request = RunRequest(command=command, cwd=str(workspace), env={"CLAUDE_PROJECT_DIR": str(workspace)},
                         timeout=30, project_dir=str(workspace), labels=LABELS)
    if isinstance(sandbox, PooledDockerSandbox):
        assert sandbox.prewarm(request, wait=60), "the pool did not fill"
        result, path = sandbox.run_with_path(request)
        assert path == "warm"
        return result
    return sandbox.run(request)


def test_ls_and_stat_on_the_workspace_answer_what_the_host_sees(sandbox: DockerSandbox, workspace: Path) -> None:
    result = hook(sandbox, workspace, f"{STAT} && ls -l src && ls -ld . && ls -la")
    assert result.exit_code == 0, result.stderr
    out = result.stdout.decode().splitlines()
    host = subprocess.run(STAT, shell=True, cwd=workspace, capture_output=True, text=True, check=True)
    assert out[:3] == host.stdout.splitlines()
    assert out[3].startswith("total ")
    mode, _, _, _, size, *_, name = out[4].split()
    assert (mode, size, name) == ("-rw-r--r--", "12", "main.py")
    assert out[5].startswith("drwxr-xr-x ") and out[5].endswith(" .")
    assert {line.split()[-1] for line in out[7:]} == {".", "..", ".git", "README.md", "src"}
    assert b"Invalid argument" not in result.stderr


def test_ls_of_the_root_lists_what_python_lists(sandbox: DockerSandbox, workspace: Path) -> None:
    python = "import os; print(*sorted(os.listdir('/')), sep=chr(10))"
    result = hook(sandbox, workspace, f"ls -l / >/dev/null && ls -1A / | sort && echo --- && python3 -c \"{python}\" "
                                      "&& echo --- && stat -c '%n %F' / /tmp /etc/passwd /bin")
    assert result.exit_code == 0, result.stderr
    listed, by_python, stat = result.stdout.decode().split("---\n")
    assert listed == by_python and {"etc", "tmp", "usr"} <= set(listed.split())
    assert stat.splitlines() == ["/ directory", "/tmp directory", "/etc/passwd regular file", "/bin symbolic link"]


def test_a_missing_file_is_still_an_error(sandbox: DockerSandbox, workspace: Path) -> None:
    result = hook(sandbox, workspace, "ls -l absent; echo rc=$?; stat absent; echo rc=$?")
    assert result.stdout.decode().splitlines() == ["rc=2", "rc=1"]
    err = result.stderr.decode()
    assert err.count("No such file or directory") == 2 and "Invalid argument" not in err
