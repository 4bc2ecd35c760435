"""The self-start's pieces that need no daemon: the switch, the idle timeout as the settings read it,
the code stamp and fingerprint, the daemon's command line and environment, ``--status`` lines."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

import executor
from executor.service import autostart, client
from executor.settings import load_settings

pytestmark = pytest.mark.spawns


def config_homes(tmp_path: Path, user: str | None, managed: str | None, variable: tuple[str, str | None]) -> dict[str, str]:
    """A user's and a managed folder with these ``config.toml`` lines (None: no file), and the
    environment naming them (plus ``variable``'s name and value, when the value is not None)."""
    home, managed_dir = tmp_path / "home", tmp_path / "managed"
    home.mkdir()
    managed_dir.mkdir()
    for folder, text in ((home, user), (managed_dir, managed)):
        if text is not None:
            (folder / "config.toml").write_text(text + "\n")
    env = {"HOOKCAGE_HOME": str(home), "HOOKCAGE_MANAGED_DIR": str(managed_dir)}
    if variable[1] is not None:
        env[variable[0]] = variable[1]
    return env


def as_the_settings_see_it(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """This process's environment is ``env`` as far as hookcage's variables go."""
    for name in list(os.environ):
        if name.startswith("HOOKCAGE_"):
            monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)


@pytest.mark.parametrize(("value", "on"), [(None, True), ("auto", True), ("", True), ("off", False),
                                            ("OFF", False), ("0", False), ("no", False)])
def test_the_switch(tmp_path: Path, value: str | None, on: bool) -> None:
    env = {"HOOKCAGE_HOME": str(tmp_path), "HOOKCAGE_MANAGED_DIR": str(tmp_path / "managed")}
    if value is not None:
        env[autostart.SWITCH_VAR] = value
    assert autostart.enabled(env) is on


@pytest.mark.parametrize(
    ("variable", "user", "managed", "on"),
    [
        (None, 'daemon = "off"', None, False),
        (None, None, 'daemon = "off"', False),
        (None, 'daemon = "auto"', 'daemon = "off"', True),  # the user's file first, as the settings
        ("auto", 'daemon = "off"', None, True),  # the variable wins over the files
        ("off", 'daemon = "auto"', None, False),
        (None, 'daemon = "sometimes"', 'daemon = "off"', False),  # refused by the settings: unset here
        (None, "daemon = 0", None, True),
    ],
)
def test_the_switch_is_also_the_setting_daemon(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variable: str | None, user: str | None, managed: str | None,
    on: bool,
) -> None:
    env = config_homes(tmp_path, user, managed, (autostart.SWITCH_VAR, variable))
    assert autostart.enabled(env) is on
    if user != 'daemon = "sometimes"' and user != "daemon = 0":  # the settings name those instead
        as_the_settings_see_it(env, monkeypatch)
        assert load_settings().daemon == ("auto" if on else "off")


@pytest.mark.parametrize(
    ("variable", "user", "managed", "expected"),
    [
        (None, None, None, 1200.0),
        ("30", "daemon_idle_timeout = 60", "daemon_idle_timeout = 90", 30.0),
        (None, "daemon_idle_timeout = 60", "daemon_idle_timeout = 90", 60.0),
        (None, None, "daemon_idle_timeout = 90.5", 90.5),
        ("0", None, None, 0.0),
    ],
)
def test_the_idle_timeout_is_the_setting_as_the_settings_read_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variable: str | None, user: str | None, managed: str | None,
    expected: float,
) -> None:
    env = config_homes(tmp_path, user, managed, (autostart.IDLE_VAR, variable))
    as_the_settings_see_it(env, monkeypatch)
    assert autostart.idle_timeout(env) == expected == load_settings().daemon_idle_timeout


def test_a_value_the_settings_refuse_is_the_default_here(tmp_path: Path) -> None:
    env = {"HOOKCAGE_HOME": str(tmp_path), "HOOKCAGE_MANAGED_DIR": str(tmp_path / "m"), autostart.IDLE_VAR: "-5"}
    assert autostart.idle_timeout(env) == autostart.DEFAULT_IDLE_TIMEOUT
    (tmp_path / "config.toml").write_text("daemon_idle_timeout = 'soon'\n")
    assert autostart.idle_timeout({**env, autostart.IDLE_VAR: ""}) == autostart.DEFAULT_IDLE_TIMEOUT


def test_the_code_stamp_names_this_package_and_its_init_file() -> None:
    stamp = client.code_stamp()
    init = Path(executor.__file__)
    info = init.stat()
    assert stamp == f"{init.parent}:{info.st_ino}:{info.st_size}:{info.st_mtime_ns}"


