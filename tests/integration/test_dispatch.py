"""The protocol end to end through real sandboxes, and the docker CLI commands.

The same cases run through the ``host`` backend and the ``docker`` backend
under runc and under gVisor (parametrised): a hook answers the same way
wherever it runs. Then the "Config and launch" cases of SECURITY-CASES.md,
under both runtimes (``hook_runtime``), proven against the engine's own
event stream (no container was created), and the CLI's docker commands.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from support import (
    OnlyThese,
    agent_session,
    allow,
    commands_in,
    containers_created,
    use_hook_runtime,
)

from executor.core.events import get_event
from executor.dialects import DEFAULT_DIALECT
from executor.executor import HookExecutor
from executor.settings import load_settings

pytestmark = pytest.mark.docker
HOOKCAGE = shutil.which("hookcage")


class Setup:
    def __init__(self, tmp: Path, workspace: Path, backend: str) -> None:
        self.home = tmp / "home"
        self.home.mkdir()
        self.managed = tmp / "managed"
        self.project = workspace
        (workspace / ".hookcage").mkdir(exist_ok=True)
        (workspace / ".hookcage").chmod(0o755)
        self.backend = backend
        self.session = agent_session("it")

    def hook(self, command: str, **extra: Any) -> dict[str, Any]:
        handler: dict[str, Any] = {"type": "command", "command": command, **extra}
        if self.backend == "host":
            handler["sandbox"] = "host"
        return handler

    def user_hooks(self, event: str, *handlers: dict[str, Any], matcher: str | None = None) -> None:
        group: dict[str, Any] = {"hooks": list(handlers)}
        if matcher:
            group["matcher"] = matcher
        data = {"hooks": {event: [group]}}
        (self.home / "hooks.json").write_text(json.dumps(data))
        allow(self.home, commands_in(data))  # as the user would, with `hookcage allow`

    def project_hooks(self, data: dict[str, Any], *, trust: bool = False) -> Path:
        path = self.project / ".hookcage" / "hooks.json"
        path.write_text(json.dumps(data))
        path.chmod(0o644)
        allow(self.home, commands_in(data))
        if trust:
            with HookExecutor(load_settings(home=self.home, managed_dir=self.managed), environ={}) as ex:
                pending, refused = ex.pending_reviews(self.project)
                assert not refused, refused
                ex.grant([subject for _, subject in pending])
        return path

    def dispatch(self, event: str, **fields: Any) -> tuple[int, Any, str]:
        payload = {"session_id": self.session, "cwd": str(self.project), **fields}
        settings = load_settings(home=self.home, managed_dir=self.managed)
        with HookExecutor(settings, environ={}) as ex:
            verdict = ex.dispatch(event, payload)
        answer = DEFAULT_DIALECT.render(get_event(event), verdict)
        out = json.loads(answer.stdout) if answer.stdout else None
        return answer.exit_code, out, answer.stderr


BACKENDS = ["host", "docker-runc", "docker-runsc"]
"""The docker backend under both runtimes: the host's kernel and gVisor's (the default where it is installed)."""


@pytest.fixture(params=BACKENDS)
def setup(request: pytest.FixtureRequest, tmp_path: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch) -> Setup:
    backend, _, runtime = str(request.param).partition("-")
    if backend == "host" and shutil.which("jq") is None:
        pytest.skip("jq is not installed on the host")
    if backend == "docker":
        use_hook_runtime(runtime, request.getfixturevalue("docker_api"), monkeypatch)
        request.getfixturevalue("runner_image")
    return Setup(tmp_path, workspace, backend)


BASH = {"tool_name": "Bash", "tool_input": {"command": "rm -rf /"}}


def deny(reason: str) -> dict[str, Any]:
    """Claude Code's PreToolUse deny, as hookcage answers a blocking verdict (exit 0)."""
    return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                   "permissionDecisionReason": reason}}


def test_exit_2_blocks_with_stderr(setup: Setup) -> None:
    setup.user_hooks("PreToolUse", setup.hook("echo 'no deletes' >&2; exit 2"), matcher="Bash")
    assert setup.dispatch("PreToolUse", **BASH) == (0, deny("no deletes"), "")


