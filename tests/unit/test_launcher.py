"""The launcher ``$HOOKCAGE_HOME/bin/hookcage`` (issue 23): what install writes, what it imports, how it fails.

Every run here spawns the launcher as an agent spawns it (its own shebang) or
its code under ``python -I -S`` exactly, against a fake daemon on a unix
socket (a thread of this test), or with no daemon at all (in-process).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from executor import __version__, launcher
from executor.core.events import EVENTS
from executor.core.hooks import Scope, is_self_route
from executor.core.install import NotInstallable, dispatch_command, merge_flat, merge_routes, routes
from executor.dialects import DIALECTS, get_dialect
from executor.dialects.base import Where

pytestmark = pytest.mark.spawns

REPO = Path(__file__).resolve().parents[2]
ANSWER = {"exit_code": 0, "stdout": "{}\n", "stderr": "", "agent": "claude"}
PAYLOAD = json.dumps({"session_id": "s", "transcript_path": "/tmp/t.jsonl", "cwd": "/tmp", "hook_event_name":
                      "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "ls"}}).encode()
FORBIDDEN = {"pydantic", "pydantic_core", "pydantic_settings", "click", "docker", "fastapi", "starlette", "uvicorn",
             "requests", "executor.cli", "executor.settings", "executor.executor", "executor.dialects",
             "site", "re", "json"}
"""What the per-event process must not import when the daemon answers: the heavy dependencies,
any dialect, the in-process CLI; and ``re``/``json`` (about 7 ms of start-up: the budget is 8)."""


class FakeDaemon:
    """A unix socket answering every ``POST /dispatch`` with :data:`ANSWER` (``/health`` too)."""

    def __init__(self, path: str) -> None:
        self.requests: list[tuple[bytes, dict[str, Any]]] = []
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen(8)
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                data = b""
                while b"\r\n\r\n" not in data and (chunk := conn.recv(65536)):
                    data += chunk
                head, _, body = data.partition(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                while len(body) < length and (chunk := conn.recv(65536)):
                    body += chunk
                self.requests.append((head.split(b"\r\n")[0], json.loads(body) if body else {}))
                reply = ANSWER if head.startswith(b"POST") else {"pid": os.getpid(), "version": __version__}
                out = json.dumps(reply).encode()
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                             + str(len(out)).encode() + b"\r\n\r\n" + out)

    def close(self) -> None:
        self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        self.thread.join(5)


@pytest.fixture
def home() -> Iterator[Path]:
    """A HOOKCAGE_HOME short enough for a socket path (tmp_path may pass 108 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="hc-launch-", dir="/tmp"))
    path.chmod(0o700)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def daemon(home: Path) -> Iterator[FakeDaemon]:
    fake = FakeDaemon(str(home / "hookcage.sock"))
    yield fake
    fake.close()


def write_launcher(home: Path, python: str = sys.executable) -> Path:
    path = Path(launcher.launcher_path(home))
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(launcher.script(python, str(REPO), __version__))
    path.chmod(0o755)
    return path


def agent_env(home: Path, **extra: str) -> dict[str, str]:
    """An agent's environment: its own HOME, no hookcage on any Python path."""
    user = home / "user"
    user.mkdir(exist_ok=True)
    project = home / "project"
    project.mkdir(exist_ok=True)
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(user), "HOOKCAGE_HOME": str(home),
            "CLAUDE_PROJECT_DIR": str(project), "HOOKCAGE_DAEMON": "off", **extra}


