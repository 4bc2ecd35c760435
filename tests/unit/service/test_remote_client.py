"""``hookcage dispatch`` with ``HOOKCAGE_URL``: the stdlib-only client of a remote hookcage service.

No Docker, no real service: a tiny HTTP(S) server on loopback plays the
service and records what it was sent; the client runs as an agent runs it,
a fresh ``python`` per event, with the in-process CLI made impossible to
import (an answer or a fallback line proves it never answered in-process).
The real service (``hookcage serve --listen``) is exercised in
``tests/integration/test_remote_dispatch.py``.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import socketserver
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme

from executor import in_hook
from executor.service import client, remote_client

pytestmark = pytest.mark.spawns

PY = sys.executable
TOKEN = "s3cret-token-0123456789abcdef"
HEAVY = ("docker", "pydantic", "pydantic_settings", "click", "fastapi", "uvicorn", "starlette",
         "tenacity", "tree_sitter", "requests", "http", "urllib", "email")
# The console script's path with the in-process CLI made impossible: it would
# raise ImportError, which the entry point reports as a missing dependency.
REMOTE_ONLY = """
import atexit, sys
before = set(sys.modules)
sys.modules["executor.cli"] = None

def report():
    new = sorted(m for m in set(sys.modules) - before if sys.modules[m] is not None)
    sys.__stderr__.write("\\nIMPORTED:" + ",".join(new) + "\\n")

atexit.register(report)
from executor.entry import main
main(sys.argv[1:])
"""
VERDICT = {"exit_code": 2, "stdout": "", "stderr": "the service says no\n", "agent": "claude"}


def split_imported(stderr: str) -> tuple[str, list[str]]:
    text, _, modules = stderr.rpartition("\nIMPORTED:")
    return text, [m for m in modules.strip().split(",") if m]


def fallback_line(url: str, reason: str, verdict: str = "blocked (HOOKCAGE_ON_ERROR=deny)") -> str:
    return f"hookcage: error: the hookcage service at {url} did not answer ({reason}): {verdict}\n"


# -- a fake service ----------------------------------------------------------------------


class FakeService(socketserver.ThreadingMixIn, socketserver.TCPServer):
    """Answers each request with ``reply(request) -> bytes`` (b"" closes at once); records requests."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, context: ssl.SSLContext | None = None) -> None:
        self.reply: Callable[[dict[str, Any]], bytes] = lambda request: respond(200, VERDICT)
        self.received: list[dict[str, Any]] = []
        self.context = context
        self.early = False  # answer after the head, without reading the body, then close
        super().__init__(("127.0.0.1", 0), _Handler)

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def url(self, path: str = "") -> str:
        scheme = "https" if self.context else "http"
        return f"{scheme}://127.0.0.1:{self.port}{path}"

    def get_request(self) -> tuple[Any, Any]:
        sock, address = super().get_request()
        if self.context is not None:
            sock.settimeout(10)
            sock = self.context.wrap_socket(sock, server_side=True)  # handshake here; a failure drops it
        return sock, address


def respond(status: int, body: Any, extra: str = "") -> bytes:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    head = (f"HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {len(data)}\r\n"
            f"{extra}connection: close\r\n\r\n")
    return head.encode() + data


class _Handler(socketserver.BaseRequestHandler):
    server: FakeService

    def handle(self) -> None:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = self.request.recv(65536)
            if not chunk:
                return
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if self.server.early:
            self.server.received.append({"line": lines[0], "headers": headers, "body": None})
            self.request.sendall(self.server.reply({}))
            self.request.close()  # unread bytes: the kernel resets the connection
            return
        while len(body) < int(headers.get("content-length", "0")):
            body += self.request.recv(65536)
        request = {"line": lines[0], "headers": headers, "body": json.loads(body) if body else None}
        self.server.received.append(request)
        answer = self.server.reply(request)
        if answer:
            self.request.sendall(answer)


@pytest.fixture
def service() -> Iterator[FakeService]:
    server = FakeService()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def tls(tmp_path: Path) -> Iterator[tuple[FakeService, Path]]:
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert.configure_cert(context)
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    server = FakeService(context)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server, ca_file
    server.shutdown()
    server.server_close()