def test_hook_reads_the_payload_on_stdin(setup: Setup) -> None:
    guard = ("jq -e '.tool_input.command | test(\"rm -rf\")' >/dev/null "
             "&& { echo \"refused: $(jq -r .tool_input.command)\" >&2; exit 2; }; exit 0")
    setup.user_hooks("PreToolUse", setup.hook(guard), matcher="Bash")
    code, out, err = setup.dispatch("PreToolUse", **BASH)
    assert (code, err) == (0, "")
    assert out["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert out["hookSpecificOutput"]["permissionDecisionReason"].startswith("refused")
    assert setup.dispatch("PreToolUse", tool_name="Bash", tool_input={"command": "ls"}) == (0, {}, "")


def test_json_permission_decisions(setup: Setup) -> None:
    ask = {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "ask",
                                  "permissionDecisionReason": "double-check"}}
    setup.user_hooks("PreToolUse", setup.hook(f"echo '{json.dumps(ask)}'"))
    code, out, _ = setup.dispatch("PreToolUse", **BASH)
    assert code == 0
    assert out["hookSpecificOutput"]["permissionDecision"] == "ask"
    assert out["hookSpecificOutput"]["permissionDecisionReason"] == "double-check"


def test_updated_input_built_from_stdin(setup: Setup) -> None:
    rewrite = ("jq -c '{hookSpecificOutput: {hookEventName: \"PreToolUse\", permissionDecision: \"allow\","
               " updatedInput: {command: (.tool_input.command + \" --dry-run\")}}}'")
    setup.user_hooks("PreToolUse", setup.hook(rewrite))
    code, out, _ = setup.dispatch("PreToolUse", tool_name="Bash", tool_input={"command": "make deploy"})
    assert code == 0
    assert out["hookSpecificOutput"]["updatedInput"] == {"command": "make deploy --dry-run"}


def test_plain_text_becomes_context_on_user_prompt_submit(setup: Setup) -> None:
    setup.user_hooks("UserPromptSubmit", setup.hook("echo \"project at $CLAUDE_PROJECT_DIR, cwd $(pwd)\""))
    code, out, _ = setup.dispatch("UserPromptSubmit", prompt="hi")
    root = os.path.realpath(setup.project)
    assert code == 0
    assert out["hookSpecificOutput"]["additionalContext"] == f"project at {root}, cwd {root}"


def test_stop_hook_sees_stop_hook_active(setup: Setup) -> None:
    setup.user_hooks("Stop", setup.hook(
        "[ \"$(jq -r .stop_hook_active)\" = true ] && exit 0; echo 'keep going' >&2; exit 2"))
    assert setup.dispatch("Stop", stop_hook_active=False) == (0, {"decision": "block", "reason": "keep going"}, "")
    assert setup.dispatch("Stop", stop_hook_active=True) == (0, {}, "")


def test_non_blocking_error_and_continue_false(setup: Setup) -> None:
    setup.user_hooks("PostToolUse",
                     setup.hook("echo 'lint crashed' >&2; exit 3", name="lint"),
                     setup.hook("echo '{\"continue\": false, \"stopReason\": \"build broke\"}'"))
    code, out, _ = setup.dispatch("PostToolUse", tool_name="Bash", tool_input={}, tool_response={})
    assert code == 0
    assert out["continue"] is False and out["stopReason"] == "build broke"
    assert "hook lint failed: exited 3: lint crashed" in out["systemMessage"]


def test_timeout_with_children_holding_stdout(setup: Setup) -> None:
    setup.user_hooks("Stop", setup.hook("sleep 60 & sleep 60", timeout=1, on_error="deny"))
    started = time.monotonic()
    code, out, err = setup.dispatch("Stop")
    assert time.monotonic() - started < 8  # hang detector
    assert (code, err, out["decision"]) == (0, "", "block") and "timed out after 1 s" in out["reason"]


