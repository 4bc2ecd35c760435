"""compose.yaml for real: `docker-compose up`, the example agent's container, then `down -v`.

The service image and the example agent's are built first (offline,
``build_service_images``; a no-op when current). One project per test, named
after this test session. The workspace is a copy of the example's, its hooks
trusted through a reviewed export (``hookcage trust export`` ->
``HOOKCAGE_TRUST_FILE``) and allow-listed by the example's managed
config.toml, the same files for the service and for the local path.

What a user must be able to count on:

* the agent container's events (``hookcage dispatch --agent claude`` with
  HOOKCAGE_URL and HOOKCAGE_TOKEN, hookcage installed there without its
  dependencies) get the answers the local path gives (``hookcage dispatch``
  in-process on the same workspace, trust and allow-list): same exit codes,
  stdout and stderr, and the same run log, the hooks run as sibling
  containers;
* a wrong or missing token is refused (401) on every endpoint and from the
  agent's container (which then blocks, per HOOKCAGE_ON_ERROR=deny), and
  nothing runs: not one run-log line;
* ``down -v`` leaves nothing: no compose container, network or volume, and
  no container the service started (its warm pool included, found by the
  service's pid namespace in their ``hookcage.owner`` label).
"""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import docker.errors  # type: ignore[import-untyped, unused-ignore]
import pytest
from support import TEST_SESSION_ENV, agent_session

from executor.errors import HookcageError
from executor.provision.service_image import AGENT_IMAGE, SERVICE_IMAGE
from executor.sandbox.docker import MANAGED_LABEL
from executor.sandbox.orphans import OWNER_LABEL

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "compose.yaml"
EXAMPLE = ROOT / "examples" / "compose-agent"
REQUIRED = os.environ.get("CI") == "true" or bool(os.environ.get("HOOKCAGE_REQUIRE_DOCKER"))
HEALTH_DEADLINE = 180.0
"""Seconds the service may take to become healthy (a loaded 2-core machine)."""
DOWN_DEADLINE = 60.0
"""Seconds the service's containers may take to go once the project is down."""


def _unavailable(message: str) -> None:
    if REQUIRED:
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="module")
def compose_tool() -> str:
    tool = shutil.which("docker-compose")
    if tool is None:
        _unavailable("docker-compose (v1) is not installed: apt-get install docker-compose")
    assert tool is not None
    return tool


@pytest.fixture(scope="module")
def service_images(docker_api: Any, runner_image: str) -> tuple[str, str]:
    """Both images of compose.yaml, built when missing or stale (a few minutes then)."""
    from executor.provision.service_image import build_service_images

    try:
        return build_service_images(docker_api, log=lambda line: print(f"[service image] {line}"))
    except HookcageError as exc:
        _unavailable(f"{SERVICE_IMAGE} could not be built: {exc}")
        raise


@pytest.fixture(scope="module")
def play() -> ModuleType:
    """The example agent's play.py, for its event files."""
    spec = importlib.util.spec_from_file_location("compose_agent_play", EXAMPLE / "play.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HOOKCAGE_", "COMPOSE_", "CLAUDE_"))}
    env[TEST_SESSION_ENV] = os.environ[TEST_SESSION_ENV]
    return {**env, **extra}


@dataclass
class Stack:
    """A compose project of compose.yaml, up."""

    tool: str
    project: str
    env: dict[str, str]
    workspace: Path
    config: Path
    token: str
    port: int = 0

    def compose(self, *args: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [self.tool, "-f", str(COMPOSE), "-p", self.project, *args],
            env=self.env, capture_output=True, text=True, timeout=timeout, check=False,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"docker-compose {' '.join(args)} failed ({done.returncode}): {done.stderr[-3000:]}")
        return done

    def agent(self, session: str, **env: str) -> list[dict[str, Any]]:
        """Run the example agent once (``run --rm``); its JSON lines, one per hook command run."""
        extra = [arg for name, value in env.items() for arg in ("-e", f"{name}={value}")]
        done = self.compose("--profile", "agent", "run", "--rm", "-T", "-e", f"AGENT_SESSION_ID={session}",
                            *extra, "agent", "--json")
        return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]

    def service_log(self) -> list[dict[str, Any]]:
        """The service's run log, read inside its container (its home is the named volume)."""
        done = self.compose("exec", "-T", "hookcage", "sh", "-c", 'cat "$HOOKCAGE_HOME/runs.jsonl" 2>/dev/null || true')
        return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]

    def request(self, method: str, path: str, body: bytes | None = None,
                token: str | None = None) -> tuple[int, dict[str, str], str]:
        headers = {"Content-Type": "application/json"}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        call = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=body, method=method,
                                      headers=headers)
        try:
            with urllib.request.urlopen(call, timeout=30) as answer:
                return answer.status, dict(answer.headers), answer.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, dict(exc.headers), exc.read().decode()


