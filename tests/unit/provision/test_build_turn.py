"""One image build at a time per user on a machine (``executor.provision.images.build_turn``)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from executor.provision import images

pytestmark = pytest.mark.spawns

HOLDER = """
import sys, time
from filelock import FileLock
lock = FileLock(sys.argv[1])
lock.acquire()
print("held", flush=True)
time.sleep(float(sys.argv[2]))
lock.release()
"""


@pytest.fixture
def temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(tmp_path))
    return tmp_path


def test_a_second_build_waits_for_the_first_and_says_so(temp: Path) -> None:
    folder = temp / f"hookcage-builds-{os.getuid()}"
    folder.mkdir(mode=0o700)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(folder / "runner.lock"), "2"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        lines: list[str] = []
        began = time.monotonic()
        with images.build_turn("runner", lines.append):
            waited = time.monotonic() - began
            pass  # the first build has let go of its turn
        assert waited >= 1.5  # the holder let go after 2 s
        assert lines == ["another build of the runner image runs on this machine: waiting for it to end"]
    finally:
        holder.kill()
        holder.wait()


def test_builds_of_other_images_do_not_wait_for_each_other(temp: Path) -> None:
    lines: list[str] = []
    with images.build_turn("service", lines.append), images.build_turn("runner", lines.append):
        pass
    assert lines == []
    assert (temp / f"hookcage-builds-{os.getuid()}").stat().st_mode & 0o777 == 0o700


def test_a_folder_that_is_not_the_users_own_is_not_used(temp: Path) -> None:
    elsewhere = temp / "elsewhere"
    elsewhere.mkdir()
    (temp / f"hookcage-builds-{os.getuid()}").symlink_to(elsewhere)
    lines: list[str] = []
    with images.build_turn("runner", lines.append):
        pass
    assert len(lines) == 1 and lines[0].startswith("warning: ") and "without waiting" in lines[0]
    assert list(elsewhere.iterdir()) == []  # no lock file planted through the link
