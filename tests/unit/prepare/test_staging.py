"""Staging folders: a killed process's are swept, a live one's never (issue 11, "Nothing left behind")."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from executor.prepare import staging

pytestmark = pytest.mark.spawns

# A process that stages a folder as the executor does, reports it, and waits to be killed.
CHILD = """
import sys, time
from pathlib import Path
from executor.prepare import staging
folder = staging.new_folder(Path(sys.argv[1]), sys.argv[2])
(folder / "reviewed.sh").write_bytes(b"x" * 100000)
print(folder, flush=True)
time.sleep(120)
"""


def stage_in_child(root: Path, kind: str = "run") -> tuple[subprocess.Popen[str], Path]:
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(root), kind], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    return child, Path(child.stdout.readline().strip())


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return staging.staging_root(tmp_path)


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM])
@pytest.mark.parametrize("kind", ["run", "env", "deps"])
def test_a_killed_owners_folders_are_swept(root: Path, how: int, kind: str) -> None:
    child, folder = stage_in_child(root, kind)
    assert folder.is_dir() and folder.name.startswith(f"{kind}-{child.pid}-")
    assert staging.sweep(root) == 0 and folder.is_dir()  # alive: kept
    child.send_signal(how)
    child.wait(10)
    assert staging.sweep(root) == 1
    assert list(root.iterdir()) == []  # the folder and the owner's lock file


def test_a_live_owners_folders_are_kept_even_when_old(root: Path) -> None:
    child, folder = stage_in_child(root)
    try:
        os.utime(folder, (0, 0))
        assert staging.sweep(root, now=time.time() + 10 * staging.STALE_AFTER) == 0
        assert folder.is_dir()
    finally:
        child.kill()
        child.wait(10)


def test_a_reused_pid_does_not_protect_a_dead_owners_folders(root: Path) -> None:
    # The lock, not the pid, says who is alive: a folder named after a live pid
    # whose lock file is free (its owner died, the pid went to someone else) is swept.
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        folder = root / f"run-{sleeper.pid}-abc123"
        folder.mkdir()
        (root / f".owner-{sleeper.pid}").touch()
        assert staging.sweep(root) == 1 and not folder.exists()
    finally:
        sleeper.kill()
        sleeper.wait()


def test_this_process_never_sweeps_its_own(root: Path) -> None:
    folder = staging.new_folder(root, "run")
    try:
        assert staging.sweep(root) == 0 and folder.is_dir()
    finally:
        staging.remove_mine()
    assert not folder.exists()


def test_pool_folders_go_with_their_pid(root: Path) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    dead = root / f"hookcage-pool-{gone.pid}-x1"
    live = root / f"hookcage-pool-{os.getpid()}-x2"
    dead.mkdir()
    live.mkdir()
    assert staging.sweep(root) == 1
    assert not dead.exists() and live.exists()


def test_folders_without_an_owner_go_after_the_longest_timeout(root: Path) -> None:
    old, young = root / "run-abcdef12", root / "env-abcdef13"
    for folder in (old, young):
        folder.mkdir()
    os.utime(old, (0, 0))
    assert staging.sweep(root) == 1
    assert not old.exists() and young.exists()


def test_foreign_names_and_symlinks_are_left_alone(root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "precious"
    outside.mkdir()
    (root / "run-1-abc").symlink_to(outside)
    (root / "notes").mkdir()
    os.utime(root / "notes", (0, 0))
    assert staging.sweep(root, now=time.time() + 10 * staging.STALE_AFTER) == 0
    assert outside.exists() and (root / "notes").exists()


def test_release_drops_the_owner_lock_once_nothing_is_staged(root: Path) -> None:
    folder = staging.new_folder(root, "run")
    lock = root / f".owner-{os.getpid()}"
    assert lock.exists()
    staging.release()
    assert lock.exists()  # a folder is still staged
    import shutil

    shutil.rmtree(folder)
    staging.release()
    assert not lock.exists()
