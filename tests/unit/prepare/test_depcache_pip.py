"""The host's ``pip download`` under hookcage's guard (executor.prepare.depcache.pip_download).

Real pip, a local ``--find-links`` folder, no network. The attack: a wheel from
the index whose metadata depends on a source archive by URL. pip resolves it
by building that archive, ``--only-binary=:all:`` notwithstanding, and building
runs the archive's own backend on this machine (the control test shows it does).
Under the guard pip can start no process, so the build fails before any code of
the archive runs.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import InvalidRequirement
from pkgfixtures import evil_sources, sdist, wheel

from executor.prepare.depcache import (
    PIP_REFUSED,
    Target,
    pip_download,
    pip_error,
    url_requirements,
)

pytestmark = pytest.mark.spawns

TARGET = Target.from_probe({"python": "3.11", "platform": "linux-x86_64", "libc": "glibc 2.36"})


def download(tmp_path: Path, index: Path, *requirements: str) -> subprocess.CompletedProcess[str]:
    dest, cwd = tmp_path / "wheels", tmp_path / "cwd"
    dest.mkdir(exist_ok=True)
    cwd.mkdir(exist_ok=True)
    return pip_download(requirements, dest, [*TARGET.pip_args(), "--no-index", "--find-links", str(index)],
                        cwd=cwd, timeout=120)


@pytest.fixture
def index(tmp_path: Path) -> Path:
    folder = tmp_path / "index"
    folder.mkdir()
    return folder


def test_control_unguarded_pip_runs_the_archive_code_on_this_machine(tmp_path: Path, index: Path) -> None:
    """Not hookcage: plain pip, to show the attack below is real."""
    marker = tmp_path / "MARKER"
    wheel(index, "top", [f"evil @ {sdist(tmp_path, marker).as_uri()}"])
    subprocess.run([sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "--only-binary=:all:",
                    "--no-index", "--find-links", str(index), "--dest", str(tmp_path / "plain"),
                    *TARGET.pip_args(), "top"], capture_output=True, timeout=120, cwd=tmp_path)
    assert marker.exists()


def test_a_wheel_depending_on_a_source_archive_by_url_builds_nothing(tmp_path: Path, index: Path) -> None:
    marker = tmp_path / "MARKER"
    wheel(index, "top", [f"evil @ {sdist(tmp_path, marker).as_uri()}"])
    proc = download(tmp_path, index, "top")
    assert proc.returncode != 0
    assert not marker.exists()
    assert PIP_REFUSED in proc.stderr
    assert pip_error(proc.stderr).startswith("a dependency is not a wheel from the index")


@pytest.mark.skipif(shutil.which("git") is None, reason="no git here")
def test_a_wheel_depending_on_a_git_url_checks_nothing_out(tmp_path: Path, index: Path) -> None:
    marker = tmp_path / "MARKER"
    repo = tmp_path / "repo"
    repo.mkdir()
    for name, text in evil_sources(marker).items():
        (repo / name).write_text(text)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    wheel(index, "top", [f"evil @ git+file://localhost{repo}"])  # pip wants a host in a git+ URL
    proc = download(tmp_path, index, "top")
    assert proc.returncode != 0 and not marker.exists()
    assert PIP_REFUSED in proc.stderr


def test_wheels_from_the_index_still_download_under_the_guard(tmp_path: Path, index: Path) -> None:
    wheel(index, "top", ["leaf>=1"])
    wheel(index, "leaf", [])
    proc = download(tmp_path, index, "top[x]; python_version >= '3'")
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in (tmp_path / "wheels").iterdir()) == [
        "leaf-1.0-py3-none-any.whl", "top-1.0-py3-none-any.whl"]
    assert url_requirements(tmp_path / "wheels") == []


def test_a_wheel_that_names_a_url_is_found_after_download(tmp_path: Path, index: Path) -> None:
    """A URL to a wheel is downloaded without building; hookcage then refuses it before uv installs anything."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    other = wheel(elsewhere, "other", [])
    wheel(index, "top", [f"other @ {other.as_uri()}"])
    proc = download(tmp_path, index, "top")
    assert proc.returncode == 0, proc.stderr
    assert url_requirements(tmp_path / "wheels") == [
        f"top-1.0-py3-none-any.whl: Requires-Dist 'other @ {other.as_uri()}'"]


@pytest.mark.parametrize("requirement", ["x @ file:///abs/x.tar.gz", "./local", "-e ."])
def test_a_url_or_path_never_reaches_pip(tmp_path: Path, index: Path, requirement: str) -> None:
    with pytest.raises(InvalidRequirement):
        download(tmp_path, index, requirement)


def test_a_name_pip_takes_for_an_archive_builds_nothing_even_when_it_is_there(tmp_path: Path, index: Path) -> None:
    """``x-1.0.tar.gz`` is a valid PEP 508 name that pip takes for a file to build (the review refuses
    it: requirement_problem); were it handed over with the archive in pip's folder, the guard holds."""
    marker = tmp_path / "MARKER"
    (tmp_path / "cwd").mkdir()
    sdist(tmp_path / "cwd", marker)
    proc = download(tmp_path, index, "evil-1.0.tar.gz")
    assert proc.returncode != 0 and not marker.exists()


def test_a_version_that_is_a_path_builds_nothing(tmp_path: Path, index: Path) -> None:
    """PEP 440's arbitrary equality takes any string: `x===/../../<archive>` is a valid requirement by
    name that pip reads as a path out of its folder (the review refuses it: requirement_problem)."""
    marker = tmp_path / "MARKER"
    archive = sdist(tmp_path, marker)
    (tmp_path / "cwd").mkdir()
    ups = "/.." * (len((tmp_path / "cwd").parts) + 2)
    proc = download(tmp_path, index, f"evil==={ups}{archive}")
    assert proc.returncode != 0 and not marker.exists()
    assert PIP_REFUSED in proc.stderr