def agent_env(tmp_path: Path, url: str, **extra: str) -> dict[str, str]:
    """An agent's environment: the service's address and token, a home with nothing in it."""
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "HOOKCAGE_HOME": str(tmp_path / "hchome"),
           "HOOKCAGE_URL": url, "HOOKCAGE_TOKEN": TOKEN, "CLAUDE_PROJECT_DIR": str(tmp_path),
           "AWS_SECRET_ACCESS_KEY": "not-for-the-service", "HOOKCAGE_MEMORY": "1g",
           **{k: os.environ[k] for k in ("PYTHONPATH",) if k in os.environ}}  # the checkout under test
    env.update(extra)
    return {k: v for k, v in env.items() if v != "<unset>"}


def run_agent(args: list[str], env: dict[str, str], stdin: bytes = b'{"tool_name": "Bash"}',
              cwd: Path | None = None, timeout: float = 60) -> tuple[int, str, str, list[str]]:
    """``hookcage dispatch ARGS`` as an agent spawns it, in-process made impossible: code, out, err, imports."""
    proc = subprocess.run([PY, "-c", REMOTE_ONLY, *args], input=stdin, capture_output=True, env=env,
                          cwd=cwd or env.get("CLAUDE_PROJECT_DIR"), timeout=timeout)
    stderr, imported = split_imported(proc.stderr.decode())
    return proc.returncode, proc.stdout.decode(), stderr, imported


def not_stdlib(modules: list[str]) -> list[str]:
    ours = {"executor", "executor.core", "executor.core.envnames", "executor.service", "executor.service.client",
            "executor.service.remote_client", "executor.service.wirejson",
            "executor.entry", "executor.in_hook"}
    return [m for m in modules if m not in ours and m.split(".")[0] not in sys.stdlib_module_names]


# -- answered --------------------------------------------------------------------------------


def test_the_services_answer_is_printed_as_is_with_the_standard_library_only(
    service: FakeService, tmp_path: Path
) -> None:
    service.reply = lambda r: respond(200, {"exit_code": 0, "stdout": '{"decision": "x"}\n',
                                            "stderr": "note\n", "agent": "claude"})
    code, out, err, imported = run_agent(["dispatch", "PreToolUse"], agent_env(tmp_path, service.url()))
    assert (code, out, err) == (0, '{"decision": "x"}\n', "note\n")
    assert not [m for m in imported if m.split(".")[0] in HEAVY], imported
    assert not_stdlib(imported) == [], imported
    assert "ssl" not in imported and "socket" not in imported, imported  # http:// costs neither
    [request] = service.received
    assert request["line"] == "POST /dispatch HTTP/1.1"
    assert request["headers"]["authorization"] == f"Bearer {TOKEN}"
    assert request["headers"]["host"] == f"127.0.0.1:{service.port}"
    body = request["body"]
    assert body["protocol"] == 1 and body["event"] == "PreToolUse" and body["agent"] is None
    assert base64.b64decode(body["payload_b64"]) == b'{"tool_name": "Bash"}'
    # Of the environment only where the project is: no settings, no home, never the token.
    assert body["env"] == {"CLAUDE_PROJECT_DIR": str(tmp_path)}
    assert body["home"] is None and body["cwd"] == str(tmp_path)
    assert TOKEN not in json.dumps(body)


@pytest.mark.parametrize("code", [0, 1, 2, 3, 255])
def test_every_exit_code_comes_through(service: FakeService, tmp_path: Path, code: int) -> None:
    service.reply = lambda r: respond(200, {"exit_code": code, "stdout": "o", "stderr": "e", "agent": "codebuddy"})
    got = run_agent(["dispatch", "--agent", "codebuddy", "Stop"], agent_env(tmp_path, service.url()))
    assert got[:3] == (code, "o", "e")
    assert service.received[0]["body"]["agent"] == "codebuddy"


