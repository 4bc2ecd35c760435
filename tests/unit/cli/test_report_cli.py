"""`hookcage report` as a user types it (the real console script; host-backend hooks, no Docker)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import xmlschema
from support import allow

HOOKCAGE = shutil.which("hookcage")
pytestmark = [
    pytest.mark.spawns,
    pytest.mark.skipif(HOOKCAGE is None, reason="the hookcage console script is not installed"),
]
DATA = Path(__file__).resolve().parents[2] / "data"


class User:
    def __init__(self, tmp: Path) -> None:
        self.home = tmp / "home"
        self.project = tmp / "project"
        self.home.mkdir()
        self.project.mkdir()
        self.env = {"PATH": os.environ["PATH"], "HOME": str(tmp), "HOOKCAGE_HOME": str(self.home),
                    "HOOKCAGE_MANAGED_DIR": str(tmp / "managed")}

    def run(self, *args: str, stdin: str = "", **env: str) -> subprocess.CompletedProcess[str]:
        assert HOOKCAGE is not None
        return subprocess.run([HOOKCAGE, *args], input=stdin, capture_output=True, text=True,
                              env={**self.env, **env}, cwd=self.project, timeout=60)

    def hooks(self, *handlers: dict[str, Any]) -> None:
        data = {"hooks": {"PreToolUse": [{"hooks": [{"type": "command", "sandbox": "host", **h} for h in handlers]}]}}
        (self.home / "hooks.json").write_text(json.dumps(data))
        allow(self.home, [h["command"] for h in handlers if "command" in h])

    def dispatch(self) -> subprocess.CompletedProcess[str]:
        payload = {"session_id": "s1", "cwd": str(self.project), "tool_name": "Bash",
                   "tool_input": {"command": "rm -rf /"}}
        return self.run("dispatch", "PreToolUse", stdin=json.dumps(payload))


@pytest.fixture
def user(tmp_path: Path) -> User:
    return User(tmp_path)


def test_a_dispatch_then_its_report_in_every_format(user: User) -> None:
    user.hooks({"command": "echo 'no <b>rm</b> | here' >&2; exit 2", "name": "guard | \x1b[31mred"},
               {"command": "true"})
    assert '"permissionDecision": "deny"' in user.dispatch().stdout
    markdown = user.run("report")
    assert markdown.returncode == 0 and markdown.stderr == ""
    assert "| **blocked** |" in markdown.stdout and "`no <b>rm</b> \\| here`" in markdown.stdout
    assert "`guard \\| \\x1b[31mred`" in markdown.stdout
    document = json.loads(user.run("report", "--format", "json").stdout)
    assert [(r["outcome"], r["agent"]) for r in document["runs"]] == [("blocked", "claude"), ("ok", "claude")]
    assert document["runs"][0]["reason"] == "no <b>rm</b> | here"
    junit = user.run("report", "--format", "junit").stdout
    xmlschema.XMLSchema(str(DATA / "junit-10.xsd")).validate(junit)
    xmlschema.XMLSchema(str(DATA / "JUnit.xsd")).validate(junit)


def test_fail_on_exits_1_prints_the_report_and_names_the_hooks(user: User) -> None:
    user.hooks({"command": "echo denied >&2; exit 2", "name": "evil\nname"}, {"command": "true"})
    user.dispatch()
    user.dispatch()
    proc = user.run("report", "--format", "json", "--fail-on", "untrusted,blocked", "--fail-on", "error")
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["failed"] == ["blocked"]
    lines = proc.stderr.splitlines()
    assert lines[0] == "hookcage: --fail-on matched: 2 blocked"
    assert len(lines) == 2 and "evil\\nname" in lines[1] and "(2 runs)" in lines[1] and "denied" in lines[1]
    assert user.run("report", "--fail-on", "untrusted,error,timeout").returncode == 0


def test_since_leaves_out_older_runs(user: User) -> None:
    user.hooks({"command": "true"})
    user.dispatch()
    assert json.loads(user.run("report", "--format", "json", "--since", "1h").stdout)["total"] == 1
    assert json.loads(user.run("report", "--format", "json", "--since", "2999-01-01").stdout)["total"] == 0


@pytest.mark.parametrize(("args", "message"), [
    (["--fail-on", "blockd"], "Invalid value for '--fail-on': unknown outcome 'blockd'; known: ok, blocked"),
    (["--since", "yesterday"], "Invalid value for '--since': 'yesterday' is neither an ISO 8601 time"),
    (["--format", "html"], "Invalid value for '--format'"),
    (["--log", "/nonexistent/runs.jsonl"], "no run log at /nonexistent/runs.jsonl"),
])
def test_no_report_is_exit_2_and_one_line(user: User, args: list[str], message: str) -> None:
    proc = user.run("report", *args)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == "" and proc.stderr.count("\n") == 1
    assert proc.stderr.startswith("hookcage: error: ") and message in proc.stderr


def test_a_fifo_as_the_log_is_refused_not_waited_on(user: User, tmp_path: Path) -> None:
    fifo = tmp_path / "runs.jsonl"
    os.mkfifo(fifo)
    proc = user.run("report", "--log", str(fifo))  # would block forever reading a FIFO
    assert proc.returncode == 2 and "is not a regular file" in proc.stderr


def test_no_log_yet_is_an_empty_report_and_a_warning(user: User) -> None:
    proc = user.run("report", "--fail-on", "blocked")
    assert proc.returncode == 0
    assert "0 hooks considered" in proc.stdout
    assert proc.stderr == f"hookcage: warning: no run log yet at {user.home / 'runs.jsonl'}: no hook has been considered\n"


def test_a_broken_log_is_reported_with_its_warning(user: User) -> None:
    user.hooks({"command": "true"})
    user.dispatch()
    with open(user.home / "runs.jsonl", "ab") as log:
        log.write(b"\x1b[2J not ours\n{\"time\": \"2025-")
    proc = user.run("report", "--format", "junit", "--log", str(user.home / "runs.jsonl"))
    assert proc.returncode == 0
    assert proc.stderr == ("hookcage: warning: 2 lines of the run log not read: 1 torn (cut short by a writer that "
                           "did not finish), 1 foreign (not a hookcage run-log record)\n")
    assert 'name="hookcage.torn_lines" value="1"' in proc.stdout


def test_log_runs_off_is_said(user: User) -> None:
    proc = user.run("report", HOOKCAGE_LOG_RUNS="false")
    assert "the log_runs setting is off" in proc.stderr and proc.returncode == 0


def test_the_log_file_setting_is_where_it_reads(user: User, tmp_path: Path) -> None:
    elsewhere = tmp_path / "logs" / "hooks.jsonl"
    user.hooks({"command": "true"})
    user.run("dispatch", "PreToolUse", stdin=json.dumps({"session_id": "s", "cwd": str(user.project),
                                                         "tool_name": "Bash", "tool_input": {}}),
             HOOKCAGE_LOG_FILE=str(elsewhere))
    proc = user.run("report", "--format", "json", HOOKCAGE_LOG_FILE=str(elsewhere))
    assert json.loads(proc.stdout)["files"] == [str(elsewhere)]
