"""`hookcage setup runsc`'s file handling against a fake engine: backup, atomic write, refusals, undo.

The entry is written by a stand-in for gVisor's ``runsc install`` that does to
its file what the real one does (tests/unit/provision/test_runsc_install.py
runs the real one).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from executor.provision.runsc import SetupError, setup_runsc

ORIGINAL = '{"data-root": "/var/lib/docker", "storage-driver": "fuse-overlayfs", "mtu": 1400}'


class FakeEngine:
    """An engine that lists runsc once reloaded with a daemon.json that registers it."""

    def __init__(self, path: Path, *, refuse: str = "", takes_reload: bool = True, listed: bool = False) -> None:
        self.path, self.refuse, self.takes_reload = path, refuse, takes_reload
        self.listed = listed
        self.reloads = 0
        self.kernels: list[str | None] = []

    def refusal(self) -> str:
        return self.refuse

    def config_file(self) -> Path:
        return self.path

    def runtimes(self) -> list[str]:
        return ["runc", "runsc"] if self.listed else ["runc"]

    def reload(self) -> None:
        self.reloads += 1
        if self.takes_reload and self.path.exists():
            self.listed = "runsc" in json.loads(self.path.read_text()).get("runtimes", {})

    def kernel(self, runtime: str | None) -> str:
        self.kernels.append(runtime)
        return "4.4.0" if runtime == "runsc" else "6.1.0"

    def lists(self, runtime: str) -> str:
        return self.ls_error

    ls_error = ""


def fake_install(runsc: str, path: Path) -> None:
    """runsc install (20221219): the entry added, keys sorted, four-space indent, the old text in ``PATH~``."""
    text = path.read_text()
    config = json.loads(text) if text.strip() else {}
    config.setdefault("runtimes", {})["runsc"] = {"path": runsc, "runtimeArgs": ["--network=none"]}
    path.with_name(path.name + "~").write_text(text)
    path.write_text(json.dumps(config, indent=4, sort_keys=True))


@pytest.fixture
def daemon_json(tmp_path: Path) -> Path:
    path = tmp_path / "daemon.json"
    path.write_text(ORIGINAL)
    path.chmod(0o600)
    return path


def run(engine: FakeEngine, **kw: object) -> object:
    return setup_runsc(engine, runsc="/usr/bin/runsc", is_root=True, wait=0.5, sleep=lambda s: None,  # type: ignore[arg-type]
                       install=fake_install, **kw)


def test_registers_keeps_keys_backs_up_reloads_and_verifies(daemon_json: Path) -> None:
    engine = FakeEngine(daemon_json)
    out = run(engine)
    data = json.loads(daemon_json.read_text())
    assert {k: v for k, v in data.items() if k != "runtimes"} == json.loads(ORIGINAL)
    assert data["runtimes"] == {"runsc": {"path": "/usr/bin/runsc", "runtimeArgs": ["--network=none"]}}
    backups = list(daemon_json.parent.glob("daemon.json.hookcage-*.bak"))
    assert len(backups) == 1 and backups[0].read_text() == ORIGINAL
    assert daemon_json.stat().st_mode & 0o777 == 0o600  # the file keeps its mode
    assert engine.reloads == 1 and engine.kernels == [None, "runsc"]
    assert out.changed and any("uname -r = 4.4.0" in line for line in out.lines)  # type: ignore[attr-defined]
    assert not [p for p in daemon_json.parent.iterdir() if p.name.endswith(".tmp")]


def test_second_run_changes_nothing(daemon_json: Path) -> None:
    engine = FakeEngine(daemon_json)
    run(engine)
    text, stat = daemon_json.read_text(), daemon_json.stat()
    out = run(engine)
    assert not out.changed and "nothing changed" in out.lines[0]  # type: ignore[attr-defined]
    assert daemon_json.read_text() == text and daemon_json.stat().st_mtime_ns == stat.st_mtime_ns
    assert engine.reloads == 1
    assert len(list(daemon_json.parent.glob("*.bak"))) == 1


def test_dry_run_shows_the_diff_and_changes_nothing(daemon_json: Path) -> None:
    engine = FakeEngine(daemon_json)
    out = setup_runsc(engine, runsc="/usr/bin/runsc", dry_run=True, is_root=False,  # type: ignore[arg-type]
                      install=fake_install)
    shown = "\n".join(out.lines)
    assert '+    "runtimes": {' in shown and '+            "path": "/usr/bin/runsc",' in shown and "-" + ORIGINAL in shown
    assert daemon_json.read_text() == ORIGINAL and engine.reloads == 0
    assert not list(daemon_json.parent.glob("*.bak"))


def test_a_missing_file_is_created(tmp_path: Path) -> None:
    path = tmp_path / "docker" / "daemon.json"
    run(FakeEngine(path))
    assert json.loads(path.read_text()) == {"runtimes": {"runsc": {"path": "/usr/bin/runsc",
                                                                   "runtimeArgs": ["--network=none"]}}}


@pytest.mark.parametrize("text", ['{"mtu": 1400,', "[]", '{"a": 1, "a": 2}', "\udcff"])
def test_a_file_that_is_not_a_json_object_is_never_rewritten(tmp_path: Path, text: str) -> None:
    path = tmp_path / "daemon.json"
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    engine = FakeEngine(path)
    with pytest.raises(SetupError, match="left untouched; fix it first") as info:
        run(engine)
    assert "\n" not in str(info.value)
    assert path.read_bytes() == text.encode("utf-8", "surrogateescape") and engine.reloads == 0
    assert list(tmp_path.iterdir()) == [path]


def test_not_installed_not_root_and_unusable_engines_are_refused(daemon_json: Path) -> None:
    with pytest.raises(SetupError, match="apt-get install runsc"):
        setup_runsc(FakeEngine(daemon_json), runsc=None, is_root=True)  # type: ignore[arg-type]
    with pytest.raises(SetupError, match="run it as root"):
        setup_runsc(FakeEngine(daemon_json), runsc="/usr/bin/runsc", is_root=False)  # type: ignore[arg-type]
    with pytest.raises(SetupError, match="is Podman"):
        run(FakeEngine(daemon_json, refuse="the engine at unix:///x is Podman: cannot register runsc"))
    assert daemon_json.read_text() == ORIGINAL and not list(daemon_json.parent.glob("*.bak"))


def test_an_entry_with_other_settings_is_kept_unless_forced(daemon_json: Path) -> None:
    daemon_json.write_text('{"runtimes": {"runsc": {"path": "/opt/runsc", "runtimeArgs": ["--debug"]}}}')
    before = daemon_json.read_text()
    with pytest.raises(SetupError, match=r'path is "/opt/runsc", hookcage would set "/usr/bin/runsc".*--force'):
        run(FakeEngine(daemon_json))
    assert daemon_json.read_text() == before
    out = run(FakeEngine(daemon_json), force=True)
    assert json.loads(daemon_json.read_text())["runtimes"]["runsc"]["runtimeArgs"] == ["--network=none"]
    assert any("replacing the entry" in line for line in out.lines)  # type: ignore[attr-defined]


def test_a_reload_the_engine_does_not_take_puts_the_file_back(daemon_json: Path) -> None:
    engine = FakeEngine(daemon_json, takes_reload=False)
    with pytest.raises(SetupError, match=r"does not list runsc .* put back as it was"):
        run(engine)
    assert daemon_json.read_text() == ORIGINAL
    assert engine.reloads == 2  # once with the new file, once more with the old one


def test_registered_in_the_file_but_not_reloaded_is_reloaded(daemon_json: Path) -> None:
    daemon_json.write_text('{"runtimes": {"runsc": {"path": "/usr/bin/runsc", "runtimeArgs": ["--network=none"]}}}')
    before = daemon_json.read_text()
    engine = FakeEngine(daemon_json)
    out = run(engine)
    assert daemon_json.read_text() == before and engine.reloads == 1 and not out.changed  # type: ignore[attr-defined]


def test_runsc_registered_outside_the_file_is_left_alone(daemon_json: Path) -> None:
    with pytest.raises(SetupError, match=r"outside .*--add-runtime"):
        run(FakeEngine(daemon_json, listed=True))
    assert daemon_json.read_text() == ORIGINAL


def test_a_runtime_that_answers_with_the_hosts_kernel_is_not_gvisor(daemon_json: Path) -> None:
    engine = FakeEngine(daemon_json)
    engine.kernel = lambda runtime: "6.1.0"  # type: ignore[method-assign]
    with pytest.raises(SetupError, match=r"host.s kernel 6\.1\.0: it is not gVisor"):
        run(engine)


def test_a_runsc_whose_ls_fails_is_registered_with_a_warning(daemon_json: Path) -> None:
    engine = FakeEngine(daemon_json)
    engine.ls_error = "ls: cannot access '/bin': Invalid argument"
    out = run(engine)
    assert out.changed  # type: ignore[attr-defined]
    warning = out.lines[-1]  # type: ignore[attr-defined]
    assert warning.startswith("warning: this runsc's kernel refuses statx") and "Invalid argument" in warning