def test_a_url_prefix_and_a_token_file(service: FakeService, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(f"  {TOKEN}  \nsecond line is ignored\n")
    env = agent_env(tmp_path, service.url("/hc/"), HOOKCAGE_TOKEN="<unset>", HOOKCAGE_TOKEN_FILE=str(token_file))
    assert run_agent(["dispatch", "Stop"], env)[:3] == (2, "", "the service says no\n")
    [request] = service.received
    assert request["line"] == "POST /hc/dispatch HTTP/1.1"
    assert request["headers"]["authorization"] == f"Bearer {TOKEN}"


def test_https_with_a_private_ca(tls: tuple[FakeService, Path], tmp_path: Path) -> None:
    server, ca_file = tls
    env = agent_env(tmp_path, server.url(), HOOKCAGE_CA_FILE=str(ca_file))
    code, out, err, imported = run_agent(["dispatch", "Stop"], env)
    assert (code, out, err) == (2, "", "the service says no\n")
    assert "ssl" in imported and not_stdlib(imported) == []
    assert server.received[0]["headers"]["authorization"] == f"Bearer {TOKEN}"


def test_https_refuses_a_certificate_it_cannot_verify(tls: tuple[FakeService, Path], tmp_path: Path) -> None:
    server, ca_file = tls
    url = server.url()
    code, out, err, _ = run_agent(["dispatch", "Stop"], agent_env(tmp_path, url))  # the system CAs only
    assert (code, out) == (2, "")
    assert err.startswith(f"hookcage: error: the hookcage service at {url} did not answer (TLS: ")
    assert "certificate" in err and err.endswith("blocked (HOOKCAGE_ON_ERROR=deny)\n")
    assert server.received == []  # the token never left
    # The right CA, the wrong name: the certificate is for 127.0.0.1, not localhost.
    wrong = f"https://localhost:{server.port}"
    code, _, err, _ = run_agent(["dispatch", "Stop"], agent_env(tmp_path, wrong, HOOKCAGE_CA_FILE=str(ca_file)))
    assert code == 2 and "TLS: " in err and "localhost" in err, err
    assert server.received == []


# -- the service cannot answer: HOOKCAGE_ON_ERROR ------------------------------------------


def _closed_mid_answer(request: dict[str, Any]) -> bytes:
    whole = respond(200, VERDICT)
    return whole[: len(whole) - 10]


CANNOT_ANSWER: list[tuple[str, Callable[[dict[str, Any]], bytes], str]] = [
    ("401", lambda r: respond(401, {"detail": f"bad token {TOKEN}"}, "www-authenticate: Bearer\r\n"),
     "HTTP 401: the token was refused; bad token ***"),
    ("409", lambda r: respond(409, {"detail": "the caller speaks protocol 1, this service 2"}),
     "HTTP 409: the caller speaks protocol 1, this service 2"),
    ("413", lambda r: respond(413, {"detail": "request body too large"}),
     "HTTP 413: the request is larger than the service accepts; request body too large"),
    ("500", lambda r: respond(500, b"Internal Server Error"), "HTTP 500"),
    ("503", lambda r: respond(503, {"detail": "busy"}, "retry-after: 1\r\n"), "HTTP 503: the service is busy; busy"),
    ("closed at once", lambda r: b"", "the connection closed before the answer was complete"),
    ("closed mid-answer", _closed_mid_answer, "the connection closed before the answer was complete"),
    ("not HTTP", lambda r: b"SSH-2.0-OpenSSH_9.6\r\n\r\n", "not an HTTP response: 'SSH-2.0-OpenSSH_9.6'"),
    ("not JSON", lambda r: respond(200, b"<html>"), "the service's answer is not JSON"),
    ("no verdict", lambda r: respond(200, {"exit_code": "0"}), "the service's answer lacks exit_code, stdout or stderr"),
    ("another agent", lambda r: respond(200, {**VERDICT, "agent": "cursor"}),
     "the service answered as agent 'cursor', not 'codebuddy'"),
]


@pytest.mark.parametrize(("name", "reply", "reason"), CANNOT_ANSWER, ids=[c[0] for c in CANNOT_ANSWER])
@pytest.mark.parametrize(
    ("extra", "code", "verdict"),
    [
        ({}, 2, "blocked (HOOKCAGE_ON_ERROR=deny)"),
        ({"HOOKCAGE_ON_ERROR": "deny"}, 2, "blocked (HOOKCAGE_ON_ERROR=deny)"),
        ({"HOOKCAGE_ON_ERROR": "allow"}, 0, "allowed (HOOKCAGE_ON_ERROR=allow)"),
        ({"HOOKCAGE_ON_ERROR": "Allow "}, 0, "allowed (HOOKCAGE_ON_ERROR=allow)"),
        ({"HOOKCAGE_ON_ERROR": "allow", "HOOKCAGE_FAIL_CLOSED": "1"}, 2, "blocked (HOOKCAGE_FAIL_CLOSED=1)"),
        ({"HOOKCAGE_ON_ERROR": "alow"}, 2, "blocked (HOOKCAGE_ON_ERROR='alow' is not deny or allow)"),
    ],
    ids=["default", "deny", "allow", "allow spelled loosely", "fail-closed wins", "a typo denies"],
)
def test_what_the_service_cannot_answer_follows_on_error(
    service: FakeService, tmp_path: Path, name: str, reply: Callable[[dict[str, Any]], bytes], reason: str,
    extra: dict[str, str], code: int, verdict: str,
) -> None:
    service.reply = reply
    env = agent_env(tmp_path, service.url(), **extra)
    got = run_agent(["dispatch", "--agent", "codebuddy", "PreToolUse"], env)
    assert got[:3] == (code, "", fallback_line(service.url(), reason, verdict))
    assert len(service.received) == 1  # asked once; never answered in-process (it cannot be imported)
    assert TOKEN not in got[2]


def test_nobody_listening_is_refused_at_once(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # bound, never listening: connections are refused
        url = f"http://127.0.0.1:{port}"
        got = run_agent(["dispatch", "Stop"], agent_env(tmp_path, url, HOOKCAGE_ON_ERROR="allow"))
    assert got[:3] == (0, "", fallback_line(url, "connection refused", "allowed (HOOKCAGE_ON_ERROR=allow)"))


def test_a_name_that_does_not_resolve(tmp_path: Path) -> None:
    url = "http://no-such-host.invalid:8787"
    code, out, err, _ = run_agent(["dispatch", "Stop"], agent_env(tmp_path, url))
    assert (code, out) == (2, "")
    assert err.startswith(f"hookcage: error: the hookcage service at {url} did not answer "
                          "(cannot resolve no-such-host.invalid"), err


def test_a_service_that_never_answers_costs_the_client_timeout(service: FakeService, tmp_path: Path) -> None:
    release = threading.Event()

    def hang(request: dict[str, Any]) -> bytes:
        release.wait(30)
        return b""

    service.reply = hang
    env = agent_env(tmp_path, service.url(), HOOKCAGE_CLIENT_TIMEOUT="1.5")
    try:
        got = run_agent(["dispatch", "Stop"], env)
    finally:
        release.set()
    assert got[:3] == (2, "", fallback_line(service.url(), "no answer within 1.5 s"))


def test_a_service_whose_backlog_is_full_costs_the_connect_timeout(tmp_path: Path) -> None:
    # Nobody accepts, and the kernel's queue is full: the client's SYN goes unanswered.
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    try:
        for _ in range(8):
            filler = socket.socket()
            filler.setblocking(False)
            filler.connect_ex(("127.0.0.1", port))
            fillers.append(filler)
        time.sleep(0.2)
        url = f"http://127.0.0.1:{port}"
        env = agent_env(tmp_path, url, HOOKCAGE_CONNECT_TIMEOUT="1")
        got = run_agent(["dispatch", "Stop"], env)
    finally:
        for filler in fillers:
            filler.close()
        listener.close()
    assert got[:3] == (2, "", fallback_line(url, "no connection within 1 s"))


def test_a_tls_service_that_never_shakes_hands_costs_the_connect_timeout(tmp_path: Path) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)  # accepted by the kernel, never spoken to
    url = f"https://127.0.0.1:{listener.getsockname()[1]}"
    try:
        got = run_agent(["dispatch", "Stop"], agent_env(tmp_path, url, HOOKCAGE_CONNECT_TIMEOUT="1"))
    finally:
        listener.close()
    assert got[:3] == (2, "", fallback_line(url, "no TLS handshake within 1 s"))


@pytest.mark.parametrize(
    ("extra", "reason"),
    [
        ({"HOOKCAGE_TOKEN": "<unset>"}, "no token: set HOOKCAGE_TOKEN or HOOKCAGE_TOKEN_FILE"),
        ({"HOOKCAGE_TOKEN": ""}, "no token: set HOOKCAGE_TOKEN or HOOKCAGE_TOKEN_FILE"),
        ({"HOOKCAGE_TOKEN": "two words"},
         "HOOKCAGE_TOKEN holds characters an HTTP header cannot carry (spaces, control or non-ASCII)"),
        ({"HOOKCAGE_TOKEN": "abc\r\nX-Evil: 1"},
         "HOOKCAGE_TOKEN holds characters an HTTP header cannot carry (spaces, control or non-ASCII)"),
        ({"HOOKCAGE_TOKEN": "<unset>", "HOOKCAGE_TOKEN_FILE": "/nonexistent/token"},
         "cannot read HOOKCAGE_TOKEN_FILE /nonexistent/token: No such file or directory"),
    ],
)
def test_without_a_usable_token_nothing_is_sent(
    service: FakeService, tmp_path: Path, extra: dict[str, str], reason: str
) -> None:
    got = run_agent(["dispatch", "Stop"], agent_env(tmp_path, service.url(), **extra))
    assert got[:3] == (2, "", fallback_line(service.url(), reason))
    assert service.received == []


def test_an_empty_token_file(service: FakeService, tmp_path: Path) -> None:
    (tmp_path / "token").write_text("\n" + TOKEN + "\n")  # the first line is the token: empty
    env = agent_env(tmp_path, service.url(), HOOKCAGE_TOKEN="<unset>", HOOKCAGE_TOKEN_FILE=str(tmp_path / "token"))
    reason = f"the first line of HOOKCAGE_TOKEN_FILE {tmp_path / 'token'} is empty"
    assert run_agent(["dispatch", "Stop"], env)[:3] == (2, "", fallback_line(service.url(), reason))
    assert service.received == []


@pytest.mark.parametrize(
    "url",
    ["ftp://host", "host:8787", "http://user:pw@host:1", "http://host:99999", "http://host:/", "http://",
     "http://host?token=x", "http://[::1", "http://ho st"],
)
def test_a_bad_url_is_named_not_repeated(tmp_path: Path, url: str) -> None:
    code, out, err, _ = run_agent(["dispatch", "Stop"], agent_env(tmp_path, url))
    assert (code, out) == (2, "")
    assert err.startswith("hookcage: error: the hookcage service at HOOKCAGE_URL did not answer "
                          "(HOOKCAGE_URL must look like http(s)://HOST[:PORT][/PREFIX]: ")
    assert url not in err


def test_other_dispatch_arguments_are_not_answered_in_process(service: FakeService, tmp_path: Path) -> None:
    env = agent_env(tmp_path, service.url(), HOOKCAGE_ON_ERROR="allow")
    code, out, err, _ = run_agent(["dispatch", "--agent", "claude", "--agent", "codebuddy", "Stop"], env)
    assert (code, out) == (0, "")
    assert err == ("hookcage: error: with HOOKCAGE_URL set, hookcage dispatch takes [EVENT] [--agent NAME] only, "
                   "not '--agent claude --agent codebuddy Stop': allowed (HOOKCAGE_ON_ERROR=allow)\n")
    assert service.received == []


def test_a_hook_calling_hookcage_is_answered_at_once(service: FakeService, tmp_path: Path) -> None:
    # This process stands for the hookcage that runs the hook: it holds the marker the value names.
    marker = in_hook.Marker()
    try:
        env = agent_env(tmp_path, service.url(), HOOKCAGE_IN_HOOK=marker.value())
        assert run_agent(["dispatch", "Stop"], env)[:2] == (0, "{}\n")
    finally:
        marker.close()
    assert service.received == []


@pytest.mark.parametrize(
    "value",
    ["1", "yes", f"{os.getpid()}:3:{'0' * 32}", "1:0:" + "a" * 32],
    ids=["1", "yes", "this-pid-marker", "pid-1-marker"],  # the same ids in every xdist worker
)
def test_an_agent_environment_that_says_in_hook_is_answered_by_the_service(
    service: FakeService, tmp_path: Path, value: str
) -> None:
    """HOOKCAGE_IN_HOOK set by a repository's `env` (or copied from a hook) no longer silences the
    service's hooks: the value proves nothing here, so the event goes to the service."""
    code, _, err, _ = run_agent(["dispatch", "Stop"], agent_env(tmp_path, service.url(), HOOKCAGE_IN_HOOK=value))
    assert (code, err.splitlines()[0]) == (2, "hookcage: HOOKCAGE_IN_HOOK is set, but not by a hook hookcage runs: "
                                              "ignored, every hook runs")
    assert len(service.received) == 1


def test_without_dependencies_other_commands_say_so_in_one_line(tmp_path: Path) -> None:
    code, out, err, _ = run_agent(["list"], agent_env(tmp_path, "http://127.0.0.1:9"))
    assert (code, out) == (1, "")
    assert err.startswith("hookcage: error: this hookcage cannot run in-process: module 'executor.cli' is missing")
    assert err.count("\n") == 1


# -- the pieces ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://hookcage:8787", remote_client.Remote("http", "hookcage", 8787, "")),
        ("HTTPS://Service.Example", remote_client.Remote("https", "service.example", 443, "")),
        ("http://127.0.0.1", remote_client.Remote("http", "127.0.0.1", 80, "")),
        ("http://[::1]:9/", remote_client.Remote("http", "::1", 9, "")),
        ("https://h:1/a/b/", remote_client.Remote("https", "h", 1, "/a/b")),
        (" http://h:1 ", remote_client.Remote("http", "h", 1, "")),
    ],
)
def test_urls(url: str, expected: remote_client.Remote) -> None:
    assert remote_client.parse_url(url) == expected


