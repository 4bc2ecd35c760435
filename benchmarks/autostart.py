"""What the self-started daemon costs and saves: an event with no matching hook, spawned as an agent spawns it.

    python benchmarks/autostart.py [--rounds N]

Rows (one run, medians of N rounds, milliseconds; ratios to the in-process row):

- the interpreter's floor (``python -I -S -c pass``);
- in-process, no daemon (``HOOKCAGE_DAEMON=off``): what every event cost before;
- the first event, no daemon running: it starts the daemon, waits for it and is answered by it
  (each round stops the daemon first);
- a later event, the self-started daemon running.

A private ``HOOKCAGE_HOME`` under a temporary directory; the daemon is stopped at the end and the
script exits 1 if a process serving its socket is left. Timings on a shared machine are noisy: read
the ratios of one run, not the absolute figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from executor.service import autostart, client  # noqa: E402


def timed(run: list[str], stdin: bytes, env: dict[str, str]) -> float:
    started = time.perf_counter()
    proc = subprocess.run(run, input=stdin, capture_output=True, env=env, timeout=300)
    took = (time.perf_counter() - started) * 1000
    if proc.returncode != 0 or proc.stdout != b"{}\n":
        raise SystemExit(f"unexpected answer: {proc.returncode} {proc.stdout!r} {proc.stderr.decode()[-500:]}")
    return took


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    rounds = parser.parse_args().rounds
    with tempfile.TemporaryDirectory(prefix="hookcage-autostart-") as tmp:
        home, project = Path(tmp) / "home", Path(tmp) / "project"
        home.mkdir()
        project.mkdir()
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("HOOKCAGE_")},
               "HOOKCAGE_HOME": str(home), "HOOKCAGE_MANAGED_DIR": str(Path(tmp) / "managed"),
               "HOOKCAGE_LOG_RUNS": "false", "PYTHONPATH": str(ROOT), "HOOKCAGE_DAEMON": "auto"}
        socket = str(home / client.SOCKET_NAME)
        stdin = json.dumps({"session_id": "bench", "cwd": str(project), "prompt": "hi"}).encode()
        dispatch = [sys.executable, "-m", "executor.entry", "dispatch", "UserPromptSubmit"]
        rows: dict[str, list[float]] = {name: [] for name in ("floor", "in-process", "first", "later")}
        try:
            for _ in range(rounds):
                started = time.perf_counter()
                subprocess.run([sys.executable, "-I", "-S", "-c", "pass"], check=True)
                rows["floor"].append((time.perf_counter() - started) * 1000)
                rows["in-process"].append(timed(dispatch, stdin, {**env, "HOOKCAGE_DAEMON": "off"}))
                autostart.stop(socket)
                rows["first"].append(timed(dispatch, stdin, env))
                if client.health(socket) is None:
                    raise SystemExit("the first event did not leave a daemon running")
                for _ in range(3):
                    rows["later"].append(timed(dispatch, stdin, env))
        finally:
            autostart.stop(socket)
        left = [pid for pid in os.listdir("/proc") if pid.isdigit() and _serves(pid, socket)]
    base = statistics.median(rows["in-process"])
    labels = {
        "floor": "`python -I -S -c pass` (the interpreter's floor)",
        "in-process": "no-hook event, in-process (`HOOKCAGE_DAEMON=off`, no daemon)",
        "first": "no-hook event, no daemon running: starts it, answered by it",
        "later": "no-hook event, the self-started daemon running",
    }
    print(f"{rounds} rounds, {sys.executable}")
    print("| path | p50 ms | min ms | vs in-process |")
    print("|---|---|---|---|")
    for name, samples in rows.items():
        p50 = statistics.median(samples)
        print(f"| {labels[name]} | {p50:.1f} | {min(samples):.1f} | {p50 / base:.2f}x |")
    if left:
        print(f"left behind: processes {left}", file=sys.stderr)
        return 1
    return 0


def _serves(pid: str, socket: str) -> bool:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"serve" in argv and socket.encode() in argv


if __name__ == "__main__":
    sys.exit(main())
