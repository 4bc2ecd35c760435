"""The TCP service (remote mode) over real HTTP on loopback, with a fake sandbox (no engine).

A real uvicorn server runs :func:`executor.service.remote.build_remote_app` in a
thread; the tests talk to it with ``http.client`` as any client would. What
ran is judged by the fake sandbox's requests and the service's run log.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families
from support import allow

from executor import __version__
from executor.core.report import classify
from executor.sandbox.base import RunRequest, RunResult, Sandbox
from executor.sandbox.fake import FakeSandbox
from executor.service.auth import (
    ServiceConfigError,
    bearer_matches,
    load_token,
    parse_listen,
    read_token_file,
)
from executor.service.daemon import Daemon
from executor.service.listener import DaemonError
from executor.service.remote import RemoteOptions, build_remote_app
from executor.settings import Settings, load_settings

TOKEN = "s3cret-token-0123456789"
REPO = Path(__file__).resolve().parents[3]


def handler(request: RunRequest) -> RunResult:
    """The fake engine: what each test hook's command does."""
    command = request.command
    if "wait-for-release" in command:
        assert RELEASE.wait(30), "never released"
    if "block" in command:
        return RunResult(2, stderr=b"blocked by the guard\n", duration=0.01)
    if "fail" in command:
        return RunResult(1, stderr=b"boom\n", duration=0.03)
    if "hang" in command:
        return RunResult(None, timed_out=True, duration=2.0)
    if "context" in command:
        return RunResult(0, stdout=b"context from the service's hook\n", duration=0.02)
    return RunResult(0, duration=0.01)


RELEASE = threading.Event()


