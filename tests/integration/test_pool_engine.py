"""The warm pool against the real engine.

What a user of the pool would notice: one container per run, never reused;
a hook cannot end its run early with a marker it prints; runs go cold (and
stay correct) when no container is ready or one died; idle containers exit
by themselves and ``reap`` removes them; ``close()`` leaves nothing; the
reviewed bytes of overlays are served warm; a warm run's environment and
process state are a cold run's. The containment cases themselves run on the
pool in ``test_docker_sandbox.py`` (its ``warm`` parameter).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import docker.errors  # type: ignore[import-untyped, unused-ignore]
import pytest

from executor.core.options import SandboxOptions
from executor.errors import SandboxUnavailable
from executor.sandbox.base import RunRequest, RunResult
from executor.sandbox.docker import (
    EXPIRES_LABEL,
    MANAGED_LABEL,
    UNLABELLED_GRACE,
    DockerSandbox,
    reap,
)
from executor.sandbox.docker.profile import relays_output
from executor.sandbox.pool import POOL_LABEL, PooledDockerSandbox

pytestmark = pytest.mark.docker

SESSION = os.environ["HOOKCAGE_TEST_SESSION"]
SESSION_LABELS = {"hookcage.test-session": SESSION}
LABELS = {"hookcage.hook": "pool-integration", **SESSION_LABELS}

PoolMaker = Callable[..., PooledDockerSandbox]


@pytest.fixture(params=["runner", "sh"])
def make_pool(docker_api: Any, runner_image: str, request: pytest.FixtureRequest) -> Iterator[PoolMaker]:
    """Pools whose containers run the job runner (the runner image has python3) or, with ``sh``, the bootstrap."""
    made: list[PooledDockerSandbox] = []

    def make(**options: Any) -> PooledDockerSandbox:
        options.setdefault("image", runner_image)
        options.setdefault("job_runner", request.param == "runner")
        options.setdefault("idle_timeout", 120)
        pool = PooledDockerSandbox(client=docker_api, labels=SESSION_LABELS, **options)
        made.append(pool)
        return pool

    yield make
    for pool in made:
        pool.close()


def request(workspace: Path, command: str, **kwargs: Any) -> RunRequest:
    kwargs.setdefault("timeout", 10.0)
    kwargs.setdefault("env", {"CLAUDE_PROJECT_DIR": str(workspace)})
    return RunRequest(
        command=command,
        cwd=str(workspace),
        project_dir=str(workspace),
        labels=LABELS,
        **kwargs,
    )


def warm_run(pool: PooledDockerSandbox, req: RunRequest) -> RunResult:
    """Fill the pool for ``req``'s key, run it, and check it was served warm."""
    assert pool.prewarm(req, wait=30), "the pool did not fill"
    result, path = pool.run_with_path(req)
    assert path == "warm"
    return result


def ours(docker_api: Any) -> list[dict[str, Any]]:
    """This session's pooled containers (this process's pools)."""
    filters = {"label": [f"{POOL_LABEL}={os.getpid()}", f"hookcage.test-session={SESSION}"]}
    return list(docker_api.containers(all=True, filters=filters))


