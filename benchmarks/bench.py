"""hookcage benchmarks: one table, measured in one run on this machine.

Usage:  python benchmarks/bench.py [--runs 30] [--seconds 10] [--burst-seconds 60] [--only STEP,...]

``--only paths,five_hooks,burst,throughput`` measures the warm pool's rows
alone (the gVisor and runc warm runs side by side are in ``paths``).

Every figure is a ratio against a bare subprocess (the floor) and against
``docker run`` measured in the same run, as PERF.md asks. Targets are
checked and reported, never asserted: this script prints, it does not fail
on a slow machine (it exits 1 only if containers were left behind, or an
answer of the load run was wrong).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
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
GAP = 0.5
"""Seconds left between two timed runs of a warm path (untimed): as between an
agent's tool calls, so that the pool has replaced the container just used."""
QUIET = 0.3
RUNTIME = "runc"
"""The runtime of every row but the gVisor ones (``auto`` would pick runsc where it is registered)."""
"""Seconds left (untimed) before each path of a round."""
PIP_SCRIPT = """# -*- coding: utf-8 -*-
import re
import sys
from executor.entry import main
if __name__ == '__main__':
    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])
    sys.exit(main())
"""


def health(sock: Path) -> Any:
    """``GET /health`` from the daemon on ``sock``."""
    with socket.socket(socket.AF_UNIX) as conn:
        conn.connect(str(sock))
        conn.sendall(b"GET /health HTTP/1.0\r\nHost: hookcage\r\n\r\n")
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    return json.loads(data.split(b"\r\n\r\n", 1)[1])
HOOK = "cat >/dev/null; echo ok"
REMOTE_GUARD = """jq -e '.tool_input.command | startswith("rm ")' >/dev/null && { echo "no rm here" >&2; exit 2; }; exit 0"""
REMOTE_ECHO = 'echo "seen $(jq -r .prompt)"'


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def timed(fn: Callable[[], Any], runs: int, warmup: int = 2, gap: float = 0.0) -> list[float]:
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(runs):
        time.sleep(gap)
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return out


def settle(pool: Any, spares: int) -> None:
    """Wait until ``pool`` has ``spares`` ready, then ``GAP`` more (the engine settles)."""
    deadline = time.monotonic() + 20
    while len(pool.spares()) < spares and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(GAP)


