"""The daemon an event starts itself (issue 23): real processes, as an agent spawns them.

Every call is a fresh ``python -m executor.entry dispatch EVENT`` with
``HOOKCAGE_DAEMON=auto`` (the suite defaults to ``off``) and a private
``HOOKCAGE_HOME``; the expected answer is the in-process one
(``HOOKCAGE_NO_DAEMON=1``). Each test stops the daemons it caused and fails
if a process serving its socket is left (the containers are checked by the
suite's ``no_leftover_containers``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from daemon_support import clean_env
from support import POOL_OWNERS, agent_session, allow, commands_in

import executor
from executor.sandbox.docker import MANAGED_LABEL
from executor.sandbox.pool import POOL_LABEL
from executor.service import autostart, client

pytestmark = pytest.mark.docker

PY = sys.executable
PACKAGE = Path(executor.__file__).resolve().parent


def host(command: str, **extra: Any) -> dict[str, Any]:
    return {"type": "command", "command": command, "sandbox": "host", "timeout": 60, **extra}


def serving(socket: Path) -> list[int]:
    """Pids of the live processes started as a daemon for ``socket`` (their command line names it)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = (Path("/proc") / entry / "cmdline").read_bytes().split(b"\0")
            state = (Path("/proc") / entry / "stat").read_bytes().rpartition(b")")[2].split()[0]
        except OSError:
            continue
        if state != b"Z" and b"serve" in argv and str(socket).encode() in argv:
            found.append(int(entry))
    return found