def gone(docker_api: Any, container: str, within: float = 3.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            docker_api.inspect_container(container)
        except docker.errors.NotFound:
            return True
        time.sleep(0.05)
    return False


# --------------------------------------------------------------------------
# One use per container
# --------------------------------------------------------------------------


def test_each_run_gets_its_own_container_and_it_is_removed_after(
    make_pool: PoolMaker, workspace: Path, docker_api: Any
) -> None:
    # Which container ran a job is asked of the engine, not of the hook: under gVisor a
    # container's /proc/self/cgroup and mountinfo name no container id (and its hostname is
    # hookcage's fixed one). With one spare per key, the spare ready before a run is its container.
    pool = make_pool(pool_size=1)
    req = request(workspace, "test -e /tmp/left-behind && echo seen; touch /tmp/left-behind; echo ran")

    def run_once() -> tuple[str, RunResult]:
        assert pool.prewarm(req, wait=30), "the pool did not fill"
        (spare,) = pool.spares()
        result, path = pool.run_with_path(req)
        assert path == "warm"
        return spare, result

    first_id, first = run_once()
    second_id, second = run_once()
    assert lines(first.stdout) == ["ran"] and lines(second.stdout) == ["ran"]  # its own /tmp: nothing of the first run
    assert first_id != second_id
    assert gone(docker_api, first_id) and gone(docker_api, second_id)
    assert first_id not in pool.spares() and second_id not in pool.spares()


def lines(data: bytes) -> list[str]:
    return data.decode().splitlines()


# --------------------------------------------------------------------------
# End markers cannot be forged by what a hook prints
# --------------------------------------------------------------------------


def test_a_made_up_end_marker_does_not_end_the_run(make_pool: PoolMaker, workspace: Path) -> None:
    pool = make_pool()
    fake = secrets.token_hex(16)
    result = warm_run(
        pool,
        request(
            workspace,
            f"printf 'hookcage-end {fake} 0 0\\n'; printf 'hookcage-end {fake} 0 0\\n' >&2; "
            "sleep 1; echo after; echo after-err >&2; exit 7",
        ),
    )
    assert result.exit_code == 7 and not result.timed_out
    assert result.duration >= 1
    assert result.stdout == f"hookcage-end {fake} 0 0\nafter\n".encode()
    assert result.stderr == f"hookcage-end {fake} 0 0\nafter-err\n".encode()


MARKER_HUNT = r"""
found=$( { for f in /proc/[0-9]*/cmdline /proc/[0-9]*/environ; do tr '\0' '\n' <"$f"; done; cat; } 2>/dev/null |
    grep -ao 'hookcage-[a-z]*[ -~]*\|[0-9a-f]\{16,64\}' | sort -u )
printf '%s\n' "$found" | while IFS= read -r line; do
    for status in 0 1 2; do
        printf '%s\n' "$line"
        printf '%s\n' "$line" >&2
        for hex in $(printf '%s\n' "$line" | grep -o '[0-9a-f]\{16,64\}'); do
            printf 'hookcage-end %s %s 0\n' "$hex" "$status"
            printf 'hookcage-end %s %s 0\n' "$hex" "$status" >&2
        done
    done
done
printf '%s\n' "$found" | grep -c . >/tmp/count
sleep 0.5
echo "hunted $(cat /tmp/count)"
exit 5
"""


def test_echoing_every_marker_looking_line_it_can_find_does_not_end_the_run(
    make_pool: PoolMaker, workspace: Path
) -> None:
    pool = make_pool()
    old_nonce = secrets.token_hex(16)
    # Its stdin carries marker-looking lines too, as a payload might.
    stdin = f"hookcage-end {old_nonce} 0 0\nhookcage-job {old_nonce}\n".encode()
    result = warm_run(pool, request(workspace, MARKER_HUNT, stdin=stdin))
    assert result.exit_code == 5 and not result.timed_out
    assert result.stdout.endswith(b"\n") and lines(result.stdout)[-1].startswith("hunted ")
    assert int(lines(result.stdout)[-1].split()[1]) >= 3  # it did find things to forge with
    assert f"hookcage-end {old_nonce} 0 0".encode() in result.stdout


# Reads the bootstrap's memory (its parent shell: same uid) for this job's
# nonce and prints this job's real end markers. Possible where the kernel has
# no Yama ptrace_scope >= 1 (this machine kind): then the nonce is no secret.
STEAL_NONCE = r"""
import os, re
pid = os.getppid()
def cmdline(p):
    with open(f"/proc/{p}/cmdline", "rb") as f:
        return f.read()
while b"hookcage-pool" not in cmdline(pid):
    with open(f"/proc/{pid}/stat") as f:
        pid = int(f.read().rsplit(")", 1)[1].split()[1])
found = set()
try:
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
        for line in maps:
            span, perms = line.split()[:2]
            if perms.startswith("rw"):
                start, end = (int(x, 16) for x in span.split("-"))
                try:
                    mem.seek(start)
                    found.update(re.findall(rb"_hc_nonce=([0-9a-f]{32})", mem.read(end - start)))
                except OSError:
                    pass
except OSError:
    pass  # the kernel keeps the bootstrap's memory from us
for nonce in found:
    marker = b"hookcage-end " + nonce + b" 0 0\n"
    os.write(1, marker)
    os.write(2, marker)
"""


def _stealing(workspace: Path) -> None:
    (workspace / "steal.py").write_text(STEAL_NONCE)


def test_a_hook_that_steals_its_nonce_cannot_act_after_its_verdict_on_a_writable_workspace(
    make_pool: PoolMaker, workspace: Path
) -> None:
    """With a writable mount, a warm run ends only when the container's last process is gone."""
    _stealing(workspace)
    workspace.chmod(0o777)  # the hook's uid may be nobody's
    req = request(
        workspace,
        "python3 steal.py; "
        "(sleep 0.3; echo during > during.txt) & "
        "(sleep 2.5; echo after > after.txt) & "
        "sleep 1.2; echo real; exit 3",
        options=SandboxOptions(workspace="rw"),
    )
    result = warm_run(pool := make_pool(), req)
    stole = b"hookcage-end " in result.stdout
    # The forged end did not end the run: the hook's real end did.
    assert result.exit_code == 3 and not result.timed_out
    assert result.stdout.endswith(b"real\n")
    assert result.duration >= 1.2
    assert (workspace / "during.txt").read_text() == "during\n"
    # Its leftover process died with the run: nothing changes after the verdict.
    time.sleep(2.5)
    assert not (workspace / "after.txt").exists()
    pool.close()
    if not stole:
        pytest.skip("the kernel kept the bootstrap's memory from the hook (Yama): nothing to forge with")


def test_a_hook_that_steals_its_nonce_gains_only_what_exiting_would_give_it(
    make_pool: PoolMaker, workspace: Path, docker_api: Any
) -> None:
    """Read-only workspace: the stolen end is taken (documented), and buys nothing.

    It ends the run with a status and output it picked, which it can do by
    exiting; its leftover processes cannot write anywhere outside their own
    container, which is removed right after.
    """
    _stealing(workspace)
    before = sorted(p.name for p in workspace.iterdir())
    req = request(
        workspace,
        "python3 steal.py; sleep 5; echo real; exit 3",
    )
    pool = make_pool()
    assert pool.prewarm(req, wait=30)
    container = pool.spares()[0]
    result, path = pool.run_with_path(req)
    assert path == "warm"
    if result.exit_code == 3:
        pytest.skip("the kernel kept the bootstrap's memory from the hook (Yama): nothing to forge with")
    assert (result.exit_code, result.stdout, result.stderr) == (0, b"", b"")
    assert result.duration < 5
    assert gone(docker_api, container, within=5.0)
    assert sorted(p.name for p in workspace.iterdir()) == before


# --------------------------------------------------------------------------
# Going cold: unknown key, dead container, refused overlay
# --------------------------------------------------------------------------


def test_an_unknown_key_runs_cold_then_gets_warm(make_pool: PoolMaker, workspace: Path) -> None:
    pool = make_pool()
    req = request(workspace, "cat; echo done", stdin=b"payload ")
    result, path = pool.run_with_path(req)
    assert path == "cold"
    assert (result.exit_code, result.stdout) == (0, b"payload done\n")
    assert pool.prewarm(req, wait=30)  # the run made its key known: the pool fills it
    result, path = pool.run_with_path(req)
    assert path == "warm"
    assert (result.exit_code, result.stdout) == (0, b"payload done\n")


def test_a_dead_spare_is_skipped_and_the_run_is_still_right(
    make_pool: PoolMaker, workspace: Path, docker_api: Any
) -> None:
    pool = make_pool(pool_size=1)
    req = request(workspace, "echo fine")
    assert pool.prewarm(req, wait=30)
    (spare,) = pool.spares()
    docker_api.kill(spare)
    docker_api.wait(spare, timeout=10)
    result, path = pool.run_with_path(req)
    assert path == "cold" and result.stdout == b"fine\n"
    assert gone(docker_api, spare)


def test_a_spare_that_dies_as_the_job_arrives_falls_back_cold(
    make_pool: PoolMaker, workspace: Path, docker_api: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    pool = make_pool(pool_size=1)
    req = request(workspace, "echo fine")
    assert pool.prewarm(req, wait=30)
    (spare,) = pool.spares()
    from executor.sandbox import pool as pool_module

    monkeypatch.setattr(pool_module, "alive", lambda handle: True)  # the check raced the death
    docker_api.kill(spare)
    docker_api.wait(spare, timeout=10)
    result, path = pool.run_with_path(req)
    assert path == "fallback" and result.stdout == b"fine\n" and result.exit_code == 0


def test_many_callers_at_once_all_get_right_results(make_pool: PoolMaker, workspace: Path) -> None:
    pool = make_pool(pool_size=2)
    assert pool.prewarm(request(workspace, "true"), wait=30)
    results: dict[int, tuple[RunResult, str]] = {}

    def call(i: int) -> None:
        results[i] = pool.run_with_path(request(workspace, f"cat; echo {i}", stdin=f"in{i} ".encode()))

    threads = [threading.Thread(target=call, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert {i: r.stdout for i, (r, _) in results.items()} == {i: f"in{i} {i}\n".encode() for i in range(6)}
    assert {path for _, path in results.values()} >= {"warm"}


# --------------------------------------------------------------------------
# Idle exit, reap, close
# --------------------------------------------------------------------------

OWNER = """
import json, sys, time
from executor.sandbox.base import RunRequest
from executor.sandbox.docker import default_client
from executor.sandbox.pool import PooledDockerSandbox
image, workspace, labels = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
pool = PooledDockerSandbox(
    client=default_client(), image=image, idle_timeout=2, pool_size=1, labels=labels, reap_on_start=False
)
req = RunRequest(command="true", project_dir=workspace, cwd=workspace, timeout=1, labels=labels)
assert pool.prewarm(req, wait=30)
print(json.dumps(pool.spares()), flush=True)
time.sleep(600)  # never closes
"""


def start_owner(runner_image: str, workspace: Path) -> tuple[subprocess.Popen[str], list[str]]:
    """A process that fills a pool (idle_timeout=2, one container) and then neither uses nor
    closes it; and the container it had ready."""
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, runner_image, str(workspace), json.dumps(SESSION_LABELS)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert owner.stdout is not None
    spares = json.loads(owner.stdout.readline())
    assert len(spares) == 1
    return owner, spares


def stop_owner(docker_api: Any, owner: subprocess.Popen[str]) -> None:
    """Kill the owner and remove what it left (a container it was making when stopped)."""
    owner.kill()
    owner.wait()
    for container in owned_by(docker_api, owner):
        with contextlib.suppress(docker.errors.NotFound):
            docker_api.remove_container(container, force=True)


def owned_by(docker_api: Any, owner: subprocess.Popen[str]) -> list[str]:
    filters = {"label": [f"{POOL_LABEL}={owner.pid}", f"hookcage.test-session={SESSION}"]}
    return [c["Id"] for c in docker_api.containers(all=True, filters=filters)]


def states(docker_api: Any, containers: list[str]) -> dict[str, str]:
    found = {}
    for container in containers:
        try:
            found[container] = docker_api.inspect_container(container)["State"]["Status"]
        except docker.errors.NotFound:
            found[container] = "gone"
    return found


def owned(owner: subprocess.Popen[str]) -> dict[str, str]:
    """Labels that limit a reap to this owner's pool (other sessions' runs share the engine)."""
    return {POOL_LABEL: str(owner.pid), "hookcage.test-session": SESSION}


def test_idle_containers_exit_by_themselves_and_reap_removes_them(
    runner_image: str, workspace: Path, docker_api: Any
) -> None:
    owner, spares = start_owner(runner_image, workspace)
    try:
        owner.send_signal(signal.SIGSTOP)  # a hung owner: its connections stay open
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            if set(states(docker_api, spares).values()) <= {"exited", "gone"}:
                break
            time.sleep(0.2)
        assert set(states(docker_api, spares).values()) <= {"exited"}, states(docker_api, spares)
        expiry = max(float(docker_api.inspect_container(c)["Config"]["Labels"][EXPIRES_LABEL]) for c in spares)
        # Not before its expiry label (its run could still be reading it)...
        reap(docker_api, include_running_expired=False, labels=owned(owner))
        assert set(states(docker_api, spares).values()) == {"exited"}
        # ...and once past it.
        reap(docker_api, include_running_expired=False, now=expiry + 1, labels=owned(owner))
        assert set(states(docker_api, spares).values()) == {"gone"}
    finally:
        stop_owner(docker_api, owner)


def test_containers_of_a_killed_owner_exit_at_once(
    runner_image: str, workspace: Path, docker_api: Any
) -> None:
    owner, spares = start_owner(runner_image, workspace)
    owner.kill()  # its end of the attach connections closes: end of input
    owner.wait()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and set(states(docker_api, spares).values()) != {"exited"}:
        time.sleep(0.1)
    assert set(states(docker_api, spares).values()) == {"exited"}
    # Long before their expiry label: a minute after they ended, like any
    # stopped container whose owner may still be reading it.
    reap(docker_api, include_running_expired=False, labels=owned(owner))
    assert set(states(docker_api, spares).values()) == {"exited"}
    reap(docker_api, include_running_expired=False, now=time.time() + UNLABELLED_GRACE + 1,
         labels=owned(owner))
    assert set(states(docker_api, spares).values()) == {"gone"}
    stop_owner(docker_api, owner)


def test_close_removes_every_pooled_container(
    make_pool: PoolMaker, workspace: Path, docker_api: Any
) -> None:
    pool = make_pool(pool_size=2, pool_total=3)
    assert pool.prewarm(request(workspace, "true"), wait=30)
    assert pool.prewarm(request(workspace, "true", options=SandboxOptions(workspace="none")), wait=30)
    warm_run(pool, request(workspace, "echo used"))
    deadline = time.monotonic() + 30
    while pool.stats().ready < 3 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(ours(docker_api)) >= 3
    began = time.monotonic()
    pool.close()
    assert time.monotonic() - began < 10
    assert ours(docker_api) == []
    result, path = pool.run_with_path(request(workspace, "echo after close"))
    assert path == "cold" and result.stdout == b"after close\n"
    assert ours(docker_api) == []


def test_pooled_containers_are_labelled_for_reap(
    make_pool: PoolMaker, workspace: Path, docker_api: Any
) -> None:
    pool = make_pool(idle_timeout=60)
    began = time.time()
    assert pool.prewarm(request(workspace, "true", timeout=45), wait=30)
    (entry, *_) = ours(docker_api)
    labels = entry["Labels"]
    assert labels[MANAGED_LABEL] == "true" and labels[POOL_LABEL] == str(os.getpid())
    assert labels["hookcage.test-session"] == SESSION
    assert "hookcage.hook" not in labels  # a request's labels are per run
    # Idle life, the longest run asked for, and the cold path's margin.
    assert began + 60 + 45 <= float(labels[EXPIRES_LABEL]) <= time.time() + 60 + 45 + 31
    reap(docker_api)  # a live pool's waiting containers are not over
    assert entry["Id"] in {c["Id"] for c in ours(docker_api)}


# --------------------------------------------------------------------------
# Overlays: reviewed bytes, warm
# --------------------------------------------------------------------------


def stage(tmp_path: Path, name: str, data: bytes) -> str:
    staged = tmp_path / "staging" / name
    staged.parent.mkdir(exist_ok=True)
    staged.write_bytes(data)
    staged.chmod(0o444)
    return str(staged)


def test_overlays_are_served_warm_with_the_reviewed_bytes(
    make_pool: PoolMaker, workspace: Path, tmp_path: Path
) -> None:
    hook = workspace / "hook.sh"
    hook.write_text("echo unreviewed\n")
    hook.chmod(0o644)
    pool = make_pool()
    command = 'sh "$CLAUDE_PROJECT_DIR/hook.sh"; echo x >> hook.sh; echo "append=$?"'
    first = warm_run(
        pool, request(workspace, command, overlays={str(hook): stage(tmp_path, "a", b"echo reviewed-1\n")})
    )
    second = warm_run(
        pool, request(workspace, command, overlays={str(hook): stage(tmp_path, "b", b"echo reviewed-2\n")})
    )
    assert lines(first.stdout) == ["reviewed-1", "append=2"]
    assert lines(second.stdout) == ["reviewed-2", "append=2"]
    assert hook.read_text() == "echo unreviewed\n"


def test_an_overlay_whose_file_was_replaced_after_creation_goes_cold(
    make_pool: PoolMaker, workspace: Path, tmp_path: Path
) -> None:
    hook = workspace / "hook.sh"
    hook.write_text("echo original\n")
    hook.chmod(0o644)
    pool = make_pool(pool_size=1)
    req = request(workspace, "cat hook.sh", overlays={str(hook): stage(tmp_path, "a", b"echo reviewed\n")})
    assert pool.prewarm(req, wait=30)
    # An editor saves by rename: the spare's overlay mount was on the old file. (Under gVisor the
    # bind is dropped only when a lookup of the path notices: the bootstrap looks before it checks.)
    replacement = workspace / "hook.sh.new"
    replacement.write_text("echo edited after review\n")
    replacement.chmod(0o644)
    replacement.rename(hook)
    result, path = pool.run_with_path(req)
    assert path == "fallback"
    assert result.stdout == b"echo reviewed\n"


def test_an_overlay_is_a_read_only_bind_of_the_bytes_written_after_creation(
    make_pool: PoolMaker, workspace: Path, tmp_path: Path
) -> None:
    hook = workspace / "hook.sh"
    hook.write_text("x\n")
    hook.chmod(0o644)
    pool = make_pool(pool_size=1)
    staged = stage(tmp_path, "s", b"reviewed\n")
    req = request(
        workspace,
        "cat hook.sh; awk -v t=\"$CLAUDE_PROJECT_DIR/hook.sh\" '$5 == t {print $6}' /proc/self/mountinfo",
        overlays={str(hook): staged},
    )
    result = warm_run(pool, req)
    out = lines(result.stdout)
    assert out[0] == "reviewed"
    assert out[1].split(",")[0] == "ro"


# --------------------------------------------------------------------------
# A warm run is a cold run: environment and process state
# --------------------------------------------------------------------------

STATE = (
    "env | sort; echo ---; id; umask; pwd; ulimit -a; echo ---; "
    "grep -E '^(Cap|NoNewPrivs|Seccomp)' /proc/self/status; echo ---; "
    "ls -A /tmp; echo ---; cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null; "
    "for fd in 0 1 2; do readlink /proc/self/fd/$fd | sed 's/:.*//'; done; ls /proc/self/fd | wc -l"
)


def test_every_session_of_a_project_is_served_warm_and_sees_its_own_transcript_only(
    make_pool: PoolMaker, workspace: Path, tmp_path: Path, docker_api: Any, runner_image: str
) -> None:
    """A transcript is per session: a spare made for one session serves the next (it binds a folder of
    its own over the transcript's folder; the session's transcript is linked in at job time)."""
    folder = tmp_path / "home" / ".claude" / "projects" / "-work-project"
    folder.mkdir(parents=True)
    for name in ("s1", "s2", "s3"):
        (folder / f"{name}.jsonl").write_text(f'{{"session": "{name}"}}\n')
    secret = tmp_path / "secret"
    secret.write_text("not for hooks\n")
    (folder / "evil.jsonl").symlink_to(secret)
    command = ('cat "$T"; echo $(ls -A "$(dirname "$T")"); '
               'echo forged >> "$T"; echo "append=$?"; touch "$(dirname "$T")/new" 2>/dev/null; echo "create=$?"')

    def session(name: str) -> RunRequest:
        transcript = str(folder / f"{name}.jsonl")
        return request(workspace, command, transcript_path=transcript,
                       env={"CLAUDE_PROJECT_DIR": str(workspace), "T": transcript})

    pool = make_pool(pool_size=1)
    first = warm_run(pool, session("s1"))
    # The second session finds a spare ready: made for the first session's key, which is its own.
    assert pool.prewarm(session("s2"), wait=30)
    second, path = pool.run_with_path(session("s2"))
    assert path == "warm"
    assert lines(first.stdout) == ['{"session": "s1"}', "s1.jsonl", "append=2", "create=1"]
    assert lines(second.stdout) == ['{"session": "s2"}', "s2.jsonl", "append=2", "create=1"]
    assert (folder / "s1.jsonl").read_text() == '{"session": "s1"}\n'
    assert sorted(os.listdir(folder)) == ["evil.jsonl", "s1.jsonl", "s2.jsonl", "s3.jsonl"]
    # A symlink posing as the transcript is not followed, warm or cold: the hook sees no file.
    evil = warm_run(pool, session("evil"))
    with DockerSandbox(client=docker_api, image=runner_image) as cold_backend:
        cold = cold_backend.run(session("evil"))
    assert b"not for hooks" not in evil.stdout + evil.stderr + cold.stdout + cold.stderr
    assert lines(evil.stdout)[-2:] == ["append=2", "create=1"]


@pytest.mark.parametrize(
    "env",
    [
        {},
        {"A": "1", "EMPTY": "", "SPACES": "  a  b  ", "NEWLINES": "x\ny\n", "EQ": "a=b=c"},
        {"UNI": "ünïcödé ✓", "BACKSLASH": "a\\nb\\", "QUOTES": "'\"$(id)`id`", "HOME": "/elsewhere"},
        {"dotted.name": "1", "dash-name": "2", "PATH": "/bin"},
    ],
    ids=["none", "odd-values", "quoting", "odd-names"],
)
@pytest.mark.parametrize("names", ["", " # python3 node jq bash"], ids=["plain", "warmed-up"])
def test_a_warm_run_sees_exactly_what_a_cold_run_sees(
    docker_api: Any, runner_image: str, workspace: Path, make_pool: PoolMaker, env: dict[str, str], names: str
) -> None:
    """Also when its container first ran the interpreters the command names (``warmjob.WARMUPS``):
    they are over before the job, and left nothing a hook can see (processes, files, descriptors)."""
    (workspace / "src").chmod(0o755)
    req = RunRequest(
        command=STATE + names,
        cwd=str(workspace / "src"),
        env={"CLAUDE_PROJECT_DIR": str(workspace), **env},
        project_dir=str(workspace),
        labels=LABELS,
        timeout=10,
    )
    with DockerSandbox(client=docker_api, image=runner_image) as cold_backend:
        cold = cold_backend.run(req)
    pool = make_pool()
    warm = warm_run(pool, req)
    assert cold.exit_code == 0, cold.stderr
    expected = cold.stdout
    if pool.job_runner and relays_output(pool.profile):
        # Under gVisor the cold run's relay (sandbox/relay.py) gives the hook FIFOs in /tmp for its
        # stdout and stderr; the job runner relays through anonymous pipes: the warm hook sees no
        # file in /tmp and a plain pipe. Everything else must be the same.
        expected = re.sub(rb"/tmp/\.hookcage-relay-[0-9]+-[12]\n", b"pipe\n", expected)
        expected = re.sub(rb"\.hookcage-relay-[0-9]+-[12]\n", b"", expected)
        assert expected != cold.stdout  # the cold run did relay: the test compares what it means to
    assert (warm.exit_code, warm.stdout, warm.stderr) == (cold.exit_code, expected, cold.stderr)


def test_no_warm_up_is_still_running_when_the_hook_starts(make_pool: PoolMaker, workspace: Path) -> None:
    # Names every interpreter the spare warms up, then lists what runs beside it.
    req = request(workspace, "for p in /proc/[0-9]*/cmdline; do tr '\\0' ' ' <$p; echo; done # python3 node jq bash")
    result = warm_run(make_pool(), req)
    assert result.exit_code == 0, result.stderr
    seen = result.stdout.decode()
    assert "hookcage-pool" in seen  # the bootstrap (or the job runner) is listed: the listing works
    runner = "python3 -I -S -c # hookcage-pool"  # the job runner itself (sandbox/jobrunner.py)
    for program in ("python3", "node", "jq -n", "bash -c"):
        assert not any(line.startswith(program) and not line.startswith(runner) for line in seen.splitlines()), seen


@pytest.fixture(scope="module")
def busybox_image(docker_api: Any) -> Iterator[str]:
    """A throwaway image holding nothing but a static busybox (its sh is ash)."""
    busybox = shutil.which("busybox")
    if busybox is None:
        pytest.skip("no busybox binary on this machine to build a busybox image from")
    tag = f"hookcage-test/busybox:{secrets.token_hex(4)}"
    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as tar:
        tar.add(busybox, arcname="busybox")
        dockerfile = (
            b"FROM scratch\nCOPY busybox /bin/busybox\n"
            b'RUN ["/bin/busybox", "mkdir", "-p", "/usr/bin", "/sbin", "/usr/sbin", "/tmp"]\n'
            b'RUN ["/bin/busybox", "--install", "-s"]\n'
        )
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(dockerfile)
        tar.addfile(info, io.BytesIO(dockerfile))
    context.seek(0)
    log = list(
        docker_api.build(
            fileobj=context, custom_context=True, tag=tag, rm=True, forcerm=True,
            network_mode="none", decode=True,
        )
    )
    errors = [entry for entry in log if "error" in entry]
    if errors:
        pytest.fail(f"could not build the busybox test image: {errors}")
    yield tag
    docker_api.remove_image(tag, force=True)


def test_the_bootstrap_works_on_a_busybox_image(
    docker_api: Any, busybox_image: str, workspace: Path, make_pool: PoolMaker
) -> None:
    req = request(
        workspace,
        "cat; env | sort; echo ---; pwd; exit 4",
        stdin=b"payload\n",
        env={"CLAUDE_PROJECT_DIR": str(workspace), "V": "a\nb"},
    )
    with DockerSandbox(client=docker_api, image=busybox_image) as cold_backend:
        cold = cold_backend.run(req)
    warm = warm_run(make_pool(image=busybox_image), req)
    assert cold.exit_code == 4 and cold.stdout.startswith(b"payload\n")
    assert (warm.exit_code, warm.stdout, warm.stderr) == (cold.exit_code, cold.stdout, cold.stderr)


def test_a_missing_image_fails_like_the_cold_path(
    docker_api: Any, workspace: Path, make_pool: PoolMaker
) -> None:
    pool = make_pool(image="hookcage/runner:0.0.0-missing")
    req = request(workspace, "true")
    assert not pool.prewarm(req, wait=2)
    with pytest.raises(SandboxUnavailable, match="is missing: run `hookcage image build`"):
        pool.run(req)
    assert pool.stats().creation_failures >= 1
    assert ours(docker_api) == []


def test_a_container_that_dies_under_its_hook_is_reported_like_a_cold_one(
    make_pool: PoolMaker, workspace: Path
) -> None:
    # The hook kills the bootstrap: no end marker will come; the stream ends
    # with the container, whose state says how it ended.
    began = time.monotonic()
    pool = make_pool()
    result = warm_run(pool, request(workspace, "echo before; kill -KILL $PPID; sleep 5"))
    assert time.monotonic() - began < 4
    assert result.exit_code == 137 and not result.timed_out and not result.oom_killed
    if relays_output(pool.profile):
        # Under gVisor the hook's output goes through the bootstrap's relay (sandbox/relay.py), which
        # dies with it: what was in flight may be lost, and the run then says its streams were cut
        # (as test_docker_sandbox's test_14e holds for every backend).
        assert result.stdout == b"before\n" or (result.stdout == b"" and result.stdout_truncated)
    else:
        assert result.stdout == b"before\n"
