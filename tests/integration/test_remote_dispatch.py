"""``hookcage dispatch`` with ``HOOKCAGE_URL`` against a real ``hookcage serve --listen`` and the real engine.

- a client installed with ``pip install --no-deps`` in a fresh virtual
  environment (hookcage's dependencies cannot be imported there) gets the
  same answers, exit codes and run log as an in-process dispatch;
- a wrong token is refused and nothing runs;
- the service killed (SIGKILL) while a hook's container runs: the client
  falls back per ``HOOKCAGE_ON_ERROR`` at once, the container ends itself
  past the hook's timeout with no hookcage process left to kill it, and the
  service's next start removes every container the killed one left;
- a container nobody watches ends itself past its timeout (the watch of
  ``executor.sandbox.docker.self_ending``);
- four agents at once, every answer checked (the load benchmark's
  correctness, without timing: ``benchmarks/bench.py`` has the figures).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
import venv
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker.errors  # type: ignore[import-untyped, unused-ignore]
import pytest
from daemon_support import SERVE, runs_command
from daemon_support import Daemon as _Daemon
from support import POOL_OWNERS, agent_session

from executor.sandbox.base import RunRequest
from executor.sandbox.docker import SELF_END_GRACE, DockerProfile, container_args
from executor.service import client

pytestmark = pytest.mark.docker

REPO = Path(__file__).resolve().parents[2]
TOKEN = "remote-dispatch-test-token-" + os.urandom(6).hex()
LISTENING = re.compile(r"answering on (https?://127\.0\.0\.1:\d+)")


class Service(_Daemon):
    """``hookcage serve --listen 127.0.0.1:0`` on a temporary home; agents reach it by URL."""

    def __init__(self, tmp: Path, workspace: Path) -> None:
        (tmp / "home").mkdir()
        super().__init__(tmp / "home", tmp / "managed", workspace, tmp / "service.log")
        self.tmp = tmp
        self.session = agent_session("remote")
        self.url = ""

    def start_listening(self, *options: str) -> subprocess.Popen[bytes]:
        """Start the service with ``--listen`` (a free port), the token and ``options``; wait until TCP answers."""
        self.started_at = time.time()
        seen = len(self.log.read_text()) if self.log.exists() else 0
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen([*SERVE, "--listen", "127.0.0.1:0", "--log-level", "info", *options],
                                         env={**self.env, "HOOKCAGE_TOKEN": TOKEN},
                                         stdout=log, stderr=log, cwd=self.home)
        deadline = time.monotonic() + 60
        while True:
            found = LISTENING.search(self.log.read_text()[seen:])
            if found and (health := client.health(str(self.socket), timeout=0.5)) is not None:
                break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError(f"the service did not start: {self.log.read_text()[seen:]}")
            time.sleep(0.05)
        self.url = found.group(1)
        self.pid = int(str(health["pid"]))
        POOL_OWNERS.add(str(self.pid))  # its pool's containers are this test session's
        return self.proc

    def hooks(self, **events: list[dict[str, Any]]) -> None:
        self.user_hooks({"hooks": {event: [{"hooks": handlers}] for event, handlers in events.items()}})

    def payload(self, **fields: Any) -> bytes:
        return json.dumps({"session_id": self.session, "cwd": str(self.project), **fields}).encode()

    def agent_env(self, **extra: str) -> dict[str, str]:
        """An agent's environment: the URL and token, and nothing of the service's settings."""
        env = {"PATH": os.environ["PATH"], "HOME": str(self.tmp / "agent-home"), "LANG": "C.UTF-8",
               "HOOKCAGE_URL": self.url, "HOOKCAGE_TOKEN": TOKEN}
        env.update(extra)
        return env

    def remote(self, argv: list[str], args: list[str], stdin: bytes, **extra: str) -> tuple[int, str, str]:
        """``ARGV dispatch ARGS`` as an agent in another container runs it: only the URL and token set."""
        proc = subprocess.run([*argv, "dispatch", *args], input=stdin, capture_output=True,
                              env=self.agent_env(**extra), cwd=self.project, timeout=120)
        return proc.returncode, proc.stdout.decode(), proc.stderr.decode()

    def in_process(self, args: list[str], stdin: bytes) -> tuple[int, str, str]:
        """The same call answered in-process with the service's own home and settings."""
        proc = subprocess.run([sys.executable, "-m", "executor.entry", "dispatch", *args], input=stdin,
                              capture_output=True, env={**self.env, "HOOKCAGE_NO_DAEMON": "1"},
                              cwd=self.project, timeout=120)
        return proc.returncode, proc.stdout.decode(), proc.stderr.decode()


