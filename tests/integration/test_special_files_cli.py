"""One file in a cloned repository cannot freeze or slow hookcage (issue 21, class 3), end to end.

Written as the repository's author: the hook file is a FIFO, a socket, or a
committed symlink to ``/dev/ptmx``, ``/dev/tty`` (run on a terminal of its
own), ``/proc/self/fd/1``, ``/dev/zero`` or ``/dev/urandom``; a hook's script
is a FIFO; the file holds 40,000 tiny handlers; infer's YAML or Codex's TOML
is a 4 MiB hook-less file; and 48 events of such a project flood a real
``hookcage serve`` while another project's event waits. The real console
script is run each time; a subprocess timeout is the hang detector (nothing
is timed). The user's own guard still runs in the real engine beside the
broken repository file.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import shutil
import socket
import subprocess
import termios
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from daemon_support import THROUGH_DAEMON_ONLY, Daemon
from support import CliUser

from executor.config import MAX_FILE_BYTES, MAX_VALUES
from executor.runlog import MAX_SKIPS_LOGGED

pytestmark = pytest.mark.docker
HOOKCAGE = shutil.which("hookcage")
HANG = 60
"""Seconds after which a command is taken to hang (a detector, not a timing bound)."""
REFUSED = ("not a regular file", "leads out of the project")
KINDS = ["fifo", "socket", "/dev/ptmx", "/proc/self/fd/1", "/dev/zero", "/dev/urandom"]
COMMANDS = [["dispatch", "PreToolUse", "--agent", "claude"], ["list"], ["trust", "--all", "--yes"], ["validate"]]
GUARD = "echo the user guard ran >&2; exit 2"


class Repo(CliUser):
    def __init__(self, tmp: Path, workspace: Path) -> None:
        super().__init__(tmp, workspace, "special")
        self.claude = workspace / ".claude"
        self.claude.mkdir()
        self.hook_file = self.claude / "settings.json"

    def payload(self, **extra: Any) -> str:
        return json.dumps({"session_id": self.session, "hook_event_name": "PreToolUse", "tool_name": "Bash",
                           "tool_input": {"command": "ls"}, "cwd": str(self.root), **extra})

    def cli(self, args: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        stdin = self.payload() if args[0] == "dispatch" else ""
        try:
            return self.run(*args, stdin=stdin, timeout=HANG, **kwargs)  # type: ignore[no-any-return]
        except subprocess.TimeoutExpired:
            pytest.fail(f"`hookcage {' '.join(args)}` hangs")

    def user_guard(self) -> None:
        (self.home / "hooks.json").write_text(json.dumps({"hooks": {"PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": GUARD}]}]}}))
        self.allow(GUARD)


def plant(path: Path, what: str) -> Iterator[None]:
    if what == "fifo":
        os.mkfifo(path)
        yield
    elif what == "socket":
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.bind(str(path))
            sock.listen(1)
            yield
    else:
        path.symlink_to(what)
        yield


@pytest.fixture
def repo(tmp_path: Path, workspace: Path) -> Repo:
    return Repo(tmp_path, workspace)


@pytest.mark.parametrize("what", KINDS)
def test_a_special_hook_file_freezes_no_command(repo: Repo, what: str) -> None:
    for _ in plant(repo.hook_file, what):
        for args in COMMANDS:
            proc = repo.cli(args)
            out = proc.stdout + proc.stderr
            assert str(repo.hook_file) in out and any(r in out for r in REFUSED), (args, out)
            assert "Traceback" not in out


EVERY_AGENTS_FILE = [
    ".hookcage/hooks.json", ".hookcage/hooks.local.json", ".claude/settings.local.json", ".codebuddy/settings.json",
    ".codebuddy/hooks.json", ".codex/hooks.json", ".codex/config.toml", ".github/hooks/a.json", ".cursor/hooks.json",
    ".gemini/settings.json", ".infer/hooks.yaml", ".jcode/hooks.json", ".ok/settings.json",
]


def test_a_fifo_in_any_agents_file_freezes_neither_list_nor_validate(repo: Repo) -> None:
    """hookcage's own files are read for every agent: a FIFO there used to hang every agent's dispatch."""
    for relative in EVERY_AGENTS_FILE:
        path = repo.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(path)
    for args in (["list"], ["validate"], ["trust", "--all", "--yes"]):
        proc = repo.cli(args)
        out = proc.stdout + proc.stderr
        for relative in EVERY_AGENTS_FILE:
            assert f"{repo.root / relative}: $: is a FIFO (named pipe)" in out, (args, relative, out)
    for agent in ("claude", "gemini", "cursor", "codex", "codebuddy", "jcode", "ok", "copilot"):
        proc = repo.cli(["dispatch", "PreToolUse", "--agent", agent])  # answers (some agents show no message)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, (agent, proc)
        assert agent != "claude" or str(repo.root / ".hookcage/hooks.json") in proc.stdout, proc


def test_the_users_guard_still_runs_in_the_engine_beside_a_fifo(repo: Repo, runner_image: str) -> None:
    repo.user_guard()
    for _ in plant(repo.hook_file, "fifo"):
        proc = repo.cli(["dispatch", "PreToolUse", "--agent", "claude"])
    answer = json.loads(proc.stdout)
    assert answer["hookSpecificOutput"]["permissionDecision"] == "deny", proc
    assert answer["hookSpecificOutput"]["permissionDecisionReason"] == "the user guard ran"
    assert "is a FIFO (named pipe)" in answer["systemMessage"]


@pytest.mark.parametrize("where", ["the repository's", "the user's"])
@pytest.mark.parametrize("args", COMMANDS)
def test_a_symlink_to_dev_tty_reads_nothing_from_the_terminal(repo: Repo, args: list[str], where: str) -> None:
    """On a terminal of its own, with a line already typed: the command ends, the line is still there.

    The repository's file is refused as a symlink out of the project; the user's own
    (which may link anywhere) is opened without blocking and refused by its kind.
    """
    if where == "the user's":
        (repo.user_home / ".claude").mkdir()
        (repo.user_home / ".claude" / "settings.json").symlink_to("/dev/tty")
        expected = "is a character device, not a regular file"
    else:
        repo.hook_file.symlink_to("/dev/tty")
        expected = "is a symlink that leads out of the project (to /dev/tty)"
    master, slave = pty.openpty()
    try:
        os.write(master, b"typed-by-the-user\n")

        def controlling_terminal() -> None:  # after setsid: the pty becomes the session's /dev/tty
            fcntl.ioctl(slave, termios.TIOCSCTTY, 0)

        assert HOOKCAGE is not None
        stdin = repo.payload().encode() if args[0] == "dispatch" else b""
        proc = subprocess.run([HOOKCAGE, *args], input=stdin, capture_output=True, cwd=repo.root, env=repo.env,
                              timeout=HANG, start_new_session=True, preexec_fn=controlling_terminal,
                              pass_fds=(slave,))
        out = (proc.stdout + proc.stderr).decode()
        assert expected in out or (args[0] == "trust" and where == "the user's"), out  # trust: repository files
        os.set_blocking(slave, False)
        assert os.read(slave, 100) == b"typed-by-the-user\n"  # nobody read the user's line
    finally:
        os.close(master)
        os.close(slave)


@pytest.mark.parametrize("swap", ["before the review", "after the review"])
def test_a_fifo_as_a_hooks_script_stalls_neither_trust_nor_dispatch(repo: Repo, swap: str) -> None:
    command = "bash .claude/hooks/x.sh"
    (repo.claude / "hooks").mkdir()
    script = repo.claude / "hooks" / "x.sh"
    repo.hook_file.write_text(json.dumps({"hooks": {"PreToolUse": [
        {"matcher": "Bash", "hooks": [{"type": "command", "command": command}]}]}}))
    repo.allow(command)
    if swap == "after the review":
        script.write_text("echo reviewed\n")
        assert repo.cli(["trust", "--all", "--yes"]).returncode == 0
        script.unlink()
    os.mkfifo(script)
    if swap == "before the review":
        proc = repo.cli(["trust", "--all", "--yes"])
        assert ".claude/hooks/x.sh: is a FIFO (named pipe), not a regular file" in proc.stdout + proc.stderr, proc
    proc = repo.cli(["dispatch", "PreToolUse", "--agent", "claude"])
    assert proc.returncode == 0 and "not run" in proc.stdout, proc  # never run, never hangs
    proc = repo.cli(["list"])
    assert "FIFO" in proc.stdout + proc.stderr or "untrusted" in proc.stdout + proc.stderr, proc


def test_forty_thousand_handlers_cost_one_line_and_a_bounded_log(repo: Repo) -> None:
    repo.hook_file.write_text(json.dumps({"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [
        {"type": "command", "command": f"echo {i}"} for i in range(40_000)]}]}}))
    log = repo.home / "runs.jsonl"
    for args in COMMANDS:
        proc = repo.cli(args)
        out = proc.stdout + proc.stderr
        assert f"more than {MAX_VALUES:,} values" in out and str(repo.hook_file) in out, (args, out[:2000])
    assert len(proc.stdout) < 10_000
    assert not log.exists() or log.stat().st_size < 100_000


def test_a_thousand_skipped_hooks_add_a_bounded_run_log(repo: Repo) -> None:
    """Within every file limit (1,000 handlers, none allowed): the log keeps 100 and counts the rest."""
    repo.hook_file.write_text(json.dumps({"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [
        {"type": "command", "command": f"echo {i}"} for i in range(1000)]}]}}))
    proc = repo.cli(["dispatch", "PreToolUse", "--agent", "claude"])
    assert proc.returncode == 0
    lines = [json.loads(line) for line in (repo.home / "runs.jsonl").read_text().splitlines()]
    assert len(lines) <= MAX_SKIPS_LOGGED + 5 and sum(r.get("omitted", 1) for r in lines) == 1000
    assert len(json.loads(proc.stdout)["systemMessage"].splitlines()) <= 25


@pytest.mark.parametrize(("form", "where", "agent"), [
    ("yaml", ".infer/hooks.yaml", "infer"), ("toml", ".codex/config.toml", "codex"),
])
def test_a_four_mib_hookless_file_is_refused_by_its_size(repo: Repo, form: str, where: str, agent: str) -> None:
    path = repo.root / where
    path.parent.mkdir(exist_ok=True)
    line = "k{}: " + "x" * 60 + "\n" if form == "yaml" else 'k{} = "' + "x" * 60 + '"\n'
    path.write_text("".join(line.format(i) for i in range(4 * 1024 * 1024 // 70)))
    limit = MAX_FILE_BYTES[form] // 1024
    said = f"is larger than {limit} KiB, the limit of a {form.upper()} hook file"
    if agent == "infer":  # infer reads no answer: its dispatch only has to end
        proc = repo.run("dispatch", "--agent", "infer", stdin=json.dumps(
            {"hook": "pre_tool", "session_id": repo.session, "turn": 1}), timeout=HANG)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc
    else:
        proc = repo.cli(["dispatch", "PreToolUse", "--agent", agent])
        assert said in proc.stdout, proc
    for args in (["list", "--agent", agent], ["validate", "--agent", agent]):
        proc = repo.cli(args)
        out = proc.stdout + proc.stderr
        assert said in out, (args, out)


def test_a_flood_of_events_of_a_fifo_project_starves_no_other_project(tmp_path: Path, workspace: Path,
                                                                       runner_image: str) -> None:
    (tmp_path / "home").mkdir()
    hostile = tmp_path / "hostile"
    (hostile / ".claude").mkdir(parents=True)
    os.mkfifo(hostile / ".claude" / "settings.json")
    daemon = Daemon(tmp_path / "home", tmp_path / "managed", workspace, tmp_path / "daemon.log")
    daemon.start()
    try:
        def event(project: Path) -> tuple[int, str, str]:
            payload = json.dumps({"session_id": "flood", "hook_event_name": "PreToolUse", "tool_name": "Bash",
                                  "tool_input": {"command": "ls"}, "cwd": str(project)}).encode()
            proc = subprocess.run([daemon_python(), "-c", THROUGH_DAEMON_ONLY, "dispatch", "PreToolUse",
                                   "--agent", "claude"], input=payload, capture_output=True, env=daemon.env,
                                  cwd=project, timeout=180)
            return proc.returncode, proc.stdout.decode(), proc.stderr.decode()

        with ThreadPoolExecutor(max_workers=48) as pool:
            flood = [pool.submit(event, hostile) for _ in range(48)]
            code, out, err = event(workspace)  # an unrelated project, while the flood is on
            assert code == 0 and "Traceback" not in err, (out, err)
            answers = [f.result() for f in flood]  # each answered or refused; none hangs
        assert all("Traceback" not in err for _, _, err in answers)
        answered = [out for code, out, _ in answers if code == 0]
        assert answered and all("is a FIFO (named pipe)" in out for out in answered)
        assert daemon.health()["pid"] == daemon.pid
    finally:
        daemon.stop()


def daemon_python() -> str:
    import sys

    return sys.executable