class Service:
    """A service home, a project, and the remote app served on 127.0.0.1:PORT."""

    def __init__(self, tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.home, self.managed, self.project = tmp / "home", tmp / "managed", tmp / "project"
        for path in (self.home, self.managed, self.project / ".hookcage"):
            path.mkdir(parents=True)
        self.service_user = tmp / "service-user"
        self.service_user.mkdir()
        for name in list(os.environ):
            if name.startswith("HOOKCAGE_") or name in ("CLAUDE_PROJECT_DIR", "CLAUDE_ENV_FILE"):
                monkeypatch.delenv(name)
        monkeypatch.setenv("HOOKCAGE_HOME", str(self.home))
        monkeypatch.setenv("HOOKCAGE_MANAGED_DIR", str(self.managed))
        monkeypatch.setenv("HOME", str(self.service_user))
        monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp}/no-engine.sock")
        self.sandbox = FakeSandbox(handler)
        self.daemon = Daemon(tmp / "sock", sandbox_factory=self._factory, home=self.home)
        self.server: uvicorn.Server | None = None
        self.thread: threading.Thread | None = None
        self.port = 0

    def _factory(self, backend: str, settings: Any) -> Sandbox:
        return self.sandbox

    def start(self, **limits: Any) -> Service:
        options = RemoteOptions("127.0.0.1", 0, TOKEN, **limits)
        sock = options.bind()
        self.port = sock.getsockname()[1]
        app = build_remote_app(self.daemon, options, f"http://127.0.0.1:{self.port}")
        self.gate = app
        self.server = uvicorn.Server(uvicorn.Config(app, lifespan="off", log_level="warning", http="h11",
                                                    loop="asyncio", ws="none"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        if self.server is not None and self.thread is not None:
            self.server.should_exit = True
            self.thread.join(10)
        self.daemon.close()

    # -- what the service is configured with ------------------------------------------

    def user_hooks(self, **events: list[str]) -> None:
        hooks = {event: [{"hooks": [{"type": "command", "command": c} for c in commands]}]
                 for event, commands in events.items()}
        (self.home / "hooks.json").write_text(json.dumps({"hooks": hooks}))
        allow(self.home, [c for commands in events.values() for c in commands])

    def log(self) -> list[dict[str, Any]]:
        path = self.home / "runs.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    # -- a client -------------------------------------------------------------------------

    def call(self, method: str, path: str, body: bytes | None = None, *, token: str | None = TOKEN,
             headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            sent = dict(headers or {})
            if token is not None:
                sent.setdefault("Authorization", f"Bearer {token}")
            if body is not None:
                sent.setdefault("Content-Type", "application/json")
            conn.request(method, path, body=body, headers=sent)
            response = conn.getresponse()
            return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
        finally:
            conn.close()

    def dispatch(self, payload: dict[str, Any] | bytes, *, token: str | None = TOKEN,
                 **fields: Any) -> tuple[int, Any]:
        raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        body = {"version": __version__, "event": None, "agent": None,
                "payload_b64": base64.b64encode(raw).decode(), "env": {}, "home": None, "cwd": None, **fields}
        status, _, data = self.call("POST", "/dispatch", json.dumps(body).encode(), token=token)
        return status, json.loads(data)

    def prompt(self, **fields: Any) -> dict[str, Any]:
        return {"session_id": "s1", "hook_event_name": "UserPromptSubmit", "prompt": "hi",
                "cwd": str(self.project), **fields}

    def metrics(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        status, _, data = self.call("GET", "/metrics")
        assert status == 200
        return {(s.name, tuple(sorted(s.labels.items()))): s.value
                for family in text_string_to_metric_families(data.decode()) for s in family.samples}


@pytest.fixture
def service(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Service]:
    RELEASE.clear()
    made = Service(tmp_path, monkeypatch)
    yield made
    RELEASE.set()
    made.stop()


def value(metrics: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    """The sum of a metric's samples whose labels include ``labels``."""
    return sum(v for (n, got), v in metrics.items()
               if n == name and all((k, w) in got for k, w in labels.items()))


# -- the token ------------------------------------------------------------------------------


BAD_AUTH = [
    None, "", "Bearer", "Bearer ", f"Basic {TOKEN}", f"Bearer {TOKEN[:-1]}", f"Bearer {TOKEN}x",
    f"Bearer {TOKEN.upper()}", f"Token {TOKEN}", f"Bearer  x{TOKEN}",
]


ENDPOINTS = [("POST", "/dispatch"), ("GET", "/metrics"), ("GET", "/openapi.json"), ("GET", "/nowhere"),
             ("GET", "/health"), ("DELETE", "/dispatch")]


@pytest.mark.parametrize(("auth", "method", "path"), [
    (auth, method, path) for auth in BAD_AUTH for method, path in ENDPOINTS
    if not (auth is None and (method, path) == ("GET", "/health"))  # the bare liveness answer (next test)
])
def test_every_endpoint_refuses_a_missing_or_wrong_token_and_runs_nothing(
    service: Service, auth: str | None, method: str, path: str
) -> None:
    service.user_hooks(UserPromptSubmit=["echo context"])
    service.start()
    body = json.dumps({"payload_b64": base64.b64encode(json.dumps(service.prompt()).encode()).decode(),
                       "cwd": str(service.project)}).encode() if method == "POST" else None
    headers = {} if auth is None else {"Authorization": auth}
    status, head, data = service.call(method, path, body, token=None, headers=headers)
    assert status == 401
    assert head["www-authenticate"].startswith("Bearer")
    assert set(json.loads(data)) == {"detail"}
    assert service.sandbox.requests == [] and service.log() == []
    assert value(service.metrics(), "hookcage_requests_rejected_total", status="401") == 1
    assert value(service.metrics(), "hookcage_dispatches_total") == 0


def test_a_bare_health_says_only_ok_and_the_token_shows_the_details(service: Service) -> None:
    service.start()
    status, _, data = service.call("GET", "/health", token=None)
    assert (status, json.loads(data)) == (200, {"status": "ok"})
    status, _, data = service.call("GET", "/health")
    details = json.loads(data)
    assert status == 200 and details["status"] == "ok" and details["pid"] == os.getpid()
    assert details["home"] == str(service.home) and details["listen"] == f"http://127.0.0.1:{service.port}"
    assert details["version"] == __version__


def test_the_scheme_is_case_insensitive_and_the_token_is_not(service: Service) -> None:
    service.start()
    assert service.call("GET", "/health", token=None, headers={"Authorization": f"bearer {TOKEN}"})[0] == 200
    assert service.call("GET", "/health", token=None, headers={"Authorization": f"BEARER  {TOKEN} "})[0] == 200
    assert bearer_matches(f"Bearer {TOKEN}".encode(), TOKEN.encode())
    assert not bearer_matches(f"Bearer {TOKEN.swapcase()}".encode(), TOKEN.encode())
    assert not bearer_matches(None, TOKEN.encode())


def test_two_authorization_headers_are_refused(service: Service) -> None:
    service.start()
    conn = http.client.HTTPConnection("127.0.0.1", service.port, timeout=10)
    try:
        conn.putrequest("GET", "/health")
        conn.putheader("Authorization", f"Bearer {TOKEN}")
        conn.putheader("Authorization", "Bearer wrong-but-second-0000")
        conn.endheaders()
        assert conn.getresponse().status == 401
    finally:
        conn.close()


# -- remote-mode semantics -----------------------------------------------------------------


def test_a_dispatch_answers_as_in_process_with_the_services_own_settings(
    service: Service, tmp_path: Path
) -> None:
    service.user_hooks(UserPromptSubmit=["echo context"])
    service.start()
    elsewhere = tmp_path / "callers-home"
    # Everything of the caller but its project is ignored: its home, settings, user, engine, version.
    status, answer = service.dispatch(
        service.prompt(), version="0.0.0-another", home=str(elsewhere),
        env={"HOOKCAGE_HOME": str(elsewhere), "HOOKCAGE_LOG_RUNS": "false", "HOOKCAGE_FAIL_CLOSED": "1",
             "HOOKCAGE_POOL_SIZE": "nonsense", "HOME": str(elsewhere), "DOCKER_HOST": "tcp://10.9.9.9:1",
             "CLAUDE_ENV_FILE": str(elsewhere / "env")},
    )
    assert status == 200, answer
    assert answer == {"exit_code": 0, "agent": "claude", "stderr": "", "stdout": answer["stdout"]}
    assert json.loads(answer["stdout"])["hookSpecificOutput"]["additionalContext"] == "context from the service's hook"
    [run] = service.sandbox.requests
    assert run.project_dir == str(service.project) and run.cwd == str(service.project)
    assert "CLAUDE_ENV_FILE" not in run.env and run.binds == ()  # the caller's env-file is no path of the service
    [record] = service.log()  # the service's log, although the caller said HOOKCAGE_LOG_RUNS=false
    assert (record["outcome"], record["exit_code"], record["command"]) == ("ran", 0, "echo context")
    assert not elsewhere.exists()


def test_a_block_is_answered_and_counted_as_blocked(service: Service) -> None:
    service.user_hooks(UserPromptSubmit=["block"])
    service.start()
    status, answer = service.dispatch(service.prompt())
    assert (status, answer["exit_code"], answer["stderr"]) == (200, 0, "")  # Claude Code reads the JSON
    verdict = json.loads(answer["stdout"])
    assert verdict["decision"] == "block" and "blocked by the guard" in verdict["reason"]
    assert value(service.metrics(), "hookcage_dispatches_total", outcome="blocked", listener="remote",
                 event="UserPromptSubmit", agent="claude") == 1


def test_the_project_comes_from_the_callers_project_variable(service: Service, tmp_path: Path) -> None:
    other = tmp_path / "other-project"
    (other / ".hookcage").mkdir(parents=True)
    (other / ".hookcage" / "hooks.json").write_text(json.dumps(
        {"hooks": {"UserPromptSubmit": [{"hooks": [{"type": "command", "command": "echo context"}]}]}}))
    allow(service.home, ["echo context"])
    (other / "sub").mkdir()
    service.start()
    status, answer = service.dispatch(service.prompt(cwd=str(other / "sub")), env={"CLAUDE_PROJECT_DIR": str(other)})
    assert status == 200 and answer["exit_code"] == 0
    assert "not trusted yet" in answer["stdout"]  # the other project's hook was found, and not run
    assert service.sandbox.requests == []
    [record] = service.log()
    assert (record["outcome"], record["skip_reason"], record["scope"]) == ("skipped", "untrusted", "project")


@pytest.mark.parametrize(("fields", "payload", "code", "reason"), [
    ({"protocol": 2}, {}, 409, "protocol 2"),
    ({"agent": "no-such-agent"}, {}, 409, "unknown agent 'no-such-agent'"),
    ({"env": {"CLAUDE_PROJECT_DIR": "relative/dir"}}, {}, 400, "is not an absolute path"),
    ({}, {"cwd": "relative"}, 400, "is not an absolute path"),
    ({"env": {"CLAUDE_PROJECT_DIR": "/no/such/project/here"}}, {}, 409, "does not exist on the hookcage service"),
    ({}, {"cwd": "/no/such/project/here"}, 409, "does not exist on the hookcage service"),
    ({}, {"cwd": None}, 409, "the caller has no working directory"),
    ({}, {"transcript_path": "relative.jsonl"}, 400, "transcript_path"),
])
def test_refusals_are_4xx_with_a_detail_and_run_nothing(
    service: Service, fields: dict[str, Any], payload: dict[str, Any], code: int, reason: str
) -> None:
    service.user_hooks(UserPromptSubmit=["echo context"])
    service.start()
    prompt = {k: v for k, v in service.prompt(**payload).items() if v is not None}
    status, answer = service.dispatch(prompt, **fields)
    assert status == code and set(answer) == {"detail"} and reason in answer["detail"]
    assert service.sandbox.requests == [] and service.log() == []
    assert value(service.metrics(), "hookcage_dispatches_total", outcome="refused") == 1


@pytest.mark.parametrize("where", ["/", "{tmp}", "{tmp}/home", "/run"])
def test_a_project_holding_the_services_home_or_the_docker_socket_is_refused(
    service: Service, tmp_path: Path, where: str
) -> None:
    # Its hooks would get it mounted, and what they print goes back to the caller.
    service.user_hooks(UserPromptSubmit=["echo context"])
    service.start()
    project = where.format(tmp=tmp_path)
    status, answer = service.dispatch(service.prompt(cwd=project), env={"CLAUDE_PROJECT_DIR": project})
    assert status == 403 and f"the project directory {os.path.realpath(project)} contains " in answer["detail"]
    assert service.sandbox.requests == [] and service.log() == []


def test_project_roots_limit_what_a_caller_may_name(service: Service, tmp_path: Path) -> None:
    service.user_hooks(UserPromptSubmit=["echo context"])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    service.start(project_roots=(service.project.parent / "project",))
    status, answer = service.dispatch(service.prompt(cwd=str(elsewhere)))
    assert status == 403 and "is outside the service's project roots" in answer["detail"]
    inside = service.project / "sub"
    inside.mkdir()
    assert service.dispatch(service.prompt(cwd=str(inside)))[0] == 200
    assert len(service.sandbox.requests) == 1


def test_a_bad_payload_is_answered_as_in_process(service: Service) -> None:
    service.start()
    status, answer = service.dispatch(b"not json", event="UserPromptSubmit", cwd=str(service.project))
    assert status == 200 and answer["exit_code"] == 1
    assert answer["stderr"] == "hookcage: stdin is not valid JSON (line 1, column 1)\n"


# -- size, shape, load ------------------------------------------------------------------------


def test_an_oversize_content_length_is_413_before_the_body_is_read(service: Service) -> None:
    service.start(max_body=1000)
    with socket.create_connection(("127.0.0.1", service.port), timeout=10) as sock:
        sock.sendall(f"POST /dispatch HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
                     f"Content-Type: application/json\r\nContent-Length: 1001\r\n\r\n".encode())
        # Not a byte of the body is sent: the answer comes anyway.
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 413 ")
    assert json.loads(reply.split(b"\r\n\r\n", 1)[1]) == {"detail": "request body over 1000 bytes"}
    assert value(service.metrics(), "hookcage_requests_rejected_total", status="413") == 1


def test_an_oversize_chunked_body_is_413_and_one_at_the_limit_is_read(service: Service) -> None:
    service.user_hooks(UserPromptSubmit=["echo context"])
    service.start(max_body=2000)
    body = json.dumps({"payload_b64": base64.b64encode(json.dumps(service.prompt()).encode()).decode()})
    padded = body[:-1] + ", " + '"pad": "' + "x" * (2000 - len(body) - 11) + '"}'
    assert len(padded) == 2000

    def chunked(data: bytes) -> Iterator[bytes]:
        for start in range(0, len(data), 300):
            yield data[start:start + 300]

    conn = http.client.HTTPConnection("127.0.0.1", service.port, timeout=10)
    conn.request("POST", "/dispatch", body=chunked(padded.encode()), encode_chunked=True,
                 headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
    response = conn.getresponse()
    assert (response.status, json.loads(response.read())["exit_code"]) == (200, 0)
    conn.close()
    conn = http.client.HTTPConnection("127.0.0.1", service.port, timeout=10)
    conn.request("POST", "/dispatch", body=chunked(padded.encode() + b" "), encode_chunked=True,
                 headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
    response = conn.getresponse()
    assert response.status == 413
    conn.close()
    assert len(service.sandbox.requests) == 1


@pytest.mark.parametrize(("body", "content_type", "status", "detail"), [
    (b"{not json", "application/json", 400, "the request body is not valid JSON"),
    (b"", "application/json", 400, "the request body is empty"),
    (b"{}", "application/json", 422, "payload_b64: Field required"),
    (b'{"payload_b64": 5}', "application/json", 422, "payload_b64: Input should be a valid string"),
    (b'{"payload_b64": "e30=", "env": {"A": 1}}', "application/json", 422, "env.A: Input should be a valid string"),
    (b'{"payload_b64": "!!not base64!!"}', "application/json", 422, "payload_b64 is not base64"),
    (b'[1, 2]', "application/json", 422, "Input should be a valid dictionary"),
    (b'{"payload_b64": "e30="}', "text/plain", 415, "Content-Type: application/json"),
    (b'{"payload_b64": "e30="}', "application/x-www-form-urlencoded", 415, "Content-Type: application/json"),
])
def test_malformed_requests_are_a_clean_4xx_with_one_line(
    service: Service, body: bytes, content_type: str, status: int, detail: str
) -> None:
    service.user_hooks(UserPromptSubmit=["echo context"])
    service.start()
    got, _, data = service.call("POST", "/dispatch", body, headers={"Content-Type": content_type})
    answer = json.loads(data)
    assert got == status and set(answer) == {"detail"}
    assert detail in answer["detail"] and "\n" not in answer["detail"]
    assert service.sandbox.requests == [] and service.log() == []
    assert value(service.metrics(), "hookcage_requests_rejected_total", status=str(status)) == 1


def test_past_the_queue_a_dispatch_is_503_with_retry_after_and_the_others_are_answered(service: Service) -> None:
    service.user_hooks(UserPromptSubmit=["wait-for-release"])
    service.start(max_concurrent=1, max_queue=1)
    results: list[tuple[int, Any]] = []

    def send() -> None:
        results.append(service.dispatch(service.prompt()))

    first = threading.Thread(target=send)
    first.start()
    wait_for(lambda: len(service.sandbox.requests) == 1)  # running, holding the only slot
    second = threading.Thread(target=send)
    second.start()
    wait_for(lambda: value(service.metrics(), "hookcage_dispatches_queued") == 1)
    body = json.dumps({"payload_b64": base64.b64encode(json.dumps(service.prompt()).encode()).decode()}).encode()
    status, head, data = service.call("POST", "/dispatch", body)
    assert (status, head["retry-after"]) == (503, "1") and "retry later" in json.loads(data)["detail"]
    assert len(service.sandbox.requests) == 1
    RELEASE.set()
    first.join(30)
    second.join(30)
    assert [status for status, _ in results] == [200, 200]
    assert len(service.sandbox.requests) == 2
    assert value(service.metrics(), "hookcage_requests_rejected_total", status="503") == 1


def wait_for(condition: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.02)


# -- metrics ---------------------------------------------------------------------------------


def test_metrics_count_what_the_run_log_says_ran(service: Service) -> None:
    (service.project / ".hookcage" / "hooks.json").write_text(json.dumps(
        {"hooks": {"UserPromptSubmit": [{"hooks": [{"type": "command", "command": "echo project"}]}]}}))
    hooks = {"hooks": {"UserPromptSubmit": [{"hooks": [
        {"type": "command", "command": "echo context"},
        {"type": "command", "command": "block"},
        {"type": "command", "command": "fail"},
        {"type": "command", "command": "hang"},
        {"type": "command", "command": "curl evil.example"},  # not on the allow-list
    ]}]}}
    (service.home / "hooks.json").write_text(json.dumps(hooks))
    allow(service.home, ["echo context", "block", "fail", "hang", "echo project"])
    service.start()
    for _ in range(3):
        assert service.dispatch(service.prompt())[0] == 200
    metrics = service.metrics()
    log = service.log()
    assert len(log) == 18
    # The same names and counts as `hookcage report` gives for the same run log.
    counted = Counter(classify(record) for record in log)
    assert counted == {"ok": 3, "blocked": 3, "error": 3, "timeout": 3, "untrusted": 3, "off-list": 3}
    for outcome, count in counted.items():
        assert value(metrics, "hookcage_hooks_total", outcome=outcome, listener="remote",
                     event="UserPromptSubmit") == count
    assert value(metrics, "hookcage_hook_duration_seconds_count") == 12
    assert value(metrics, "hookcage_hook_duration_seconds_sum", outcome="timeout") == pytest.approx(6.0)
    assert value(metrics, "hookcage_dispatches_total", listener="remote", outcome="blocked",
                 event="UserPromptSubmit", agent="claude") == 3
    assert value(metrics, "hookcage_dispatch_duration_seconds_count", listener="remote") == 3
    assert value(metrics, "hookcage_dispatches_in_flight") == 0
    assert value(metrics, "hookcage_containers_alive") == 0  # the fake sandbox has no engine
    assert value(metrics, "hookcage_container_starts_total") == 0
    assert value(metrics, "hookcage_info", version=__version__) == 1


def test_an_async_hook_is_counted_once_it_has_run_after_the_answer(service: Service) -> None:
    hooks = {"hooks": {"UserPromptSubmit": [{"hooks": [
        {"type": "command", "command": "block", "async": True}]}]}}
    (service.home / "hooks.json").write_text(json.dumps(hooks))
    allow(service.home, ["block"])
    service.start()
    status, answer = service.dispatch(service.prompt())
    assert (status, answer["exit_code"], answer["stdout"]) == (200, 0, "{}\n")  # not awaited: no say
    wait_for(lambda: value(service.metrics(), "hookcage_hooks_total", outcome="blocked") == 1)
    wait_for(lambda: len(service.log()) == 1)  # the run log is written as the executor closes, after
    [record] = service.log()
    assert record["async"] is True and classify(record) == "blocked"
    # The dispatch itself was answered without it.
    assert value(service.metrics(), "hookcage_dispatches_total", outcome="answered") == 1


def test_each_daemon_counts_on_its_own_registry(tmp_path: Path) -> None:
    first, second = Daemon(tmp_path / "a", home=tmp_path / "h1"), Daemon(tmp_path / "b", home=tmp_path / "h2")
    try:
        first.metrics.rejected(401)
        assert b'hookcage_requests_rejected_total{status="401"} 1.0' in first.metrics.exposition()[0]
        assert b'hookcage_requests_rejected_total{status="401"} 0.0' in second.metrics.exposition()[0]
    finally:
        first.close()
        second.close()


# -- OpenAPI ---------------------------------------------------------------------------------


def test_openapi_is_behind_the_token_and_docs_openapi_json_is_its_copy(service: Service) -> None:
    service.start()
    status, _, data = service.call("GET", "/openapi.json")
    assert status == 200
    served = json.loads(data)
    assert {"/dispatch", "/health", "/metrics"} <= set(served["paths"])
    assert served["components"]["securitySchemes"]["bearer"] == {"type": "http", "scheme": "bearer"}
    for code in ("200", "400", "401", "409", "413", "415", "422", "503"):
        assert code in served["paths"]["/dispatch"]["post"]["responses"]
    committed = json.loads((REPO / "docs" / "openapi.json").read_text())
    assert committed == served, (
        "docs/openapi.json is out of date: regenerate it with "
        "`python -m executor.service.remote > docs/openapi.json`"
    )


# -- the token's sources -----------------------------------------------------------------------


def test_the_token_comes_from_the_file_then_the_variable_then_the_variables_file(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text(f"  {TOKEN}  \nsecond line ignored\n")
    path.chmod(0o600)
    other = tmp_path / "other"
    other.write_text("another-token-from-env-file\n")
    other.chmod(0o400)
    env = {"HOOKCAGE_TOKEN": "token-from-the-variable", "HOOKCAGE_TOKEN_FILE": str(other)}
    assert load_token(path, env) == TOKEN
    assert load_token(None, env) == "token-from-the-variable"
    assert load_token(None, {"HOOKCAGE_TOKEN_FILE": str(other)}) == "another-token-from-env-file"


@pytest.mark.parametrize(("content", "mode", "message"), [
    ("short\n", 0o600, "the token has 5 characters, at least 16"),
    ("\n", 0o600, "empty; the TCP service needs a token"),
    ("ünïcödé-token-1234567\n", 0o600, "other than visible ASCII"),
    ("tab\tinside-the-token-123\n", 0o600, "other than visible ASCII"),
    (f"{TOKEN}\n", 0o640, r"group or others may read or write it \(mode 0640\); run chmod 600"),
    (f"{TOKEN}\n", 0o604, "group or others may read or write it"),
    (f"{TOKEN}\n", 0o620, "group or others may read or write it"),
])
def test_an_unusable_token_file_is_refused_with_one_line(tmp_path: Path, content: str, mode: int,
                                                         message: str) -> None:
    path = tmp_path / "token"
    path.write_text(content)
    path.chmod(mode)
    with pytest.raises(ServiceConfigError, match=message) as caught:
        read_token_file(path)
    assert "\n" not in str(caught.value)


def test_no_token_a_missing_file_and_a_directory_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ServiceConfigError, match="--listen needs a token"):
        load_token(None, {})
    with pytest.raises(ServiceConfigError, match="cannot read token file"):
        load_token(tmp_path / "missing", {})
    with pytest.raises(ServiceConfigError, match="not a regular file"):
        read_token_file(tmp_path)
    with pytest.raises(ServiceConfigError, match="HOOKCAGE_TOKEN: empty"):
        load_token(None, {"HOOKCAGE_TOKEN": "  "})
    link = tmp_path / "link"
    target = tmp_path / "target"
    target.write_text(TOKEN)
    target.chmod(0o600)
    link.symlink_to(target)
    with pytest.raises(ServiceConfigError, match="cannot read token file"):  # O_NOFOLLOW
        read_token_file(link)


@pytest.mark.parametrize(("text", "expected"), [
    ("127.0.0.1:8765", ("127.0.0.1", 8765)), ("0.0.0.0:0", ("0.0.0.0", 0)), ("[::1]:80", ("::1", 80)),
    ("localhost:65535", ("localhost", 65535)),
])
def test_listen_addresses(text: str, expected: tuple[str, int]) -> None:
    assert parse_listen(text) == expected


@pytest.mark.parametrize("text", ["8765", ":8765", "host:", "host:port", "host:65536", "::1:80", "[nope]:80",
                                  "127.0.0.1:-1"])
def test_bad_listen_addresses(text: str) -> None:
    with pytest.raises(ServiceConfigError, match="--listen"):
        parse_listen(text)


def test_callers_with_another_path_map_get_another_shared_sandbox(tmp_path: Path) -> None:
    made: list[Settings] = []

    def factory(backend: str, settings: Settings) -> Sandbox:
        made.append(settings)
        return FakeSandbox()

    daemon = Daemon(tmp_path / "sock", sandbox_factory=factory, home=tmp_path / "home")
    try:
        plain = daemon.shared_sandbox("docker", load_settings())
        mapped = daemon.shared_sandbox("docker", load_settings(path_map={"/work": "/srv/work"}))
        assert mapped is not plain
        assert daemon.shared_sandbox("docker", load_settings(path_map={"/work": "/srv/work"})) is mapped
        assert [entry["profile"]["path_map"] for entry in daemon.sandboxes()] == [None, {"/work": "/srv/work"}]
        assert [s.path_map for s in made] == [None, {"/work": "/srv/work"}]
    finally:
        daemon.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_a_token_file_of_another_user_is_taken_by_root_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "token"
    path.write_text(TOKEN)
    path.chmod(0o600)
    os.chown(path, 12345, 12345)  # a host user's secret, bind-mounted into a service that runs as root
    assert read_token_file(path) == TOKEN
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(ServiceConfigError, match="belongs to another user"):
        read_token_file(path)


def test_accepted_connections_do_not_wait_for_nagle(tmp_path: Path) -> None:
    # Regression: over TLS each answer waited ~40 ms for the client's delayed ACK
    # (benchmarks/service_tcp.py: TLS p50 48 ms -> 7 ms). Accepted sockets inherit the option.
    listener = RemoteOptions("127.0.0.1", 0, TOKEN).bind()
    try:
        with socket.create_connection(listener.getsockname()[:2], timeout=5):
            accepted, _ = listener.accept()
            with accepted:
                assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
    finally:
        listener.close()


def test_a_tcp_listener_that_dies_stops_the_service_with_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Not a requested stop: serve must not end as if SIGTERM had asked it to (exit 0).
    class Vanished(RemoteOptions):
        def uvicorn_ssl(self) -> dict[str, Any]:
            return {"ssl_certfile": str(tmp_path / "gone.pem"), "ssl_keyfile": str(tmp_path / "gone-key.pem")}

    monkeypatch.setenv("HOOKCAGE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    daemon = Daemon(tmp_path / "home" / "hookcage.sock", sandbox_factory=lambda b, s: FakeSandbox(),
                    home=tmp_path / "home")
    with pytest.raises(DaemonError, match=r"the TCP listener on http://127\.0\.0\.1:\d+ stopped: .*No such file or directory"):
        daemon.serve(log_level="warning", warm=False, remote=Vanished("127.0.0.1", 0, TOKEN))
    assert not (tmp_path / "home" / "hookcage.sock").exists()


# -- the keep-out: every path a remote request names (issue 21) -------------------------


def _transcript_prompt(service: Service, transcript: str, **fields: Any) -> dict[str, Any]:
    return service.prompt(transcript_path=transcript, **fields)


def _secrets(service: Service, tmp_path: Path) -> dict[str, Path]:
    token_file = tmp_path / "service-user" / "token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    (service.home / "trust.json").write_text('{"secret": "TRUST-STORE-CONTENT"}')
    other = tmp_path / "tenants" / "other"
    other.mkdir(parents=True)
    (other / "secret.txt").write_text("OTHER-TENANT-SECRET")
    return {"token": token_file, "trust": service.home / "trust.json", "other": other / "secret.txt"}


@pytest.mark.parametrize("target", ["token", "trust", "other"])
def test_a_transcript_naming_the_services_secrets_is_refused_and_nothing_is_mounted(
    service: Service, tmp_path: Path, target: str
) -> None:
    # The attack: a token holder names the service's own files as its transcript; a hook that
    # reads the transcript would hand them back.
    secrets = _secrets(service, tmp_path)
    service.user_hooks(UserPromptSubmit=["cat-transcript"])
    service.start(token_file=secrets["token"])
    status, answer = service.dispatch(_transcript_prompt(service, str(secrets[target])))
    assert status == 403 and set(answer) == {"detail"}
    assert "transcript_path" in answer["detail"] and "\n" not in answer["detail"]
    assert service.sandbox.requests == [] and service.log() == []


def test_another_tenants_project_under_the_project_roots_is_refused_even_when_absent(
    service: Service, tmp_path: Path
) -> None:
    secrets = _secrets(service, tmp_path)
    service.user_hooks(UserPromptSubmit=["cat-transcript"])
    mine = tmp_path / "tenants" / "mine"
    mine.mkdir()
    service.start(project_roots=(tmp_path / "tenants",))
    for transcript in (secrets["other"], tmp_path / "tenants" / "other" / "not-yet.jsonl"):
        status, answer = service.dispatch(_transcript_prompt(service, str(transcript), cwd=str(mine)))
        assert status == 403 and "outside the request's project" in answer["detail"]
    assert service.sandbox.requests == []


@pytest.mark.parametrize("how", ["file", "folder"])
def test_a_symlink_in_the_project_to_the_token_file_is_refused(
    service: Service, tmp_path: Path, how: str
) -> None:
    secrets = _secrets(service, tmp_path)
    service.user_hooks(UserPromptSubmit=["cat-transcript"])
    if how == "file":
        (service.project / "t.jsonl").symlink_to(secrets["token"])
        transcript = service.project / "t.jsonl"
    else:  # a directory on the way: lstat of the last component alone sees a regular file
        (service.project / "logs").symlink_to(secrets["token"].parent)
        transcript = service.project / "logs" / "token"
    service.start(token_file=secrets["token"])
    status, answer = service.dispatch(_transcript_prompt(service, str(transcript)))
    assert status == 403 and f"really {secrets['token']}" in answer["detail"]
    assert service.sandbox.requests == []


def test_a_transcript_in_the_project_is_bound_from_its_real_path(service: Service) -> None:
    service.user_hooks(UserPromptSubmit=["cat-transcript"])
    (service.project / ".t").mkdir()
    (service.project / ".t" / "s1.jsonl").write_text("{}\n")
    (service.project / "t.jsonl").symlink_to(service.project / ".t" / "s1.jsonl")
    service.start()
    for named in (service.project / ".t" / "s1.jsonl", service.project / "t.jsonl"):
        assert service.dispatch(_transcript_prompt(service, str(named)))[0] == 200
        request = service.sandbox.requests[-1]
        assert request.transcript_path == str(named)
        assert request.transcript_source == os.path.realpath(service.project / ".t" / "s1.jsonl")


def test_a_transcript_the_service_cannot_see_is_passed_as_text_and_never_mounted(service: Service) -> None:
    # The agent's own transcript in its own container (~/.claude/projects/...): no such file here.
    service.user_hooks(UserPromptSubmit=["cat-transcript"])
    service.start()
    status, _ = service.dispatch(_transcript_prompt(service, "/root/.claude/projects/-work-app/s1.jsonl"))
    assert status == 200
    [request] = service.sandbox.requests
    assert request.transcript_path is None and request.transcript_source is None
    assert b"/root/.claude/projects/-work-app/s1.jsonl" in request.stdin  # the payload is the agent's


def test_transcript_roots_admit_transcripts_outside_the_project(service: Service, tmp_path: Path) -> None:
    transcripts = tmp_path / "transcripts"
    transcripts.mkdir()
    (transcripts / "s1.jsonl").write_text("{}\n")
    elsewhere = tmp_path / "elsewhere.jsonl"
    elsewhere.write_text("{}\n")
    service.user_hooks(UserPromptSubmit=["cat-transcript"])
    service.start(transcript_roots=(transcripts,))
    assert service.dispatch(_transcript_prompt(service, str(transcripts / "s1.jsonl")))[0] == 200
    assert service.sandbox.requests[-1].transcript_source == str(transcripts / "s1.jsonl")
    status, answer = service.dispatch(_transcript_prompt(service, str(elsewhere)))
    assert status == 403 and "the service's transcript roots" in answer["detail"]


@pytest.mark.parametrize(("field", "where"), [
    ("agent_transcript_path", "{home}/trust.json"),
    ("cwd", "{home}"),
    ("new_cwd", "{tmp}/service-user"),
    ("worktree_path", "{home}/state"),
])
def test_every_path_field_of_the_payload_passes_the_keep_out(
    service: Service, tmp_path: Path, field: str, where: str
) -> None:
    _secrets(service, tmp_path)
    (service.home / "state").mkdir(exist_ok=True)
    service.user_hooks(UserPromptSubmit=["echo context"])
    service.start()
    path = where.format(home=service.home, tmp=tmp_path)
    status, answer = service.dispatch(service.prompt(**{field: path}),
                                      env={"CLAUDE_PROJECT_DIR": str(service.project)})
    assert status == 403 and field in answer["detail"]
    assert service.sandbox.requests == []


def test_cursors_workspace_roots_cannot_name_another_project_than_the_one_checked(
    service: Service, tmp_path: Path
) -> None:
    # Cursor's canonical cwd is workspace_roots[0]: the executor's root when no variable is set.
    service.user_hooks(UserPromptSubmit=["echo context"])
    service.start()
    payload = {"conversation_id": "c1", "generation_id": "g1", "hook_event_name": "beforeSubmitPrompt",
               "prompt": "hi", "workspace_roots": [str(tmp_path)], "cwd": str(service.project)}
    status, answer = service.dispatch(payload, agent="cursor")
    assert status == 403 and "contains" in answer["detail"]
    status, answer = service.dispatch(payload, agent="cursor", env={"CLAUDE_PROJECT_DIR": str(service.project)})
    assert status == 403 and "workspace_roots[0]" in answer["detail"]
    assert service.sandbox.requests == []


def test_the_project_is_pinned_to_the_path_that_was_judged(service: Service) -> None:
    service.user_hooks(UserPromptSubmit=["echo context"])
    (service.project / "sub").mkdir()
    link = service.project.parent / "project-link"
    link.symlink_to(service.project)
    service.start()
    assert service.dispatch(service.prompt(cwd=str(link / "sub")))[0] == 200
    [request] = service.sandbox.requests
    assert request.project_dir == os.path.realpath(service.project / "sub")
    assert request.env["CLAUDE_PROJECT_DIR"] == os.path.realpath(service.project / "sub")


ODD_PATHS = [
    ("a NUL byte", "/work/app\x00/x", 400),
    ("a lone surrogate", "/work/\ud800app", 400),
    ("5,000 characters", "/" + "a" * 5000, 400),
    ("a long component", "/" + "a" * 300, 400),
    ("relative", "work/app", 400),
    ("dot-dot", "/work/app/../../etc", 400),
    ("a number", 5, 400),
    ("a list", ["/work/app"], 400),
    ("an object", {"p": "/"}, 400),
    ("true", True, 400),
]


@pytest.mark.parametrize("field", ["cwd", "transcript_path", "agent_transcript_path", "workspace_roots"])
@pytest.mark.parametrize(("name", "odd", "code"), ODD_PATHS, ids=[o[0] for o in ODD_PATHS])
def test_odd_payload_paths_are_one_line_400s(
    service: Service, field: str, name: str, odd: Any, code: int
) -> None:
    service.user_hooks(UserPromptSubmit=["echo context"])
    service.start()
    value = [odd] if field == "workspace_roots" else odd
    raw = json.dumps(service.prompt(**{field: value}), ensure_ascii=True).encode()
    status, answer = service.dispatch(raw, env={"CLAUDE_PROJECT_DIR": str(service.project)})
    assert status == code, answer
    assert set(answer) == {"detail"} and "\n" not in answer["detail"] and len(answer["detail"]) < 400
    assert service.sandbox.requests == []


@pytest.mark.parametrize(("name", "odd", "code"), [o for o in ODD_PATHS if isinstance(o[1], str)],
                         ids=[o[0] for o in ODD_PATHS if isinstance(o[1], str)])
@pytest.mark.parametrize("where", ["env", "cwd"])
def test_odd_project_paths_are_one_line_4xx(service: Service, where: str, name: str, odd: str, code: int) -> None:
    # issue 21, class 8: these were HTTP 500.
    service.user_hooks(UserPromptSubmit=["echo context"])
    service.start()
    payload = {k: v for k, v in service.prompt().items() if k != "cwd"}
    fields = {"env": {"CLAUDE_PROJECT_DIR": odd}} if where == "env" else {"cwd": odd}
    body = {"version": __version__, "payload_b64": base64.b64encode(json.dumps(payload).encode()).decode(),
            **fields}
    status, _, data = service.call("POST", "/dispatch", json.dumps(body, ensure_ascii=True).encode())
    assert 400 <= status < 500, data
    answer = json.loads(data)
    assert set(answer) == {"detail"} and "\n" not in answer["detail"]
    assert service.sandbox.requests == []


_PIECES = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["..", ".", "", "\x00", "\ud800", "\udcff", "a" * 300, "home", "trust.json", "project",
                     "service-user", "token", "tenants", "proc", "self", "root", "run", "docker.sock"]),
)
_PATHS = st.one_of(
    st.lists(_PIECES, max_size=6).map(lambda parts: "/".join(parts)),
    st.lists(_PIECES, max_size=6).map(lambda parts: "/" + "/".join(parts)),
    st.sampled_from(["{tmp}", "{tmp}/home", "{tmp}/home/trust.json", "{tmp}/project", "{tmp}/project/link",
                     "{tmp}/project/logs/token", "{tmp}/service-user/token", "/", "/" + "a" * 5000]),
)
_ODD = st.one_of(_PATHS, st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
                 st.lists(_PATHS, max_size=3), st.dictionaries(st.text(max_size=4), _PATHS, max_size=2))
_FIELDS = ("cwd", "transcript_path", "agent_transcript_path", "workspace_roots", "new_cwd", "transcriptPath",
           "session_id", "workingDirectory")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(payload_fields=st.dictionaries(st.sampled_from(_FIELDS), _ODD, max_size=4),
       project=st.one_of(st.none(), _PATHS), cwd=st.one_of(st.none(), _PATHS))
def test_no_path_a_request_names_gets_a_500_or_leads_out(
    service: Service, tmp_path: Path, payload_fields: dict[str, Any], project: str | None, cwd: str | None
) -> None:
    # Property (issue 21, classes 2 and 8): whatever path fields the body holds, the answer is
    # 200 or a one-line 4xx, never an exception; a 4xx runs nothing; what runs sees only its project.
    if service.server is None:
        _secrets(service, tmp_path)
        (service.project / "link").symlink_to(service.home / "trust.json")
        (service.project / "logs").symlink_to(tmp_path / "service-user")
        service.user_hooks(UserPromptSubmit=["echo context"])
        service.start(token_file=tmp_path / "service-user" / "token")

    def filled(value: Any) -> Any:
        if isinstance(value, str):
            return value.replace("{tmp}", str(tmp_path))
        if isinstance(value, list):
            return [filled(v) for v in value]
        if isinstance(value, dict):
            return {k: filled(v) for k, v in value.items()}
        return value

    payload = {k: v for k, v in service.prompt(**filled(payload_fields)).items() if v is not None}
    env = {} if project is None else {"CLAUDE_PROJECT_DIR": filled(project)}
    body = {"version": __version__, "payload_b64": base64.b64encode(json.dumps(payload).encode()).decode(),
            "env": env, "cwd": filled(cwd)}
    before = len(service.sandbox.requests)
    status, _, data = service.call("POST", "/dispatch", json.dumps(body).encode())
    assert status in (200, 400, 403, 409, 422), data
    event(f"HTTP {status}")
    answer = json.loads(data)
    if status != 200:
        assert set(answer) == {"detail"} and "\n" not in answer["detail"]
        assert len(service.sandbox.requests) == before
        return
    assert "internal error" not in answer["stdout"] + answer["stderr"], answer
    for request in service.sandbox.requests[before:]:
        assert not Path(request.project_dir).is_relative_to(service.home)
        assert not service.home.is_relative_to(request.project_dir)
        if request.transcript_source is not None:
            assert Path(request.transcript_source).is_relative_to(os.path.realpath(request.project_dir))


def test_the_engines_credentials_are_kept_out_too(
    service: Service, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    certs = tmp_path / "certs"
    certs.mkdir()
    (certs / "key.pem").write_text("ENGINE-CLIENT-KEY")
    (service.service_user / ".docker").mkdir()
    (service.service_user / ".docker" / "config.json").write_text('{"auths": {}}')
    (service.project / "docker-config").symlink_to(service.service_user / ".docker")
    monkeypatch.setenv("DOCKER_CERT_PATH", str(certs))
    service.user_hooks(UserPromptSubmit=["cat-transcript"])
    service.start()
    for transcript in (certs / "key.pem", service.project / "docker-config" / "config.json"):
        status, answer = service.dispatch(_transcript_prompt(service, str(transcript)))
        assert status == 403 and "keeps to itself" in answer["detail"], answer
    assert service.sandbox.requests == []