def dispatch(program: Path, env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([str(program), "dispatch", "--agent", "claude"], input=PAYLOAD, capture_output=True,
                          env=env, timeout=120, cwd=env["CLAUDE_PROJECT_DIR"])


# -- the script --------------------------------------------------------------------------


def test_the_script_starts_python_isolated_with_the_package_first() -> None:
    text = launcher.script("/usr/bin/python3", "/opt/site-packages", "1.2.3").decode()
    lines = text.splitlines()
    assert lines[0] == "#!/usr/bin/python3 -IS"
    assert launcher.is_launcher(text.encode()) and "hookcage 1.2.3" in lines[1]
    assert "sys.path.insert(0, '/opt/site-packages')" in lines
    assert lines[-2:] == ["from executor.entry import main", "main()"]
    with pytest.raises(ValueError):
        launcher.script("python3", "/x", "1")  # a relative interpreter would be looked up per agent
    with pytest.raises(ValueError):
        launcher.script("/opt/it's/python3", "/x", "1")
    assert not launcher.is_launcher(b"#!/bin/sh\nexec hookcage \"$@\"\n")


def test_an_interpreter_path_no_shebang_can_hold_runs_through_sh(home: Path, daemon: FakeDaemon) -> None:
    spaced = home / "py thon" / ("x" * 120)
    spaced.mkdir(parents=True)
    (spaced / "python3").symlink_to(sys.executable)
    program = write_launcher(home, str(spaced / "python3"))
    assert program.read_bytes().startswith(b"#!/bin/sh\n'''exec' ")
    out = dispatch(program, agent_env(home))
    assert (out.returncode, out.stdout, out.stderr) == (0, b"{}\n", b"")
    assert [line for line, _ in daemon.requests] == [b"POST /dispatch HTTP/1.1"]


# -- the fast path -----------------------------------------------------------------------


def test_an_event_the_daemon_answers_imports_nothing_heavy(home: Path, daemon: FakeDaemon) -> None:
    program = write_launcher(home)
    # The launcher's own code, under the flags of its shebang; sys.modules is printed once the
    # answer is written and the process exits.
    code = ("import atexit, sys\n"
            "atexit.register(lambda: sys.stderr.write('MODULES ' + ' '.join(sorted(sys.modules)) + '\\n'))\n"
            f"sys.argv = [{str(program)!r}, 'dispatch', '--agent', 'claude']\n"
            f"exec(compile(open({str(program)!r}).read(), {str(program)!r}, 'exec'))\n")
    env = agent_env(home)
    out = subprocess.run([sys.executable, "-I", "-S", "-c", code], input=PAYLOAD, capture_output=True, env=env,
                         timeout=60, cwd=env["CLAUDE_PROJECT_DIR"])
    assert (out.returncode, out.stdout) == (0, b"{}\n"), out.stderr
    modules = set(out.stderr.decode().split("MODULES ", 1)[1].split())
    assert "executor.service.client" in modules, "the daemon answered through the client"
    heavy = {m for m in modules if m in FORBIDDEN or m.split(".")[0] in FORBIDDEN
             or m.startswith("executor.dialects")}
    assert heavy == set()
    (line, body), = daemon.requests
    assert line == b"POST /dispatch HTTP/1.1" and body["agent"] == "claude"


def test_the_agent_s_pythonpath_and_pythonhome_are_ignored(home: Path, daemon: FakeDaemon) -> None:
    junk = home / "junk"
    (junk / "executor").mkdir(parents=True)
    (junk / "executor" / "__init__.py").write_text("raise SystemExit('the junk executor was imported')\n")
    (junk / "json.py").write_text("raise SystemExit('the junk json was imported')\n")
    env = agent_env(home, PYTHONPATH=str(junk), PYTHONHOME=str(junk / "nowhere"), PYTHONSTARTUP=str(junk / "x"))
    out = dispatch(write_launcher(home), env)
    assert (out.returncode, out.stdout, out.stderr) == (0, b"{}\n", b"")


def test_without_a_daemon_the_launcher_answers_in_process(home: Path) -> None:
    """No socket, HOOKCAGE_DAEMON=off: the site is enabled and the in-process CLI answers (junk env too)."""
    junk = home / "junk"
    (junk / "click").mkdir(parents=True)
    (junk / "click" / "__init__.py").write_text("raise SystemExit('the junk click was imported')\n")
    env = agent_env(home, PYTHONPATH=str(junk), PYTHONHOME=str(junk / "nowhere"))
    program = write_launcher(home)
    out = dispatch(program, env)
    assert (out.returncode, out.stdout) == (0, b"{}\n"), out.stderr
    other = subprocess.run([str(program), "--version"], capture_output=True, env=env, timeout=60)
    assert (other.returncode, other.stdout) == (0, f"hookcage, version {__version__}\n".encode()), other.stderr


def test_enable_site_is_a_no_op_where_the_site_ran() -> None:
    before = list(sys.path)
    launcher.enable_site()
    assert sys.path == before


# -- install, reinstall, uninstall -----------------------------------------------------


def hookcage(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**agent_env(home), "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "executor", *args], capture_output=True, text=True, env=env,
                          timeout=120, cwd=home)


def test_install_writes_the_launcher_and_routes_to_it_and_a_reinstall_rewrites_it(home: Path) -> None:
    out = hookcage(home, "install", "claude")
    assert out.returncode == 0, out.stderr
    program = Path(launcher.launcher_path(home))
    assert f"wrote {program}" in out.stdout
    assert program.stat().st_mode & 0o777 == 0o755
    assert program.read_bytes() == launcher.script(sys.executable, str(REPO), __version__)
    settings = json.loads((home / "agents" / "claude-settings.json").read_text())
    commands = {h["command"] for groups in settings["hooks"].values() for g in groups for h in g["hooks"]}
    assert commands == {dispatch_command(str(program), "claude")}
    # What an older hookcage (or one installed elsewhere) left: every install rewrites it.
    program.write_bytes(launcher.script("/old/venv/bin/python", "/old/site-packages", "0.0.1"))
    again = hookcage(home, "install", "claude")
    assert again.returncode == 0 and f"rewrote {program}" in again.stdout, again.stderr
    assert program.read_bytes() == launcher.script(sys.executable, str(REPO), __version__)
    assert "unchanged" in hookcage(home, "install", "claude").stdout.splitlines()[0]
    gone = hookcage(home, "uninstall", "claude")
    assert gone.returncode == 0 and f"removed {program}" in gone.stdout, gone.stderr
    assert not program.exists()


def test_install_never_overwrites_a_program_of_its_own_there(home: Path) -> None:
    mine = Path(launcher.launcher_path(home))
    mine.parent.mkdir()
    mine.write_text("#!/bin/sh\necho mine\n")
    out = hookcage(home, "install", "claude")
    assert out.returncode != 0 and "is not hookcage's launcher" in out.stderr
    assert mine.read_text() == "#!/bin/sh\necho mine\n"


def test_dry_run_names_the_launcher_and_writes_nothing(home: Path) -> None:
    out = hookcage(home, "install", "claude", "--dry-run")
    assert out.returncode == 0 and f"# {launcher.launcher_path(home)}: hookcage's launcher" in out.stdout
    assert not Path(launcher.launcher_path(home)).exists()


OLD = "/usr/local/bin/hookcage dispatch --agent claude"
NEW = dispatch_command("/home/u/.config/hookcage/bin/hookcage", "claude")


def test_a_reinstall_replaces_routes_written_for_another_hookcage_program() -> None:
    mine = {"type": "command", "command": "sh guard.sh"}
    mention = {"type": "command", "command": f"{OLD} && echo also-mine"}
    existing = {"model": "x", "hooks": {"PreToolUse": [
        {"matcher": "*", "hooks": [{"type": "command", "command": OLD}]},
        {"matcher": "Bash", "hooks": [mine, {"type": "command", "command": OLD}, mention]}]}}
    merged = merge_routes(existing, routes(["PreToolUse", "Stop"], NEW, matcher_events=["PreToolUse"]))
    assert merged["model"] == "x"
    assert merged["hooks"]["PreToolUse"] == [
        {"matcher": "Bash", "hooks": [mine, mention]},
        {"matcher": "*", "hooks": [{"type": "command", "command": NEW}]}]
    assert merge_routes(merged, routes(["PreToolUse", "Stop"], NEW, matcher_events=["PreToolUse"])) == merged
    other_agent = "/usr/local/bin/hookcage dispatch --agent gemini"
    flat = {"hooks": {"preToolUse": [{"bash": OLD}, {"bash": other_agent}, {"bash": "sh x"}]}}
    assert merge_flat(flat, {"preToolUse": {"bash": NEW}}, "bash")["hooks"]["preToolUse"] == [
        {"bash": other_agent}, {"bash": "sh x"}, {"bash": NEW}]


def test_the_launcher_route_is_a_route_in_your_files_and_a_hook_in_a_repository_s() -> None:
    assert is_self_route(NEW) and not is_self_route(NEW, absolute=False)
    data = {"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [{"type": "command", "command": NEW}]}]}}
    parsed = get_dialect("claude").parse(data, scope=Scope.PROJECT, source="/r/.claude/settings.json",
                                         project_root="/r")
    assert [h.command for h in parsed.hooks] == [NEW] and parsed.routes == ()
    user = get_dialect("claude").parse(data, scope=Scope.USER, source="/h/.claude/settings.json", project_root="/r")
    assert user.hooks == () and len(user.routes) == 1  # the route, by its place in the file


# -- why no "type": "http" route ----------------------------------------------------------


def handlers(value: Any) -> Iterator[dict[str, Any]]:
    """Every hook handler (a dict with a command or a type) anywhere in a decoded settings file."""
    if isinstance(value, dict):
        if "type" in value or "command" in value or "bash" in value:
            yield value
        for item in value.values():
            yield from handlers(item)
    elif isinstance(value, list):
        for item in value:
            yield from handlers(item)


def test_no_gating_event_is_ever_routed_through_http() -> None:
    """Claude Code treats an unreachable ``type: "http"`` hook as a non-blocking error: it would allow.

    So every route install writes, for every agent, is a command (whose failure hookcage
    answers in-process, never with an allow); the gating events of the catalog are named here
    so that a future partial http routing has to face this list.
    """
    gating = {name for name, spec in EVENTS.items() if spec.can_block or spec.permission}
    assert {"PreToolUse", "PermissionRequest", "UserPromptSubmit", "Stop", "SubagentStop", "PostToolUse",
            "TaskCreated", "TaskCompleted", "PreCompact", "ConfigChange", "Elicitation"} <= gating
    program = "/home/u/.config/hookcage/bin/hookcage"
    where = Where(None, "/home/u", {"PATH": "/usr/bin", "HOOKCAGE_HOME": "/home/u/.config/hookcage"})
    routed_gating = 0
    for name, dialect in DIALECTS.items():
        try:
            plan = dialect.install("user", where, lambda path: None, program)
        except NotInstallable as exc:
            if exc.offer is None:
                continue
            plan = exc.offer
        for edit in plan.edits:
            try:
                data = json.loads(edit.content or b"")
            except ValueError:
                continue  # a wrapper script, a TOML file: no JSON handlers
            found = list(handlers(data))
            assert found, (name, edit.path)
            assert all(h.get("type", "command") == "command" for h in found), (name, edit.path)
            if name == "claude":
                routed_gating += len(gating & set(data["hooks"]))
    assert routed_gating == len(gating - {"WorktreeCreate"})  # WorktreeCreate is never routed at all


def test_doctor_names_a_launcher_that_cannot_start(home: Path) -> None:
    good = launcher.script(sys.executable, str(REPO), __version__)
    assert launcher.broken(good) is None
    assert launcher.broken(launcher.script("/gone/venv/bin/python", str(REPO), "1")) == \
        "its interpreter /gone/venv/bin/python is gone"
    assert launcher.broken(launcher.script(sys.executable, str(home), "1")) == \
        f"hookcage's package is no longer in {home}"
    spaced = launcher.script("/gone/py thon/python3", str(REPO), "1")
    assert launcher.broken(spaced) == "its interpreter /gone/py thon/python3 is gone"
    assert launcher.broken(b"#!/bin/sh\n") == "it is not hookcage's launcher"
