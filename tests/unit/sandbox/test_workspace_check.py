"""The workspace-on-the-engine's-host check (pathcheck.check_workspace / verify_workspace), on a fake sandbox.

The fake sandbox plays the engine: it "mounts" a directory of its choosing at
the workspace's path and answers ``cat -- ./NAME`` from there, so each case is
a host that has the workspace, has another directory there, or has none.
The real engine (a TLS one, with a workspace it cannot see) is in
tests/integration/test_engine_tls_remote.py.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest

from executor.core.options import SandboxOptions
from executor.core.pathmap import IDENTITY, PathMap
from executor.errors import SandboxError
from executor.sandbox.base import RunRequest, RunResult
from executor.sandbox.pathcheck import (
    MARKER_PREFIX,
    check_workspace,
    engine_is_elsewhere,
    verify_workspace,
)


class FakeSandbox:
    """Runs ``cat -- ./NAME`` in ``seen`` (the engine host's directory at the workspace's path)."""

    def __init__(self, seen: Path | None, *, refuse: str = "") -> None:
        self.seen, self.refuse = seen, refuse
        self.requests: list[RunRequest] = []
        self.markers_seen: list[str] = []

    def run(self, request: RunRequest) -> RunResult:
        self.requests.append(request)
        if self.refuse:
            raise SandboxError(self.refuse)
        [_, _, name] = shlex.split(request.command)
        self.markers_seen.extend(p for p in os.listdir(request.project_dir) if p.startswith(MARKER_PREFIX))
        path = (self.seen / name) if self.seen else None
        if path is not None and path.exists():
            return RunResult(exit_code=0, stdout=path.read_bytes(), stderr=b"", duration=0.1)
        return RunResult(exit_code=1, stdout=b"", stderr=f"cat: can't open '{name}': No such file\n".encode(),
                         duration=0.1)


@pytest.mark.parametrize(
    ("url", "elsewhere"),
    [
        ("unix:///var/run/docker.sock", False),
        ("unix:///run/user/1000/podman/podman.sock", False),
        ("http+docker://localhost", False),  # docker-py's own name for a unix socket
        ("https://127.0.0.1:2376", True),
        ("http://docker:2375", True),
        ("tcp://docker:2376", True),
        ("ssh://me@host", True),
        ("http+docker://ssh", True),
    ],
)
def test_which_engines_are_elsewhere(url: str, elsewhere: bool) -> None:
    assert engine_is_elsewhere(url, IDENTITY) is elsewhere


def test_a_path_map_in_force_means_elsewhere_even_on_a_unix_socket() -> None:
    assert engine_is_elsewhere("unix:///var/run/docker.sock", PathMap((("/w", "/host/w"),), "setting"))


def test_the_same_directory_sees_the_marker_and_it_is_removed(tmp_path: Path) -> None:
    sandbox = FakeSandbox(tmp_path)
    check = check_workspace(sandbox, str(tmp_path), "https://h:2376")
    assert check.ok is True, check.detail
    [request] = sandbox.requests
    assert request.options.workspace == "ro" and not request.warm  # mounted as a hook's, read-only
    assert request.labels["hookcage.probe"] == "workspace"
    assert len(sandbox.markers_seen) == 1  # there while the probe ran ...
    assert not [p for p in os.listdir(tmp_path) if p.startswith(MARKER_PREFIX)]  # ... and gone after


def test_another_directory_at_that_path_is_refused_in_one_line(tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    workspace = tmp_path / "ws"
    workspace.mkdir()
    check = check_workspace(FakeSandbox(other), str(workspace), "https://h:2376")
    assert check.ok is False
    assert check.line() == (f"workspace {workspace} on the engine at tcp://h:2376: the engine sees no such "
                            "directory there (a marker file written here is not in it)")
    assert not list(workspace.iterdir())


def test_a_path_the_engine_cannot_mount_is_refused(tmp_path: Path) -> None:
    sandbox = FakeSandbox(None, refuse="the engine refused: bind source path does not exist")
    check = check_workspace(sandbox, str(tmp_path), "https://h:2376")
    assert check.ok is False and "cannot mount it" in check.detail and "does not exist" in check.detail
    assert not list(tmp_path.iterdir())


def test_a_workspace_hookcage_cannot_write_is_not_checked(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        ws = tmp_path / "file-not-dir"  # root writes anywhere: a file in the way plays the unwritable folder
        ws.write_text("")
    else:
        ws = tmp_path / "ro"
        ws.mkdir()
        ws.chmod(0o555)
    sandbox = FakeSandbox(tmp_path)
    check = check_workspace(sandbox, str(ws), "https://h:2376")
    assert check.ok is None and check.detail.startswith("not checked: cannot write a marker file there")
    assert not sandbox.requests


def request_in(workspace: Path, workspace_mode: str = "ro") -> RunRequest:
    return RunRequest(command="true", cwd=str(workspace), project_dir=str(workspace),
                      options=SandboxOptions(workspace=workspace_mode))  # type: ignore[arg-type]


def test_runs_are_refused_once_checked_and_the_probe_runs_once_per_workspace(tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    ws = tmp_path / "ws"
    ws.mkdir()
    sandbox = FakeSandbox(other)
    for _ in range(3):
        with pytest.raises(SandboxError, match="run hookcage on the engine's host, or share the workspace"):
            verify_workspace(sandbox, request_in(ws), "https://h:2376", IDENTITY)
    assert len(sandbox.requests) == 1


def test_a_good_workspace_is_probed_once(tmp_path: Path) -> None:
    sandbox = FakeSandbox(tmp_path)
    for _ in range(3):
        verify_workspace(sandbox, request_in(tmp_path), "https://h:2376", IDENTITY)
    assert len(sandbox.requests) == 1


@pytest.mark.parametrize(
    ("url", "mode"), [("unix:///var/run/docker.sock", "ro"), ("https://h:2376", "none")]
)
def test_no_probe_for_a_local_engine_or_a_run_without_workspace(tmp_path: Path, url: str, mode: str) -> None:
    sandbox = FakeSandbox(None, refuse="must not be asked")
    verify_workspace(sandbox, request_in(tmp_path, mode), url, IDENTITY)
    assert not sandbox.requests