def test_parallel_hooks_fold(setup: Setup) -> None:
    deny = {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                   "permissionDecisionReason": "policy"}}
    ctx = {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow"}}
    setup.user_hooks("PreToolUse", setup.hook(f"echo '{json.dumps(ctx)}'"),
                     setup.hook(f"sleep 0.2; echo '{json.dumps(deny)}'"))
    assert setup.dispatch("PreToolUse", **BASH) == (0, deny, "")


# -- Config and launch (SECURITY-CASES 24-26), docker only -------------------


@pytest.fixture
def docker_setup(tmp_path: Path, workspace: Path, runner_image: str, hook_runtime: str) -> Setup:
    return Setup(tmp_path, workspace, "docker")


@pytest.mark.parametrize(
    ("sandbox", "key"),
    [
        ({"privileged": True}, "sandbox.privileged"),
        ({"cap_add": ["SYS_ADMIN"]}, "sandbox.cap_add"),
        ({"devices": ["/dev/kmsg"]}, "sandbox.devices"),
        ({"network": "host"}, "sandbox.network"),
        ({"pid": "host"}, "sandbox.pid"),
        ({"ipc": "host"}, "sandbox.ipc"),
        ({"mounts": ["/var/run/docker.sock"]}, "sandbox.mounts[0]"),
        ({"mounts": ["/etc"]}, "sandbox.mounts[0]"),
        ({"mounts": ["../.."]}, "sandbox.mounts[0]"),
        ({"image": "--privileged"}, "sandbox.image"),
        ("host", "sandbox"),
    ],
)
def test_project_cannot_widen_the_sandbox(docker_setup: Setup, docker_api: Any, sandbox: Any, key: str) -> None:
    path = docker_setup.project_hooks({"hooks": {"Stop": [{"hooks": [
        {"type": "command", "command": "touch /tmp/x", "sandbox": sandbox}]}]}})
    since = time.time()
    code, out, _ = docker_setup.dispatch("Stop")
    assert code == 0
    assert f"{path}: $.hooks.Stop[0].hooks[0].{key}" in out["systemMessage"]
    assert containers_created(docker_api, docker_setup.session, since) == 0


def test_command_starting_with_dash_is_rejected(docker_setup: Setup, docker_api: Any) -> None:
    path = docker_setup.project_hooks({"hooks": {"Stop": [{"hooks": [
        {"type": "command", "command": "--rm -v /:/host"}]}]}})
    since = time.time()
    _, out, _ = docker_setup.dispatch("Stop")
    assert f"{path}: $.hooks.Stop[0].hooks[0].command: must not start with '-'" in out["systemMessage"]
    assert containers_created(docker_api, docker_setup.session, since) == 0


def test_allowed_hook_does_create_a_container(docker_setup: Setup, docker_api: Any) -> None:
    # The control for the tests above: the event stream does see our containers.
    docker_setup.user_hooks("Stop", docker_setup.hook("true"))
    since = time.time()
    assert docker_setup.dispatch("Stop")[0] == 0
    assert containers_created(docker_api, docker_setup.session, since) == 1


def test_engine_unreachable_follows_on_error(docker_setup: Setup, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    docker_setup.user_hooks("PreToolUse", docker_setup.hook("true", name="lenient"))
    code, out, _ = docker_setup.dispatch("PreToolUse", **BASH)
    assert code == 0
    assert "hook lenient failed: cannot reach the Docker engine" in out["systemMessage"]
    assert "\n" not in out["systemMessage"].split("hookcage: ", 1)[1]
    docker_setup.user_hooks("PreToolUse", docker_setup.hook("true", name="strict", on_error="deny"))
    code, out, err = docker_setup.dispatch("PreToolUse", **BASH)
    assert (code, err, out["hookSpecificOutput"]["permissionDecision"]) == (0, "", "deny")
    assert "strict could not answer (cannot reach the Docker engine" in out["hookSpecificOutput"]["permissionDecisionReason"]


def test_missing_image_says_what_to_do(docker_setup: Setup) -> None:
    docker_setup.user_hooks("Stop", docker_setup.hook("true", sandbox={"image": "hookcage/nope:0"}))
    _, out, _ = docker_setup.dispatch("Stop")
    assert "hookcage/nope:0" in out["systemMessage"] and "missing" in out["systemMessage"]


def test_any_image_with_sh_works(docker_setup: Setup, docker_api: Any) -> None:
    from executor.provision.recipe import BASE_IMAGE

    if not docker_api.images(name=BASE_IMAGE):
        pytest.skip(f"{BASE_IMAGE} is not present")
    docker_setup.user_hooks("UserPromptSubmit", docker_setup.hook("echo from-$(hostname)", sandbox={"image": BASE_IMAGE}))
    _, out, _ = docker_setup.dispatch("UserPromptSubmit", prompt="x")
    assert out["hookSpecificOutput"]["additionalContext"] == "from-hookcage"


def test_findings_name_what_the_sandbox_refused(docker_setup: Setup) -> None:
    # The runner image's own /bin/sh (dash) and shells print these; none of them is a verdict.
    (docker_setup.project / "bad.sh").write_text("echo start\nif then\n")
    docker_setup.user_hooks("PreToolUse",
                            docker_setup.hook("deno --version", name="deno"),
                            docker_setup.hook("echo x > $CLAUDE_PROJECT_DIR/.cache-log", name="project"),
                            docker_setup.hook("echo x > $HOME/.claude/log.txt", name="home"),
                            docker_setup.hook("sh $CLAUDE_PROJECT_DIR/bad.sh", name="syntax"),
                            docker_setup.hook("python3 -c \"import socket; socket.getaddrinfo('example.com', 80)\"",
                                              name="net"))
    code, out, err = docker_setup.dispatch("PreToolUse", **BASH)
    assert (code, err) == (0, "") and "hookSpecificOutput" not in out  # nothing blocked
    lines = out["systemMessage"].splitlines()
    assert ("hookcage: hook deno failed: exited 127: the default image has no `deno`: use an image that has it "
            "(sandbox.image) or see docs/recipes.md") in lines
    root = os.path.realpath(docker_setup.project)
    # The kernel's word for it: EROFS under runc, EACCES under gVisor; the advice is the same.
    assert any(f"hookcage: hook project failed: exited 2 because the shell could not write {root}/.cache-log "
               f"({why}), not as a verdict: the project is read-only in the sandbox; to let this "
               'hook write it: sandbox.workspace: "rw"' in lines
               for why in ("Read-only file system", "Permission denied")), lines
    assert ("hookcage: hook home failed: exited 2 because the shell could not write /tmp/.claude/log.txt "
            "(Directory nonexistent), not as a verdict: the sandbox's home is throw-away and /tmp is the only "
            'writable place; a persistent home: sandbox.home: "persistent" (see docs/sandbox.md)') in lines
    assert (f"hookcage: hook syntax failed: exited 2 on the shell's syntax error, not as a verdict: {root}/bad.sh: "
            '2: Syntax error: "then" unexpected') in lines
    assert ("hookcage: hook net failed: exited 1: socket.gaierror: [Errno -3] Temporary failure in name "
            "resolution; no network in the sandbox (sandbox.network)") in lines


# -- the CLI's docker commands ----------------------------------------------


def hookcage(*args: str, stdin: bytes = b"", cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess[bytes]:
    assert HOOKCAGE is not None, "the hookcage console script is not installed"
    return subprocess.run([HOOKCAGE, *args], input=stdin, capture_output=True, cwd=cwd,
                          env={**os.environ, **env}, timeout=300)


def test_cli_dispatch_end_to_end_through_docker(docker_setup: Setup, tmp_path: Path) -> None:
    docker_setup.project_hooks({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
        {"type": "command", "command": "touch $CLAUDE_PROJECT_DIR/pwned; echo \"write: $?\" >&2; exit 2"}]}]}},
        trust=True)
    payload = json.dumps({"session_id": docker_setup.session, "cwd": str(docker_setup.project), **BASH})
    proc = hookcage("dispatch", "PreToolUse", stdin=payload.encode(), cwd=docker_setup.project,
                    HOOKCAGE_HOME=str(docker_setup.home), HOOKCAGE_MANAGED_DIR=str(docker_setup.managed))
    assert (proc.returncode, proc.stderr) == (0, b"")
    reason = json.loads(proc.stdout)["hookSpecificOutput"]["permissionDecisionReason"]
    assert "Read-only file system" in reason or "Permission denied" in reason
    assert not (docker_setup.project / "pwned").exists()


