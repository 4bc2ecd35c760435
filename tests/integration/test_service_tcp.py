"""``hookcage serve --listen`` against the real engine: remote mode over loopback TCP.

A real ``hookcage serve`` process (the console script), its hooks run in
containers; requests are plain HTTP(S) from this process. The answer over
TCP equals the local path's (exit code, stdout, stderr, run log); a missing or
wrong token runs nothing (no run-log line, no container created, no marker
written); oversize and malformed bodies are refused cleanly; TLS works with a
private CA (trustme) and plain HTTP to the TLS port fails without harm.
"""

from __future__ import annotations

import base64
import http.client
import json
import re
import signal
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme
from daemon_support import SERVE, runs_command
from daemon_support import Daemon as _Daemon
from prometheus_client.parser import text_string_to_metric_families
from support import POOL_OWNERS, agent_session, containers_created

from executor import __version__
from executor.service import client

TOKEN = "integration-token-0123456789abcdef"
_ADDRESS = re.compile(rb"answering on (https?)://127\.0\.0\.1:(\d+) \(remote mode")


class Service(_Daemon):
    """A ``hookcage serve --listen 127.0.0.1:0`` and the requests sent to it."""

    def __init__(self, tmp: Path, workspace: Path) -> None:
        (tmp / "home").mkdir()
        super().__init__(tmp / "home", tmp / "managed", workspace, tmp / "serve.log")
        self.tmp = tmp
        self.session = agent_session("tcp")
        self.port = 0
        self.scheme = "http"
        self.ssl_context: ssl.SSLContext | None = None

    def start_tcp(self, *args: str, **env: str) -> subprocess.Popen[bytes]:
        self.started_at = time.time()
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen([*SERVE, "--listen", "127.0.0.1:0", *args],
                                         env={**self.env, "HOOKCAGE_TOKEN": TOKEN, **env},
                                         stdout=log, stderr=log, cwd=self.home)
        deadline = time.monotonic() + 30
        while (found := _ADDRESS.search(self.log.read_bytes())) is None or (
                health := client.health(str(self.socket), timeout=0.5)) is None:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError(f"the service did not start: {self.log.read_text()}")
            time.sleep(0.05)
        self.scheme, self.port = found.group(1).decode(), int(found.group(2))
        self.pid = int(str(health["pid"]))
        POOL_OWNERS.add(str(self.pid))
        return self.proc

    def hooks(self, **events: list[dict[str, Any]]) -> None:
        self.user_hooks({"hooks": {event: [{"hooks": handlers}] for event, handlers in events.items()}})

    def payload(self, **fields: Any) -> bytes:
        return json.dumps({"session_id": self.session, "cwd": str(self.project), **fields}).encode()

    # -- HTTP ---------------------------------------------------------------------------------

    def connection(self, timeout: float = 120) -> http.client.HTTPConnection:
        if self.scheme == "https":
            return http.client.HTTPSConnection("127.0.0.1", self.port, timeout=timeout, context=self.ssl_context)
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def call(self, method: str, path: str, body: bytes | None = None, *, token: str | None = TOKEN,
             headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
        conn = self.connection()
        try:
            sent = {"Content-Type": "application/json", **(headers or {})}
            if token is not None:
                sent["Authorization"] = f"Bearer {token}"
            conn.request(method, path, body=body, headers=sent)
            response = conn.getresponse()
            return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
        finally:
            conn.close()

    def body(self, event: str, stdin: bytes, **fields: Any) -> bytes:
        return json.dumps({"version": __version__, "protocol": 1, "event": event, "agent": None,
                           "payload_b64": base64.b64encode(stdin).decode(), "env": {}, "cwd": str(self.project),
                           **fields}).encode()

    def remote(self, event: str, stdin: bytes, *, token: str | None = TOKEN, **fields: Any) -> tuple[int, str, str]:
        status, _, data = self.call("POST", "/dispatch", self.body(event, stdin, **fields), token=token)
        assert status == 200, (status, data)
        answer = json.loads(data)
        assert answer["agent"] == "claude"
        return answer["exit_code"], answer["stdout"], answer["stderr"]

    def metrics(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        status, _, data = self.call("GET", "/metrics")
        assert status == 200
        return {(s.name, tuple(sorted(s.labels.items()))): s.value
                for family in text_string_to_metric_families(data.decode()) for s in family.samples}


def metric(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    return sum(v for (n, got), v in samples.items() if n == name and all((k, w) in got for k, w in labels.items()))


def command(line: str, **extra: Any) -> dict[str, Any]:
    return {"type": "command", "command": line, **extra}


@pytest.fixture
def service(tmp_path: Path, workspace: Path, runner_image: str) -> Iterator[Service]:
    made = Service(tmp_path, workspace)
    yield made
    made.stop()


GUARD = "test -r README.md && cat >/dev/null && echo \"from $(hostname)\" >&2 && exit 2"


@pytest.mark.docker
def test_a_hook_runs_in_a_container_over_tcp_and_answers_as_the_local_path(service: Service) -> None:
    service.hooks(PreToolUse=[command(GUARD)], UserPromptSubmit=[command('echo "$(jq -r .prompt) on $(hostname)"')])
    service.start_tcp()
    for event, stdin in (("PreToolUse", service.payload(tool_name="Bash", tool_input={"command": "ls"})),
                         ("UserPromptSubmit", service.payload(prompt="hello"))):
        expected = service.dispatch(event, stdin, daemon=False)  # in-process, the agent's own machine
        assert service.remote(event, stdin) == expected
        assert service.dispatch(event, stdin, daemon=True) == expected  # the unix socket, unchanged beside TCP
    code, stdout, stderr = expected
    assert (code, stderr) == (0, "")
    assert json.loads(stdout)["hookSpecificOutput"]["additionalContext"] == "hello on hookcage"  # in a container
    guard = service.dispatch("PreToolUse", service.payload(tool_name="Bash", tool_input={"command": "ls"}),
                             daemon=False)
    assert json.loads(guard[1])["hookSpecificOutput"]["permissionDecisionReason"] == "from hookcage"
    lines = service.log_lines()
    assert len(lines) == 7
    assert lines[0] == lines[1] == lines[2] == lines[6] and lines[0]["sandbox"].startswith("docker(")
    assert lines[3] == lines[4] == lines[5] and lines[3]["exit_code"] == 0
    samples = service.metrics()
    assert metric(samples, "hookcage_dispatches_total", listener="remote") == 2
    assert metric(samples, "hookcage_dispatches_total", listener="local") == 2
    assert metric(samples, "hookcage_hooks_total", listener="remote", outcome="blocked") == 1
    assert metric(samples, "hookcage_hooks_total", listener="remote", outcome="ok") == 1
    starts = metric(samples, "hookcage_container_starts_total", start="warm") + metric(
        samples, "hookcage_container_starts_total", start="cold")
    assert starts == 4  # every docker run through the service, warm or cold, as the pool counted it
    assert metric(samples, "hookcage_containers_alive") >= metric(samples, "hookcage_pool_ready")


@pytest.mark.docker
def test_a_missing_or_wrong_token_runs_nothing(service: Service, docker_api: Any) -> None:
    marks = service.project / "marks"
    marks.mkdir()
    marks.chmod(0o777)
    writer = "touch marks/ran-$(date +%s%N)"
    service.hooks(UserPromptSubmit=[command(writer, sandbox={"workspace": "rw"})])
    service.start_tcp()
    since = time.time()
    stdin = service.payload(prompt="x")
    for token, headers in ((None, {}), ("wrong-token-wrong-token-0000", {}), (TOKEN[:-1], {}),
                           (None, {"Authorization": f"Basic {TOKEN}"}), (None, {"Authorization": TOKEN})):
        status, head, data = service.call("POST", "/dispatch", service.body("UserPromptSubmit", stdin),
                                          token=token, headers=headers)
        assert status == 401 and head["www-authenticate"].startswith("Bearer"), data
        assert set(json.loads(data)) == {"detail"}
    for path in ("/metrics", "/openapi.json", "/health"):
        assert service.call("GET", path, token="wrong-token-wrong-token-0000")[0] == 401
    assert service.call("GET", "/health", token=None)[2] == b'{"status": "ok"}'
    assert list(marks.iterdir()) == []
    assert not (service.home / "runs.jsonl").exists()
    assert containers_created(docker_api, service.session, since) == 0
    # The same request with the token: the hook runs, writes its marker, is logged.
    assert service.remote("UserPromptSubmit", stdin) == (0, "{}\n", "")
    assert len(list(marks.iterdir())) == 1
    assert [line["outcome"] for line in service.log_lines()] == ["ran"]
    assert metric(service.metrics(), "hookcage_requests_rejected_total", status="401") == 8


@pytest.mark.docker
def test_oversize_and_malformed_requests_are_refused_and_run_nothing(service: Service, docker_api: Any) -> None:
    service.hooks(UserPromptSubmit=[command("echo ran")])
    service.start_tcp("--max-body", "4096")
    since = time.time()
    stdin = service.payload(prompt="x" * 5000)
    status, _, data = service.call("POST", "/dispatch", service.body("UserPromptSubmit", stdin))
    assert (status, json.loads(data)) == (413, {"detail": "request body over 4096 bytes"})
    for body, expected in ((b"{oops", 400), (b'{"event": "UserPromptSubmit"}', 422),
                           (b'{"payload_b64": "***"}', 422), (b'"a string"', 422)):
        status, _, data = service.call("POST", "/dispatch", body)
        assert status == expected and "\n" not in json.loads(data)["detail"]
    assert not (service.home / "runs.jsonl").exists()
    assert containers_created(docker_api, service.session, since) == 0
    small = service.payload(prompt="y")
    assert service.remote("UserPromptSubmit", small) == service.dispatch("UserPromptSubmit", small, daemon=False)


@pytest.mark.docker
def test_tls_with_a_private_ca_and_plain_http_to_the_tls_port_fails_cleanly(service: Service) -> None:
    ca = trustme.CA()
    issued = ca.issue_cert("127.0.0.1", "localhost")
    cert, key, ca_file = service.tmp / "cert.pem", service.tmp / "key.pem", service.tmp / "ca.pem"
    cert.write_bytes(b"".join(blob.bytes() for blob in issued.cert_chain_pems))
    issued.private_key_pem.write_to_path(str(key))
    ca.cert_pem.write_to_path(str(ca_file))
    service.hooks(UserPromptSubmit=[command('echo "tls on $(hostname)"')])
    service.start_tcp("--tls-cert", str(cert), "--tls-key", str(key))
    assert service.scheme == "https"

    # Plain HTTP to the TLS port: no answer, no hang, the service carries on.
    plain = http.client.HTTPConnection("127.0.0.1", service.port, timeout=10)
    with pytest.raises((http.client.RemoteDisconnected, ConnectionResetError, http.client.BadStatusLine)):
        plain.request("GET", "/health")
        plain.getresponse()
    plain.close()
    # A client that does not trust the private CA refuses the service.
    service.ssl_context = ssl.create_default_context()
    with pytest.raises(ssl.SSLCertVerificationError):
        service.call("GET", "/health")
    service.ssl_context = ssl.create_default_context(cafile=str(ca_file))
    stdin = service.payload(prompt="x")
    answer = service.remote("UserPromptSubmit", stdin)
    assert answer == service.dispatch("UserPromptSubmit", stdin, daemon=False)
    assert json.loads(answer[1])["hookSpecificOutput"]["additionalContext"] == "tls on hookcage"
    assert service.call("GET", "/health", token="wrong-token-wrong-token-0000")[0] == 401
    assert service.proc is not None and service.proc.poll() is None


@pytest.mark.docker
def test_sigterm_answers_the_tcp_dispatch_in_flight_then_removes_every_container(
    service: Service, docker_api: Any
) -> None:
    service.hooks(UserPromptSubmit=[command("sleep 3; echo done")])
    service.start_tcp()
    stdin = service.payload(prompt="x")
    got: list[tuple[int, str, str]] = []
    caller = threading.Thread(target=lambda: got.append(service.remote("UserPromptSubmit", stdin)))
    caller.start()
    deadline = time.monotonic() + 30
    while not any(runs_command(docker_api, c["Id"], "sleep 3") for c in service.containers(docker_api, service.session)):
        assert time.monotonic() < deadline, "the hook never started"
        time.sleep(0.05)
    assert service.proc is not None
    service.proc.send_signal(signal.SIGTERM)
    caller.join(60)
    expected = json.dumps({"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": "done"}})
    assert got == [(0, expected + "\n", "")]
    assert service.proc.wait(60) in (0, -signal.SIGTERM)
    assert service.containers(docker_api, service.session) == []
    assert not service.socket.exists()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", service.port), timeout=2).close()


# -- refusing to start -----------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize(("args", "env", "message"), [
    ([], {}, "--listen needs a token"),
    ([], {"HOOKCAGE_TOKEN": "too-short"}, "at least 16 are needed"),
    (["--token-file", "{tmp}/hookcage-token"], {}, "group or others may read or write it (mode 0644); run chmod 600 "),
    (["--token-file", "{tmp}/missing"], {}, "cannot read token file"),
    (["--tls-cert", "{tmp}/hookcage-token"], {"HOOKCAGE_TOKEN": TOKEN}, "--tls-cert and --tls-key go together"),
    (["--tls-cert", "{tmp}/hookcage-token", "--tls-key", "{tmp}/hookcage-token"], {"HOOKCAGE_TOKEN": TOKEN}, "do not load as a PEM certificate and its private key"),
    (["--project-root", "relative/dir"], {"HOOKCAGE_TOKEN": TOKEN}, "--project-root must be an existing directory"),
    (["--transcript-root", "relative/dir"], {"HOOKCAGE_TOKEN": TOKEN}, "--transcript-root must be an existing directory"),
])
def test_serve_refuses_to_start_with_one_line_and_listens_nowhere(
    tmp_path: Path, args: list[str], env: dict[str, str], message: str
) -> None:
    (tmp_path / "hookcage-token").write_text(TOKEN + "\n")
    (tmp_path / "hookcage-token").chmod(0o644)
    home = tmp_path / "home"
    port = _free_port()
    service = _Daemon(home, tmp_path / "managed", tmp_path, tmp_path / "log")
    proc = subprocess.run([*SERVE, "--listen", f"127.0.0.1:{port}", *(a.format(tmp=tmp_path) for a in args)],
                          env={**service.env, **env}, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and proc.stdout == ""
    [line] = proc.stderr.splitlines()
    assert line.startswith("hookcage: error: ") and message in line and "***" not in line
    assert TOKEN not in proc.stderr
    assert not (home / client.SOCKET_NAME).exists()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", port))  # nobody took it


def test_serve_refuses_an_address_in_use_and_leaves_no_socket(tmp_path: Path) -> None:
    home = tmp_path / "home"
    service = _Daemon(home, tmp_path / "managed", tmp_path, tmp_path / "log")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        proc = subprocess.run([*SERVE, "--listen", f"127.0.0.1:{port}"],
                              env={**service.env, "HOOKCAGE_TOKEN": TOKEN}, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    [line] = [line for line in proc.stderr.splitlines() if line.startswith("hookcage: error:")]
    assert f"cannot listen on 127.0.0.1:{port}: Address already in use" in line
    assert not (home / client.SOCKET_NAME).exists()


@pytest.mark.parametrize(("args", "named"), [
    (["--token-file", "t"], "--token-file goes"), (["--max-queue", "3", "--tls-key", "k"], "--tls-key, --max-queue go"),
    (["--max-concurrent", "8"], "--max-concurrent goes"),
])
def test_tcp_options_without_listen_are_a_usage_error(tmp_path: Path, args: list[str], named: str) -> None:
    home = tmp_path / "home"
    service = _Daemon(home, tmp_path / "managed", tmp_path, tmp_path / "log")
    proc = subprocess.run([*SERVE, *args], env=service.env, capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stdout) == (1, "")
    assert proc.stderr == f"hookcage: error: {named} with --listen HOST:PORT\n"
    assert not home.exists()