def _service_container(stack: Stack) -> str:
    ids = stack.compose("ps", "-q", "hookcage").stdout.split()
    assert len(ids) == 1, ids
    return ids[0]


def _wait_healthy(stack: Stack, docker_api: Any) -> None:
    container = _service_container(stack)
    deadline = time.monotonic() + HEALTH_DEADLINE
    status = "?"
    while time.monotonic() < deadline:
        state = docker_api.inspect_container(container)["State"]
        status = (state.get("Health") or {}).get("Status", state["Status"])
        if status == "healthy":
            return
        if not state["Running"] and not state.get("Restarting"):
            break
        time.sleep(1)
    logs = stack.compose("logs", "--no-color", "hookcage", check=False).stdout[-3000:]
    raise AssertionError(f"the hookcage service is {status}, not healthy:\n{logs}")


def _pid_namespace(docker_api: Any, container: str) -> str:
    """The pid namespace of a running container, as its processes' ``hookcage.owner`` labels name it."""
    pid = docker_api.inspect_container(container)["State"]["Pid"]
    return os.readlink(f"/proc/{pid}/ns/pid")


def _owned_by(docker_api: Any, namespace: str) -> list[dict[str, Any]]:
    """Managed containers started by a process of that pid namespace."""
    return [c for c in docker_api.containers(all=True, filters={"label": f"{MANAGED_LABEL}=true"})
            if f"/{namespace}/" in (c.get("Labels") or {}).get(OWNER_LABEL, "")]


@pytest.fixture
def stack(tmp_path: Path, compose_tool: str, service_images: tuple[str, str], docker_api: Any) -> Iterator[Stack]:
    """compose.yaml up on a copy of the example workspace, trusted from an export; down -v after."""
    workspace = tmp_path / "project"
    shutil.copytree(EXAMPLE / "workspace", workspace)
    config = tmp_path / "config"
    shutil.copytree(EXAMPLE / "config", config)
    reviewer = _clean_env(HOOKCAGE_HOME=str(tmp_path / "reviewer-home"), HOOKCAGE_MANAGED_DIR=str(config))
    trusted = subprocess.run(["hookcage", "trust", "--all", "--yes", "--project", str(workspace)],
                             env=reviewer, capture_output=True, text=True, timeout=300, check=False)
    assert trusted.returncode == 0, trusted.stderr
    export = subprocess.run(["hookcage", "trust", "export"], env=reviewer, capture_output=True, text=True,
                            timeout=60, check=True)
    (config / "trust.json").write_text(export.stdout)
    assert len(json.loads(export.stdout)["records"]) == 4
    stack = Stack(
        tool=compose_tool,
        project=f"hookcage{os.environ[TEST_SESSION_ENV]}{uuid.uuid4().hex[:6]}".lower(),
        env=_clean_env(
            HOOKCAGE_TOKEN=f"tok-{uuid.uuid4().hex}",
            HOOKCAGE_WORKSPACE=str(workspace),
            HOOKCAGE_CONFIG=str(config),
            HOOKCAGE_TRUST_FILE="/etc/hookcage/trust.json",
            HOOKCAGE_PORT="0",  # the engine picks a free one
        ),
        workspace=workspace,
        config=config,
        token="",
    )
    stack.token = stack.env["HOOKCAGE_TOKEN"]
    try:
        stack.compose("up", "-d")
        stack.port = int(stack.compose("port", "hookcage", "8787").stdout.strip().rsplit(":", 1)[1])
        _wait_healthy(stack, docker_api)
        yield stack
    finally:
        stack.compose("down", "-v", "--remove-orphans", check=False)


