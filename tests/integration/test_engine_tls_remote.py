"""A remote engine over TCP + TLS, cold and warm, through Debian's stunnel4 (issue 15).

``stunnel_support.StunnelEngine`` puts this machine's engine behind
``tcp://127.0.0.1:PORT`` with TLS and a client certificate required (a
throwaway CA from trustme), as a ``dockerd --tlsverify`` on another host (or
GitLab's ``docker:dind``) offers one. The client side is only what a user
sets: ``DOCKER_HOST``, ``DOCKER_TLS_VERIFY=1``, ``DOCKER_CERT_PATH``.

- ``hookcage run`` (cold) and ``hookcage serve`` + ``hookcage dispatch`` (warm:
  the service's pool says so in ``/health``) through it;
- the containment cases about the stream, warm over TLS: a timeout (12),
  background children and a child holding stdout (13), output past the cap
  (14), escapes and invalid UTF-8 reaching the agent escaped (15), 10 MB of
  stdin read, 10 MB unread, or none (23);
- a client certificate the engine does not know: one line, nothing run;
- a workspace the engine's host does not have at that path (hookcage in a
  private mount namespace, a tmpfs over the workspace's parent): the run is
  refused in one line instead of mounting an empty directory.

Every container is removed (the suite's autouse check); stunnel is stopped
at the end of the module.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme
from daemon_support import Daemon
from stunnel_support import StunnelEngine, stunnel_binary, stunnel_pid_alive
from support import CLEARED_ENV, agent_session

from executor.sandbox.base import RunRequest
from executor.sandbox.docker import MANAGED_LABEL, default_client, over_tls
from executor.sandbox.pool import PooledDockerSandbox

pytestmark = pytest.mark.docker

MiB = 1024 * 1024
SESSION = os.environ["HOOKCAGE_TEST_SESSION"]
LABELS = {"hookcage.test-session": SESSION}
HOOKCAGE = shutil.which("hookcage")


@pytest.fixture(scope="module")
def engine(docker_api: Any) -> Iterator[StunnelEngine]:
    """stunnel in front of the engine's socket; stopped (and checked gone) at the end."""
    if stunnel_binary() is None:
        if os.environ.get("CI") == "true":
            pytest.fail("stunnel4 is not installed (.ci/run installs it)", pytrace=False)
        pytest.skip("stunnel4 is not installed (apt-get install stunnel4)")
    with StunnelEngine() as tunnel:
        assert tunnel.process is not None
        pid = tunnel.process.pid
        yield tunnel
    assert not tunnel.running() and not stunnel_pid_alive(pid)


@pytest.fixture
def tls_env(engine: StunnelEngine) -> dict[str, str]:
    return engine.client_env()


def accepted(engine: StunnelEngine) -> int:
    """Client certificates stunnel accepted so far (one per TLS connection that reached the engine)."""
    return engine.log().count("Certificate accepted")


