"""The daemon (``hookcage serve``) and the stdlib-only client path of ``hookcage dispatch``.

No Docker: hooks use the ``host`` backend (user scope, explicit opt-in). The
daemon runs as a real process on a temporary ``HOOKCAGE_HOME``; the client
runs as an agent runs it, a fresh ``python`` per event.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import socketserver
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from support import allow, commands_in

from executor import entry
from executor.entry import forwardable
from executor.service import client

pytestmark = pytest.mark.spawns

PY = sys.executable
HEAVY = ("docker", "pydantic", "pydantic_settings", "click", "fastapi", "uvicorn", "starlette",
         "tenacity", "tree_sitter", "requests", "http")
# Runs the console script's path with the in-process fallback made impossible:
# an answer proves the daemon gave it, and the modules imported prove what it cost.
THROUGH_DAEMON_ONLY = """
import atexit, sys
before = set(sys.modules)
sys.modules["executor.cli"] = None  # the fallback would raise ImportError

def report():
    new = sorted(m for m in set(sys.modules) - before if sys.modules[m] is not None)
    sys.__stderr__.write("\\nIMPORTED:" + ",".join(new) + "\\n")

atexit.register(report)
from executor.entry import main
main(sys.argv[1:])
"""


def split_imported(stderr: str) -> tuple[str, list[str]]:
    text, _, modules = stderr.rpartition("\nIMPORTED:")
    return text, [m for m in modules.strip().split(",") if m]


def not_stdlib(modules: list[str]) -> list[str]:
    ours = {"executor", "executor.core", "executor.core.envnames", "executor.service", "executor.service.client",
            "executor.entry", "executor.in_hook", "executor.service.wirejson", "executor.service.autostart"}
    return [m for m in modules if m not in ours and m.split(".")[0] not in sys.stdlib_module_names]


# -- the client on its own ----------------------------------------------------------


def test_request_carries_the_bytes_and_only_the_environment_that_matters() -> None:
    raw = b'\xff\xfe{"not": utf8'
    env = {"HOOKCAGE_FAIL_CLOSED": "1", "hookcage_memory": "1g", "CLAUDE_PROJECT_DIR": "/p",
           "PATH": "/bin", "HOME": "/h", "LANG": "C", "DOCKER_HOST": "unix:///d.sock",
           "AWS_SECRET_ACCESS_KEY": "secret", "SSH_AUTH_SOCK": "/tmp/agent", "HOOKCAGE_HOME": "/h/hc"}
    body = json.loads(client.encode_request("PreToolUse", raw, env, "/work"))
    assert base64.b64decode(body["payload_b64"]) == raw
    assert body["event"] == "PreToolUse" and body["cwd"] == "/work" and body["home"] == "/h/hc"
    assert body["agent"] is None
    assert json.loads(client.encode_request("PreToolUse", raw, env, "/work", "codebuddy"))["agent"] == "codebuddy"
    assert body["env"] == {k: v for k, v in env.items() if k not in ("AWS_SECRET_ACCESS_KEY", "SSH_AUTH_SOCK")}
    assert body["version"] == client.__version__


def test_response_parsing_waits_for_the_whole_body_wherever_reads_cut_it() -> None:
    body = b'{"exit_code": 2, "stdout": "", "stderr": "no\\n", "agent": "claude"}'
    data = b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\ncontent-type: application/json\r\n\r\n" % len(body) + body
    for cut in range(len(data)):
        assert client.parse_response(data[:cut]) is None
    assert client.parse_response(data) == (200, body)
    assert client.decode_answer(200, body) == client.Answer(2, "", "no\n")


@pytest.mark.parametrize(
    "data",
    [
        b"SSH-2.0-OpenSSH_9.6\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nserver: x\r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 3\r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
    ],
)
def test_anything_but_our_http_answer_is_refused(data: bytes) -> None:
    with pytest.raises(client.ClientError):
        client.parse_response(data)


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (409, b'{"detail": "the caller is hookcage 9.9"}'),
        (200, b"not json"),
        (200, b"[]"),
        (200, b'{"exit_code": "0", "stdout": "", "stderr": ""}'),
        (200, b'{"exit_code": true, "stdout": "", "stderr": ""}'),
        (200, b'{"exit_code": 300, "stdout": "", "stderr": ""}'),
        (200, b'{"exit_code": 0, "stdout": null, "stderr": "", "agent": "claude"}'),
        # A daemon that predates dialects names none: it would answer every agent as Claude Code.
        (200, b'{"exit_code": 0, "stdout": "{}\\n", "stderr": ""}'),
        (200, b'{"exit_code": 0, "stdout": "{}\\n", "stderr": "", "agent": null}'),
    ],
)
def test_an_answer_that_is_not_a_verdict_means_answer_in_process(status: int, body: bytes) -> None:
    with pytest.raises(client.ClientError):
        client.decode_answer(status, body)


def test_an_answer_for_another_agent_than_asked_means_answer_in_process() -> None:
    body = b'{"exit_code": 0, "stdout": "{}\\n", "stderr": "", "agent": "claude"}'
    assert client.decode_answer(200, body) == client.Answer(0, "{}\n", "")
    assert client.decode_answer(200, body, "claude") == client.Answer(0, "{}\n", "")
    with pytest.raises(client.ClientError):
        client.decode_answer(200, body, "codebuddy")


@pytest.mark.parametrize(
    "env",
    [
        {"HOME": "/home/ann"},
        {"HOME": "/home/ann/"},
        {"HOME": "/"},
        {"HOME": "/home/ann", "XDG_CONFIG_HOME": "/xdg/config"},
        {"HOME": "/home/ann", "XDG_CONFIG_HOME": "relative/config"},
        {"HOME": "/home/ann", "XDG_CONFIG_HOME": "  "},
        {},
    ],
)
def test_default_home_is_what_platformdirs_gives_the_settings(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    import platformdirs

    for name in ("HOME", "XDG_CONFIG_HOME", "HOOKCAGE_HOME"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert client.default_home(dict(os.environ)) == platformdirs.user_config_dir("hookcage")


def test_homes_the_client_cannot_be_sure_of_are_left_in_process() -> None:
    assert client.default_home({"HOME": "relative"}) is None
    assert client.default_home({"HOME": "/h", "HOOKCAGE_HOME": ""}) is None
    assert client.default_home({"HOME": "/h"}, platform="win32") is None
    assert client.socket_path({"HOOKCAGE_HOME": "/x/home"}) == "/x/home/hookcage.sock"
    assert client.socket_path({"HOOKCAGE_SOCKET": "/run/hc.sock", "HOOKCAGE_HOME": "/x"}) == "/run/hc.sock"


def test_client_constants_match_the_library() -> None:
    from executor.config import PROJECT_DIR_VARS
    from executor.service.answer import MAX_PAYLOAD

    assert client.MAX_PAYLOAD == MAX_PAYLOAD
    assert client.PROJECT_DIR_VARS == PROJECT_DIR_VARS


def test_host_hooks_get_the_callers_base_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from executor.sandbox.host import default_base_env
    from executor.service.forwarding import host_base_env

    for env in ({"PATH": "/opt/bin", "LANG": "de_DE.UTF-8", "HOME": "/h"}, {"PATH": ""}, {}):
        for name in ("PATH", "LANG", "HOME"):
            monkeypatch.delenv(name, raising=False)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        assert host_base_env(env) == default_base_env()


NOT_FORWARDED = (False, None, None)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["dispatch"], (True, None, None)),
        (["dispatch", "Stop"], (True, "Stop", None)),
        (["dispatch", "--agent", "codebuddy"], (True, None, "codebuddy")),
        (["dispatch", "--agent", "codebuddy", "Stop"], (True, "Stop", "codebuddy")),
        (["dispatch", "Stop", "--agent", "codebuddy"], (True, "Stop", "codebuddy")),
        (["dispatch", "--agent=codebuddy", "Stop"], (True, "Stop", "codebuddy")),
        (["dispatch", "--agent", "nosuchagent"], (True, None, "nosuchagent")),  # the daemon refuses it: the CLI says why
        (["dispatch", "--agent", "help"], NOT_FORWARDED),
        (["dispatch", "--agent=help"], NOT_FORWARDED),
        (["dispatch", "--agent"], NOT_FORWARDED),
        (["dispatch", "--agent="], NOT_FORWARDED),
        (["dispatch", "--agent", "-h"], NOT_FORWARDED),
        (["dispatch", "--agent", "claude", "--agent", "codebuddy"], NOT_FORWARDED),
        (["dispatch", "--agent", "claude", "--help"], NOT_FORWARDED),
        (["dispatch", "--help"], NOT_FORWARDED),
        (["dispatch", "-h"], NOT_FORWARDED),
        (["dispatch", "Stop", "extra"], NOT_FORWARDED),
        (["list"], NOT_FORWARDED),
        ([], NOT_FORWARDED),
    ],
)
def test_only_plain_dispatch_calls_are_offered_to_the_daemon(
    args: list[str], expected: tuple[bool, str | None, str | None]
) -> None:
    assert forwardable(args) == expected


def test_no_socket_means_none(tmp_path: Path) -> None:
    env = {"HOOKCAGE_HOME": str(tmp_path), "HOOKCAGE_DAEMON": "off"}  # with auto, one is started
    assert entry.through_daemon("Stop", b"{}", env) is None
    (tmp_path / "hookcage.sock").write_text("a regular file is nobody's daemon")
    assert entry.through_daemon("Stop", b"{}", env) is None


def test_a_socket_nobody_listens_on_means_none(tmp_path: Path) -> None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(tmp_path / "hookcage.sock"))  # bound, never listening: connect is refused
    try:
        started = time.monotonic()
        assert entry.through_daemon("Stop", b"{}", {"HOOKCAGE_HOME": str(tmp_path), "HOOKCAGE_DAEMON": "off"}) is None
        assert time.monotonic() - started < 1
    finally:
        sock.close()


# -- a fake daemon: what the client sends, what it imports ---------------------------


class FakeDaemon(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def __init__(self, path: Path, answer: dict[str, Any], status: int = 200) -> None:
        self.answer, self.status = answer, status
        self.received: list[dict[str, Any]] = []
        super().__init__(str(path), _FakeHandler)


class _FakeHandler(BaseHTTPRequestHandler):
    server: FakeDaemon
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.received.append({"path": self.path, **json.loads(body)})
        data = json.dumps(self.server.answer).encode()
        self.send_response(self.server.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def fake_daemon(tmp_path: Path) -> Iterator[FakeDaemon]:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    server = FakeDaemon(home / "hookcage.sock", {"exit_code": 2, "stdout": "", "stderr": "fake says no\n",
                                                 "agent": "claude"})
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_answered_by_the_daemon_the_client_imports_the_standard_library_only(
    fake_daemon: FakeDaemon, tmp_path: Path
) -> None:
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "HOOKCAGE_HOME": str(tmp_path / "home"),
           "CLAUDE_PROJECT_DIR": str(tmp_path), "UNRELATED_TOKEN": "x"}
    proc = subprocess.run([PY, "-c", THROUGH_DAEMON_ONLY, "dispatch", "PreToolUse"], input=b'{"tool_name": "Bash"}',
                          capture_output=True, env=env, cwd=tmp_path, timeout=30)
    stderr, imported = split_imported(proc.stderr.decode())
    assert (proc.returncode, proc.stdout, stderr) == (2, b"", "fake says no\n")
    assert not [m for m in imported if m.split(".")[0] in HEAVY], imported
    assert not_stdlib(imported) == [], imported
    [request] = fake_daemon.received
    assert request["path"] == "/dispatch" and request["event"] == "PreToolUse"
    assert base64.b64decode(request["payload_b64"]) == b'{"tool_name": "Bash"}'
    assert "UNRELATED_TOKEN" not in request["env"] and request["env"]["CLAUDE_PROJECT_DIR"] == str(tmp_path)
    assert request["cwd"] == str(tmp_path)


def test_a_refusal_falls_back_in_process_with_the_same_stdin(fake_daemon: FakeDaemon, tmp_path: Path) -> None:
    fake_daemon.status = 409
    fake_daemon.answer = {"detail": "answer it yourself"}
    (tmp_path / "project").mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "HOOKCAGE_HOME": str(tmp_path / "home"),
           "HOOKCAGE_MANAGED_DIR": str(tmp_path / "managed")}
    payload = json.dumps({"session_id": "s", "cwd": str(tmp_path / "project")}).encode()
    proc = subprocess.run([PY, "-m", "executor.entry", "dispatch", "Stop"], input=payload,
                          capture_output=True, env=env, timeout=60)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"{}\n", b"")
    assert len(fake_daemon.received) == 1  # asked once, then answered in-process from the same bytes


def test_a_daemon_that_names_no_dialect_is_not_used(fake_daemon: FakeDaemon, tmp_path: Path) -> None:
    # Same version, older code: it would ignore --agent and answer in Claude Code's spelling.
    fake_daemon.answer = {"exit_code": 0, "stdout": "{}\n", "stderr": ""}
    (tmp_path / "project").mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "HOOKCAGE_HOME": str(tmp_path / "home"),
           "HOOKCAGE_MANAGED_DIR": str(tmp_path / "managed")}
    payload = json.dumps({"session_id": "s", "cwd": str(tmp_path / "project")}).encode()
    proc = subprocess.run([PY, "-m", "executor.entry", "dispatch", "--agent", "codebuddy", "Stop"], input=payload,
                          capture_output=True, env=env, timeout=60)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"{}\n", b"")
    [request] = fake_daemon.received  # asked once, with the agent; then answered in-process
    assert request["agent"] == "codebuddy" and request["event"] == "Stop"


# -- the real daemon ---------------------------------------------------------------------


class Setup:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.home = tmp / "home"
        self.project = tmp / "project"
        self.home.mkdir()
        self.project.mkdir()
        self.socket = self.home / "hookcage.sock"
        self.env = {
            "PATH": os.environ["PATH"],
            "HOME": str(tmp),
            "LANG": "C.UTF-8",
            "HOOKCAGE_HOME": str(self.home),
            "HOOKCAGE_MANAGED_DIR": str(tmp / "managed"),
        }
        self.daemon: subprocess.Popen[bytes] | None = None
        self.daemon_log = tmp / "daemon.log"

    def user_hooks(self, data: dict[str, Any]) -> None:
        (self.home / "hooks.json").write_text(json.dumps(data))
        allow(self.home, commands_in(data))

    def start(self, **env: str) -> subprocess.Popen[bytes]:
        log = self.daemon_log.open("ab")
        proc = subprocess.Popen([PY, "-m", "executor", "serve", "--log-level", "info"],
                                env={**self.env, **env}, stdout=log, stderr=log, cwd=self.tmp)
        log.close()
        deadline = time.monotonic() + 30
        while client.health(str(self.socket), timeout=0.5) is None:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise AssertionError(f"the daemon did not start: {self.daemon_log.read_text()}")
            time.sleep(0.05)
        self.daemon = proc
        return proc

    def stop(self) -> None:
        if self.daemon is not None and self.daemon.poll() is None:
            self.daemon.send_signal(signal.SIGTERM)
            try:
                self.daemon.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.daemon.kill()
                self.daemon.wait()
        self.daemon = None

    def dispatch(self, args: list[str], stdin: bytes, *, mode: str, env: dict[str, str] | None = None,
                 timeout: float = 60) -> tuple[int, str, str]:
        """Run `hookcage dispatch` as an agent would: ``daemon`` (no fallback possible),
        ``in-process`` (no daemon asked) or ``auto``."""
        full = {**self.env, **(env or {})}
        if mode == "daemon":
            command = [PY, "-c", THROUGH_DAEMON_ONLY, "dispatch", *args]
        else:
            command = [PY, "-m", "executor.entry", "dispatch", *args]
            if mode == "in-process":
                full["HOOKCAGE_NO_DAEMON"] = "1"
        proc = subprocess.run(command, input=stdin, capture_output=True, env=full, cwd=self.project, timeout=timeout)
        stderr = proc.stderr.decode()
        if mode == "daemon":
            stderr, imported = split_imported(stderr)
            assert not_stdlib(imported) == [], imported
        return proc.returncode, proc.stdout.decode(), stderr

    def log_lines(self) -> list[dict[str, Any]]:
        path = self.home / "runs.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines()]


def comparable(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k not in ("time", "duration_ms")} for r in records]


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[Setup]:
    s = Setup(tmp_path)
    yield s
    s.stop()


def host(command: str, **extra: Any) -> dict[str, Any]:
    return {"type": "command", "command": command, "sandbox": "host", **extra}


HOOKS = {"hooks": {
    "PreToolUse": [{"matcher": "Bash", "hooks": [host("echo 'rm is not allowed here' >&2; exit 2")]},
                   {"matcher": "Read", "hooks": [host(
                       """echo '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "ask", "permissionDecisionReason": "check"}}'""")]},
                   {"matcher": "Write", "hooks": [host(
                       """echo '{"systemMessage": "sandboxed the path", "hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow", "updatedInput": {"file_path": "/tmp/x"}}}'""")]}],
    "PostToolUse": [{"hooks": [host("true")]}],
    "UserPromptSubmit": [{"hooks": [host("echo \"root=$CLAUDE_PROJECT_DIR path=$PATH home=$HOME\"")]}],
    "Stop": [{"hooks": [host("""echo '{"continue": false, "stopReason": "enough"}'""")]}],
    "SessionStart": [{"hooks": [host("echo from-append-only")]}],
    "Notification": [{"hooks": [host("echo never-allowed")]}],
}}


def _cases(project: Path, socket_path: Path) -> list[tuple[str, list[str], bytes, dict[str, str], bool]]:
    """(name, args, stdin, extra env, answered by the daemon)."""
    cwd = str(project)

    def payload(**fields: Any) -> bytes:
        return json.dumps({"session_id": "s1", "cwd": cwd, **fields}).encode()

    bash = payload(tool_name="Bash", tool_input={"command": "rm -rf /"})
    write = {"tool_name": "Write", "tool_input": {"file_path": "/etc/x"}}
    codebuddy = payload(**write, client="CLI", version="2.163.0", generation_id="g1", model="m")
    return [
        ("block exit 2", ["PreToolUse"], bash, {}, True),
        ("block for codebuddy", ["--agent=codebuddy", "PreToolUse"], bash, {}, True),
        ("rewrite for claude", ["PreToolUse"], payload(**write), {}, True),
        ("rewrite for codebuddy by --agent", ["--agent", "codebuddy", "PreToolUse"], payload(**write), {}, True),
        ("codebuddy recognised from its payload", ["PreToolUse"], codebuddy, {}, True),
        ("--agent wins over the payload", ["PreToolUse", "--agent", "claude"], codebuddy, {}, True),
        ("unknown agent: the command line says so", ["--agent", "nosuchagent", "Stop"], payload(), {}, False),
        ("unknown agent, fail-closed", ["--agent", "nosuchagent", "Stop"], payload(), {"HOOKCAGE_FAIL_CLOSED": "1"}, False),
        ("ask", ["PreToolUse"], payload(tool_name="Read", tool_input={"file_path": "/x"}), {}, True),
        ("allow {}", ["PostToolUse"], payload(tool_name="Bash", tool_input={}, tool_response={}), {}, True),
        ("context, root from the caller's cwd", ["UserPromptSubmit"],
         json.dumps({"session_id": "s1", "prompt": "hi"}).encode(), {"PATH": "/usr/bin:/bin"}, True),
        ("event from the payload", [], payload(hook_event_name="UserPromptSubmit", prompt="hi"), {}, True),
        ("continue false", ["Stop"], payload(), {}, True),
        ("bad input exit 1", ["PreToolUse"], b"{not json", {}, True),
        ("not UTF-8", ["PreToolUse"], b"\xff\xfe{", {}, True),
        ("empty stdin", ["PreToolUse"], b"", {}, True),
        ("fail-closed exit 2", ["PreToolUse"], b"", {"HOOKCAGE_FAIL_CLOSED": "1"}, True),
        ("fail-closed from the environment blocks a bad payload", ["Stop"], b"[]", {"HOOKCAGE_FAIL_CLOSED": "yes"}, True),
        ("unknown event", ["BeforeLunch"], b"{}", {}, True),
        ("event and payload disagree", ["Stop"], payload(hook_event_name="PreToolUse"), {}, True),
        ("missing field", ["PreToolUse"], payload(), {}, True),
        ("off the allow-list", ["Notification"], payload(message="m", notification_type="idle"), {}, True),
        ("allow-list from the caller's environment", ["SessionStart"], payload(source="startup"),
         {"HOOKCAGE_ALLOW_APPEND": "echo from-append-only"}, True),
        ("run log off from the caller's environment", ["Stop"], payload(), {"HOOKCAGE_LOG_RUNS": "0"}, True),
        ("project root from CLAUDE_PROJECT_DIR", ["UserPromptSubmit"], payload(prompt="x"),
         {"CLAUDE_PROJECT_DIR": str(project / "sub")}, True),
        ("a broken setting: in-process names it", ["Stop"], payload(), {"HOOKCAGE_MAX_PARALLEL": "many"}, False),
        ("a relative cwd: in-process resolves it", ["UserPromptSubmit"],
         json.dumps({"session_id": "s1", "cwd": "sub", "prompt": "x"}).encode(), {}, False),
        ("another installation on the same socket", ["Stop"], payload(),
         {"HOOKCAGE_HOME": str(project / "sub"), "HOOKCAGE_SOCKET": str(socket_path)}, False),
    ]


def test_daemon_and_in_process_give_the_same_answer_and_run_log(setup: Setup) -> None:
    setup.user_hooks(HOOKS)
    (setup.project / "sub").mkdir()
    setup.start()
    for name, args, stdin, env, by_daemon in _cases(setup.project, setup.socket):
        before = len(setup.log_lines())
        expected = setup.dispatch(args, stdin, mode="in-process", env=env)
        middle = len(setup.log_lines())
        got = setup.dispatch(args, stdin, mode="daemon" if by_daemon else "auto", env=env)
        lines = setup.log_lines()
        assert got == expected, name
        assert comparable(lines[middle:]) == comparable(lines[before:middle]), name
    refusals = [line for line in setup.daemon_log.read_text().splitlines() if "left to the caller" in line]
    assert len(refusals) == sum(not case[-1] for case in _cases(setup.project, setup.socket)), refusals


def test_each_agent_is_answered_in_its_own_spelling_on_both_paths(setup: Setup) -> None:
    setup.user_hooks(HOOKS)
    setup.start()
    base = {"session_id": "s1", "cwd": str(setup.project), "tool_name": "Write", "tool_input": {"file_path": "/etc/x"}}
    marks = {"client": "CLI", "version": "2.163.0", "generation_id": "g1", "model": "m"}
    for args, fields, key in [(["PreToolUse"], {}, "updatedInput"),
                              (["--agent", "codebuddy", "PreToolUse"], {}, "modifiedInput"),
                              (["PreToolUse"], marks, "modifiedInput"),
                              (["--agent", "claude", "PreToolUse"], marks, "updatedInput")]:
        stdin = json.dumps({**base, **fields}).encode()
        for mode in ("daemon", "in-process"):
            code, out, err = setup.dispatch(args, stdin, mode=mode)
            answer = json.loads(out)
            assert (code, err) == (0, ""), (args, mode)
            assert answer["hookSpecificOutput"][key] == {"file_path": "/tmp/x"}, (args, fields, mode)
            assert answer["systemMessage"] == "sandboxed the path"
    code, out, err = setup.dispatch(["--agent", "nosuchagent", "Stop"], b"{}", mode="auto")
    assert (code, out) == (1, "") and err.startswith("hookcage: error: ") and "unknown agent 'nosuchagent'" in err
    assert len(err.splitlines()) == 1


def test_async_hooks_run_after_the_daemons_answer(setup: Setup) -> None:
    marker = setup.tmp / "async-ran"
    setup.user_hooks({"hooks": {"PostToolUse": [{"hooks": [host(f"sleep 1; echo x >> {marker}", **{"async": True})]}]}})
    setup.start()
    payload = json.dumps({"session_id": "s", "cwd": str(setup.project), "tool_name": "Bash",
                          "tool_input": {}, "tool_response": {}}).encode()
    started = time.monotonic()
    assert setup.dispatch(["PostToolUse"], payload, mode="daemon") == (0, "{}\n", "")
    assert time.monotonic() - started < 0.9
    deadline = time.monotonic() + 15
    while not (marker.exists() and len(setup.log_lines()) == 1) and time.monotonic() < deadline:
        time.sleep(0.05)
    [record] = setup.log_lines()
    assert marker.read_text() == "x\n" and record["async"] is True and record["exit_code"] == 0


def test_socket_is_private_and_a_second_daemon_refuses_to_start(setup: Setup) -> None:
    setup.home.chmod(0o755)
    first = setup.start()
    assert stat.S_IMODE(setup.socket.stat().st_mode) == 0o600
    assert stat.S_IMODE(setup.home.stat().st_mode) == 0o700
    second = subprocess.run([PY, "-m", "executor", "serve"], env=setup.env, capture_output=True, timeout=30)
    assert second.returncode == 1
    assert second.stderr.decode() == f"hookcage: error: another hookcage daemon (pid {first.pid}) is serving {setup.socket}\n"
    health = client.health(str(setup.socket))
    assert health is not None
    sandboxes = health.pop("sandboxes")
    assert {k: health[k] for k in ("version", "pid", "home", "socket")} == {
        "version": client.__version__, "pid": first.pid, "home": str(setup.home), "socket": str(setup.socket)}
    # The docker sandbox made at start (for the daemon's own settings): a pool, nothing started yet.
    assert [(s["backend"], s["pool"]["ready"]) for s in sandboxes] == [("docker", 0)]  # type: ignore[index]
    setup.stop()
    assert not setup.socket.exists()  # a clean stop removes it


def test_a_daemon_of_another_version_is_not_used(setup: Setup) -> None:
    setup.start()
    body = json.loads(client.encode_request("Stop", b"{}", setup.env, str(setup.project)))
    body["version"] = "0.0.1"
    status, answer = client.exchange(str(setup.socket), "POST", "/dispatch", json.dumps(body).encode(),
                                     connect_timeout=1, timeout=10)
    # a daemon of another version retires (410) and the caller starts its own (docs/daemon.md)
    assert status == 410 and "0.0.1" in json.loads(answer)["detail"]


def test_killed_mid_call_the_client_falls_back_and_a_restart_clears_the_stale_socket(setup: Setup) -> None:
    runs = setup.tmp / "runs"
    setup.user_hooks({"hooks": {"Stop": [{"hooks": [host(f"echo x >> {runs}; sleep 5")]}]}})
    daemon = setup.start()
    payload = json.dumps({"session_id": "s", "cwd": str(setup.project)}).encode()
    started = time.monotonic()
    (setup.tmp / "payload.json").write_bytes(payload)
    with (setup.tmp / "payload.json").open("rb") as stdin:
        agent = subprocess.Popen([PY, "-m", "executor.entry", "dispatch", "Stop"], stdin=stdin,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=setup.env, cwd=setup.project)
    deadline = time.monotonic() + 20
    while not runs.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert runs.exists(), "the daemon never started the hook"
    daemon.kill()  # SIGKILL: no cleanup, the socket file stays
    daemon.wait()
    out, err = agent.communicate(timeout=30)
    # Answered in-process: the hook ran a second time (5 s), nothing hung.
    assert (agent.returncode, out, err) == (0, b"{}\n", b"")
    assert runs.read_text() == "x\nx\n"
    assert time.monotonic() - started < 20
    assert setup.socket.exists()

    setup.daemon = None
    setup.user_hooks({"hooks": {"Stop": [{"hooks": [host("""echo '{"systemMessage": "restarted"}'""")]}]}})
    setup.start()
    assert "removed stale socket" in setup.daemon_log.read_text()
    assert setup.dispatch(["Stop"], payload, mode="daemon") == (0, '{"systemMessage": "restarted"}\n', "")


def test_a_daemon_that_stops_answering_costs_the_client_timeout_then_in_process(setup: Setup) -> None:
    daemon = setup.start()
    daemon.send_signal(signal.SIGSTOP)
    try:
        payload = json.dumps({"session_id": "s", "cwd": str(setup.project)}).encode()
        started = time.monotonic()
        got = setup.dispatch(["Stop"], payload, mode="auto", env={"HOOKCAGE_CLIENT_TIMEOUT": "1"})
        assert got == (0, "{}\n", "")
        assert 1 <= time.monotonic() - started < 15
    finally:
        daemon.send_signal(signal.SIGCONT)


def test_a_graceful_stop_mid_call_still_answers_and_runs_the_hook_once(setup: Setup) -> None:
    runs = setup.tmp / "runs"
    setup.user_hooks({"hooks": {"Stop": [{"hooks": [host(f"echo x >> {runs}; sleep 2; echo '{{\"systemMessage\": \"done\"}}'")]}]}})
    daemon = setup.start()
    (setup.tmp / "payload.json").write_bytes(json.dumps({"session_id": "s", "cwd": str(setup.project)}).encode())
    with (setup.tmp / "payload.json").open("rb") as stdin:
        agent = subprocess.Popen([PY, "-c", THROUGH_DAEMON_ONLY, "dispatch", "Stop"], stdin=stdin,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=setup.env, cwd=setup.project)
    deadline = time.monotonic() + 20
    while not runs.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    daemon.send_signal(signal.SIGTERM)  # systemctl stop / restart
    out, err = agent.communicate(timeout=30)
    assert (agent.returncode, out) == (0, b'{"systemMessage": "done"}\n'), err
    assert runs.read_text() == "x\n"
    daemon.wait(timeout=30)
    assert not setup.socket.exists()


def test_settings_and_hook_files_are_read_afresh_for_every_call(setup: Setup) -> None:
    setup.user_hooks({"hooks": {"UserPromptSubmit": [{"hooks": [host("echo first")]}]}})
    setup.start()
    stdin = json.dumps({"session_id": "s", "cwd": str(setup.project), "prompt": "x"}).encode()
    code, out, _ = setup.dispatch(["UserPromptSubmit"], stdin, mode="daemon")
    assert json.loads(out)["hookSpecificOutput"]["additionalContext"] == "first"
    setup.user_hooks({"hooks": {"UserPromptSubmit": [{"hooks": [host("echo second")]}]}})
    code, out, _ = setup.dispatch(["UserPromptSubmit"], stdin, mode="daemon")
    assert json.loads(out)["hookSpecificOutput"]["additionalContext"] == "second"
    (setup.home / "config.toml").write_text("[allowlist]\nallow = []\n")  # the user takes it off the list
    code, out, _ = setup.dispatch(["UserPromptSubmit"], stdin, mode="daemon")
    assert code == 0 and "not run" in json.loads(out)["systemMessage"]
    assert setup.dispatch(["UserPromptSubmit"], stdin, mode="in-process") == (code, out, "")


@pytest.mark.parametrize(("value", "expected"), [("1.5", 1.5), ("", 600.0), ("soon", 600.0), ("-1", 600.0),
                                                 ("inf", 600.0), ("nan", 600.0)])
def test_client_timeout_from_the_environment(value: str, expected: float) -> None:
    # "inf" used to reach settimeout() and end in an OverflowError traceback.
    assert client._timeout({"HOOKCAGE_CLIENT_TIMEOUT": value}) == expected
