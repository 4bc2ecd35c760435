"""The daemon's own work per event, over the sandbox run (issue 23): one table, one run.

Usage:  python benchmarks/daemon_work.py [--runs 200]

A daemon (``executor.service.daemon.Daemon``, in this process) answers two
events of a project with one trusted ``python3 .claude/hooks/guard.py``
PreToolUse guard (Claude Code's ``.claude/settings.json``): a
UserPromptSubmit that matches no hook, and a PreToolUse that matches the
guard. Its docker sandbox is the real one (engine connection, image id),
except that ``run`` answers at once: what is timed is everything the daemon
does for an event *but* the hook's run (settings, hook files of every scope,
allow-list, trust subject and store, image id, staging, run log). Each row
is measured with the caches on (``executor.filecache``, the image ids) and
with every cache emptied before each event (what the daemon did before).
The HTTP rows add FastAPI and uvicorn: the app served on a unix socket in a
thread, asked as ``hookcage dispatch`` asks it. No container is made.
Prints p50 / p90 wall milliseconds and the p50 of the process's CPU milliseconds (all its threads:
the socket rows include uvicorn's); the target is <= 3 ms p50 for both events.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

GUARD = 'python3 "$CLAUDE_PROJECT_DIR"/.claude/hooks/guard.py'
GUARD_PY = """import json, sys
data = json.load(sys.stdin)
command = data.get("tool_input", {}).get("command", "")
if command.startswith("rm "):
    print("no rm here", file=sys.stderr)
    sys.exit(2)
"""


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="hookcage-daemon-work-"))
    home, managed, project = tmp / "home", tmp / "managed", tmp / "project"
    for folder in (home, managed, project / ".claude" / "hooks"):
        folder.mkdir(parents=True)
    os.environ.update(HOOKCAGE_HOME=str(home), HOOKCAGE_MANAGED_DIR=str(managed), HOOKCAGE_RUNTIME="runc")
    os.environ.pop("CLAUDE_PROJECT_DIR", None)
    (project / ".claude" / "hooks" / "guard.py").write_text(GUARD_PY)
    (project / ".claude" / "settings.json").write_text(json.dumps(
        {"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": GUARD}]}]}}))
    (home / "config.toml").write_text('runtime = "runc"\n[allowlist]\nallow = ' + json.dumps([GUARD]) + "\n")

    from executor import __version__, filecache
    from executor.dialects import DIALECTS
    from executor.executor import HookExecutor
    from executor.sandbox.backends import build_sandbox
    from executor.sandbox.base import RunRequest, RunResult, Sandbox
    from executor.service import client
    from executor.service.daemon import Daemon, DispatchRequest
    from executor.settings import load_settings

    ran: list[float] = []

    def factory(backend: str, settings: Any) -> Sandbox:
        sandbox = build_sandbox(backend, settings)  # the real engine: image ids, runtime

        def run(request: RunRequest) -> RunResult:
            began = time.perf_counter()
            result = RunResult(0, duration=0.0)
            ran.append(time.perf_counter() - began)
            return result

        sandbox.run = run  # type: ignore[method-assign]
        return sandbox

    env = {"CLAUDE_PROJECT_DIR": str(project), "HOOKCAGE_HOME": str(home), "HOOKCAGE_MANAGED_DIR": str(managed),
           "HOOKCAGE_RUNTIME": "runc", "PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/")}
    with HookExecutor(load_settings(), environ=env, sandbox_factory=factory) as executor:
        pending, _ = executor.pending_reviews(project, agents=[DIALECTS["claude"]])
        executor.grant([subject for _, subject in pending])

    def request(event: str) -> DispatchRequest:
        payload: dict[str, Any] = {"session_id": "bench", "hook_event_name": event, "cwd": str(project),
                                   "transcript_path": str(tmp / "t.jsonl")}
        payload.update({"tool_name": "Bash", "tool_input": {"command": "ls"}} if event == "PreToolUse"
                       else {"prompt": "hi"})
        return DispatchRequest(version=__version__, event=event, agent="claude",
                               payload_b64=base64.b64encode(json.dumps(payload).encode()).decode(),
                               env=env, home=str(home), cwd=str(project))

    daemon = Daemon(home=home, sandbox_factory=factory)
    events = {"no hook (UserPromptSubmit)": request("UserPromptSubmit"),
              "one trusted hook (PreToolUse)": request("PreToolUse")}
    rows: list[tuple[str, list[float], list[float]]] = []

    def forget() -> None:
        filecache.clear_all()
        daemon._trees.close()  # the next run writes its staged tree, and it is removed after
        for kept in list(daemon.shared._ids.values()):
            kept._forget(watching=kept._watching)  # the next image id is asked of the engine

    def measure(name: str, ask: Any, cold: bool) -> None:
        for _ in range(5):
            ask()
        samples, cpu = [], []
        for _ in range(args.runs):
            if cold:
                forget()
            ran.clear()
            time.sleep(0.005)  # as between an agent's events: the cleanup thread finishes
            began, began_cpu = time.perf_counter(), time.process_time()
            ask()
            samples.append((time.perf_counter() - began - sum(ran)) * 1000)
            cpu.append((time.process_time() - began_cpu) * 1000)
        rows.append((name, samples, cpu))

    for label, req in events.items():
        assert daemon.answer(req)[0].exit_code == 0
        measure(f"in the daemon, cached: {label}", lambda req=req: daemon.answer(req), cold=False)
        measure(f"in the daemon, no cache: {label}", lambda req=req: daemon.answer(req), cold=True)

    import uvicorn

    sock = daemon.listen()
    server = uvicorn.Server(uvicorn.Config(daemon.app, log_level="warning", lifespan="off", http="h11",
                                           loop="asyncio", ws="none"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while client.health(str(daemon.socket_path), timeout=0.5) is None:
        time.sleep(0.05)
    for label, req in events.items():
        body = req.model_dump_json().encode()

        def ask(body: bytes = body) -> None:
            status, _ = client.exchange(str(daemon.socket_path), "POST", "/dispatch", body,
                                        connect_timeout=5, timeout=60)
            assert status == 200

        measure(f"over the socket (HTTP, FastAPI), cached: {label}", ask, cold=False)
    server.should_exit = True
    thread.join(30)
    ids = list(daemon.shared._ids.values())
    daemon.close()

    print(f"\nThe daemon's own work per event, over the sandbox run (ms, {args.runs} events each, one run;"
          " wall time, and the CPU time of this whole process: less sensitive to a busy machine)\n")
    print(f"| {'what':70} | {'p50':>6} | {'p90':>6} | {'CPU p50':>7} |")
    print(f"|{'-' * 72}|{'-' * 8}|{'-' * 8}|{'-' * 9}|")
    for name, samples, cpu in rows:
        print(f"| {name:70} | {statistics.median(samples):6.2f} | {pct(samples, 0.9):6.2f} | "
              f"{statistics.median(cpu):7.2f} |")
    asked = sum(kept.asked for kept in ids)
    print(f"\nimage ids asked of the engine: {asked} (any image event on the engine forgets them)")
    print(f"file cache: {filecache.FILES.hits} hits, {filecache.FILES.checked} checked by bytes, "
          f"{filecache.FILES.parsed} parsed; target: <= 3 ms p50 in the daemon")
    return 0


if __name__ == "__main__":
    sys.exit(main())
