"""The run log under many writer processes, tiny rotation sizes, SIGKILL and a reader meanwhile (issue 14, D3).

Each writer is its own Python process (not a fork of this one) appending the
way a dispatch does (:func:`executor.runlog.append_records`: two records in
one call); `hookcage report` reads the log with the real console script.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

HOOKCAGE = shutil.which("hookcage")
NOW = datetime(2025, 5, 1, tzinfo=UTC)
pytestmark = [
    pytest.mark.spawns,
    pytest.mark.skipif(HOOKCAGE is None, reason="the hookcage console script is not installed"),
]

WRITER = r"""
import sys, time
from pathlib import Path
from executor.runlog import append_records

path, worker, count, max_bytes, keep, pause = sys.argv[1:]
worker, count, max_bytes, keep, pause = int(worker), int(count), int(max_bytes), int(keep), float(pause)
for i in range(count):
    base = {"time": "2025-05-01T12:00:00.000+00:00", "event": "PreToolUse", "agent": "claude",
            "hook_id": f"w{worker}", "scope": "user", "source": "hooks.json", "sandbox": "docker",
            "async": False, "outcome": "ran", "status": "ok", "exit_code": 0, "duration_ms": 1.0}
    pad = "x" * (50 + (i * 37 + worker * 11) % 400)
    append_records(Path(path), [{**base, "session": f"{i}-a", "command": pad},
                                {**base, "session": f"{i}-b", "command": "echo " + pad}],
                   max_bytes=max_bytes, keep=keep)
    if pause:
        time.sleep(pause)