def test_authority_and_display() -> None:
    assert remote_client.parse_url("http://[::1]:9/x").authority == "[::1]:9"
    assert str(remote_client.parse_url("https://h/x/")) == "https://h:443/x"


def test_a_payload_past_the_bound_blocks_whatever_on_error_says(
    service: FakeService, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(client, "MAX_PAYLOAD", 10)
    env = {"HOOKCAGE_URL": service.url(), "HOOKCAGE_TOKEN": TOKEN, "HOOKCAGE_ON_ERROR": "allow"}
    answer = remote_client.remote("Stop", b"x" * 11, env)
    assert answer.exit_code == 2 and answer.stdout == "" and "refused" in answer.stderr
    assert service.received == []
    assert remote_client.remote("Stop", b"x" * 10, env) == client.Answer(2, "", "the service says no\n")


def test_the_token_is_never_forwarded_to_the_local_daemon() -> None:
    env = {"HOOKCAGE_TOKEN": TOKEN, "HOOKCAGE_TOKEN_FILE": "/t", "HOOKCAGE_MEMORY": "1g"}
    assert client.forwarded_env(env) == {"HOOKCAGE_MEMORY": "1g"}


def test_on_error() -> None:
    assert remote_client.on_error({}) == (False, "HOOKCAGE_ON_ERROR=deny")
    assert remote_client.on_error({"HOOKCAGE_ON_ERROR": "ALLOW"}) == (True, "HOOKCAGE_ON_ERROR=allow")
    assert remote_client.on_error({"HOOKCAGE_ON_ERROR": "allow", "HOOKCAGE_FAIL_CLOSED": "true"}) == (
        False, "HOOKCAGE_FAIL_CLOSED=1")
    assert remote_client.on_error({"HOOKCAGE_ON_ERROR": "allow", "HOOKCAGE_FAIL_CLOSED": "0"})[0] is True


def test_without_dependencies_the_version_still_shows(tmp_path: Path) -> None:
    code, out, err, _ = run_agent(["--version"], agent_env(tmp_path, "http://127.0.0.1:9"))
    assert (code, out, err) == (0, f"hookcage, version {client.__version__}\n", "")


@pytest.mark.parametrize(("content", "why"), [(None, "No such file or directory"), ("not a certificate\n", "")])
def test_an_unusable_ca_file_is_named_and_nothing_is_sent(
    tls: tuple[FakeService, Path], tmp_path: Path, content: str | None, why: str
) -> None:
    server, _ = tls
    ca_file = tmp_path / "bad-ca.pem"
    if content is not None:
        ca_file.write_text(content)
    code, out, err, _ = run_agent(["dispatch", "Stop"], agent_env(tmp_path, server.url(), HOOKCAGE_CA_FILE=str(ca_file)))
    assert (code, out) == (2, "")
    assert err.startswith(f"hookcage: error: the hookcage service at {server.url()} did not answer "
                          f"(cannot use HOOKCAGE_CA_FILE {ca_file}: {why}")
    assert server.received == []


def test_a_refusal_sent_before_the_body_was_read_is_still_read(service: FakeService, tmp_path: Path) -> None:
    # The service refuses on Content-Length and closes while the client still sends: the
    # 413 it wrote is what the client reports, not the reset that follows it.
    service.early = True
    service.reply = lambda r: respond(413, {"detail": "request body over 1000 bytes"})
    payload = json.dumps({"prompt": "x" * (8 * 1024 * 1024)}).encode()
    got = run_agent(["dispatch", "UserPromptSubmit"], agent_env(tmp_path, service.url()), stdin=payload)
    reason = "HTTP 413: the request is larger than the service accepts; request body over 1000 bytes"
    assert got[:3] == (2, "", fallback_line(service.url(), reason))
