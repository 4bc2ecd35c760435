"""The per-event process: an event that matches no hook, against the interpreter's own start-up.

Usage:  python benchmarks/launcher.py [--runs 30]

One run, every path interleaved round by round (a busy machine slows them
all alike), milliseconds; the minimum over the rounds is printed too: on a
shared machine it is the closest to what a quiet one measures.

- the floor: ``python -I -S -c pass``;
- the launcher ``hookcage install`` writes (``#!python -IS``), the daemon
  running (target: p50 within 8 ms of the floor);
- pip's console script (site enabled) to the same daemon;
- both in-process (no daemon), fewer runs;
- the alternatives the launcher was weighed against: a ``type: "http"``
  route (no process: one ``POST /dispatch`` from a process already running,
  what the agent would pay at best) and no route at all (an event no hook
  matches is not routed: nothing is spawned).

:func:`rows` returns the rows for ``benchmarks/bench.py``'s table; run as a
script it prints its own. Nothing is asserted; the daemon it starts is
stopped and its home removed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from executor import __version__, entry, launcher  # noqa: E402
from executor.service import client  # noqa: E402

PIP_SCRIPT = """# -*- coding: utf-8 -*-
import re
import sys
from executor.entry import main
if __name__ == '__main__':
    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])
    sys.exit(main())
"""
"""What pip writes for the ``hookcage`` console script (after its ``#!python`` line)."""
Row = tuple[str, "list[float] | None", str]


class Setup:
    """A private HOOKCAGE_HOME, HOME and project with no hook, the launcher and a pip-style script."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.home, self.user, self.project = tmp / "hookcage-home", tmp / "user", tmp / "project"
        for folder in (self.home, self.user, self.project):
            folder.mkdir(mode=0o700)
        self.launcher = Path(launcher.launcher_path(self.home))
        self.launcher.parent.mkdir()
        self.launcher.write_bytes(launcher.script(sys.executable, str(REPO), __version__))
        self.launcher.chmod(0o755)
        self.pip_script = tmp / "pip-bin" / "hookcage"
        self.pip_script.parent.mkdir()
        self.pip_script.write_text(f"#!{sys.executable}\n" + PIP_SCRIPT)
        self.pip_script.chmod(0o755)
        self.payload = json.dumps({
            "session_id": "bench", "transcript_path": str(self.project / "t.jsonl"), "cwd": str(self.project),
            "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "ls"},
        }).encode()

    def env(self, **extra: str) -> dict[str, str]:
        """The agent's environment: PYTHONPATH for pip's script (the launcher ignores it)."""
        keep = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "DOCKER_HOST")}
        return {**keep, "HOME": str(self.user), "HOOKCAGE_HOME": str(self.home), "HOOKCAGE_DAEMON": "off",
                "CLAUDE_PROJECT_DIR": str(self.project), "PYTHONPATH": str(REPO), **extra}

    def dispatch(self, program: Path, **extra: str) -> Callable[[], None]:
        env = self.env(**extra)

        def one() -> None:
            out = subprocess.run([str(program), "dispatch", "--agent", "claude"], input=self.payload,
                                 capture_output=True, env=env, cwd=self.project)
            assert out.returncode == 0 and out.stdout == b"{}\n", out
        return one

    @contextmanager
    def daemon(self) -> Iterator[bool]:
        """``hookcage serve`` on the home's socket for the block (stopped after); False if it did not start."""
        sock = self.home / client.SOCKET_NAME
        with open(self.tmp / "serve.log", "wb") as log:
            proc = subprocess.Popen([sys.executable, "-m", "executor", "serve"], env=self.env(), stdout=log,
                                    stderr=log, stdin=subprocess.DEVNULL, cwd=self.tmp)
        try:
            deadline = time.monotonic() + 60
            while client.health(str(sock)) is None and time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.1)
            yield client.health(str(sock)) is not None
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def interleaved(paths: dict[str, Callable[[], None]], runs: int, warmup: int = 2) -> dict[str, list[float]]:
    """Each path once per round, ``runs`` rounds (after ``warmup`` untimed ones); ms per run."""
    samples: dict[str, list[float]] = {name: [] for name in paths}
    for round_ in range(warmup + runs):
        for name, fn in paths.items():
            start = time.perf_counter()
            fn()
            if round_ >= warmup:
                samples[name].append((time.perf_counter() - start) * 1000)
    return samples


def rows(runs: int = 30) -> list[Row]:
    """The table's rows: (path, samples in ms or None, target or note)."""
    tmp = Path(tempfile.mkdtemp(prefix="hookcage-launcher-bench-"))
    try:
        setup = Setup(tmp)
        floor = [sys.executable, "-I", "-S", "-c", "pass"]
        with_json = [sys.executable, "-I", "-S", "-c", "import json"]
        out: list[Row] = []
        with setup.daemon() as started:
            if not started:
                return [("daemon", None, f"n/a: hookcage serve did not start ({tmp / 'serve.log'})")]
            environ = setup.env()

            def http_route() -> None:
                answer = entry.through_daemon(None, setup.payload, environ, agent="claude")
                assert answer is not None and answer.stdout == "{}\n", answer
            paths = {
                "`python -I -S -c pass` (the floor)": lambda: subprocess.run(floor, check=True),
                "`python -I -S -c 'import json'` (what the client imported before)":
                    lambda: subprocess.run(with_json, check=True),
                "launcher (`python -IS`), daemon running, no matching hook": setup.dispatch(setup.launcher),
                "pip's console script (site enabled), daemon running": setup.dispatch(setup.pip_script),
                "`type: \"http\"` route: no process, one POST from a running process": http_route,
            }
            samples = interleaved(paths, runs)
        slow = {
            "launcher, no daemon (in-process)": setup.dispatch(setup.launcher),
            "pip's console script, no daemon (in-process)": setup.dispatch(setup.pip_script),
        }
        samples.update(interleaved(slow, max(3, runs // 5), warmup=1))
        base = statistics.median(samples["`python -I -S -c pass` (the floor)"])
        for name, values in samples.items():
            target = "p50 <= floor + 8 ms" if name.startswith("launcher (") else ""
            out.append((name, values, target))
        out.append(("no route: an event no hook matches is not routed", None, "0 (nothing spawned)"))
        out.append(("floor p50, for the +ms column", [base], ""))
        return out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    table = rows(args.runs)
    base = next((s[0] for n, s, _ in table if n.startswith("floor p50") and s), None)
    floor_min = next((min(s) for n, s, _ in table if n.startswith("`python -I -S -c pass`") and s), None)
    print(f"no-hook PreToolUse event, spawned as an agent spawns it; {args.runs} interleaved rounds "
          f"(in-process rows: {max(3, args.runs // 5)}), ms")
    print()
    print("| path | p50 | p90 | min | + over floor (p50) | + over floor (min) | x floor | target |")
    print("|---|---|---|---|---|---|---|---|")
    for name, samples, target in table:
        if name.startswith("floor p50"):
            continue
        if not samples:
            print(f"| {name} | | | | | | | {target} |")
            continue
        p50 = statistics.median(samples)
        over = f"{p50 - base:+.1f}" if base else ""
        over_min = f"{min(samples) - floor_min:+.1f}" if floor_min else ""
        ratio = f"{p50 / base:.2f}" if base else ""
        print(f"| {name} | {p50:.1f} | {pct(samples, .9):.1f} | {min(samples):.1f} | {over} | {over_min} | {ratio} "
              f"| {target} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