"""


def start_writers(log: Path, workers: int, count: int, max_bytes: int, keep: int,
                  pause: float) -> list[subprocess.Popen[bytes]]:
    return [subprocess.Popen([sys.executable, "-c", WRITER, str(log), str(w), str(count), str(max_bytes),
                              str(keep), str(pause)]) for w in range(workers)]


def report(log: Path) -> dict[str, Any]:
    assert HOOKCAGE is not None
    proc = subprocess.run([HOOKCAGE, "report", "--format", "json", "--log", str(log)], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "HOOKCAGE_HOME": str(log.parent / "home")})
    assert proc.returncode == 0, proc.stderr
    document: dict[str, Any] = json.loads(proc.stdout)
    return document


def keys(document: dict[str, Any]) -> list[tuple[int, int, str]]:
    out = []
    for run in document["runs"]:
        i, part = run["session"].split("-")
        out.append((int(run["hook_id"][1:]), int(i), part))
    return out


def log_files(folder: Path) -> list[Path]:
    return [p for p in folder.iterdir() if p.name.startswith("runs.jsonl") and not p.name.endswith(".lock")]


def raw_lines(folder: Path) -> list[bytes]:
    data = [line for path in log_files(folder) for line in path.read_bytes().splitlines(keepends=True)]
    for line in data:
        assert line.endswith(b"\n"), f"a torn line: {line[:80]!r}"
    return data


def test_many_writers_rotating_some_killed_lose_tear_and_repeat_no_line(tmp_path: Path) -> None:
    log = tmp_path / "runs.jsonl"
    workers, count = 12, 150
    # ~2 MB in all, rotated every 40 kB: some 50 rotations while 12 processes write (keep=100: none lost).
    writers = start_writers(log, workers, count, max_bytes=40_000, keep=100, pause=0.002)
    killed: set[int] = set()
    snapshots: list[list[tuple[int, int, str]]] = []
    deadline = time.monotonic() + 120
    while any(w.poll() is None for w in writers):
        assert time.monotonic() < deadline, "the writers did not finish"
        snapshot = report(log)  # read while they write and rotate
        assert snapshot["unread_lines"]["foreign"] == 0
        assert snapshot["unread_lines"]["torn"] <= 1  # at most a line being written as it read
        snapshots.append(keys(snapshot))
        if not killed and len(snapshots[-1]) > workers * count // 3:
            for index in (1, 5, 9):
                if writers[index].poll() is None:
                    writers[index].send_signal(signal.SIGKILL)
                    killed.add(index)
    for w in writers:
        w.wait(60)
    assert killed, "every writer had finished before the kill: nothing was killed mid-run"
    assert all(writers[i].returncode == -signal.SIGKILL for i in killed)
    assert all(w.returncode == 0 for i, w in enumerate(writers) if i not in killed)
    # On disk: every line whole, each file within its size (a file holds more only when one write is bigger).
    for path in log_files(tmp_path):
        assert path.stat().st_size <= 40_000
    lines = raw_lines(tmp_path)
    assert len(log_files(tmp_path)) < 101  # nothing rotated away: every line written is still there
    final = report(log)
    assert final["unread_lines"] == {"torn": 0, "foreign": 0}
    seen = keys(final)
    assert len(seen) == len(set(seen)) == len(lines)  # each line once
    for worker in range(workers):
        mine = sorted((i, part) for w, i, part in seen if w == worker)
        written = len(mine) // 2
        # Both records of an append or neither, and no gap: a killed writer's lines are what it wrote before dying.
        assert mine == [(i, part) for i in range(written) for part in ("a", "b")], worker
        assert written == count or worker in killed
    # The report read across the rotations: each snapshot saw every line of the ones before it, once.
    for before, after in zip(snapshots, [*snapshots[1:], seen], strict=True):
        assert len(before) == len(set(before))
        assert set(before) <= set(after)
    assert len(snapshots) >= 2


def test_a_log_smaller_than_one_write_keeps_exactly_the_newest_writes(tmp_path: Path) -> None:
    # max_bytes below any one write: every write rotates first, so each file holds one write, and
    # with keep=N exactly the N+1 newest writes survive, each writer's a run of its newest.
    log = tmp_path / "runs.jsonl"
    workers, count, keep = 8, 60, 30
    writers = start_writers(log, workers, count, max_bytes=100, keep=keep, pause=0.0)
    for w in writers:
        assert w.wait(120) == 0
    lines = raw_lines(tmp_path)
    assert len(log_files(tmp_path)) == keep + 1
    assert len(lines) == 2 * (keep + 1)
    final = report(log)
    assert final["unread_lines"] == {"torn": 0, "foreign": 0} and final["total"] == len(lines)
    seen = keys(final)
    for worker in range(workers):
        mine = sorted({i for w, i, _ in seen if w == worker})
        assert mine == list(range(count - len(mine), count)), worker  # only the oldest went
    # The report lists them oldest first: each writer's appends in the order it made them.
    for worker in range(workers):
        order = [i for w, i, _ in seen if w == worker]
        assert order == sorted(order)


def test_a_rotation_while_the_report_opens_the_files_hides_no_line(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # The reader lists and opens the files under the writers' lock. Without it a rotation between
    # opening runs.jsonl.1 and runs.jsonl moved the newest lines to .1 (already opened: the older
    # lines) and the reader saw none of them.
    from executor import runlog
    from executor.core.report import parse_log

    log = tmp_path / "runs.jsonl"
    for i in range(3):  # one record per file: runs.jsonl.2, runs.jsonl.1, runs.jsonl
        runlog.append_records(log, [{"event": "Stop", "hook_id": f"h{i}", "outcome": "ran", "status": "ok"}],
                              max_bytes=1, keep=10)
    rotate_now = ("from pathlib import Path; from executor.runlog import append_records; "
                  f"append_records(Path({str(log)!r}), [{{'event': 'Stop', 'hook_id': 'late', 'outcome': 'ran', "
                  "'status': 'ok'}], max_bytes=1, keep=10)")
    real_open = os.open
    writer: list[subprocess.Popen[bytes]] = []

    def opening(path: Any, flags: int, *args: Any) -> int:
        fd = real_open(path, flags, *args)
        if not writer and str(path).endswith("runs.jsonl.1"):  # between two files of the log
            writer.append(subprocess.Popen([sys.executable, "-c", rotate_now]))
            time.sleep(1.5)  # room for the writer to rotate, unless the lock holds it
        return fd

    monkeypatch.setattr(runlog.os, "open", opening)
    with runlog.open_log(log) as files:
        seen = [row.hook_id for row in parse_log(((str(p), f) for p, f in files), now=NOW).rows]
    monkeypatch.undo()
    assert writer and writer[0].wait(30) == 0
    assert seen == ["h0", "h1", "h2"]
    assert [r.hook_id for r in parse_log(((str(p), p.read_bytes().splitlines(keepends=True))
                                          for p in [*runlog.rotated_files(log), log]), now=NOW).rows] == [
        "h0", "h1", "h2", "late"]
