"""hookcage benchmarks: one table, measured in one run on this machine.

Usage:  python benchmarks/bench.py [--runs 30] [--seconds 10]

Every figure is a ratio against a bare subprocess (the floor) and against
``docker run`` measured in the same run, as PERF.md asks. Targets are
checked and reported, never asserted: this script prints, it does not fail
on a slow machine (it exits 1 only if containers were left behind).
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
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

STDIN = b"x" * 1024
MANAGED = {"label": "hookcage.managed=true"}
HOOK = "cat >/dev/null; echo ok"


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def timed(fn: Callable[[], Any], runs: int, warmup: int = 2) -> list[float]:
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return out


def settle(pool: Any, spares: int) -> None:
    """Wait until ``pool`` has ``spares`` ready and has stopped creating: as between
    an agent's tool calls, which come seconds apart."""
    deadline = time.monotonic() + 20
    while len(pool.spares()) < spares and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.05)


class Bench:
    def __init__(self, runs: int, seconds: float) -> None:
        from executor.images import RUNNER_IMAGE
        from executor.sandbox.docker import default_client

        self.runs, self.seconds = runs, seconds
        self.client = default_client()
        self.image = RUNNER_IMAGE
        self.tmp = Path(tempfile.mkdtemp(prefix="hookcage-bench-"))
        self.tmp.chmod(0o755)
        self.ws = self.tmp / "ws"
        self.ws.mkdir(mode=0o755)
        self.home = self.tmp / "home"
        self.home.mkdir()
        self.before = {c["Id"] for c in self.client.containers(all=True, filters=MANAGED)}
        self.rows: list[tuple[str, list[float] | None, str]] = []
        self.extra: list[tuple[str, str]] = []

    # -- helpers ---------------------------------------------------------------

    def request(self, command: str = HOOK) -> Any:
        from executor.sandbox.base import RunRequest

        return RunRequest(command=command, stdin=STDIN, cwd=str(self.ws), timeout=30,
                          project_dir=str(self.ws))

    def hooks_file(self, count: int) -> None:
        handlers = [{"type": "command", "command": f"cat >/dev/null; echo ok{i}"} for i in range(count)]
        (self.home / "hooks.json").write_text(json.dumps({"hooks": {"PreToolUse": [{"hooks": handlers}]}}))
        entries = [h["command"] for h in handlers]
        (self.home / "config.toml").write_text("[allowlist]\nallow = " + json.dumps(entries) + "\n")

    def payload(self) -> bytes:
        return json.dumps({"session_id": "bench", "cwd": str(self.ws), "tool_name": "Bash",
                           "tool_input": {"command": "x" * 900}}).encode()

    def env(self) -> dict[str, str]:
        return {**os.environ, "HOOKCAGE_HOME": str(self.home),
                "HOOKCAGE_MANAGED_DIR": str(self.tmp / "managed"), "HOOKCAGE_LOG_RUNS": "false"}

    # -- measurements ----------------------------------------------------------

    def floor(self) -> None:
        self.rows.append(("host subprocess (the floor)", timed(
            lambda: subprocess.run(["sh", "-c", HOOK], input=STDIN, capture_output=True), self.runs), ""))

    def docker_run(self) -> None:
        cmd = ["docker", "run", "--rm", "-i", "--network", "none", "-v", f"{self.ws}:{self.ws}:ro",
               "--label", "hookcage.managed=true", self.image, "sh", "-c", HOOK]
        self.rows.append(("`docker run --rm -i --network none -v ws:ro`", timed(
            lambda: subprocess.run(cmd, input=STDIN, capture_output=True), self.runs), ""))

    def cold(self) -> None:
        from executor.sandbox.docker import DockerSandbox

        with DockerSandbox(client=self.client, reap_on_start=False) as sandbox:
            samples = timed(lambda: sandbox.run(self.request()), self.runs)
        self.rows.append(("in-process cold (DockerSandbox)", samples, "<= 0.6x docker run"))

    def warm(self) -> None:
        try:
            from executor.sandbox.pool import PooledDockerSandbox
        except ImportError as exc:
            self.rows.append(("in-process warm (pool)", None, f"n/a: {exc}"))
            return
        with PooledDockerSandbox(client=self.client, reap_on_start=False, pool_size=2) as sandbox:
            sandbox.prewarm(self.request(), wait=30)

            samples = []
            for _ in range(self.runs):
                settle(sandbox, 2)
                t = time.perf_counter()
                sandbox.run(self.request())
                samples.append((time.perf_counter() - t) * 1000)
        self.rows.append(("in-process warm (pool, pre-started)", samples, "p50 <= 15 ms"))

    def spawned(self, daemon: bool) -> None:
        exe = shutil.which("hookcage")
        if exe is None:
            self.rows.append(("`hookcage dispatch` spawned", None, "n/a: console script missing"))
            return
        self.hooks_file(1)
        env = self.env()
        proc = None
        label = "`hookcage dispatch` spawned, daemon running" if daemon else "`hookcage dispatch` spawned, no daemon"
        if daemon:
            sock = self.home / "hookcage.sock"
            proc = subprocess.Popen([exe, "serve"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            deadline = time.monotonic() + 30
            while not sock.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            if not sock.exists():
                proc.kill()
                self.rows.append((label, None, "n/a: the daemon did not start"))
                return
            time.sleep(0.5)
        try:
            payload = self.payload()

            def one() -> None:
                out = subprocess.run([exe, "dispatch", "PreToolUse"], input=payload, capture_output=True, env=env)
                assert out.returncode == 0, out.stderr

            samples = timed(one, self.runs)
            target = "p50 <= 60 ms" if daemon else "p50 <= 1.6x docker run"
            self.rows.append((label, samples, target))
            if daemon and proc is not None:
                rss = Path(f"/proc/{proc.pid}/status").read_text()
                kb = next(int(line.split()[1]) for line in rss.splitlines() if line.startswith("VmRSS"))
                self.extra.append(("daemon RSS", f"{kb / 1024:.1f} MiB"))
        finally:
            if proc is not None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(20)
                except subprocess.TimeoutExpired:
                    proc.kill()

    def five_hooks(self) -> None:
        from executor.executor import HookExecutor
        from executor.sandbox.pool import PooledDockerSandbox
        from executor.settings import load_settings

        payload = json.loads(self.payload())
        with PooledDockerSandbox(client=self.client, reap_on_start=False) as pool:
            for count in (1, 5):
                self.hooks_file(count)
                settings = load_settings(home=self.home, managed_dir=self.tmp / "managed", log_runs=False)
                plural = "s" if count > 1 else ""
                with HookExecutor(settings, environ={}) as ex:
                    samples = timed(lambda: ex.dispatch("PreToolUse", payload), self.runs)
                self.rows.append((f"in-process dispatch, cold, {count} matching hook{plural}", samples,
                                  "5 hooks <= 1.5x one" if count == 5 else ""))
                with HookExecutor(settings, environ={}, sandboxes={"docker": pool}) as ex:
                    ex.dispatch("PreToolUse", payload)  # the pool learns the shape and the burst

                    samples = []
                    for _ in range(self.runs):
                        settle(pool, count)
                        t = time.perf_counter()
                        ex.dispatch("PreToolUse", payload)
                        samples.append((time.perf_counter() - t) * 1000)
                self.rows.append((f"in-process dispatch, warm pool, {count} matching hook{plural}", samples,
                                  "5 hooks <= 1.5x one" if count == 5 else ""))

    def warm_rw(self) -> None:
        from executor.sandbox.base import SandboxOptions
        from executor.sandbox.pool import PooledDockerSandbox

        request = replace(self.request(), options=SandboxOptions(workspace="rw"))
        with PooledDockerSandbox(client=self.client, reap_on_start=False, pool_size=2) as sandbox:
            sandbox.prewarm(request, wait=30)
            samples = []
            for _ in range(self.runs):
                settle(sandbox, 2)
                t = time.perf_counter()
                sandbox.run(request)
                samples.append((time.perf_counter() - t) * 1000)
        self.rows.append(("in-process warm, `workspace: rw` (ends when the container has exited)", samples, ""))

    def throughput(self) -> None:
        from executor.sandbox.docker import DockerSandbox

        def rate(work: Callable[[], None]) -> float:
            stop = time.monotonic() + self.seconds
            done = [0] * 4

            def worker(i: int) -> None:
                while time.monotonic() < stop:
                    work()
                    done[i] += 1

            threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            return sum(done) / self.seconds

        def engine() -> None:
            c = self.client.create_container(self.image, command=["true"], labels={"hookcage.managed": "true"},
                                             host_config=self.client.create_host_config(), network_disabled=True)
            self.client.start(c["Id"])
            self.client.wait(c["Id"])
            self.client.remove_container(c["Id"], force=True)

        base = rate(engine)
        self.extra.append(("engine's own create+start+wait+remove, 4 threads", f"{base:.1f}/s"))
        with DockerSandbox(client=self.client, reap_on_start=False) as sandbox:
            cold = rate(lambda: sandbox.run(self.request()))
        self.extra.append(("hookcage cold, 4 callers", f"{cold:.1f}/s ({cold / base:.2f}x engine)"))
        try:
            from executor.sandbox.pool import PooledDockerSandbox
        except ImportError:
            return
        with PooledDockerSandbox(client=self.client, reap_on_start=False, pool_size=4) as sandbox:
            sandbox.prewarm(self.request(), wait=30)
            warm = rate(lambda: sandbox.run(self.request()))
        self.extra.append(("hookcage warm pool, 4 callers", f"{warm:.1f}/s ({warm / base:.2f}x engine; target >= 0.9x)"))

    def pooled_memory(self) -> None:
        try:
            from executor.sandbox.pool import PooledDockerSandbox
        except ImportError:
            return
        with PooledDockerSandbox(client=self.client, reap_on_start=False, pool_size=1) as sandbox:
            sandbox.prewarm(self.request(), wait=30)
            listed = [{"Id": container} for container in sandbox.spares()]
            usages = []
            for c in listed:
                stats = self.client.stats(c["Id"], stream=False)
                usage = stats.get("memory_stats", {}).get("usage")
                if usage:
                    usages.append(usage)
            if usages:
                self.extra.append(("memory of one pooled container", f"{statistics.median(usages) / 2**20:.1f} MiB"))

    # -- report ----------------------------------------------------------------

    def report(self) -> int:
        floor = next((s for n, s, _ in self.rows if n.startswith("host") and s), None)
        drun = next((s for n, s, _ in self.rows if n.startswith("`docker run") and s), None)
        print(f"hookcage benchmark: trivial hook `{HOOK}`, 1 KiB stdin, {self.runs} runs each, ms")
        print()
        print("| path | p50 | p90 | p99 | x floor | x docker run | target |")
        print("|---|---|---|---|---|---|---|")
        for name, samples, target in self.rows:
            if not samples:
                print(f"| {name} | | | | | | {target} |")
                continue
            p50 = statistics.median(samples)
            xf = f"{p50 / statistics.median(floor):.1f}" if floor else ""
            xd = f"{p50 / statistics.median(drun):.2f}" if drun else ""
            print(f"| {name} | {p50:.1f} | {pct(samples, .9):.1f} | {pct(samples, .99):.1f} | {xf} | {xd} | {target} |")
        print()
        for name, value in self.extra:
            print(f"- {name}: {value}")
        deadline = time.monotonic() + 5  # used pooled containers are removed in the background
        while True:
            left = [c for c in self.client.containers(all=True, filters=MANAGED) if c["Id"] not in self.before]
            if not left or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        print(f"- containers labelled hookcage.managed=true left after the run: {len(left)}")
        shutil.rmtree(self.tmp, ignore_errors=True)
        return 1 if left else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    bench = Bench(args.runs, args.seconds)
    for step in (bench.floor, bench.docker_run, bench.cold, bench.warm, bench.warm_rw,
                 lambda: bench.spawned(False), lambda: bench.spawned(True),
                 bench.five_hooks, bench.throughput, bench.pooled_memory):
        step()
        print(".", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    return bench.report()


if __name__ == "__main__":
    sys.exit(main())