def test_cli_dispatch_engine_down_is_one_line_no_traceback(docker_setup: Setup) -> None:
    docker_setup.user_hooks("Stop", docker_setup.hook("true"))
    proc = hookcage("dispatch", "Stop", stdin=json.dumps({"session_id": "s", "cwd": str(docker_setup.project)}).encode(),
                    HOOKCAGE_HOME=str(docker_setup.home), HOOKCAGE_MANAGED_DIR=str(docker_setup.managed),
                    DOCKER_HOST="unix:///nonexistent/docker.sock")
    assert proc.returncode == 0 and b"Traceback" not in proc.stderr
    assert "start Docker" in json.loads(proc.stdout)["systemMessage"]


def test_cli_run_passes_stdin_and_exit_code(workspace: Path, runner_image: str) -> None:
    proc = hookcage("run", "--", "wc -c; touch README.md; exit 7", stdin=b"12345", cwd=workspace)
    assert proc.returncode == 7
    assert proc.stdout.strip() == b"5"
    assert b"touch" in proc.stderr


def test_cli_run_widening_and_timeout(workspace: Path, runner_image: str) -> None:
    if os.getuid() == 0:
        # As root, hooks run as the project's owner (never root): make it someone.
        os.chown(workspace, 4321, 4321)
    proc = hookcage("run", "--workspace", "rw", "--", "sh", "-c", "echo hi > made.txt; id -u", cwd=workspace)
    assert proc.returncode == 0, proc.stderr
    assert (workspace / "made.txt").read_text() == "hi\n"
    assert proc.stdout.strip() == str(os.getuid() or 4321).encode()
    proc = hookcage("run", "--timeout", "1", "--", "sleep 30", cwd=workspace)
    assert proc.returncode == 124 and b"timed out after 1 s" in proc.stderr


