"""`hookcage setup runsc` with gVisor's real `runsc install` writing temporary daemon.json files (no dockerd).

What runsc install (20221219) does to its file, seen here: it adds the entry,
keeps the other keys (sorted, four-space indent), rewrites the file in place
and leaves the old text in ``PATH~`` (mode 0644), replaces an entry with
other settings unless ``-clobber=false``, exits 1 on a file it cannot parse,
panics (exit 2) on ``"runtimes": []``, takes the last of a key given twice,
and reads numbers as floats. hookcage refuses the bad files before it runs,
runs it on a copy in a private folder, and checks the copy.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from executor.provision.runsc import SetupError, runsc_install, setup_runsc

pytestmark = pytest.mark.spawns

ORIGINAL = '{"data-root": "/var/lib/docker", "storage-driver": "fuse-overlayfs", "mtu": 1400}'
ENTRY = {"runtimeArgs": ["--network=none"]}


class Engine:
    """An engine that lists runsc once reloaded with a daemon.json that registers it."""

    def __init__(self, path: Path) -> None:
        self.path, self.listed, self.reloads = path, False, 0

    def refusal(self) -> str:
        return ""

    def config_file(self) -> Path:
        return self.path

    def runtimes(self) -> list[str]:
        return ["runc", "runsc"] if self.listed else ["runc"]

    def reload(self) -> None:
        self.reloads += 1
        self.listed = "runsc" in json.loads(self.path.read_text()).get("runtimes", {})

    def kernel(self, runtime: str | None) -> str:
        return "4.4.0" if runtime == "runsc" else "6.1.0"

    def lists(self, runtime: str) -> str:
        return ""


@pytest.fixture
def runsc() -> str:
    found = shutil.which("runsc")
    if found is None:
        pytest.skip("runsc (gVisor) is not installed: apt-get install runsc")
    return os.path.realpath(found)


def register(engine: Engine, runsc: str, **kw: object) -> object:
    return setup_runsc(engine, runsc=runsc, is_root=True, wait=5, sleep=lambda s: None, **kw)  # type: ignore[arg-type]


def test_runsc_install_adds_the_entry_and_keeps_every_key(tmp_path: Path, runsc: str) -> None:
    path = tmp_path / "daemon.json"
    path.write_text(ORIGINAL)
    path.chmod(0o600)
    engine = Engine(path)
    out = register(engine, runsc)
    data = json.loads(path.read_text())
    assert {k: v for k, v in data.items() if k != "runtimes"} == json.loads(ORIGINAL)
    assert data["runtimes"] == {"runsc": {"path": runsc, **ENTRY}}
    assert path.stat().st_mode & 0o777 == 0o600
    [backup] = tmp_path.glob("daemon.json.hookcage-*.bak")
    assert backup.read_text() == ORIGINAL
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([path.name, backup.name])  # no copy, no ~ file
    assert out.changed and engine.reloads == 1  # type: ignore[attr-defined]
    assert any(line.startswith("runsc install added runtimes.runsc") for line in out.lines)  # type: ignore[attr-defined]

    text, mtime = path.read_text(), path.stat().st_mtime_ns
    again = register(engine, runsc)
    assert not again.changed and "nothing changed" in again.lines[0]  # type: ignore[attr-defined]
    assert path.read_text() == text and path.stat().st_mtime_ns == mtime


def test_a_missing_file_and_folder_are_created(tmp_path: Path, runsc: str) -> None:
    path = tmp_path / "docker" / "daemon.json"
    register(Engine(path), runsc)
    assert json.loads(path.read_text()) == {"runtimes": {"runsc": {"path": runsc, **ENTRY}}}
    assert path.stat().st_mode & 0o777 == 0o644
    assert [p.name for p in path.parent.iterdir()] == ["daemon.json"]


def test_an_entry_with_other_settings_is_replaced_only_when_forced(tmp_path: Path, runsc: str) -> None:
    path = tmp_path / "daemon.json"
    path.write_text('{"runtimes": {"runsc": {"path": "/opt/runsc", "runtimeArgs": ["--debug"]}, "kata": {}}}')
    before = path.read_text()
    with pytest.raises(SetupError, match="--force"):  # refused before runsc install (it would replace it)
        register(Engine(path), runsc)
    assert path.read_text() == before
    out = register(Engine(path), runsc, force=True)
    assert json.loads(path.read_text())["runtimes"] == {"runsc": {"path": runsc, **ENTRY}, "kata": {}}
    assert any("replacing the entry" in line for line in out.lines)  # type: ignore[attr-defined]


def test_dry_run_shows_what_runsc_install_would_write(tmp_path: Path, runsc: str) -> None:
    path = tmp_path / "daemon.json"
    path.write_text(ORIGINAL)
    out = setup_runsc(Engine(path), runsc=runsc, dry_run=True, is_root=False)  # type: ignore[arg-type]
    shown = "\n".join(out.lines)
    assert '+    "runtimes": {' in shown and f'+            "path": "{runsc}",' in shown and "-" + ORIGINAL in shown
    assert '+    "mtu": 1400,' in shown  # the other keys, sorted
    assert path.read_text() == ORIGINAL and [p.name for p in tmp_path.iterdir()] == ["daemon.json"]


def test_a_value_runsc_install_would_change_leaves_the_file_untouched(tmp_path: Path, runsc: str) -> None:
    path = tmp_path / "daemon.json"
    original = '{"mtu": 1400, "max-concurrent-uploads": 12345678901234567890}'  # past a float's precision
    path.write_text(original)
    engine = Engine(path)
    with pytest.raises(SetupError, match=r"changed more than runtimes.runsc .*\(max-concurrent-uploads\): "
                                         r".* left untouched") as info:
        register(engine, runsc)
    assert "\n" not in str(info.value)
    assert path.read_text() == original and [p.name for p in tmp_path.iterdir()] == ["daemon.json"]
    assert engine.reloads == 0


def test_runsc_install_failing_is_one_line(tmp_path: Path, runsc: str) -> None:
    path = tmp_path / "daemon.json"
    path.write_text('{"mtu": 1400,')  # what setup_runsc refuses before it runs runsc install
    with pytest.raises(SetupError, match=r"install failed \(exit 1\): .*Install failed: unexpected end of JSON"):
        runsc_install(runsc, path)
    assert path.read_text() == '{"mtu": 1400,'


def test_a_runsc_that_would_turn_the_userland_proxy_off_is_told_not_to(tmp_path: Path) -> None:
    # gVisor after 20221219: install sets "userland-proxy": false unless -userland-proxy is given.
    seen = tmp_path / "args"
    fake = tmp_path / "runsc"
    fake.write_text('#!/bin/sh\n[ "$2" = --help ] && { echo "  -userland-proxy" >&2; exit 2; }\n'
                    f'printf "%s\\n" "$@" > {seen}\n')
    fake.chmod(0o755)
    runsc_install(str(fake), tmp_path / "daemon.json")
    assert seen.read_text().splitlines()[2:] == ["--runtime=runsc", "--userland-proxy=true", "--", "--network=none"]