def hookcage(args: list[str], env: dict[str, str], home: Path, *, stdin: str = "",
             cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The console script with only the engine variables given (the rest of DOCKER_* dropped)."""
    assert HOOKCAGE is not None, "the hookcage console script is not installed"
    base = {k: v for k, v in os.environ.items() if not k.startswith("DOCKER_") and k not in CLEARED_ENV}
    return subprocess.run([HOOKCAGE, *args], input=stdin, capture_output=True, text=True, timeout=180,
                          cwd=cwd, env={**base, "HOOKCAGE_HOME": str(home), **env})


def one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 1 and proc.stdout == "", proc.stdout + proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("hookcage: error: "), proc.stderr
    return lines[0]


def session_containers(docker_api: Any) -> list[str]:
    return [c["Id"] for c in docker_api.containers(
        all=True, filters={"label": [f"{MANAGED_LABEL}=true", f"hookcage.test-session={SESSION}"]})]


# --------------------------------------------------------------------------
# Cold: `hookcage run`
# --------------------------------------------------------------------------


def test_hookcage_run_goes_through_stunnel_with_the_end_of_its_stdin(
    engine: StunnelEngine, tls_env: dict[str, str], runner_image: str, workspace: Path, tmp_path: Path
) -> None:
    before = accepted(engine)
    proc = hookcage(["run", "--project", str(workspace), "--", "wc -c; hostname; echo to-stderr >&2; exit 3"],
                    tls_env, tmp_path / "home", stdin="x" * 100_000)
    # `wc -c` printing its count: the hook saw end-of-input through a TLS terminator.
    assert (proc.returncode, proc.stdout, proc.stderr) == (3, "100000\nhookcage\n", "to-stderr\n")
    assert accepted(engine) > before  # through stunnel, not the unix socket


def test_a_client_certificate_the_engine_does_not_know_is_one_line_and_runs_nothing(
    engine: StunnelEngine, runner_image: str, workspace: Path, tmp_path: Path
) -> None:
    stranger = engine.client_env("stranger", signer=trustme.CA())  # signed by another CA
    before = accepted(engine)
    marker = workspace / "ran"
    line = one_line_error(hookcage(["run", "--project", str(workspace), "--workspace", "rw", "--",
                                    f"touch {marker}"], stranger, tmp_path / "home"))
    assert f"the TLS handshake with the Docker engine at {stranger['DOCKER_HOST']} failed" in line, line
    assert "DOCKER_CERT_PATH" in line
    assert accepted(engine) == before  # stunnel let no request through to the engine
    assert not marker.exists()


# --------------------------------------------------------------------------
# Warm: the pool over TLS, and the stream's containment cases
# --------------------------------------------------------------------------


def request(command: str, workspace: Path, *, stdin: bytes = b"", timeout: float = 60.0,
            output_cap: int = MiB) -> RunRequest:
    return RunRequest(command=command, stdin=stdin, cwd=str(workspace), project_dir=str(workspace),
                      timeout=timeout, labels=LABELS, output_cap=output_cap)


@pytest.fixture
def pool(tls_env: dict[str, str], runner_image: str, docker_api: Any) -> Iterator[PooledDockerSandbox]:
    client = default_client(environ=tls_env)
    assert over_tls(client)
    with PooledDockerSandbox(client=client, image=runner_image, labels=LABELS, idle_timeout=120) as sandbox:
        yield sandbox
    client.close()
    assert session_containers(docker_api) == []


def warm(pool: PooledDockerSandbox, req: RunRequest) -> Any:
    """Run ``req`` on a ready pooled container (waiting for one), and check it went warm."""
    assert pool.prewarm(req, wait=90), "the pool did not fill over TLS"
    result, path = pool.run_with_path(req)
    assert path == "warm", result
    return result


@pytest.mark.parametrize(
    ("command", "stdin", "stdout"),
    [
        ("wc -c", os.urandom(10 * MiB), b"10485760\n"),  # 23: 10 MB read to the end
        ("echo early", os.urandom(10 * MiB), b"early\n"),  # 23: 10 MB never read
        ("head -c 3; echo", b"abcdef", b"abc\n"),  # reads part of it
        ("cat; echo end", b"", b"end\n"),  # 23: none at all
    ],
    ids=["10MB-read", "10MB-unread", "partly-read", "none"],
)
def test_case_23_stdin_over_tls_warm(pool: PooledDockerSandbox, workspace: Path, command: str, stdin: bytes,
                                     stdout: bytes) -> None:
    result = warm(pool, request(command, workspace, stdin=stdin))
    assert (result.exit_code, result.stdout, result.timed_out) == (0, stdout, False)


def test_case_12_a_busy_loop_is_killed_at_its_timeout_warm_over_tls(
    pool: PooledDockerSandbox, workspace: Path
) -> None:
    result = warm(pool, request("echo started; while :; do :; done", workspace, timeout=3))
    assert result.timed_out and result.exit_code is None and result.stdout == b"started\n"


@pytest.mark.parametrize(
    "command",
    [
        "setsid nohup sleep 9999 >/dev/null 2>&1 & echo bye",  # 13: a detached child
        "(sleep 9999 &); echo bye",  # 13: a child holding stdout open
        "sleep 9999 <&0 & echo bye",  # a child holding the hook's stdin (its feeder must not wait for it)
    ],
    ids=["setsid", "holds-stdout", "holds-stdin"],
)
def test_case_13_background_children_neither_hang_nor_outlive_the_run_warm_over_tls(
    pool: PooledDockerSandbox, workspace: Path, docker_api: Any, command: str
) -> None:
    result = warm(pool, request(command, workspace, stdin=os.urandom(MiB), timeout=60))
    assert (result.exit_code, result.stdout, result.timed_out) == (0, b"bye\n", False)
    # The used container is removed (the pool's fixture checks none is left after close).


def test_case_14_output_past_the_cap_is_cut_warm_over_tls(pool: PooledDockerSandbox, workspace: Path) -> None:
    result = warm(pool, request("yes | head -c 100000000; echo done >&2", workspace, timeout=120))
    assert result.exit_code == 0 and not result.timed_out
    assert result.stdout == b"y\n" * (MiB // 2) and result.stdout_truncated
    assert result.stderr == b"done\n"


def test_the_pool_serves_warm_over_tls_and_says_so(pool: PooledDockerSandbox, workspace: Path) -> None:
    req = request("cat; echo $((6*7))", workspace, stdin=b"in\n")
    results = [warm(pool, req).stdout for _ in range(3)]
    assert results == [b"in\n42\n"] * 3
    stats = pool.stats()
    assert stats.warm == 3 and stats.fallbacks == 0


# --------------------------------------------------------------------------
# `hookcage serve` + `hookcage dispatch` over TLS: warm, and case 15
# --------------------------------------------------------------------------


HOOK = ("n=$(wc -c); printf '\\033[2J\\033]52;c;QUFB\\007 \\342\\200\\256 \\377 got %s bytes' \"$n\" >&2; exit 2")


def test_serve_and_dispatch_over_tls_answer_from_the_warm_pool(
    engine: StunnelEngine, tls_env: dict[str, str], runner_image: str, workspace: Path, tmp_path: Path
) -> None:
    (tmp_path / "home").mkdir()
    daemon = Daemon(tmp_path / "home", tmp_path / "managed", workspace, tmp_path / "daemon.log")
    daemon.env = {k: v for k, v in daemon.env.items() if not k.startswith("DOCKER_")}
    daemon.user_hooks({"hooks": {"PreToolUse": [{"hooks": [{"type": "command", "command": HOOK}]}]}})
    session = agent_session("tls")
    payload = json.dumps({"session_id": session, "cwd": str(workspace), "hook_event_name": "PreToolUse",
                          "tool_name": "Bash", "tool_input": {"command": "ls"}}).encode()
    before = accepted(engine)
    daemon.start(**tls_env)
    try:
        reasons = []
        for _ in range(3):
            code, stdout, stderr = daemon.dispatch("PreToolUse", payload, daemon=True, env=tls_env)
            assert code == 0, stderr
            answer = json.loads(stdout)  # strict UTF-8
            reasons.append(answer["hookSpecificOutput"]["permissionDecisionReason"])
            daemon.wait_ready(1, timeout=90)
        # 15: the escapes and the invalid byte arrive escaped; 23: the hook read the whole payload.
        assert reasons == [rf"\x1b[2J\x1b]52;c;QUFB\x07 \u202e \xff got {len(payload)} bytes"] * 3
        stats = daemon.pool()
        assert stats["warm"] >= 2 and stats["fallbacks"] == 0, stats  # the first may be cold: the key was new
        assert accepted(engine) > before
    finally:
        assert daemon.stop() in (0, -signal.SIGTERM), daemon.log.read_text()


# --------------------------------------------------------------------------
# The workspace on the engine's host
# --------------------------------------------------------------------------


def _namespaces_work() -> bool:
    try:
        proc = subprocess.run(["unshare", "-m", "--propagation", "private", "true"], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


def in_private_namespace(over: Path, workspace: Path, args: list[str], env: dict[str, str],
                         home: Path) -> subprocess.CompletedProcess[str]:
    """``hookcage ARGS`` in ``workspace``, made inside a tmpfs over ``over`` that only this namespace has."""
    assert HOOKCAGE is not None
    script = (f"mount -t tmpfs -o mode=755 hookcage-test {shlex.quote(str(over))} && "
              f"mkdir -p {shlex.quote(str(workspace))} && echo only-here > {shlex.quote(str(workspace / 'f'))} && "
              f"cd {shlex.quote(str(workspace))} && exec \"$@\"")
    base = {k: v for k, v in os.environ.items() if not k.startswith("DOCKER_") and k not in CLEARED_ENV}
    return subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", HOOKCAGE, *args],
                          capture_output=True, text=True, timeout=180,
                          env={**base, "HOOKCAGE_HOME": str(home), **env})


@pytest.mark.parametrize("engine_has_it", [False, True], ids=["no-such-path", "another-empty-dir"])
def test_a_workspace_the_engines_host_lacks_is_refused_in_one_line(
    tls_env: dict[str, str], runner_image: str, tmp_path: Path, engine_has_it: bool
) -> None:
    if not _namespaces_work():
        pytest.skip("no private mount namespaces here (unshare -m needs CAP_SYS_ADMIN)")
    tmp_path.chmod(0o755)
    over = tmp_path / "shared"
    over.mkdir()
    ws = over / "ws"
    if engine_has_it:
        ws.mkdir()  # the engine's host has an (empty) directory at that path: what it would mount silently
        ws.chmod(0o755)
    proc = in_private_namespace(over, ws, ["run", "--workspace", "rw", "--", "touch ran; ls"], tls_env,
                                tmp_path / "home")
    line = one_line_error(proc)
    assert f"workspace {ws} on the engine at {tls_env['DOCKER_HOST']}: " in line, line
    assert "run hookcage on the engine's host, or share the workspace" in line
    if engine_has_it:
        assert "the engine sees no such directory there" in line
        assert list(ws.iterdir()) == []  # nothing ran in the engine's directory, no marker left
    else:
        assert "the engine cannot mount it" in line
        assert not ws.exists()
    # `hookcage doctor` says the same, as a problem with its fix.
    doctor = in_private_namespace(over, ws, ["doctor"], tls_env, tmp_path / "home")
    assert doctor.returncode == 1, doctor.stdout + doctor.stderr
    [said] = [line for line in doctor.stdout.splitlines() if line.startswith("[!!] workspace ")]
    assert said.startswith(f"[!!] workspace {ws} on the engine at {tls_env['DOCKER_HOST']}: "), said
    assert "fix: run hookcage on the engine's host, or share the workspace" in doctor.stdout


def test_a_workspace_the_engines_host_shares_runs(
    tls_env: dict[str, str], runner_image: str, workspace: Path, tmp_path: Path
) -> None:
    (workspace / "here.txt").write_text("the workspace\n")
    (workspace / "here.txt").chmod(0o644)
    proc = hookcage(["run", "--", "cat here.txt; ls -A | grep -c hookcage-seen"], tls_env, tmp_path / "home",
                    cwd=workspace)
    # The check ran (the engine is tcp://) and left no marker behind for the hook to see.
    assert (proc.returncode, proc.stdout, proc.stderr) == (1, "the workspace\n0\n", "")
    doctor = hookcage(["doctor"], tls_env, tmp_path / "home", cwd=workspace)
    assert (f"[ok] workspace {workspace} on the engine at {tls_env['DOCKER_HOST']}: same directory (a marker "
            "file written here is seen there)") in doctor.stdout.splitlines(), doctor.stdout