def test_cli_run_engine_down(workspace: Path) -> None:
    proc = hookcage("run", "--", "true", cwd=workspace, DOCKER_HOST="unix:///nonexistent/docker.sock")
    assert proc.returncode == 1 and b"Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and b"start Docker" in proc.stderr


def test_cli_doctor(runner_image: str) -> None:
    proc = hookcage("doctor")
    assert b"Docker engine" in proc.stdout and b"image hookcage/runner" in proc.stdout
    assert b"[ok] image hookcage/runner:" in proc.stdout and b"built from this version's recipe" in proc.stdout
    down = hookcage("doctor", DOCKER_HOST="unix:///nonexistent/docker.sock")
    assert down.returncode == 1 and b"fix: start Docker" in down.stdout


def test_cli_gc_removes_a_finished_orphan(docker_api: Any, runner_image: str) -> None:
    created = docker_api.create_container(runner_image, command=["true"], labels={
        "hookcage.managed": "true", "hookcage.expires": str(int(time.time()) - 5)})
    proc = hookcage("gc")
    assert proc.returncode == 0 and b"removed" in proc.stdout
    assert not docker_api.containers(all=True, filters={"id": created["Id"]})


def test_cli_demo_passes(runner_image: str, tmp_path: Path) -> None:
    proc = hookcage("demo", HOOKCAGE_HOME=str(tmp_path / "home"))
    assert proc.returncode == 0, proc.stdout.decode() + proc.stderr.decode()
    assert b"demo passed" in proc.stdout


def test_killed_executor_leaves_nothing_the_next_start_does_not_clean(docker_api: Any, workspace: Path,
                                                                     runner_image: str) -> None:
    from executor.sandbox.docker import reap

    assert HOOKCAGE is not None
    since = time.time()
    marker = f"killed-{uuid.uuid4().hex[:12]}"
    proc = subprocess.Popen([HOOKCAGE, "run", "--timeout", "1", "--", f"sleep 100 # {marker}"], cwd=workspace,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    mine: list[dict[str, Any]] = []
    deadline = time.monotonic() + 30
    while not mine and time.monotonic() < deadline:
        # This run's container, by its command: other runs share the engine (under gVisor a container
        # takes longer to start, and another's running one was found first).
        mine = [c for c in docker_api.containers(filters={"label": "hookcage.managed=true"})
                if c["Created"] >= int(since) - 1 and c["State"] == "running" and marker in c["Command"]]
        time.sleep(0.05)
    assert mine, "the run never started a container"
    proc.kill()  # the executor dies mid-run: nobody is left to kill or remove its container
    proc.wait()
    assert docker_api.containers(all=True, filters={"id": mine[0]["Id"]})
    # The next executor's start-up reap, once the run's deadline has passed:
    reap(OnlyThese(docker_api, {mine[0]["Id"]}), now=time.time() + 60)  # (others' runs share the engine)
    assert not docker_api.containers(all=True, filters={"id": mine[0]["Id"]})