LOCAL_CLIENT = [sys.executable, "-m", "executor.entry"]


def command(line: str, **extra: Any) -> dict[str, Any]:
    return {"type": "command", "command": line, **extra}


@pytest.fixture
def service(tmp_path: Path, workspace: Path, runner_image: str) -> Iterator[Service]:
    s = Service(tmp_path, workspace)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def bare_client(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``hookcage`` of a fresh virtual environment holding hookcage alone: ``pip install --no-deps``."""
    where = tmp_path_factory.mktemp("bare-client") / "venv"
    venv.create(where, with_pip=True, clear=True)
    python = where / "bin" / "python"
    proc = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", str(REPO)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for dependency in ("click", "pydantic", "docker", "fastapi", "platformdirs"):
        probe = subprocess.run([str(python), "-c", f"import {dependency}"], capture_output=True, timeout=60)
        assert probe.returncode != 0, f"{dependency} is importable in the bare environment"
    return where / "bin" / "hookcage"


HOOKS: dict[str, list[dict[str, Any]]] = {
    "PreToolUse": [command("cat >/dev/null; echo \"from $(hostname)\" >&2; exit 2")],
    "UserPromptSubmit": [command("echo \"$(jq -r .prompt) in $(pwd)\"")],
    "Stop": [command("""echo '{"continue": false, "stopReason": "enough"}'""")],
    "Notification": [command("exit 3")],
}


def cases(s: Service) -> list[tuple[list[str], bytes]]:
    return [
        (["PreToolUse"], s.payload(tool_name="Bash", tool_input={"command": "ls"})),
        (["UserPromptSubmit"], s.payload(prompt="hello")),
        (["Stop"], s.payload()),
        (["Notification"], s.payload(message="m", notification_type="idle")),
        (["--agent", "codebuddy", "PreToolUse"], s.payload(tool_name="Bash", tool_input={"command": "ls"})),
        (["PreToolUse"], b"{not json"),
    ]


def test_a_client_without_dependencies_answers_as_in_process(service: Service, bare_client: Path) -> None:
    service.hooks(**HOOKS)
    service.start_listening()
    answers = []
    for args, stdin in cases(service):
        before = len(service.log_lines())
        expected = service.in_process(args, stdin)
        middle = len(service.log_lines())
        got = service.remote([str(bare_client)], args, stdin)
        assert got == expected, (args, got, expected)
        # The service wrote the same run-log records as the in-process run did.
        records = service.log_lines()
        assert records[middle:] == records[before:middle], args
        answers.append(got)
    pre, prompt, stop, notification, _codebuddy, broken = answers
    assert pre[0] == 0 and "from hookcage" in pre[1]  # a block in the JSON, from the container
    assert json.loads(prompt[1])["hookSpecificOutput"]["additionalContext"] == f"hello in {service.project}"
    assert json.loads(stop[1]) == {"continue": False, "stopReason": "enough"}
    assert notification[0] == 0
    assert broken == (1, "", "hookcage: stdin is not valid JSON (line 1, column 2)\n")


def test_a_wrong_token_is_refused_and_nothing_runs(service: Service, bare_client: Path) -> None:
    service.hooks(Stop=[command("echo ran >&2")])
    service.start_listening()
    for extra, code, verdict in (({}, 2, "blocked (HOOKCAGE_ON_ERROR=deny)"),
                                 ({"HOOKCAGE_ON_ERROR": "allow"}, 0, "allowed (HOOKCAGE_ON_ERROR=allow)")):
        got = service.remote([str(bare_client)], ["Stop"], service.payload(), HOOKCAGE_TOKEN="x" * 32, **extra)
        assert got == (code, "", f"hookcage: error: the hookcage service at {service.url} did not answer "
                                 f"(HTTP 401: the token was refused; wrong bearer token): {verdict}\n")
    assert service.log_lines() == []  # nothing judged, nothing run
    assert service.remote([str(bare_client)], ["Stop"], service.payload()) == (0, "{}\n", "")  # the right token
    [record] = service.log_lines()
    assert record["outcome"] == "ran" and record["exit_code"] == 0


def test_https_with_a_private_ca(service: Service, bare_client: Path, tmp_path: Path) -> None:
    import trustme

    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    cert_file, key_file, ca_file = tmp_path / "cert.pem", tmp_path / "key.pem", tmp_path / "ca.pem"
    cert.cert_chain_pems[0].write_to_path(str(cert_file))
    cert.private_key_pem.write_to_path(str(key_file))
    key_file.chmod(0o600)
    ca.cert_pem.write_to_path(str(ca_file))
    service.hooks(Stop=[command("""echo '{"systemMessage": "over TLS"}'""")])
    service.start_listening("--tls-cert", str(cert_file), "--tls-key", str(key_file))
    assert service.url.startswith("https://")
    answer = (0, '{"systemMessage": "over TLS"}\n', "")
    assert service.remote([str(bare_client)], ["Stop"], service.payload(), HOOKCAGE_CA_FILE=str(ca_file)) == answer
    # Without the CA the certificate is not trusted: nothing is sent, the fallback says why.
    code, out, err = service.remote([str(bare_client)], ["Stop"], service.payload())
    assert (code, out) == (2, "") and "(TLS: " in err and "certificate" in err, err
    assert len(service.log_lines()) == 1


@pytest.mark.parametrize("size", [10_000, 20_000_000], ids=["small", "sent-while-refused"])
def test_an_event_larger_than_the_service_takes_is_413_and_nothing_runs(
    service: Service, bare_client: Path, size: int
) -> None:
    service.hooks(UserPromptSubmit=[command("echo ran")])
    service.start_listening("--max-body", "4096")
    big = service.payload(prompt="x" * size)
    for extra, code, verdict in (({}, 2, "blocked (HOOKCAGE_ON_ERROR=deny)"),
                                 ({"HOOKCAGE_ON_ERROR": "allow"}, 0, "allowed (HOOKCAGE_ON_ERROR=allow)")):
        got = service.remote([str(bare_client)], ["UserPromptSubmit"], big, **extra)
        assert got[:2] == (code, "")
        assert got[2].startswith(f"hookcage: error: the hookcage service at {service.url} did not answer "
                                 "(HTTP 413: the request is larger than the service accepts"), got[2]
        assert got[2].endswith(f"): {verdict}\n")
    assert service.log_lines() == []
    small = service.remote([str(bare_client)], ["UserPromptSubmit"], service.payload(prompt="x"))
    assert small[0] == 0 and "ran" in small[1]


@pytest.mark.parametrize("path", ["cold", "warm"])
def test_a_service_killed_mid_run_leaves_no_container(
    service: Service, docker_api: Any, path: str
) -> None:
    # Long enough that the hook's container is surely still running when the client
    # has answered; it ends itself SELF_END_GRACE seconds past this.
    hook_timeout = 20
    service.hooks(Stop=[command("sleep 3600", timeout=hook_timeout)], UserPromptSubmit=[command("true")])
    proc = service.start_listening()
    killed_pid = service.pid
    if path == "warm":  # the same container shape: the Stop hook then runs in a pooled container
        assert service.remote(LOCAL_CLIENT, ["UserPromptSubmit"], service.payload(prompt="x"))[0] == 0
        service.wait_ready(2)
    (service.tmp / "payload.json").write_bytes(service.payload())
    with (service.tmp / "payload.json").open("rb") as stdin:
        agent = subprocess.Popen([*LOCAL_CLIENT, "dispatch", "Stop"], stdin=stdin,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=service.agent_env(),
                                 cwd=service.project)
    deadline = time.monotonic() + 60
    hook: list[str] = []
    while not hook:
        assert time.monotonic() < deadline, "the service never started the hook's container"
        time.sleep(0.05)
        hook = [c["Id"] for c in service.containers(docker_api, service.session)
                if c["State"] == "running" and runs_command(docker_api, c["Id"], "sleep 3600")]
    listed = service.containers(docker_api, service.session)
    made = {c["Id"] for c in listed}
    # Each names its owner, the service (pool containers too): what lets the next start remove them.
    assert all(c["Labels"].get("hookcage.owner", "").endswith(f"/{killed_pid}") for c in listed), listed
    if path == "warm":
        assert any("hookcage.pool" in c["Labels"] for c in listed)
    proc.kill()  # SIGKILL: the service can remove neither its hook's container nor its pool's
    proc.wait()
    out, err = agent.communicate(timeout=60)
    assert (agent.returncode, out.decode(), err.decode()) == (
        2, "", f"hookcage: error: the hookcage service at {service.url} did not answer "
               "(the connection closed before the answer was complete): blocked (HOOKCAGE_ON_ERROR=deny)\n")
    # The client did not wait for the hook: its container still runs, and nobody is left to kill it.
    # (Other sessions sharing the engine may start a `hookcage serve` meanwhile, which removes the
    # containers of dead owners at once: gone counts as ended, the next start's work done early.)
    [container] = hook
    assert state(docker_api, container) in ("running", "gone")

    # It ends itself past its timeout (the watch in the container), with no hookcage process alive.
    deadline = time.monotonic() + hook_timeout + SELF_END_GRACE + 60
    while (now := state(docker_api, container)) == "running":
        assert time.monotonic() < deadline, "the hook's container outlived its timeout"
        time.sleep(0.5)
    assert now in ("exited 137", "gone")  # killed by its watch

    # The service's next start removes what the killed one left: the hook's and its pool's
    # (or any `hookcage serve` or `gc` started meanwhile on this shared engine did it first).
    leftovers = made | {c["Id"] for c in docker_api.containers(
        all=True, filters={"label": f"hookcage.pool={killed_pid}"})}
    service.start_listening()
    deadline = time.monotonic() + 60
    while present := [c for c in leftovers if exists(docker_api, c)]:
        assert time.monotonic() < deadline, f"left behind: {[c[:12] for c in present]}"
        time.sleep(0.2)


def state(docker_api: Any, container: str) -> str:
    """``running``, ``exited CODE`` or ``gone``."""
    try:
        found = docker_api.inspect_container(container)["State"]
    except docker.errors.NotFound:
        return "gone"
    return "running" if found["Running"] else f"exited {found['ExitCode']}"


def exists(docker_api: Any, container: str) -> bool:
    try:
        docker_api.inspect_container(container)
    except docker.errors.NotFound:
        return False
    return True


def test_a_hook_container_nobody_watches_ends_itself_past_its_timeout(
    docker_api: Any, runner_image: str, workspace: Path
) -> None:
    """Started as the docker sandbox starts it, then left alone: no kill from outside ever comes."""
    session = agent_session("self-ending")
    request = RunRequest(command="sleep 3600", project_dir=str(workspace),
                         cwd=str(workspace), timeout=2, labels={"hookcage.session": session})
    create, host = container_args(DockerProfile(image=runner_image), request, name=f"hookcage-{session}",
                                  now=time.time())
    container = docker_api.create_container(host_config=docker_api.create_host_config(**host), **create)["Id"]
    try:
        docker_api.start(container)
        deadline = time.monotonic() + request.timeout + SELF_END_GRACE + 60
        while docker_api.inspect_container(container)["State"]["Running"]:
            assert time.monotonic() < deadline, "the container outlived its timeout"
            time.sleep(0.5)
        assert docker_api.inspect_container(container)["State"]["ExitCode"] == 137
    finally:
        docker_api.remove_container(container, force=True)


def test_four_agents_at_once_every_answer_correct(service: Service, docker_api: Any) -> None:
    """The load benchmark's shape, short and without timing: 4 agents at once, each answer checked.

    Every prompt is unique (agent, event), so an answer handed to the wrong agent shows.
    """
    service.hooks(**HOOKS)
    service.start_listening()
    fixed = [case for case in cases(service) if case[0] != ["UserPromptSubmit"]][:3]
    expected = {tuple(args): service.in_process(args, stdin) for args, stdin in fixed}
    template = service.in_process(["UserPromptSubmit"], service.payload(prompt="PROMPT"))
    assert "PROMPT in" in template[1]
    wrong: list[str] = []
    answered = [0]
    lock = threading.Lock()

    def agent(number: int) -> None:
        for i in range(8):
            if i % 2:
                args, stdin = fixed[(number + i) % len(fixed)]
                want = expected[tuple(args)]
            else:
                prompt = f"agent {number} event {i}"
                args, stdin = ["UserPromptSubmit"], service.payload(prompt=prompt)
                want = (template[0], template[1].replace("PROMPT", prompt), template[2])
            got = service.remote(LOCAL_CLIENT, args, stdin)
            with lock:
                answered[0] += 1
                if got != want:
                    wrong.append(f"agent {number}, {args}: {got!r}, not {want!r}")

    threads = [threading.Thread(target=agent, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == [] and answered[0] == 32
    assert service.stop() is not None
    assert service.containers(docker_api, service.session) == []