def _local(workspace: Path, config: Path, home: Path, payload: dict[str, Any]) -> dict[str, Any]:
    """``hookcage dispatch --agent claude`` in-process, with the service's trust and allow-list."""
    done = subprocess.run(
        ["sh", "-c", "hookcage dispatch --agent claude"],
        input=json.dumps(payload).encode(),
        env=_clean_env(HOOKCAGE_HOME=str(home), HOOKCAGE_MANAGED_DIR=str(config),
                       HOOKCAGE_TRUST_FILE=str(config / "trust.json"), CLAUDE_PROJECT_DIR=str(workspace)),
        cwd=workspace, capture_output=True, timeout=300, check=False,
    )
    return {"exit_code": done.returncode, "stdout": done.stdout.decode(), "stderr": done.stderr.decode()}


def _comparable(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k not in ("time", "duration_ms")} for r in records]


def test_the_agent_container_gets_the_local_answers_and_log_and_down_leaves_nothing(
    stack: Stack, docker_api: Any, play: ModuleType, tmp_path: Path,
) -> None:
    project = {"label": f"com.docker.compose.project={stack.project}"}
    started = [c["Labels"]["com.docker.compose.service"] for c in docker_api.containers(all=True, filters=project)]
    assert started == ["hookcage"], "up starts the service only: the agent waits for its profile"
    session = agent_session("compose")

    # The agent's container, through the service.
    remote = stack.agent(session)
    events = play.load_events(EXAMPLE / "events", str(stack.workspace), session)
    assert [r["event"] for r in remote] == [name for name, _ in events]
    assert all(r["command"] == "hookcage dispatch --agent claude" for r in remote)

    # The local path: in-process, same workspace, trust export and allow-list, a fresh home.
    local_home = tmp_path / "local-home"
    local = [_local(stack.workspace, stack.config, local_home, payload) for _, payload in events]
    assert [{k: r[k] for k in ("exit_code", "stdout", "stderr")} for r in remote] == local

    # Not a pair of equal failures: the example's verdicts, with the hooks run in containers.
    answers = {r["event"]: json.loads(r["stdout"] or "{}") for r in remote}
    assert "unittest" in answers["01-session-start"]["hookSpecificOutput"]["additionalContext"]
    assert answers["03-run-tests"] == {}
    for event, hook in (("04-rm-rf", "rm-guard"), ("05-write-env", "protect-env")):
        decision = answers[event]["hookSpecificOutput"]
        assert decision["permissionDecision"] == "deny" and decision["permissionDecisionReason"].startswith(hook)
    assert "telemetry not run" in answers["06-tests-ran"]["systemMessage"]
    assert all(r["exit_code"] == 0 for r in remote)

    service_log = stack.service_log()
    local_log = [json.loads(line) for line in (local_home / "runs.jsonl").read_text().splitlines()]
    assert _comparable(service_log) == _comparable(local_log)
    ran = {r["name"]: r for r in service_log if r["outcome"] == "ran"}
    assert sorted(ran) == ["protect-env", "rm-guard", "session-context"]
    assert all(r["sandbox"].startswith("docker(") and r["session"] == session for r in ran.values())
    assert [r["skip_reason"] for r in service_log if r["outcome"] == "skipped"] == ["not_allowlisted"]

    # The token does not open other directories the service sees: only the workspace is a project
    # (the keep-out answers 403, docs/service.md "Every path a request names").
    lines_before = len(service_log)
    for elsewhere in ("/etc/hookcage", "/var/lib/hookcage", "/"):
        foreign = json.dumps({
            "event": "SessionStart", "agent": "claude", "protocol": 1, "cwd": elsewhere,
            "env": {"CLAUDE_PROJECT_DIR": elsewhere},
            "payload_b64": base64.b64encode(json.dumps({**dict(events)["01-session-start"], "cwd": elsewhere}).encode()).decode(),
        }).encode()
        status, _, text = stack.request("POST", "/dispatch", foreign, token=stack.token)
        assert status == 403 and elsewhere in json.loads(text)["detail"], (elsewhere, status, text)
    assert len(stack.service_log()) == lines_before

    # A wrong or missing token: 401 on every endpoint, and nothing run.
    body = json.dumps({
        "event": "PreToolUse", "agent": "claude", "protocol": 1, "cwd": str(stack.workspace),
        "env": {"CLAUDE_PROJECT_DIR": str(stack.workspace)},
        "payload_b64": base64.b64encode(json.dumps(dict(events)["04-rm-rf"]).encode()).decode(),
    }).encode()
    for token in (None, "", "wrong-" + stack.token[6:], stack.token + "x"):
        for method, path, data in (("POST", "/dispatch", body), ("GET", "/metrics", None),
                                   ("GET", "/openapi.json", None)):
            status, headers, text = stack.request(method, path, data, token=token)
            assert status == 401, (method, path, token, status, text)
            assert headers.get("www-authenticate", headers.get("WWW-Authenticate", "")).startswith("Bearer")
            assert stack.token not in text
    assert stack.request("GET", "/health", token=stack.token + "x")[0] == 401
    status, _, text = stack.request("GET", "/health")  # liveness only, without a token
    assert status == 200 and json.loads(text) == {"status": "ok"}
    refused_session = agent_session("compose-refused")
    for token in ("wrong-token-0123456789abcdef", ""):
        refused = stack.agent(refused_session, HOOKCAGE_TOKEN=token)
        assert len(refused) == len(events)
        for run in refused:
            assert run["exit_code"] == 2 and run["stdout"] == "", run
            assert run["stderr"].startswith("hookcage: error: the hookcage service at http://hookcage:8787 ")
            assert run["stderr"].rstrip().endswith("blocked (HOOKCAGE_ON_ERROR=deny)"), run
            assert len(run["stderr"].splitlines()) == 1 and stack.token not in run["stderr"]
    assert len(stack.service_log()) == lines_before, "a refused request must run nothing"
    assert not docker_api.containers(all=True, filters={"label": f"hookcage.session={refused_session}"})

    # down -v: nothing of the project is left, nor any container the service started.
    service = _service_container(stack)
    namespace = _pid_namespace(docker_api, service)
    assert _owned_by(docker_api, namespace), "the service keeps a warm pool: its containers must be found"
    volumes = [v["Name"] for v in docker_api.volumes()["Volumes"] or [] if v["Name"].startswith(stack.project)]
    assert volumes == [f"{stack.project}_hookcage-home"]
    stack.compose("down", "-v")
    assert not docker_api.containers(all=True, filters=project)
    assert not [v for v in docker_api.volumes()["Volumes"] or [] if v["Name"].startswith(stack.project)]
    assert not docker_api.networks(filters=project)
    deadline = time.monotonic() + DOWN_DEADLINE
    while _owned_by(docker_api, namespace) and time.monotonic() < deadline:
        time.sleep(0.5)
    left = [f"{c['Names'][0]} ({c['State']})" for c in _owned_by(docker_api, namespace)]
    assert not left, f"containers the service started outlived down -v: {left}"
    with pytest.raises(docker.errors.NotFound):
        docker_api.inspect_container(service)


