"""What a user feels: the real Claude Code CLI through N Bash tool calls, with and without hookcage.

Usage:  python benchmarks/agent_sessions.py [--calls 10] [--sessions 3] [--events 15] [--think 0]
        python benchmarks/agent_sessions.py --check     # one call, one session: does it all work?
        python benchmarks/agent_sessions.py --per-event # also: every hook invocation of the warm
                                                        # row's sessions, by event (where the time goes)

The Claude Code CLI comes from its PyPI wheel (``tests/agents.py`` fetches and
caches it); a loopback model asks for ``--calls`` Bash tool calls in a row
(the last one ``rm -rf victim``), then answers in text. The repository's
``.claude/settings.json`` has one PreToolUse guard on Bash,
``python3 "$CLAUDE_PROJECT_DIR"/.claude/hooks/guard.py`` (8 lines, denies
``rm -rf``). Sessions, all in one run, in rounds (each round runs every row
once, so load from elsewhere lands on all of them alike), medians of
``--sessions``:

1. no hooks at all;
2. the CLI runs the guard itself, on the host;
3. ``hookcage install claude`` + ``hookcage trust --all --yes`` + ``hookcage
   allow`` of the guard's command, nothing else, as a user has it (whatever
   daemon hookcage starts by itself, from the first session on; this script
   starts none for this row);
4. the same with ``hookcage serve`` started by hand and warm before the first session.

Then single events, spawned as the agent spawns them (``sh -c`` the route
``hookcage install`` wrote, the payload on stdin): an event that matches no
hook against the interpreter's start-up floor (``python -I -S -c pass``), the
guard on the host against the guard through hookcage, on PreToolUse and on
PostToolUse. The rest (pool, gVisor beside runc, five hooks, bursts):
``python benchmarks/bench.py``, or ``--bench`` here.

Every row has its own HOME and HOOKCAGE_HOME under one temporary folder;
at the end every daemon the run caused is stopped, the containers of its
sessions and daemons are removed, the folder is deleted. It checks (and exits
1 otherwise) that each session ended with the model's answer, that the guard
denied ``rm -rf`` in rows 2-4 (and did not exist in row 1), and that nothing
was left behind; it never fails on a slow machine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
from agents import Agent, ModelStandIn, ToolCall, claude_cli  # noqa: E402

from executor.service.autostart import daemon_alive  # noqa: E402  (the pid in the socket lock)

GUARD = '''"""PreToolUse (Bash): deny `rm -rf` (hookcage's agent-session benchmark)."""
import json
import sys

command = (json.load(sys.stdin).get("tool_input") or {}).get("command", "")
if "rm -rf" in command:
    print("guard: no rm -rf here", file=sys.stderr)
    sys.exit(2)
'''
HOOK = 'python3 "$CLAUDE_PROJECT_DIR"/.claude/hooks/guard.py'
DENIED = "guard: no rm -rf here"
REPLY = "stand-in model: done"
PROMPT = "run the commands"
CLEARED_ENV = ("CLAUDE_PROJECT_DIR", "CLAUDE_ENV_FILE", "CLAUDE_CONFIG_DIR", "HOOKCAGE_PROJECT_DIR",
               "HOOKCAGE_HOME_CAP", "HOOKCAGE_IN_HOOK", "HOOKCAGE_SOCKET", "HOOKCAGE_DAEMON",
               "HOOKCAGE_TRUST_FILE", "HOOKCAGE_MANAGED_DIR", "HOOKCAGE_RUNTIME")
"""The caller's variables that would make a row differ from a user's fresh setup."""
SESSION_TIMEOUT = 900.0
RUN = f"hookcage-bench-{uuid.uuid4().hex[:12]}"
"""The session label prefix of this run's single events (their containers are removed by it)."""


class Scripted(ModelStandIn):
    """The loopback model: ``calls`` Bash calls in a row, the last one ``rm -rf victim``.

    ``think``: seconds it takes before each answer (0: at once, the harshest case for
    hookcage, whose pool then refills while the agent already runs its next call; a real
    model takes seconds per turn, and the refill happens meanwhile).
    """

    think = 0.0

    def next_tool(self, answered: int) -> ToolCall | None:
        if self.think > 0:
            time.sleep(self.think)
        if answered >= self.calls:
            return None
        if answered == self.calls - 1:
            return ToolCall("Bash", {"command": "rm -rf victim", "description": "Remove the folder"})
        return ToolCall("Bash", {"command": f"echo call {answered + 1}", "description": "Say which call"})


def hookcage(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``hookcage ARGS`` of this checkout, as the user would type it."""
    return subprocess.run([sys.executable, "-m", "executor", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300, stdin=subprocess.DEVNULL)


def health(sock: Path, timeout: float = 1.0) -> Any:
    """``GET /health`` from the daemon on ``sock`` (None: nothing answers)."""
    try:
        with socket.socket(socket.AF_UNIX) as conn:
            conn.settimeout(timeout)
            conn.connect(str(sock))
            conn.sendall(b"GET /health HTTP/1.0\r\nHost: hookcage\r\n\r\n")
            data = b""
            while chunk := conn.recv(65536):
                data += chunk
        return json.loads(data.split(b"\r\n\r\n", 1)[1])
    except (OSError, ValueError, IndexError):
        return None


def socket_owners(sock: Path) -> set[int]:
    """The pids holding the listening unix socket ``sock`` (Linux ``/proc``)."""
    inodes = set()
    with contextlib.suppress(OSError), open("/proc/net/unix") as table:
        for line in table.readlines()[1:]:
            parts = line.split()
            if len(parts) >= 8 and parts[7] == str(sock):
                inodes.add(f"socket:[{parts[6]}]")
    owners = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or not inodes:
            continue
        with contextlib.suppress(OSError):
            for fd in (proc / "fd").iterdir():
                with contextlib.suppress(OSError):
                    if os.readlink(fd) in inodes:
                        owners.add(int(proc.name))
                        break
    return owners


def end(pid: int, grace: float = 20.0) -> None:
    """SIGTERM ``pid`` (a daemon removes its pool on the way out), SIGKILL after ``grace`` s."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            os.kill(pid, 0)
            with contextlib.suppress(ChildProcessError):
                if os.waitpid(pid, os.WNOHANG)[0] == pid:
                    return
            time.sleep(0.05)
        os.kill(pid, signal.SIGKILL)


@dataclass
class Row:
    """One way the guard runs: its own repository, HOME and HOOKCAGE_HOME."""

    key: str
    title: str
    base: Path
    hooks: bool
    hookcage: bool = False
    daemon: subprocess.Popen[bytes] | None = None
    seconds: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.tmp = self.base / self.key
        self.repo = self.tmp / "repo"
        self.home = self.tmp / "home"
        self.hookcage_home = self.tmp / "hookcage-home"
        self.bin = self.tmp / "agent-bin"
        for folder in (self.tmp, self.repo, self.repo / ".claude", self.repo / ".claude" / "hooks",
                       self.home, self.hookcage_home, self.bin):
            folder.mkdir(mode=0o755, exist_ok=True)
            folder.chmod(0o755)  # the container's user reads the repository
        (self.repo / ".claude" / "hooks" / "guard.py").write_text(GUARD)
        if self.hooks:
            settings = {"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command",
                                                                              "command": HOOK}]}]}}
            (self.repo / ".claude" / "settings.json").write_text(json.dumps(settings, indent=2) + "\n")
        (self.bin / "claude").symlink_to(claude_cli())
        env = {k: v for k, v in os.environ.items() if k not in CLEARED_ENV}
        # hookcage's wrapper first (once installed), then the real CLI; python3 is a real
        # interpreter, not a version manager's shim, for the guard on the host as in the cage.
        env["PATH"] = os.pathsep.join([str(self.home / ".local" / "bin"), str(self.bin),
                                       str(Path(sys.executable).parent), env.get("PATH", os.defpath)])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
        env.update(HOME=str(self.home), HOOKCAGE_HOME=str(self.hookcage_home),
                   HOOKCAGE_MANAGED_DIR=str(self.tmp / "managed"))
        self.env = env
        self.model = Scripted(reply=REPLY)
        self.model.start()
        self.agent = Agent("claude", Path("claude"), self.home, env, model=self.model)

    @property
    def socket(self) -> Path:
        return self.hookcage_home / "hookcage.sock"

    def install(self) -> None:
        """``hookcage install claude``, ``hookcage trust --all --yes`` and ``hookcage allow`` of the
        guard's command (only allow-listed commands are launched), in the repository."""
        for args in (("install", "claude"), ("trust", "--all", "--yes"), ("allow", HOOK)):
            proc = hookcage(self.env, self.repo, *args)
            if proc.returncode != 0:
                raise SystemExit(f"hookcage {' '.join(args)} failed ({self.title}):\n{proc.stdout}{proc.stderr}")

    def serve(self) -> None:
        """``hookcage serve`` by hand; returns once it answers /health."""
        log = open(self.tmp / "serve.log", "wb")  # noqa: SIM115 - kept open for the daemon's life
        self.daemon = subprocess.Popen([sys.executable, "-m", "executor", "serve"], cwd=self.repo, env=self.env,
                                       stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        deadline = time.monotonic() + 120
        while health(self.socket) is None:
            if self.daemon.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"hookcage serve did not start: see {self.tmp / 'serve.log'}")
            time.sleep(0.1)

    def session(self, calls: int) -> float:
        """One ``claude -p`` session; its seconds. A session that went wrong is noted in ``failures``."""
        victim = self.repo / "victim"
        victim.mkdir(exist_ok=True)
        self.model.calls = calls
        self.model.requests.clear()
        start = time.perf_counter()
        proc = self.agent.run(PROMPT, self.repo, routed=False, args=("--allowedTools", "Bash"),
                              timeout=SESSION_TIMEOUT)
        seconds = time.perf_counter() - start
        results = sum(r.text.count('"tool_result"') for r in self.model.conversation()[-1:])
        if proc.returncode != 0 or REPLY not in proc.stdout:
            self.failures.append(f"exit {proc.returncode}: {(proc.stdout + proc.stderr)[-400:]!r}")
        elif results != calls:
            self.failures.append(f"{results} tool results reached the model, not {calls}")
        elif self.hooks and (not victim.is_dir() or not self.model.saw(DENIED)):
            self.failures.append("the guard did not deny `rm -rf`")
        elif not self.hooks and victim.exists():
            self.failures.append("`rm -rf victim` did not run without hooks")
        self.seconds.append(seconds)
        return seconds

    def route(self, event: str, tool: str = "") -> dict[str, Any] | None:
        """The handler ``hookcage install`` routes ``event`` (for ``tool``) to; None: not routed."""
        try:
            routes = json.loads((self.hookcage_home / "agents" / "claude-settings.json").read_text())
            groups = routes["hooks"].get(event) or []
        except (OSError, ValueError, KeyError, AttributeError):
            return None
        for group in groups:
            matcher = group.get("matcher") or "*"
            if matcher == "*" or re.fullmatch(matcher, tool):
                return dict(group["hooks"][0])
        return None

    def event_env(self, repo: Path) -> dict[str, str]:
        return {**self.agent.environment(), "CLAUDE_PROJECT_DIR": str(repo)}

    def stop(self) -> list[str]:
        """Stop every daemon this row caused (``hookcage serve --stop`` where it exists); what was left."""
        self.model.stop()
        if self.daemon is not None:
            end(self.daemon.pid)
            self.daemon.wait()
        if not self.hookcage:
            return []
        helptext = hookcage(self.env, self.tmp, "serve", "--help").stdout
        if "--stop" in helptext and health(self.socket) is not None:
            hookcage(self.env, self.tmp, "serve", "--stop")
        for pid in socket_owners(self.socket):
            end(pid)
        holder = daemon_alive(str(self.socket))
        if holder:
            end(holder)
        left = [f"daemon pid {pid}" for pid in {*socket_owners(self.socket), daemon_alive(str(self.socket))}
                if pid]
        return left + ([f"socket {self.socket}"] if self.socket.exists() else [])


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else float("nan")


def spawn_event(row: Row, repo: Path, event: str, payload: dict[str, Any],
                transcript: Path | None = None) -> Callable[[], object] | None:
    """The route of ``event``, run as Claude Code runs it (``sh -c`` for a command, POST for http);
    None when hookcage routes no handler there (the agent spawns nothing)."""
    handler = row.route(event, str(payload.get("tool_name", "")))
    if handler is None:
        return None
    data = json.dumps({"session_id": f"{RUN}-{uuid.uuid4().hex[:8]}", "cwd": str(repo),
                       "hook_event_name": event,
                       "transcript_path": str(transcript or row.tmp / "transcript.jsonl"), **payload}).encode()
    env = row.event_env(repo)
    if handler.get("type") == "http":
        def post() -> None:
            request = urllib.request.Request(handler["url"], data=data, headers={
                "Content-Type": "application/json", **(handler.get("headers") or {})})
            with contextlib.suppress(OSError), urllib.request.urlopen(request, timeout=60) as answer:
                answer.read()
        return post

    def run() -> None:
        subprocess.run(["/bin/sh", "-c", handler["command"]], input=data, cwd=repo, env=env,
                       capture_output=True, timeout=300)
    return run


def events(rows: dict[str, Row], runs: int) -> list[tuple[str, list[float], str]]:
    """Single events, spawned as the agent spawns them, in rounds."""
    host, installed, warm = rows["host"], rows["installed"], rows["warm"]
    # A repository with the guard on PostToolUse, trusted in the warm row's HOOKCAGE_HOME.
    post = warm.tmp / "post-repo"
    (post / ".claude" / "hooks").mkdir(parents=True, mode=0o755)
    for folder in (post, post / ".claude", post / ".claude" / "hooks"):
        folder.chmod(0o755)
    (post / ".claude" / "hooks" / "guard.py").write_text(GUARD)
    (post / ".claude" / "settings.json").write_text(json.dumps({"hooks": {"PostToolUse": [
        {"matcher": "Bash", "hooks": [{"type": "command", "command": HOOK}]}]}}))
    hookcage(warm.env, post, "trust", "--all", "--yes")
    bash = {"tool_name": "Bash", "tool_input": {"command": "echo hi", "description": "Say hi"},
            "tool_use_id": "toolu_bench"}
    read = {"tool_name": "Read", "tool_input": {"file_path": "README.md"}, "tool_use_id": "toolu_bench"}
    post_bash = {**bash, "tool_response": {"stdout": "hi", "stderr": "", "interrupted": False}}

    def on_host(repo: Path, row: Row, payload: dict[str, Any]) -> Callable[[], object]:
        data = json.dumps({"session_id": "bench", "cwd": str(repo), **payload}).encode()
        env = row.event_env(repo)
        return lambda: subprocess.run(["/bin/sh", "-c", HOOK], input=data, cwd=repo, env=env,
                                      capture_output=True, timeout=60)

    floor = [sys.executable, "-I", "-S", "-c", "pass"]
    floor_row, pre_host, post_host = ("`python -I -S -c pass` (the interpreter's floor)",
                                  "PreToolUse guard, the CLI runs it on the host",
                                  "PostToolUse hook, the CLI runs it on the host")
    planned: list[tuple[str, Callable[[], object] | None]] = [
        (floor_row, lambda: subprocess.run(floor)),
        ("no matching hook (PreToolUse Read), as installed", spawn_event(installed, installed.repo, "PreToolUse",
                                                                         read)),
        ("no matching hook (PreToolUse Read), daemon warm", spawn_event(warm, warm.repo, "PreToolUse", read)),
        (pre_host, on_host(host.repo, host, bash)),
        ("PreToolUse guard through hookcage, as installed", spawn_event(installed, installed.repo, "PreToolUse",
                                                                         bash)),
        ("PreToolUse guard through hookcage, daemon warm", spawn_event(warm, warm.repo, "PreToolUse", bash)),
        (post_host, on_host(post, warm, post_bash)),
        ("PostToolUse hook through hookcage, daemon warm", spawn_event(warm, post, "PostToolUse", post_bash)),
    ]
    paths = [(name, fn) for name, fn in planned if fn is not None]
    samples: dict[str, list[float]] = {name: [] for name, _ in paths}
    for _name, fn in paths:  # one untimed run each: files cached, pool filled
        fn()
    for _ in range(runs):
        for name, fn in paths:
            time.sleep(0.3)  # as between an agent's tool calls: the pool replaces what was used
            start = time.perf_counter()
            fn()
            samples[name].append((time.perf_counter() - start) * 1000)
    floor_p50 = pct(samples[floor_row], 0.5)
    out: list[tuple[str, list[float], str]] = []
    for name, spawned in planned:
        if spawned is None:
            out.append((name, [], "no route: the agent spawns nothing"))
            continue
        p50 = pct(samples[name], 0.5)
        note = "" if name == floor_row else f"+{p50 - floor_p50:.1f} ms over the floor"
        if "through hookcage" in name:
            note += f"; {p50 / pct(samples[pre_host if name.startswith('Pre') else post_host], 0.5):.1f}x the host"
        out.append((name, samples[name], note))
    return out


def processes_of(base: Path) -> list[int]:
    """Processes whose environment names a folder under ``base`` (this run's homes): what it caused."""
    needle = ("=" + str(base) + "/").encode()
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid():
            with contextlib.suppress(OSError):
                if needle in (proc / "environ").read_bytes():
                    found.append(int(proc.name))
    return found


def leftovers(sessions: list[str], pools: set[str]) -> list[str]:
    """Remove the containers of these agent sessions and daemon pools; their names."""
    try:
        from executor.sandbox.docker import default_client

        client = default_client()
    except Exception as exc:  # no engine: nothing of ours can be there either
        return [f"(engine not reachable: {exc})"] if sessions else []
    names = []
    deadline = time.monotonic() + 10  # used pool containers are removed in the background
    while True:
        found = [c for c in client.containers(all=True, filters={"label": "hookcage.managed=true"})
                 if (c.get("Labels") or {}).get("hookcage.session", "") in sessions
                 or (c.get("Labels") or {}).get("hookcage.session", "").startswith(RUN)
                 or (c.get("Labels") or {}).get("hookcage.pool", "") in pools]
        if not found or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    for entry in found:
        names.append(f"{entry['Names'][0].lstrip('/')} ({entry['State']})")
        with contextlib.suppress(Exception):
            client.remove_container(entry["Id"], force=True, v=True)
    return names


@contextlib.contextmanager
def workspace(keep: bool) -> Iterator[Path]:
    base = Path(tempfile.mkdtemp(prefix="hookcage-agent-sessions-"))
    base.chmod(0o755)
    try:
        yield base
    finally:
        if not keep:
            shutil.rmtree(base, ignore_errors=True)


def table(rows: list[Row], calls: int) -> list[str]:
    none, host = median(rows[0].seconds), median(rows[1].seconds)
    host_added = (host - none) / calls * 1000
    lines = ["| how the hook ran | session | added per tool call | vs the host |", "|---|---|---|---|"]
    for i, row in enumerate(rows):
        s = median(row.seconds)
        added = (s - none) / calls * 1000
        cells = [row.title, f"{s:.2f} s"]
        cells.append("—" if i == 0 else f"{added:+,.0f} ms")
        cells.append("—" if i < 2 else (f"{added / host_added:.1f}x" if host_added > 0 else "n/a"))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def wrap_launcher(row: Row) -> Path:
    """Put a timing wrapper in place of ``row``'s launcher (``hookcage install`` routes to it); the log's path.

    Each line: start and end (ns), exit status, the payload's ``hook_event_name``."""
    launcher = row.hookcage_home / "bin" / "hookcage"
    real = launcher.with_name("hookcage-timed")
    launcher.rename(real)
    log = row.tmp / "invocations.log"
    launcher.write_text(
        "#!/bin/sh\n"
        "s=$(date +%s%N); in=$(cat)\n"
        f"out=$(printf '%s' \"$in\" | {real} \"$@\"); rc=$?\n"
        "e=$(date +%s%N)\n"
        "ev=$(printf '%s' \"$in\" | grep -o '\"hook_event_name\": *\"[A-Za-z]*\"' | head -n 1 | tr -dc 'A-Za-z_:')\n"
        f"echo \"$s $e $rc ${{ev#hook_event_name:}}\" >> {log}\n"
        "printf '%s' \"$out\"; exit $rc\n")
    launcher.chmod(0o755)
    return log


def invocations(log: str, sessions: int, calls: int) -> list[str]:
    """The wrapper's log as a table: per event, how many, p50, max, and the total per tool call."""
    by_event: dict[str, list[float]] = {}
    firsts: list[float] = []
    previous = ""
    for line in log.splitlines():
        parts = line.split()
        if len(parts) < 4:
            continue
        ms = (int(parts[1]) - int(parts[0])) / 1e6
        by_event.setdefault(parts[3], []).append(ms)
        if parts[3] == "PreToolUse" and previous == "UserPromptSubmit":
            firsts.append(ms)
        previous = parts[3]
    out = ["| event | runs | p50 | max | per tool call |", "|---|---|---|---|---|"]
    total = 0.0
    for event, samples in by_event.items():
        total += sum(samples)
        out.append(f"| {event} | {len(samples)} | {pct(samples, 0.5):.1f} | {max(samples):.1f} | "
                   f"{sum(samples) / (sessions * calls):.1f} |")
    out.append(f"| all | {sum(map(len, by_event.values()))} | | | {total / (sessions * calls):.1f} |")
    if firsts:
        out.append(f"\n- each session's first PreToolUse (ms): {', '.join(f'{ms:.0f}' for ms in firsts)}")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=10, help="Bash tool calls per session (default 10)")
    parser.add_argument("--sessions", type=int, default=3, help="sessions per row; medians (default 3)")
    parser.add_argument("--events", type=int, default=15, help="timed runs of each single event (default 15)")
    parser.add_argument("--think", type=float, default=0.0,
                        help="seconds the loopback model takes per turn, as a real model does (default 0: at once)")
    parser.add_argument("--check", action="store_true",
                        help="one call, one session, one run of each event: does it work?")
    parser.add_argument("--bench", action="store_true", help="then run benchmarks/bench.py (the other rows)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (its logs)")
    parser.add_argument("--per-event", action="store_true",
                        help="time every hook invocation of the warm row's sessions (a sh wrapper around "
                             "hookcage's launcher: adds a few ms to that row) and print them by event")
    args = parser.parse_args()
    if args.check:
        args.calls, args.sessions, args.events = 1, 1, 1
    args.calls = max(1, args.calls)
    try:
        claude_cli()  # fetched from PyPI and cached the first time
    except BaseException as exc:  # tests/agents.py says why with pytest's skip/fail
        print(f"cannot get the Claude Code CLI ({type(exc).__name__}): {exc}", file=sys.stderr)
        return 2
    problems: list[str] = []
    with workspace(args.keep) as base:
        rows = [Row("none", "no hooks at all", base, hooks=False),
                Row("host", "the CLI runs the hook itself, on the host", base, hooks=True),
                Row("installed", "`hookcage install claude` + `trust` + `allow`, nothing else", base,
                    hooks=True, hookcage=True),
                Row("warm", "the same with `hookcage serve` started by hand, warm", base,
                    hooks=True, hookcage=True)]
        by_key = {row.key: row for row in rows}
        for row in rows:
            row.model.think = args.think
        pools: set[str] = set()
        event_rows: list[tuple[str, list[float], str]] = []
        first_installed = float("nan")
        per_event = ""
        try:
            for row in rows[2:]:
                row.install()
            warm = by_key["warm"]
            trace = wrap_launcher(warm) if args.per_event else None
            warm.serve()
            assert warm.daemon is not None
            pools.add(str(warm.daemon.pid))
            bash = {"tool_name": "Bash", "tool_input": {"command": "echo warm-up"}}
            # As after an earlier session in this repository: its transcript where Claude Code keeps them
            # (a pooled container serves every session of a project: docs/sandbox.md, the warm pool).
            earlier = warm.home / ".claude" / "projects" / re.sub(r"[^A-Za-z0-9]", "-", str(warm.repo))
            earlier.mkdir(parents=True, exist_ok=True)
            (earlier / "earlier-session.jsonl").write_text('{"type": "summary"}\n')
            warm_up = spawn_event(warm, warm.repo, "PreToolUse", bash, earlier / "earlier-session.jsonl")
            for _ in range(2):  # the pool is filled, the files are read once
                if warm_up is not None:
                    warm_up()
            if trace is not None:
                trace.write_text("")
            for n in range(args.sessions):
                for row in rows:
                    seconds = row.session(args.calls)
                    if row.key == "installed" and n == 0:
                        first_installed = seconds
                    print(".", end="", file=sys.stderr, flush=True)
            if trace is not None:  # the single events below run the launcher itself
                per_event = trace.read_text()
                launcher = warm.hookcage_home / "bin" / "hookcage"
                launcher.with_name("hookcage-timed").replace(launcher)
            event_rows = events(by_key, args.events)
            print(file=sys.stderr)
        finally:
            for row in rows:
                pools |= {str(pid) for pid in socket_owners(row.socket)} if row.hookcage else set()
                problems += [f"{row.title}: left {what}" for what in row.stop()]
            for pid in processes_of(base):
                with contextlib.suppress(OSError):
                    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                    problems.append(f"process left (ended now): {pid} {b' '.join(argv).decode()[:120]}")
                end(pid)
            left = leftovers([s for row in rows for s in row.agent.sessions], pools)
            problems += [f"container left behind (removed now): {name}" for name in left]

    thinking = f", the model taking {args.think:g} s per turn" if args.think > 0 else ""
    print(f"\nClaude Code (claude-agent-sdk wheel), {args.calls} Bash tool calls per session{thinking}, "
          f"medians of {args.sessions} session(s), one run:\n")
    print("\n".join(table(rows, args.calls)))
    print("\n- sessions (s): " + "; ".join(
        f"{row.key} " + ", ".join(f"{s:.2f}" for s in row.seconds) for row in rows))
    print(f"- first session of `hookcage install` + `trust` (any daemon start included): {first_installed:.2f} s")
    if per_event:
        print(f"\nEvery hook invocation of the warm row's {args.sessions} session(s), as Claude Code waited "
              "for it (ms; a sh wrapper around the launcher):\n")
        print("\n".join(invocations(per_event, args.sessions, args.calls)))
    if event_rows:
        print(f"\nSingle events, spawned as Claude Code spawns them ({args.events} runs each, ms):\n")
        print("| event | p50 | p90 | |\n|---|---|---|---|")
        for name, samples, note in event_rows:
            figures = f"{pct(samples, 0.5):.1f} | {pct(samples, 0.9):.1f}" if samples else "0 | 0"
            print(f"| {name} | {figures} | {note} |")
    for row in rows:
        problems += [f"{row.title}: {failure}" for failure in row.failures]
    print(f"\n- problems: {len(problems)}")
    for problem in problems:
        print(f"  - {problem}")
    if args.bench:
        subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench.py")], check=False)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