def test_the_fingerprint_sees_edits_and_replaced_files_not_bytecode_or_editor_files(tmp_path: Path) -> None:
    package = tmp_path / "executor"
    (package / "service").mkdir(parents=True)
    module = package / "service" / "answer.py"
    module.write_text("A = 1\n")
    before = autostart.package_fingerprint(str(package))
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"pyc")
    (package / "service" / ".answer.py.swp").write_bytes(b"vim")
    (package / "service" / "answer.py~").write_bytes(b"backup")
    assert autostart.package_fingerprint(str(package)) == before

    stat = module.stat()
    os.utime(module, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))  # an edit in place
    assert autostart.package_fingerprint(str(package)) != before
    os.utime(module, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert autostart.package_fingerprint(str(package)) == before

    replacement = package / "service" / "answer.new"  # an upgrade: a new file under the old name,
    replacement.write_text("A = 2\n")  # same size, same mtime
    os.utime(replacement, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    replacement.replace(module)
    assert autostart.package_fingerprint(str(package)) != before
    (package / "added.py").write_text("")
    module.unlink()
    assert len(autostart.package_fingerprint(str(package))) == 1


def test_the_daemon_runs_this_package_with_this_interpreter(tmp_path: Path) -> None:
    argv = autostart.daemon_argv("/s/hookcage.sock", 600, "/h/daemon.log")
    assert argv[:3] == [sys.executable, "-E", "-c"]  # no PYTHONPATH of the agent that started it
    assert argv[4] == str(Path(executor.__file__).resolve().parents[1])
    assert argv[5:] == ["serve", "--socket", "/s/hookcage.sock", "--idle-timeout", "600", "--log-file",
                        "/h/daemon.log"]
    env = autostart.daemon_env({"CLAUDE_PROJECT_DIR": "/p", "CLAUDE_ENV_FILE": "/e", "PATH": "/bin",
                                "HOOKCAGE_SOCKET": "/s", "HOOKCAGE_RUNTIME": "runc"}, "/h")
    assert env == {"PATH": "/bin", "HOOKCAGE_RUNTIME": "runc", "HOOKCAGE_HOME": "/h"}


def test_off_or_without_a_home_nothing_is_started(tmp_path: Path) -> None:
    assert not autostart.ensure({"HOOKCAGE_HOME": str(tmp_path), autostart.SWITCH_VAR: "off"},
                                str(tmp_path / "hookcage.sock"))
    assert list(tmp_path.iterdir()) == []


def test_a_recent_failure_is_not_tried_again(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / autostart.FAILED_MARK).write_text("the daemon exited at start\n")
    assert not autostart.ensure({"HOOKCAGE_HOME": str(tmp_path)}, str(tmp_path / "hookcage.sock"))
    assert capsys.readouterr().err == ""  # said when it failed, not again
    assert sorted(p.name for p in tmp_path.iterdir()) == [autostart.FAILED_MARK]


def test_an_unusable_home_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / autostart.START_LOCK).mkdir()
    assert not autostart.ensure({"HOOKCAGE_HOME": str(tmp_path)}, str(tmp_path / "hookcage.sock"))
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("hookcage: cannot start the daemon (") and line.endswith("answered in-process")


def test_status_lines() -> None:
    health = {"version": executor.__version__, "code": client.code_stamp(), "pid": 42, "socket": "/s",
              "log_file": "/h/daemon.log", "uptime": 3725.2, "idle_timeout": 1200.0, "idle": 65.0, "requests": 7,
              "sandboxes": [{"backend": "docker", "profile": {"runtime": "auto"},
                             "pool": {"warm": 5, "cold": 2, "ready": 2}}], "retiring": None}
    assert autostart.status_lines(health, "/s") == [
        "pid: 42", f"version: {executor.__version__}", f"code: {Path(executor.__file__).parent}", "socket: /s",
        "log: /h/daemon.log", "uptime: 1h02m", "idle timeout: 1200 s (idle for 1m05s)", "requests: 7",
        "pool (docker, auto): warm 5, cold 2, ready 2",
    ]
    other = autostart.status_lines({**health, "version": "0.0.1", "idle_timeout": 0}, "/s")
    assert "the next event retires it" in other[1] and "idle timeout: never (idle for 1m05s)" in other


def test_a_broken_interpreter_path_is_one_line_and_not_tried_again_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "executable", str(tmp_path / "gone" / "python3"))
    env = {"HOOKCAGE_HOME": str(tmp_path / "home")}
    assert not autostart.ensure(env, str(tmp_path / "home" / "hookcage.sock"))
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"hookcage: cannot run {tmp_path}/gone/python3 (") and "answered in-process" in line
    assert (tmp_path / "home" / autostart.FAILED_MARK).exists()
    assert not autostart.ensure(env, str(tmp_path / "home" / "hookcage.sock"))
    assert capsys.readouterr().err == ""