def test_image_build_service_returns_current_images_at_once(service_images: tuple[str, str]) -> None:
    done = subprocess.run(["hookcage", "image", "build", "--service"], env=_clean_env(),
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"{SERVICE_IMAGE} {service_images[0]}", f"{AGENT_IMAGE} {service_images[1]}"]
    assert "nothing to build" in done.stderr


def test_a_stale_service_image_is_rebuilt_with_the_new_inputs(
    docker_api: Any, service_images: tuple[str, str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    from executor.provision import service_image
    from executor.provision.recipe import INPUTS_LABEL

    # Another source file, pin, Dockerfile or runner: other inputs than the present images' label.
    monkeypatch.setattr(service_image, "service_inputs", lambda *a, **k: "sha256:other")
    monkeypatch.setattr(service_image, "prepare_contexts",
                        lambda root, dest, *a, **k: (dest / "service", dest / "agent", dest / "source"))
    monkeypatch.setattr(service_image, "remove_superseded", lambda *a, **k: None)
    built: list[tuple[str, dict[str, str], bool]] = []

    def docker_build(client: Any, context: Path, *, tag: str, labels: dict[str, str], offline: bool,
                     **kwargs: Any) -> str:
        built.append((tag, labels, offline))
        return service_images[0] if tag == SERVICE_IMAGE else service_images[1]

    monkeypatch.setattr(service_image, "docker_build", docker_build)
    lines: list[str] = []
    assert service_image.build_service_images(docker_api, log=lines.append) == service_images
    assert built == [(SERVICE_IMAGE, {INPUTS_LABEL: "sha256:other"}, True),
                     (AGENT_IMAGE, {INPUTS_LABEL: "sha256:other"}, True)]
    assert any("built from other inputs" in line for line in lines)
