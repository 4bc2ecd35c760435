"""The run log stays bounded whatever one event carries (issue 11, "No input stalls a gate")."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path
from typing import Any

import pytest
from executor_env import Env, hooks

from executor.runlog import FIELD_CAP, append_records, cap_record, rotate

pytestmark = pytest.mark.spawns


@pytest.fixture
def env(tmp_path: Path) -> Env:
    return Env(tmp_path)


def test_a_3_9_mb_command_adds_a_bounded_line(env: Env) -> None:
    command = "echo " + "A" * 3_900_000
    env.write("user", hooks("PreToolUse", command))
    ex, _ = env.executor()
    with ex:
        ex.dispatch("PreToolUse", env.payload())
        ex.dispatch("PreToolUse", env.payload())
    log = env.home / "runs.jsonl"
    lines = log.read_bytes().splitlines()
    assert len(lines) == 2
    assert log.stat().st_size < 4 * (FIELD_CAP + 2048)  # was 2.5 MB per event
    record = json.loads(lines[0])
    assert record["truncated_fields"] == ["command"]
    assert record["command"].startswith("echo AAAA") and record["command"].endswith("[truncated by hookcage]")
    assert len(record["command"]) == FIELD_CAP


@pytest.mark.parametrize("field", ["command", "detail", "error", "name", "source"])
def test_every_huge_field_is_cut_and_named(field: str) -> None:
    record = cap_record({"hook_id": "h1", field: "x" * 1_000_000, "ok": "short"})
    assert len(record[field]) == FIELD_CAP and record["ok"] == "short"
    assert record["truncated_fields"] == [field]


def test_nested_fields_are_cut_and_named_by_path() -> None:
    record = cap_record({"env_file": {"bytes": 9, "text": "y" * 50_000}, "dropped_capabilities": ["z" * 9000]})
    assert record["truncated_fields"] == ["env_file.text", "dropped_capabilities[0]"]
    assert len(record["env_file"]["text"]) == FIELD_CAP and record["env_file"]["bytes"] == 9


def test_a_record_within_the_caps_is_unchanged() -> None:
    record: dict[str, Any] = {"a": "b", "n": 3, "nested": {"c": [1, "d"]}, "none": None}
    assert cap_record(record) == record


def test_the_log_rotates_by_size_and_keeps_n_files(tmp_path: Path) -> None:
    log = tmp_path / "runs.jsonl"
    for i in range(40):
        append_records(log, [{"i": i, "pad": "p" * 200}], max_bytes=1000, keep=2)
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock")) == [
        "runs.jsonl", "runs.jsonl.1", "runs.jsonl.2"]
    for path in (log, tmp_path / "runs.jsonl.1", tmp_path / "runs.jsonl.2"):
        assert path.stat().st_size <= 1000
    newest = [json.loads(line)["i"] for line in log.read_text().splitlines()]
    older = [json.loads(line)["i"] for line in (tmp_path / "runs.jsonl.1").read_text().splitlines()]
    assert newest[-1] == 39 and older[-1] == newest[0] - 1  # nothing lost between the files


def test_rotation_is_a_setting(env: Env) -> None:
    env.write("user", hooks("PreToolUse", "ls"))
    (env.home / "runs.jsonl").write_text("x" * 5000 + "\n")
    ex, _ = env.executor(log_max_bytes=4096, log_keep=1)
    with ex:
        ex.dispatch("PreToolUse", env.payload())
    assert (env.home / "runs.jsonl.1").read_text() == "x" * 5000 + "\n"
    assert json.loads((env.home / "runs.jsonl").read_text())["command"] == "ls"


def test_rotate_without_a_log_does_nothing(tmp_path: Path) -> None:
    rotate(tmp_path / "runs.jsonl", 3)
    assert list(tmp_path.iterdir()) == []


def _writer(path: str, worker: int, count: int) -> None:
    for i in range(count):
        append_records(Path(path), [{"w": worker, "i": i, "pad": "q" * (100 + (i * 37) % 900)},
                                    {"w": worker, "i": i, "second": True}], max_bytes=20_000, keep=50)


def test_concurrent_dispatches_rotating_lose_and_interleave_no_line(tmp_path: Path) -> None:
    log = tmp_path / "runs.jsonl"
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_writer, args=(str(log), w, 150)) for w in range(6)]
    for process in workers:
        process.start()
    for process in workers:
        process.join(60)
        assert process.exitcode == 0
    seen: set[tuple[int, int, bool]] = set()
    files = [p for p in tmp_path.iterdir() if p.name.startswith("runs.jsonl") and not p.name.endswith(".lock")]
    for path in files:
        assert path.stat().st_size <= 20_000
        for line in path.read_text().splitlines():
            record = json.loads(line)  # an interleaved line would not parse
            seen.add((record["w"], record["i"], bool(record.get("second"))))
    assert len(seen) == 6 * 150 * 2


def test_a_lone_surrogate_in_a_record_is_written_escaped(tmp_path: Path) -> None:
    log = tmp_path / "runs.jsonl"
    append_records(log, [{"command": "echo \ud800"}])
    assert json.loads(log.read_text())["command"] == "echo \ud800"


def test_the_log_holds_no_raw_escape_or_bidi_character(tmp_path: Path) -> None:
    # A hostile hook's name reaches the log; `cat runs.jsonl` must not repaint the terminal.
    log = tmp_path / "runs.jsonl"
    hostile = "\x1b[2J\x1b]52;c;ZXZpbA==\x07\u202egnp.exe\x9b31m\ud800"
    append_records(log, [{"name": hostile, "command": "echo é"}])
    raw = log.read_bytes()
    assert raw.isascii() and b"\x1b" not in raw and b"\x07" not in raw
    assert json.loads(raw)["name"] == hostile  # nothing lost: the reader gets the exact text
