"""The example agent of compose.yaml (examples/compose-agent/play.py and its events), without Docker."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from executor.core.events import get_event

pytestmark = pytest.mark.spawns

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "compose-agent"


@pytest.fixture(scope="module")
def play() -> ModuleType:
    spec = importlib.util.spec_from_file_location("compose_agent_play", EXAMPLE / "play.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_event_is_a_claude_code_payload_with_the_placeholders_filled(play: ModuleType) -> None:
    events = play.load_events(EXAMPLE / "events", "/work/space", "s-123")
    assert [name for name, _ in events] == sorted(p.stem for p in (EXAMPLE / "events").glob("*.json"))
    for name, payload in events:
        get_event(payload["hook_event_name"])  # a known event
        assert payload["session_id"] == "s-123", name
        assert payload["cwd"] == "/work/space", name
        assert "${" not in json.dumps(payload), name
    by_name = dict(events)
    assert by_name["05-write-env"]["tool_input"]["file_path"] == "/work/space/.env"


def test_every_event_is_routed_once_to_hookcage_dispatch(play: ModuleType) -> None:
    settings = json.loads((EXAMPLE / "claude-settings.json").read_text())
    for name, payload in play.load_events(EXAMPLE / "events", "/w", "s"):
        assert play.routed_commands(settings, payload) == ["hookcage dispatch --agent claude"], name


def test_matchers_read_as_claude_code_reads_them(play: ModuleType) -> None:
    bash = {"hook_event_name": "PreToolUse", "tool_name": "Bash"}
    assert play._matches("Bash", bash) and play._matches("Write|Bash", bash) and play._matches("*", bash)
    assert not play._matches("Write|Edit", bash) and not play._matches("Bas", bash)
    assert play._matches("^Ba.*", bash) and not play._matches("^Wr.*", bash)
    assert play._matches("Write", {"hook_event_name": "Stop"})  # other events ignore the matcher


def test_play_runs_each_routed_command_with_the_payload_on_stdin(tmp_path: Path) -> None:
    settings = tmp_path / "settings.json"
    # A hook that echoes its stdin and exits 2 on a Bash call: what play reports is what the command did.
    hook = "tee /dev/stderr | grep -q '\"Bash\"' && exit 2; exit 0"
    settings.write_text(json.dumps({"hooks": {
        "PreToolUse": [{"matcher": "Bash|Write", "hooks": [{"type": "command", "command": hook}]}],
    }}))
    done = subprocess.run(
        [sys.executable, str(EXAMPLE / "play.py"), "--json", "--settings", str(settings)],
        env={"PATH": "/usr/bin:/bin", "CLAUDE_PROJECT_DIR": str(tmp_path), "AGENT_SESSION_ID": "s-9"},
        cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
    )
    assert done.returncode == 0, done.stderr
    runs = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(r["event"], r["exit_code"]) for r in runs] == [
        ("03-run-tests", 2), ("04-rm-rf", 2), ("05-write-env", 0),
    ]
    sent = json.loads(runs[2]["stderr"])
    assert sent["tool_input"]["file_path"] == f"{tmp_path}/.env" and sent["session_id"] == "s-9"


def test_play_reports_a_broken_event_file_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "01-bad.json").write_text('{"no": "event name"}')
    done = subprocess.run(
        [sys.executable, str(EXAMPLE / "play.py"), "--events", str(tmp_path)],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert done.returncode == 1
    assert done.stderr.startswith("play: error: ") and "01-bad.json" in done.stderr
    assert len(done.stderr.splitlines()) == 1