class Bench:
    def __init__(self, runs: int, seconds: float, load_seconds: float = 30.0, burst_seconds: float = 60.0) -> None:
        from executor.provision.recipe import RUNNER_IMAGE
        from executor.sandbox.docker import default_client

        self.runs, self.seconds, self.load_seconds = runs, seconds, load_seconds
        self.burst_seconds = burst_seconds
        self.wrong = 0
        self.client = default_client()
        self.image = RUNNER_IMAGE
        self.tmp = Path(tempfile.mkdtemp(prefix="hookcage-bench-"))
        self.tmp.chmod(0o755)
        self.ws = self.tmp / "ws"
        self.ws.mkdir(mode=0o755)
        self.home = self.tmp / "home"
        self.home.mkdir()
        self.before = {c["Id"] for c in self.client.containers(all=True, filters=MANAGED)}
        self.pools = {str(os.getpid())}
        """Pool owners whose containers are this run's: this process and the daemons it starts."""
        self.rows: list[tuple[str, list[float] | None, str]] = []
        self.extra: list[tuple[str, str]] = []

    # -- helpers ---------------------------------------------------------------

    def ours(self, entry: dict[str, Any]) -> bool:
        """Whether a managed container is this run's, not another process's on a shared engine.

        A test session's containers carry ``hookcage.test-session``; an agent's
        (or a test's) hook runs their session id; a daemon's pool its pid.
        This run's hook runs say ``bench...``, its pools are ``self.pools``.
        """
        labels = entry.get("Labels") or {}
        if "hookcage.test-session" in labels:
            return False
        if "hookcage.session" in labels and not labels["hookcage.session"].startswith("bench"):
            return False
        return "hookcage.pool" not in labels or labels["hookcage.pool"] in self.pools

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
        # HOOKCAGE_DAEMON=off: the "no daemon" rows must not start one (the daemon rows start it by hand).
        return {**os.environ, "HOOKCAGE_HOME": str(self.home), "HOOKCAGE_DAEMON": "off",
                "HOOKCAGE_MANAGED_DIR": str(self.tmp / "managed"), "HOOKCAGE_LOG_RUNS": "false"}

    # -- measurements ----------------------------------------------------------

    def paths(self) -> None:
        """The single-hook paths, measured in rounds: each round times every path once,
        so that load from elsewhere on a shared machine lands on all of them alike."""
        from executor.core.options import SandboxOptions
        from executor.sandbox.docker import DockerSandbox
        from executor.sandbox.pool import PooledDockerSandbox

        run = ["docker", "run", "--rm", "-i", "--network", "none", "-v", f"{self.ws}:{self.ws}:ro",
               "--label", "hookcage.managed=true", self.image, "sh", "-c", HOOK]
        ro = self.request()
        rw = replace(ro, options=SandboxOptions(workspace="rw"))
        gvisor = "runsc" in self.client.info().get("Runtimes", {})
        with DockerSandbox(client=self.client, reap_on_start=False, runtime=RUNTIME) as cold, \
                PooledDockerSandbox(client=self.client, reap_on_start=False, pool_size=2, runtime=RUNTIME) as warm, \
                PooledDockerSandbox(client=self.client, reap_on_start=False, pool_size=2,
                                    runtime=RUNTIME) as warm_rw, \
                DockerSandbox(client=self.client, reap_on_start=False, runtime="runsc") as cold_gvisor, \
                PooledDockerSandbox(client=self.client, reap_on_start=False, pool_size=2,
                                    runtime="runsc") as warm_gvisor:
            warm.prewarm(ro, wait=30)
            warm_rw.prewarm(rw, wait=30)
            if gvisor:
                warm_gvisor.prewarm(ro, wait=60)

            # Each path returns when its timing started (None: when it was called),
            # so that a pooled path can first wait, untimed, for its pool to settle.
            def pooled(pool: Any, request: Any) -> Callable[[], float | None]:
                def one() -> float | None:
                    settle(pool, 2)
                    clock = time.perf_counter()
                    pool.run(request)
                    return clock
                return one

            def whole(fn: Callable[[], Any]) -> Callable[[], float | None]:
                def one() -> float | None:
                    fn()
                    return None
                return one

            paths: list[tuple[str, Callable[[], float | None], str]] = [
                ("host subprocess (the floor)", whole(
                    lambda: subprocess.run(["sh", "-c", HOOK], input=STDIN, capture_output=True)), ""),
                ("`docker run --rm -i --network none -v ws:ro`", whole(
                    lambda: subprocess.run(run, input=STDIN, capture_output=True)), ""),
                ("in-process cold (DockerSandbox)", whole(lambda: cold.run(ro)), "<= 0.6x docker run"),
                ("in-process warm (pool, pre-started)", pooled(warm, ro), "p50 <= 15 ms"),
                ("in-process warm, `workspace: rw` (ends when the container has exited)", pooled(warm_rw, rw), ""),
            ]
            gvisor_paths: list[tuple[str, Callable[[], float | None], str]] = [
                ("in-process cold, gVisor (runsc)", whole(lambda: cold_gvisor.run(ro)), ""),
                ("in-process warm, gVisor (runsc, pool, pre-started)", pooled(warm_gvisor, ro), ""),
            ]
            if gvisor:
                paths += gvisor_paths
            else:
                for name, _, _ in gvisor_paths:
                    self.rows.append((name, None, "n/a (runsc not registered: apt-get install runsc && "
                                                  "hookcage setup runsc)"))
            samples: list[list[float]] = [[] for _ in paths]
            for round_ in range(self.runs + 2):  # two warm-up rounds
                for i, (_, fn, _) in enumerate(paths):
                    time.sleep(QUIET)  # the last path's containers finish going away
                    called = time.perf_counter()
                    started = fn()
                    if round_ >= 2:
                        samples[i].append((time.perf_counter() - (started or called)) * 1000)
        for (name, _, target), taken in zip(paths, samples, strict=True):
            self.rows.append((name, taken, target))
        by_name = {name: taken for (name, _, _), taken in zip(paths, samples, strict=True)}
        runc_warm = by_name.get("in-process warm (pool, pre-started)")
        gvisor_warm = by_name.get("in-process warm, gVisor (runsc, pool, pre-started)")
        if runc_warm and gvisor_warm:
            ratio = statistics.median(gvisor_warm) / statistics.median(runc_warm)
            self.extra.append(("gVisor warm / runc warm, side by side in the same rounds",
                               f"{statistics.median(gvisor_warm):.1f} / {statistics.median(runc_warm):.1f} ms p50 "
                               f"= {ratio:.2f}x (target <= 2x)"))

    def tls(self) -> None:
        """Cold and warm runs against the same engine behind TLS: Debian's stunnel4 in front of its
        socket (a client certificate required), reached as ``tcp://`` with ``DOCKER_TLS_VERIFY``."""
        from executor.sandbox.docker import DockerSandbox, default_client
        from executor.sandbox.pool import PooledDockerSandbox

        names = ("in-process cold over TLS (tcp://, stunnel)", "in-process warm over TLS (tcp://, stunnel, pool, pre-started)")
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integration"))
        try:
            from stunnel_support import StunnelEngine, stunnel_binary
        except ImportError as exc:
            self.rows.extend((name, None, f"n/a ({exc})") for name in names)
            return
        if stunnel_binary() is None:
            self.rows.extend((name, None, "n/a (stunnel4 not installed: apt-get install stunnel4)") for name in names)
            return
        ro = self.request()
        with StunnelEngine() as tunnel:
            client = default_client(environ=tunnel.client_env())
            with DockerSandbox(client=client, reap_on_start=False, runtime="runc") as cold, \
                    PooledDockerSandbox(client=client, reap_on_start=False, pool_size=2, runtime="runc") as warm:
                warm.prewarm(ro, wait=60)
                cold_ms = timed(lambda: cold.run(ro), self.runs)
                warm_ms: list[float] = []
                for _ in range(self.runs + 2):
                    settle(warm, 2)
                    clock = time.perf_counter()
                    _, path = warm.run_with_path(ro)
                    if path == "warm":
                        warm_ms.append((time.perf_counter() - clock) * 1000)
                warm_ms = warm_ms[2:]
            client.close()
        self.rows.append((names[0], cold_ms, ""))
        self.rows.append((names[1], warm_ms or None, "" if warm_ms else "n/a: no run went warm"))

    def podman(self) -> None:
        """Cold and warm runs on Podman's Docker-compatible API: a rootful ``podman system service`` started
        here on a private socket and storage (as the tests start it), the image loaded from this engine;
        a rootless one is only asked whether it can hold the limits (where it cannot, hooks are refused)."""
        from executor.sandbox.docker import DockerSandbox, engine_traits
        from executor.sandbox.engines import limits_refusal
        from executor.sandbox.pool import PooledDockerSandbox

        names = ("in-process cold, Podman rootful", "in-process warm, Podman rootful")
        rootless_names = ("in-process cold, Podman rootless", "in-process warm, Podman rootless (pool, pre-started)")
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integration"))
        try:
            from podman_support import PODMAN, PodmanService
        except ImportError as exc:
            self.rows.extend((name, None, f"n/a ({exc})") for name in (*names, *rootless_names))
            return
        if PODMAN is None or os.geteuid() != 0:
            why = "podman not installed: apt-get install podman uidmap catatonit" if PODMAN is None else "needs root"
            self.rows.extend((name, None, f"n/a ({why})") for name in (*names, *rootless_names))
            return
        ro = self.request()
        service = PodmanService(rootless=False)
        try:
            service.start()
            service.load_image(self.client, self.image)
            with DockerSandbox(client=service.client, reap_on_start=False, runtime="auto") as cold, \
                    PooledDockerSandbox(client=service.client, reap_on_start=False, pool_size=2,
                                        runtime="auto") as warm:
                runtime = cold.runtime()
                warm.prewarm(ro, wait=60)
                cold_ms = timed(lambda: cold.run(ro), self.runs)
                warm_ms: list[float] = []
                for _ in range(self.runs + 2):
                    settle(warm, 2)
                    clock = time.perf_counter()
                    _, path = warm.run_with_path(ro)
                    if path == "warm":
                        warm_ms.append((time.perf_counter() - clock) * 1000)
                warm_ms = warm_ms[2:]
            self.rows.append((f"{names[0]} ({runtime})", cold_ms, ""))
            self.rows.append((f"{names[1]} ({runtime}, pool, pre-started)", warm_ms or None,
                              "" if warm_ms else "n/a: no run went warm"))
        except Exception as exc:  # a bench prints what it could not measure
            self.rows.extend((name, None, f"n/a ({' '.join(str(exc).split())[:160]})") for name in names)
        finally:
            left = service.stop()
            if left:
                self.wrong += 1
                self.extra.append(("containers left in Podman (removed)", ", ".join(left)))
        rootless = PodmanService(rootless=True)
        try:
            rootless.start()
            refusal = limits_refusal(engine_traits(rootless.client), rootless.url)
            why = "refused: cannot enforce the limits here (cgroup v1)" if refusal else "not measured"
        except Exception as exc:
            why = f"did not start: {' '.join(str(exc).split())[:120]}"
        finally:
            rootless.stop()
        self.rows.extend((name, None, f"n/a ({why})") for name in rootless_names)

    def console_script(self) -> str | None:
        """The interpreter's own ``hookcage`` script (a pyenv shim on PATH adds a bash start-up)."""
        own = Path(sys.executable).parent / "hookcage"
        return str(own) if own.exists() else shutil.which("hookcage")

    def clean_venv(self) -> tuple[str, str]:
        """A venv without site packages: its python, and a ``hookcage`` script as pip writes it.

        Only the daemon-answered path can run there (it imports the standard
        library and ``executor`` alone); it shows what start-up costs without
        this machine's extra ``.pth`` files.
        """
        import executor

        venv = self.tmp / "venv"
        if (venv / "bin" / "hookcage").exists():
            return str(venv / "bin" / "python"), str(venv / "bin" / "hookcage")
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
        site = next((venv / "lib").glob("python3*/site-packages"))
        (site / "hookcage-src.pth").write_text(str(Path(executor.__file__).resolve().parents[1]) + "\n")
        python = venv / "bin" / "python"
        script = venv / "bin" / "hookcage"
        script.write_text(f"#!{python}\n" + PIP_SCRIPT)
        script.chmod(0o755)
        return str(python), str(script)

    def startup(self) -> None:
        python, _ = self.clean_venv()
        for name, exe in (("this machine's interpreter", sys.executable), ("a clean venv", python)):
            self.rows.append((f"`python -c pass`, {name} (start-up floor)", timed(
                lambda exe=exe: subprocess.run([exe, "-c", "pass"], capture_output=True), self.runs), ""))

    def spawned(self) -> None:
        exe = self.console_script()
        if exe is None:
            self.rows.append(("`hookcage dispatch` spawned", None, "n/a: console script missing"))
            return
        self.hooks_file(1)
        env = self.env()
        payload = self.payload()

        def dispatch(script: str) -> Callable[[], None]:
            def one() -> None:
                out = subprocess.run([script, "dispatch", "PreToolUse"], input=payload, capture_output=True, env=env)
                assert out.returncode == 0 and out.stdout == b"{}\n", out
            return one

        self.rows.append(("`hookcage dispatch` spawned, no daemon", timed(dispatch(exe), self.runs, gap=GAP),
                          "p50 <= 1.6x docker run"))
        sock = self.home / "hookcage.sock"
        with open(self.tmp / "serve.log", "wb") as log:
            proc = subprocess.Popen([exe, "serve"], env=env, stdout=log, stderr=log)
            self.pools.add(str(proc.pid))
        try:
            deadline = time.monotonic() + 30
            while not sock.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            if not sock.exists():
                self.rows.append(("`hookcage dispatch` spawned, daemon running", None, "n/a: the daemon did not start"))
                return
            _, clean = self.clean_venv()
            for name, script in (("", exe), (", clean venv", clean)):
                samples = timed(dispatch(script), self.runs, gap=GAP)
                self.rows.append((f"`hookcage dispatch` spawned, daemon running{name}", samples, "p50 <= 60 ms"))
            status = Path(f"/proc/{proc.pid}/status").read_text()
            kb = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS"))
            self.extra.append(("daemon RSS after those runs", f"{kb / 1024:.1f} MiB"))
            pools = [entry["pool"] for entry in health(sock)["sandboxes"] if entry.get("pool")]
            self.extra.append(("daemon's pool over those runs", ", ".join(
                f"{p['warm']} warm, {p['cold']} cold, {p['fallbacks']} fallbacks" for p in pools) or "none"))
        finally:
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
        warm_p50: dict[int, float] = {}
        with PooledDockerSandbox(client=self.client, reap_on_start=False, runtime=RUNTIME) as pool:
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
                warm_p50[count] = statistics.median(samples)
        stats = pool.stats()
        self.extra.append(("five matching hooks vs one, warm pool (dispatch p50)",
                           f"{warm_p50[5]:.1f} / {warm_p50[1]:.1f} ms = {warm_p50[5] / warm_p50[1]:.2f}x "
                           f"(target <= 1.5x); pool: {stats.warm} warm, {stats.cold} cold"))

    def burst(self) -> None:
        """One event a second for ``burst_seconds`` (one matching hook, the daemon's default pool of 2),
        as an agent's tool calls come: how many went cold (the target: the first only)."""
        from executor.executor import HookExecutor
        from executor.sandbox.pool import PooledDockerSandbox
        from executor.settings import load_settings

        payload = json.loads(self.payload())
        self.hooks_file(1)
        settings = load_settings(home=self.home, managed_dir=self.tmp / "managed", log_runs=False)
        events = max(2, round(self.burst_seconds))
        for runtime in (RUNTIME, "runsc"):
            name = f"1 event/s for {events} s, warm pool ({runtime}), dispatch"
            if runtime == "runsc" and "runsc" not in self.client.info().get("Runtimes", {}):
                self.rows.append((name, None, "n/a (runsc not registered)"))
                continue
            samples: list[float] = []
            with PooledDockerSandbox(client=self.client, reap_on_start=False, runtime=runtime) as pool, \
                    HookExecutor(settings, environ={}, sandboxes={"docker": pool}) as ex:
                began = time.monotonic()
                for n in range(events):
                    time.sleep(max(0.0, began + n - time.monotonic()))
                    t = time.perf_counter()
                    ex.dispatch("PreToolUse", payload)
                    samples.append((time.perf_counter() - t) * 1000)
                stats = pool.stats()
            self.rows.append((name, samples[1:], "warm after the first"))
            self.extra.append((f"the 1 event/s burst ({runtime}): cold starts",
                               f"{stats.cold} of {events} events ({stats.warm} warm; target: 1, the first)"))

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

        from executor.sandbox.docker import remove_container_quietly

        def engine() -> None:
            c = self.client.create_container(self.image, command=["true"], labels={"hookcage.managed": "true"},
                                             host_config=self.client.create_host_config(), network_disabled=True)
            self.client.start(c["Id"])
            self.client.wait(c["Id"])
            remove_container_quietly(self.client, c["Id"])  # another session's reap may be removing it

        base = rate(engine)
        self.extra.append(("engine's own create+start+wait+remove, 4 threads", f"{base:.1f}/s"))
        with DockerSandbox(client=self.client, reap_on_start=False, runtime=RUNTIME) as sandbox:
            cold = rate(lambda: sandbox.run(self.request()))
        self.extra.append(("hookcage cold, 4 callers", f"{cold:.1f}/s ({cold / base:.2f}x engine)"))
        try:
            from executor.sandbox.pool import PooledDockerSandbox
        except ImportError:
            return
        with PooledDockerSandbox(client=self.client, reap_on_start=False, pool_size=4, runtime=RUNTIME) as sandbox:
            sandbox.prewarm(self.request(), wait=30)
            warm = rate(lambda: sandbox.run(self.request()))
            stats = sandbox.stats()
        self.extra.append(("hookcage warm pool, 4 callers", f"{warm:.1f}/s ({warm / base:.2f}x engine; target >= 0.9x; "
                                                            f"{stats.warm} warm, {stats.cold} cold)"))

    def remote_load(self) -> None:
        """4 agents sending events for ``load_seconds`` through ``hookcage serve --listen`` (TCP, token):
        each a fresh ``hookcage dispatch`` with ``HOOKCAGE_URL`` from a venv without hookcage's
        dependencies, every answer checked (each prompt is unique, so a mixed-up answer shows)."""
        import re
        import secrets

        exe = self.console_script()
        name = f"`hookcage dispatch` via HOOKCAGE_URL (TCP), 4 agents x {self.load_seconds:g} s, pool_size 4"
        if exe is None:
            self.rows.append((name, None, "n/a: console script missing"))
            return
        home = self.tmp / "remote-home"
        home.mkdir(mode=0o700)
        hooks = {"PreToolUse": [{"hooks": [{"type": "command", "command": REMOTE_GUARD}]}],
                 "UserPromptSubmit": [{"hooks": [{"type": "command", "command": REMOTE_ECHO}]}]}
        (home / "hooks.json").write_text(json.dumps({"hooks": hooks}))
        (home / "config.toml").write_text("[allowlist]\nallow = " + json.dumps([REMOTE_GUARD, REMOTE_ECHO]) + "\n")
        token = secrets.token_hex(16)
        # One ready container per agent (the default 2 per shape would send half of them cold).
        env = {**self.env(), "HOOKCAGE_HOME": str(home), "HOOKCAGE_TOKEN": token, "HOOKCAGE_POOL_SIZE": "4"}
        log_path = self.tmp / "serve-remote.log"
        with open(log_path, "wb") as log:
            proc = subprocess.Popen([exe, "serve", "--listen", "127.0.0.1:0", "--socket", str(home / "s.sock")],
                                    env=env, stdout=log, stderr=log)
            self.pools.add(str(proc.pid))
        try:
            deadline = time.monotonic() + 60
            while not (found := re.search(r"answering on (http://127\.0\.0\.1:\d+)", log_path.read_text())):
                if proc.poll() is not None or time.monotonic() > deadline:
                    self.rows.append((name, None, "n/a: the service did not start"))
                    return
                time.sleep(0.05)
            _, client_script = self.clean_venv()
            agent_env = {"PATH": os.environ["PATH"], "HOME": str(self.tmp), "LANG": "C.UTF-8",
                         "HOOKCAGE_URL": found.group(1), "HOOKCAGE_TOKEN": token}

            def event(agent: int, n: int) -> tuple[str, bytes]:
                if n % 2:
                    command = "rm -rf build" if n % 4 == 1 else "ls"
                    return "PreToolUse", json.dumps({"session_id": f"bench-{agent}", "cwd": str(self.ws),
                                                     "tool_name": "Bash", "tool_input": {"command": command}}).encode()
                return "UserPromptSubmit", json.dumps({"session_id": f"bench-{agent}", "cwd": str(self.ws),
                                                       "prompt": f"agent {agent} event {n}"}).encode()

            def ask(script: str, what: str, payload: bytes, environ: dict[str, str]) -> tuple[int, bytes, bytes]:
                out = subprocess.run([script, "dispatch", what], input=payload, capture_output=True, env=environ)
                return out.returncode, out.stdout, out.stderr

            # The expected answers, from an in-process dispatch with the service's own settings.
            local = {**env, "HOOKCAGE_NO_DAEMON": "1"}
            expected = {key: ask(exe, *event(0, n), local) for n, key in ((1, "deny"), (3, "allow"), (0, "prompt"))}

            def correct(agent: int, n: int, got: tuple[int, bytes, bytes]) -> bool:
                if n % 2:
                    return got == expected["deny" if n % 4 == 1 else "allow"]
                code, out, err = expected["prompt"]
                return got == (code, out.replace(b"agent 0 event 0", f"agent {agent} event {n}".encode()), err)

            latencies: list[float] = []
            wrong: list[str] = []
            lock = threading.Lock()
            stop = time.monotonic() + self.load_seconds

            def agent(number: int) -> None:
                n = 0
                while time.monotonic() < stop:
                    what, payload = event(number, n)
                    t = time.perf_counter()
                    got = ask(client_script, what, payload, agent_env)
                    took = (time.perf_counter() - t) * 1000
                    with lock:
                        latencies.append(took)
                        if not correct(number, n, got):
                            wrong.append(f"agent {number} event {n}: {got!r}")
                    n += 1

            began = time.monotonic()
            threads = [threading.Thread(target=agent, args=(i,)) for i in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            elapsed = time.monotonic() - began
            rate = len(latencies) / elapsed
            self.wrong += len(wrong)
            verdict = f"{len(latencies)} answers, all correct" if not wrong else f"{len(wrong)} WRONG: {wrong[0]}"
            self.rows.append((f"{name}: {rate:.1f} events/s", latencies, verdict))
            pools = [entry["pool"] for entry in health(home / "s.sock")["sandboxes"] if entry.get("pool")]
            self.extra.append(("the TCP service's pool over the load run", ", ".join(
                f"{p['warm']} warm, {p['cold']} cold, {p['fallbacks']} fallbacks" for p in pools) or "none"))
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
        # This run's own containers (the engine may be shared): its hooks' and its service's pool.
        mine = [{"label": ["hookcage.managed=true", f"hookcage.session=bench-{i}"]} for i in range(4)]
        mine.append({"label": ["hookcage.managed=true", f"hookcage.pool={proc.pid}"]})
        deadline = time.monotonic() + 10
        while (left := sum(len(self.client.containers(all=True, filters=f)) for f in mine)) and \
                time.monotonic() < deadline:
            time.sleep(0.2)
        self.extra.append(("containers of the load run left after its service stopped", str(left)))
        self.wrong += left

    def pooled_memory(self) -> None:
        try:
            from executor.sandbox.pool import PooledDockerSandbox
        except ImportError:
            return
        with PooledDockerSandbox(client=self.client, reap_on_start=False, pool_size=1, runtime=RUNTIME) as sandbox:
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
            left = [c for c in self.client.containers(all=True, filters=MANAGED)
                    if c["Id"] not in self.before and self.ours(c)]
            if not left or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        print(f"- containers labelled hookcage.managed=true left after the run: {len(left)}")
        shutil.rmtree(self.tmp, ignore_errors=True)
        return 1 if left or self.wrong else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--load-seconds", type=float, default=30.0,
                        help="how long 4 agents send events through the TCP service (default 30)")
    parser.add_argument("--burst-seconds", type=float, default=60.0,
                        help="how long the one-event-a-second burst lasts (default 60)")
    parser.add_argument("--only", default="",
                        help="comma-separated steps to run (paths, tls, podman, startup, spawned, five_hooks, "
                             "burst, throughput, pooled_memory, remote_load); default all")
    args = parser.parse_args()
    # Every row but the gVisor ones under runc (settings and spawned commands read this too),
    # so they stay comparable with earlier runs; the gVisor rows name their runtime.
    os.environ["HOOKCAGE_RUNTIME"] = RUNTIME
    bench = Bench(args.runs, args.seconds, args.load_seconds, args.burst_seconds)
    steps = [bench.paths, bench.tls, bench.podman, bench.startup, bench.spawned,
             bench.five_hooks, bench.burst, bench.throughput, bench.pooled_memory, bench.remote_load]
    only = {name.strip() for name in args.only.split(",") if name.strip()}
    unknown = only - {step.__name__ for step in steps}
    if unknown:
        parser.error(f"unknown step(s): {', '.join(sorted(unknown))}")
    for step in steps:
        if only and step.__name__ not in only:
            continue
        step()
        print(".", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    return bench.report()


if __name__ == "__main__":
    sys.exit(main())
