"""The daemon (``hookcage serve``) with docker-sandboxed hooks, against the real engine.

The same answer and run log as in-process, cold or from the daemon's warm
pool; a daemon stopped with SIGTERM removes every container it made; one
killed while its hook's container runs leaves nothing behind once the reaper
has passed.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from daemon_support import PY, runs_command, wait_stopped
from daemon_support import Daemon as _Daemon
from support import OnlyThese, agent_session, allow, commands_in

from executor.sandbox.docker import EXPIRES_LABEL, reap

pytestmark = pytest.mark.docker


class Daemon(_Daemon):
    def __init__(self, tmp: Path, workspace: Path) -> None:
        (tmp / "home").mkdir()
        super().__init__(tmp / "home", tmp / "managed", workspace, tmp / "daemon.log")
        self.tmp = tmp
        self.session = agent_session("daemon")

    def hooks(self, **events: list[dict[str, Any]]) -> None:
        """User hooks: ``Event=[handler, ...]``."""
        self.user_hooks({"hooks": {event: [{"hooks": handlers}] for event, handlers in events.items()}})

    def payload(self, **fields: Any) -> bytes:
        return json.dumps({"session_id": self.session, "cwd": str(self.project), **fields}).encode()


def command(line: str, **extra: Any) -> dict[str, Any]:
    return {"type": "command", "command": line, **extra}


@pytest.fixture
def daemon(tmp_path: Path, workspace: Path, runner_image: str) -> Iterator[Daemon]:
    d = Daemon(tmp_path, workspace)
    yield d
    d.stop()


def test_a_docker_hook_answers_the_same_through_the_daemon(daemon: Daemon) -> None:
    daemon.hooks(PreToolUse=[command("test -r README.md && cat >/dev/null && echo \"from $(hostname)\" >&2 && exit 2")])
    daemon.start()
    stdin = daemon.payload(tool_name="Bash", tool_input={"command": "ls"})
    expected = daemon.dispatch("PreToolUse", stdin, daemon=False)
    got = daemon.dispatch("PreToolUse", stdin, daemon=True)
    code, stdout, stderr = expected
    assert (code, stderr) == (0, "")  # a block keeps its whole answer: JSON, exit 0
    assert json.loads(stdout)["hookSpecificOutput"] == {
        "hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "from hookcage"}
    assert got == expected
    first, second = daemon.log_lines()
    assert first == second and first["sandbox"].startswith("docker(") and first["exit_code"] == 2


def test_the_second_run_is_warm_and_answers_as_in_process(daemon: Daemon) -> None:
    daemon.hooks(UserPromptSubmit=[command("echo \"$(jq -r .prompt) in $(pwd) on $(hostname)\"; cat /proc/1/comm >&2")])
    daemon.start()
    stdin = daemon.payload(prompt="hello")
    expected = daemon.dispatch("UserPromptSubmit", stdin, daemon=False)
    context = json.loads(expected[1])["hookSpecificOutput"]["additionalContext"]
    assert (expected[0], context, expected[2]) == (0, f"hello in {daemon.project} on hookcage", "")

    assert daemon.dispatch("UserPromptSubmit", stdin, daemon=True) == expected
    cold = daemon.wait_ready(2)  # the run made its container shape known: the pool fills it
    assert (cold["cold"], cold["warm"]) == (1, 0)
    assert daemon.dispatch("UserPromptSubmit", stdin, daemon=True) == expected
    warm = daemon.pool()
    assert (warm["cold"], warm["warm"], warm["fallbacks"]) == (1, 1, 0)
    [sandbox] = daemon.health()["sandboxes"]
    assert sandbox["backend"] == "docker" and sandbox["profile"]["pool_size"] == 2
    in_process, cold_run, warm_run = daemon.log_lines()
    assert in_process == cold_run == warm_run


def test_sigterm_removes_every_container_of_the_daemon(daemon: Daemon, docker_api: Any) -> None:
    daemon.hooks(UserPromptSubmit=[command("sleep 3; echo done")])
    daemon.start()
    stdin = daemon.payload(prompt="x")
    expected = (0, json.dumps({"hookSpecificOutput": {"hookEventName": "UserPromptSubmit",
                                                      "additionalContext": "done"}}) + "\n", "")
    assert daemon.dispatch("UserPromptSubmit", stdin, daemon=True) == expected
    daemon.wait_ready(2)
    # A warm run in flight when SIGTERM comes: answered first, then everything goes.
    (daemon.tmp / "payload.json").write_bytes(stdin)
    argv, env = daemon.command("UserPromptSubmit", daemon=True)
    with (daemon.tmp / "payload.json").open("rb") as payload:
        agent = subprocess.Popen(argv, stdin=payload, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 env=env, cwd=daemon.project)
    deadline = time.monotonic() + 30
    while not any(runs_command(docker_api, c["Id"], "sleep 3") for c in daemon.containers(docker_api)):
        assert time.monotonic() < deadline, "the hook never started in a pooled container"
        time.sleep(0.05)
    made = {c["Id"] for c in daemon.containers(docker_api, daemon.session)}
    assert len(made) >= 2  # the warm run's and the spare not taken (the cold run's is gone)

    # uvicorn re-raises the signal once it has shut down: the exit status says SIGTERM.
    assert daemon.stop() in (0, -signal.SIGTERM)
    out, err = agent.communicate(timeout=30)
    assert (agent.returncode, out.decode(), err.decode()) == expected
    assert daemon.containers(docker_api, daemon.session) == []
    assert not daemon.socket.exists()
    assert "closing a sandbox failed" not in daemon.log.read_text()


@pytest.mark.parametrize("path", ["cold", "warm"])
def test_killed_mid_run_the_client_falls_back_and_the_reaper_removes_the_container(
    daemon: Daemon, docker_api: Any, path: str
) -> None:
    # A timeout well past the test's length: the containers' expiry labels stay
    # ahead of reaps that other sessions sharing the engine may run meanwhile.
    # The hook runs long enough (10 s) to be seen running by a poll that lists and inspects the
    # session's containers, which a loaded engine (CI's other workers) can take seconds to answer.
    daemon.hooks(Stop=[command("sleep 10", timeout=120)], UserPromptSubmit=[command("true")])
    proc = daemon.start()
    if path == "warm":  # the same container shape: the Stop hook then runs in a pooled container
        assert daemon.dispatch("UserPromptSubmit", daemon.payload(prompt="x"), daemon=True)[0] == 0
        daemon.wait_ready(2)
    (daemon.tmp / "payload.json").write_bytes(daemon.payload())
    with (daemon.tmp / "payload.json").open("rb") as stdin:
        agent = subprocess.Popen([PY, "-m", "executor.entry", "dispatch", "Stop"], stdin=stdin,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=daemon.env, cwd=daemon.project)
    deadline = time.monotonic() + 60
    hook: list[str] = []
    while not hook:
        assert time.monotonic() < deadline, "the daemon never started the hook's container"
        time.sleep(0.05)
        hook = [c["Id"] for c in daemon.containers(docker_api, daemon.session)
                if c["State"] == "running" and runs_command(docker_api, c["Id"], "sleep 10")]
    proc.kill()  # SIGKILL: the daemon can remove neither its hook's container nor its pool's
    proc.wait()
    out, err = agent.communicate(timeout=60)
    assert (agent.returncode, out, err) == (0, b"{}\n", b"")  # answered in-process (the hook ran again)

    # The in-process run removed its own container; the daemon's are left for the reaper:
    # the hook's, runs to its end; the pool's, exit at once (their stdin ended with the daemon).
    # Any `hookcage serve` started meanwhile on this engine (other test sessions share it) removes
    # them at once (their owner is dead: executor.sandbox.orphans): what is left is what it missed.
    left = daemon.containers(docker_api, daemon.session)
    wait_stopped(docker_api, {c["Id"] for c in left})
    # What the next reap does once their expiry has passed; shown only these
    # containers, so other sessions sharing the engine are left alone.
    if left:
        expiry = max(float(c["Labels"][EXPIRES_LABEL]) for c in left)
        reap(OnlyThese(docker_api, {c["Id"] for c in left}), now=expiry + 1)
    assert daemon.containers(docker_api, daemon.session) == []


def test_trust_granted_while_the_daemon_runs_takes_effect_at_once(daemon: Daemon) -> None:
    hooks = daemon.project / ".hookcage" / "hooks.json"
    hooks.parent.mkdir(exist_ok=True)
    hooks.parent.chmod(0o755)
    data = {"hooks": {"UserPromptSubmit": [{"hooks": [command("echo reviewed")]}]}}
    hooks.write_text(json.dumps(data))
    hooks.chmod(0o644)
    allow(daemon.home, commands_in(data))
    daemon.start()
    stdin = daemon.payload(prompt="x")
    code, out, _ = daemon.dispatch("UserPromptSubmit", stdin, daemon=True)
    assert code == 0 and "not trusted yet" in json.loads(out)["systemMessage"]
    trust = subprocess.run([PY, "-m", "executor", "trust", "--all", "--yes", "--project", str(daemon.project)],
                           env=daemon.env, capture_output=True, text=True, timeout=120)
    assert trust.returncode == 0, trust.stderr
    code, out, _ = daemon.dispatch("UserPromptSubmit", stdin, daemon=True)
    assert json.loads(out) == {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit",
                                                      "additionalContext": "reviewed"}}
    assert daemon.dispatch("UserPromptSubmit", stdin, daemon=False) == (code, out, "")