def running(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_bytes().rpartition(b")")[2].split()[0]
    except OSError:
        return False
    return state != b"Z"


def wait_until(what: str, check: Any, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.05)
    return found


class Agent:
    """An agent's environment with a private hookcage home; its dispatches; the daemons they start."""

    def __init__(self, tmp: Path, project: Path) -> None:
        self.tmp = tmp
        self.home = tmp / "home"
        self.home.mkdir()
        self.project = project
        self.socket = self.home / client.SOCKET_NAME
        self.log = self.home / autostart.LOG_NAME
        self.env = {**clean_env(self.home, tmp / "managed"), "HOOKCAGE_DAEMON": "auto",
                    "HOOKCAGE_DAEMON_IDLE_TIMEOUT": "300"}
        self.session = agent_session("autostart")
        self.pids: set[int] = set()
        self.calls = 0
        self.callers: list[subprocess.Popen[bytes]] = []

    def hooks(self, **events: list[dict[str, Any]]) -> None:
        data = {"hooks": {event: [{"hooks": handlers}] for event, handlers in events.items()}}
        (self.home / "hooks.json").write_text(json.dumps(data))
        allow(self.home, commands_in(data))

    def payload(self, **fields: Any) -> bytes:
        return json.dumps({"session_id": self.session, "cwd": str(self.project), **fields}).encode()

    def start(self, event: str, stdin: bytes, **env: str) -> subprocess.Popen[bytes]:
        """A dispatch left running (its stdin a file, so several run at once)."""
        self.calls += 1
        path = self.tmp / f"stdin-{self.calls}"
        path.write_bytes(stdin)
        with path.open("rb") as handle:
            proc = subprocess.Popen([PY, "-m", "executor.entry", "dispatch", event], stdin=handle,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**self.env, **env},
                                    cwd=self.project)
        self.callers.append(proc)
        return proc

    def dispatch(self, event: str, stdin: bytes, **env: str) -> tuple[int, str, str]:
        proc = subprocess.run([PY, "-m", "executor.entry", "dispatch", event], input=stdin, capture_output=True,
                              env={**self.env, **env}, cwd=self.project, timeout=180)
        self.note()
        return proc.returncode, proc.stdout.decode(), proc.stderr.decode()

    def in_process(self, event: str, stdin: bytes, **env: str) -> tuple[int, str, str]:
        return self.dispatch(event, stdin, HOOKCAGE_NO_DAEMON="1", **env)

    def health(self) -> dict[str, Any] | None:
        return client.health(str(self.socket), timeout=5.0)

    def note(self) -> None:
        """Remember the daemons serving our socket (their pools' containers are this session's)."""
        for pid in serving(self.socket):
            self.pids.add(pid)
            POOL_OWNERS.add(str(pid))

    def serve(self, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([PY, "-m", "executor", "serve", *args], capture_output=True, text=True,
                              env={**self.env, **env}, timeout=120)

    def cleanup(self) -> list[int]:
        """Stop what serves our socket; the pids that had to be killed (left behind)."""
        for proc in self.callers:  # a test that failed half-way: its callers may still start a daemon
            if proc.poll() is None:
                proc.kill()
            proc.communicate()
        self.note()
        autostart.stop(str(self.socket), wait=60)
        left = serving(self.socket)
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        return left


@pytest.fixture
def agent(tmp_path: Path, workspace: Path, runner_image: str) -> Iterator[Agent]:
    a = Agent(tmp_path, workspace)
    yield a
    left = a.cleanup()
    assert left == [], f"daemons left behind: {left}"
    assert not a.socket.exists()


def answering(agent: Agent) -> dict[str, Any]:
    health = agent.health()
    assert health is not None, f"no daemon answers: {agent.log.read_text() if agent.log.exists() else ''}"
    return health


def test_concurrent_first_events_start_exactly_one_daemon(agent: Agent) -> None:
    agent.hooks(UserPromptSubmit=[host("echo context")])
    stdin = agent.payload(prompt="hi")
    expected = agent.in_process("UserPromptSubmit", stdin)
    assert expected[0] == 0 and "context" in expected[1]
    assert not agent.socket.exists()

    callers = [agent.start("UserPromptSubmit", stdin) for _ in range(5)]
    answers = []
    for proc in callers:
        out, err = proc.communicate(timeout=120)
        answers.append((proc.returncode, out.decode(), err.decode()))
    agent.note()
    assert answers == [expected] * 5
    assert len(serving(agent.socket)) == 1 and len(agent.pids) == 1
    health = answering(agent)
    assert health["pid"] in agent.pids and health["requests"] == 5
    assert agent.log.read_text().count("answering on") == 1


def test_the_daemon_outlives_the_agent_then_stops_when_idle_removing_its_pool(
    agent: Agent, docker_api: Any
) -> None:
    agent.hooks(UserPromptSubmit=[{"type": "command", "command": "echo pooled"}])
    stdin = agent.payload(prompt="hi")
    expected = agent.in_process("UserPromptSubmit", stdin)
    assert expected[0] == 0 and "pooled" in expected[1]
    # The agent: a process group whose dispatch starts the daemon; then the whole group is killed
    # (the agent quits, its terminal closes).
    (agent.tmp / "stdin").write_bytes(stdin)
    out = agent.tmp / "answer"
    line = f"{PY} -m executor.entry dispatch UserPromptSubmit <{agent.tmp / 'stdin'} >{out}.part && mv {out}.part {out}"
    session = subprocess.Popen(["sh", "-c", f"{line}; sleep 120"], env={**agent.env, "HOOKCAGE_DAEMON_IDLE_TIMEOUT": "8"},
                               cwd=agent.project, start_new_session=True)
    try:
        wait_until("the agent's event was answered", out.exists, timeout=120)
    finally:
        os.killpg(session.pid, signal.SIGKILL)
        session.wait()
    assert out.read_text() == expected[1]
    agent.note()
    [pid] = agent.pids
    assert running(pid)  # the agent and its dispatch are gone; the daemon is not

    def pool() -> list[Any]:
        return list(docker_api.containers(all=True, filters={"label": [f"{MANAGED_LABEL}=true", f"{POOL_LABEL}={pid}"]}))

    wait_until("the pool holds a ready container", pool)
    health = answering(agent)
    assert (health["idle_timeout"], health["requests"]) == (8, 1)

    wait_until("the daemon stopped when idle", lambda: not running(pid), timeout=90)
    assert not agent.socket.exists()
    assert pool() == []
    assert "stopping: idle for 8 s" in agent.log.read_text()


def copy_of_hookcage(tmp: Path, version: str | None = None) -> Path:
    """hookcage's package copied under ``tmp/NAME`` (another installation); its parent directory."""
    parent = tmp / f"hookcage-{version or 'copy'}"
    shutil.copytree(PACKAGE, parent / "executor", ignore=shutil.ignore_patterns("__pycache__"))
    if version is not None:
        init = parent / "executor" / "__init__.py"
        init.write_text(init.read_text().replace(f'__version__ = "{executor.__version__}"',
                                                 f'__version__ = "{version}"'))
    return parent


@pytest.mark.parametrize("change", ["another installation", "another version", "edited in place"])
def test_an_upgraded_hookcage_retires_the_old_daemon(agent: Agent, tmp_path: Path, change: str) -> None:
    agent.hooks(UserPromptSubmit=[host("echo context")])
    stdin = agent.payload(prompt="hi")
    expected = agent.in_process("UserPromptSubmit", stdin)
    old = copy_of_hookcage(tmp_path, "0.0.9" if change == "another version" else None)
    old_env = {"PYTHONPATH": str(old)}
    assert agent.dispatch("UserPromptSubmit", stdin, **old_env) == expected
    [first] = agent.pids
    assert answering(agent)["code"].startswith(f"{old / 'executor'}:")

    if change == "edited in place":
        # An editable install edited (or upgraded in place): the daemon sees its own files change.
        os.utime(old / "executor" / "service" / "answer.py")
        wait_until("the old daemon retired itself", lambda: not running(first), timeout=60)
        assert not agent.socket.exists()
        assert agent.dispatch("UserPromptSubmit", stdin, **old_env) == expected
    else:
        # This hookcage's first event: the old daemon answers "retire", the event starts the new one.
        assert agent.dispatch("UserPromptSubmit", stdin) == expected
        wait_until("the old daemon is gone", lambda: not running(first), timeout=60)
        assert answering(agent)["code"] == client.code_stamp()  # this test's hookcage
    [second] = serving(agent.socket)
    assert second != first
    assert "stopping: " in agent.log.read_text()


def test_a_daemon_killed_with_sigkill_leaves_a_socket_the_next_event_recovers(agent: Agent) -> None:
    agent.hooks(UserPromptSubmit=[host("echo context")])
    stdin = agent.payload(prompt="hi")
    expected = agent.in_process("UserPromptSubmit", stdin)
    assert agent.dispatch("UserPromptSubmit", stdin) == expected
    [first] = agent.pids
    os.kill(first, signal.SIGKILL)
    wait_until("the daemon died", lambda: not running(first))
    assert agent.socket.exists() and (agent.home / "hookcage.sock.lock").exists()  # left by the killed daemon

    assert agent.dispatch("UserPromptSubmit", stdin) == expected
    [second] = serving(agent.socket)
    assert second != first and answering(agent)["pid"] == second


def test_a_caller_killed_while_starting_the_daemon_leaves_no_lock_behind(agent: Agent) -> None:
    agent.hooks(UserPromptSubmit=[host("echo context")])
    stdin = agent.payload(prompt="hi")
    expected = agent.in_process("UserPromptSubmit", stdin)
    starter = agent.start("UserPromptSubmit", stdin)
    # It holds daemon.start.lock while its daemon starts: kill it then.
    [daemon] = wait_until("the daemon was spawned", lambda: serving(agent.socket))
    starter.kill()
    starter.communicate()
    assert agent.dispatch("UserPromptSubmit", stdin) == expected  # the lock went with its holder
    agent.note()
    assert serving(agent.socket) == [daemon]  # the one the killed caller started, no second one


def broken_daemon(tmp: Path) -> dict[str, str]:
    """A hookcage whose daemon cannot start (an import it needs fails), the in-process CLI intact:
    the environment of its callers."""
    parent = copy_of_hookcage(tmp)
    daemon = parent / "executor" / "service" / "daemon.py"
    daemon.write_text(daemon.read_text() + "\nraise ImportError('fastapi is broken on this machine')\n")
    return {"PYTHONPATH": str(parent)}


@pytest.mark.parametrize("why", ["dependencies broken", "home unusable"])
def test_a_daemon_that_cannot_start_is_said_once_and_the_event_answered_in_process(
    agent: Agent, tmp_path: Path, why: str
) -> None:
    agent.hooks(UserPromptSubmit=[host("echo context")])
    stdin = agent.payload(prompt="hi")
    if why == "dependencies broken":
        env = broken_daemon(tmp_path)
    else:
        env = {}
        (agent.home / autostart.START_LOCK).mkdir()  # the start lock cannot be opened
    code, out, err = expected = agent.in_process("UserPromptSubmit", stdin, **env)
    assert code == 0 and "context" in out

    started = time.monotonic()
    got = agent.dispatch("UserPromptSubmit", stdin, **env)
    assert time.monotonic() - started < autostart.START_WAIT + 60  # never a hang
    said = [line for line in got[2].splitlines() if line not in err.splitlines()]
    assert got[:2] == expected[:2] and len(said) == 1, got
    assert said[0].startswith("hookcage: ") and "answered in-process" in said[0]
    if why == "dependencies broken":
        assert "exited at start" in said[0] and "fastapi is broken" in agent.log.read_text()
        # Said once: the next events do not try again for a while, and say nothing.
        assert agent.dispatch("UserPromptSubmit", stdin, **env) == expected
    assert serving(agent.socket) == [] and agent.health() is None


@pytest.mark.parametrize("how", ["killed mid-way", "cannot start"])
def test_a_gating_event_is_never_allowed_because_the_daemon_is_unreachable(
    agent: Agent, tmp_path: Path, how: str
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    guard = f"echo $$ >{marks}/$$; sleep 3; echo 'rm is not allowed here' >&2; exit 2"
    agent.hooks(PreToolUse=[host(guard)])
    stdin = agent.payload(tool_name="Bash", tool_input={"command": "rm -rf /"})
    env = {}
    if how == "cannot start":
        env = broken_daemon(tmp_path)
    expected = agent.in_process("PreToolUse", stdin, **env)
    denied = json.loads(expected[1])["hookSpecificOutput"]
    assert (expected[0], denied["permissionDecision"]) == (0, "deny")
    for mark in marks.iterdir():
        mark.unlink()

    if how == "killed mid-way":
        assert agent.dispatch("UserPromptSubmit", agent.payload(prompt="x")) == (0, "{}\n", "")  # started
        [daemon] = agent.pids
        caller = agent.start("PreToolUse", stdin)
        wait_until("the daemon ran the guard", lambda: list(marks.iterdir()))
        os.kill(daemon, signal.SIGKILL)
        out, err = caller.communicate(timeout=120)
        got = (caller.returncode, out.decode(), err.decode())
        assert got == expected  # answered in-process: the guard ran again and denied
        for mark in marks.iterdir():  # the killed daemon's guard ends on its own: wait for it
            wait_until("the orphaned guard ended", lambda mark=mark: not running(int(mark.read_text())))
        agent.socket.unlink()  # the killed daemon's (the next event would clear it: test above)
    else:
        answer = agent.dispatch("PreToolUse", stdin, **env)
        assert answer[:2] == expected[:2] and "answered in-process" in answer[2]


def test_serve_status_and_stop(agent: Agent) -> None:
    status = agent.serve("--status")
    assert status.returncode == 1 and "no hookcage daemon answers" in status.stdout
    agent.hooks(UserPromptSubmit=[host("echo context")])
    stdin = agent.payload(prompt="hi")
    assert agent.dispatch("UserPromptSubmit", stdin)[0] == 0
    [pid] = agent.pids

    status = agent.serve("--status")
    assert status.returncode == 0, status.stderr
    lines = [line.strip() for line in status.stdout.splitlines()]
    assert f"pid: {pid}" in lines and f"version: {executor.__version__}" in lines
    assert "requests: 1" in lines and any(line.startswith("idle timeout: 300 s") for line in lines)
    assert f"log: {agent.log}" in lines

    stop = agent.serve("--stop")
    assert (stop.returncode, stop.stdout) == (0, f"stopped the hookcage daemon (pid {pid}) on {agent.socket}\n")
    assert not running(pid) and not agent.socket.exists()
    assert "asked to stop" in agent.log.read_text()
    assert agent.serve("--stop").stdout.startswith("no hookcage daemon answers")
    mixed = agent.serve("--status", "--listen", "127.0.0.1:0")
    assert mixed.returncode == 1 and "take --socket only" in mixed.stderr


def test_with_hookcage_daemon_off_no_daemon_is_started_but_a_running_one_is_used(agent: Agent) -> None:
    agent.hooks(UserPromptSubmit=[host("echo context")])
    stdin = agent.payload(prompt="hi")
    expected = agent.in_process("UserPromptSubmit", stdin)
    assert agent.dispatch("UserPromptSubmit", stdin, HOOKCAGE_DAEMON="off") == expected
    assert serving(agent.socket) == [] and not agent.socket.exists()
    assert agent.dispatch("UserPromptSubmit", stdin) == expected  # auto: started
    assert agent.dispatch("UserPromptSubmit", stdin, HOOKCAGE_DAEMON="off") == expected
    assert answering(agent)["requests"] == 2
