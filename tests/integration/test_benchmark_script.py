"""The benchmark script runs end to end and leaves nothing behind.

Timing is never asserted here (PERF.md: benchmarks print, tests do not
time); this only keeps ``benchmarks/bench.py`` working as the code changes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.docker, pytest.mark.alone]  # it times the engine: nothing else on it meanwhile

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench.py"


def test_the_benchmark_prints_its_table_and_leaves_no_container(
    docker_api: object, runner_image: str
) -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--runs", "2", "--seconds", "1", "--load-seconds", "2",
         "--burst-seconds", "2"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, "HOOKCAGE_IMAGE": runner_image},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "| path | p50 | p90 | p99 | x floor | x docker run | target |" in out
    for row in (
        "host subprocess (the floor)",
        "`docker run",
        "in-process cold",
        "in-process warm",
        "`hookcage dispatch` spawned, no daemon",
        "`hookcage dispatch` spawned, daemon running",
        "5 matching hooks",
        "daemon RSS",
        "4 callers",
        "memory of one pooled container",
        "`hookcage dispatch` via HOOKCAGE_URL (TCP), 4 agents x 2 s, pool_size 4: ",
        "in-process cold, gVisor (runsc)",
        "in-process warm, gVisor (runsc, pool, pre-started)",
        "in-process cold, Podman rootful",
        "in-process warm, Podman rootful",
        "in-process cold over TLS (tcp://, stunnel)",
        "1 event/s for 2 s, warm pool (runc)",
        "1 event/s for 2 s, warm pool (runsc)",
        "the 1 event/s burst (runc): cold starts",
        "gVisor warm / runc warm, side by side",
        "five matching hooks vs one, warm pool",
        "in-process warm over TLS (tcp://, stunnel, pool, pre-started)",
    ):
        assert row in out, f"{row!r} missing from:\n{out}"
    # Every row is measured, but a rootless Podman's where it cannot hold the
    # hooks' limits (cgroup v1, as on this project's machines): it says why.
    unmeasured = [line for line in out.splitlines() if "n/a" in line]
    assert all("Podman rootless" in line and "n/a (" in line for line in unmeasured), out
    assert "containers labelled hookcage.managed=true left after the run: 0" in out
