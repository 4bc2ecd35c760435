"""`hookcage report` over a run log the real engine wrote (issue 14, D3).

A repository whose hooks give every outcome: one answers (and tries to
pre-approve: dropped), one blocks with hostile stderr, one crashes, one
times out, one is off the allow-list, one disabled, one invalid, one of an
unsupported type, one added after the review (untrusted), and an ok (serial
agent) pair whose first blocks so the second is never started. All of it
through `hookcage dispatch` as the agents run it, the hooks in containers;
then `hookcage report` in every format, the JUnit validated against both
published schemas, the Markdown rendered by GitHub's renderer, and
`--fail-on` exit codes.
"""

from __future__ import annotations

import html
import json
import re
import time
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import cmarkgfm  # type: ignore[import-untyped, unused-ignore]
import pytest
import xmlschema
from cmarkgfm.cmark import Options  # type: ignore[import-untyped, unused-ignore]
from support import CliUser, containers_created

from executor.core.text import one_line

pytestmark = pytest.mark.docker
DATA = Path(__file__).resolve().parents[1] / "data"
HOSTILE = ("no | <b>rm</b> [x](https://evil.example/a) www.evil.example me@evil.example "
           "\\033[2J\\033]52;c;ZXZpbA==\\007 ``x`` <!-- :smile: @octocat\\n| fake | row | x | y | z | w |")
SCRIPTS = {
    "ok.sh": 'cat >/dev/null; echo \'{"hookSpecificOutput": {"hookEventName": "PreToolUse", '
             '"permissionDecision": "allow"}}\'\n',
    "guard.sh": f"cat >/dev/null; printf '{HOSTILE}' >&2; exit 2\n",
    "crash.sh": "cat >/dev/null; echo 'Traceback: boom' >&2; exit 3\n",
    "slow.sh": "sleep 30\n",
    "offlist.sh": "exit 0\n",
    "new.sh": "echo ran > /dev/null\n",
}
HOOK = "sh $CLAUDE_PROJECT_DIR/.hookcage/{}"
OK_FIRST = "cat >/dev/null; echo 'first says no' >&2; exit 2\n"


class Repo(CliUser):
    def write(self, rel: str, text: str) -> None:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.parent.chmod(0o755)
        path.write_text(text)
        path.chmod(0o755)

    def hookcage_hooks(self, *, with_new: bool) -> None:
        handlers: list[dict[str, Any]] = [
            {"type": "command", "command": HOOK.format("ok.sh")},
            {"type": "command", "command": HOOK.format("guard.sh"), "name": "guard | <i>hostile</i>"},
            {"type": "command", "command": HOOK.format("crash.sh")},
            {"type": "command", "command": HOOK.format("slow.sh"), "timeout": 2},
            {"type": "command", "command": HOOK.format("offlist.sh")},
            {"type": "command", "command": HOOK.format("ok.sh") + " # off", "enabled": False},
            {"type": "command", "command": HOOK.format("ok.sh") + " # bad", "timeout": "soon"},
            {"type": "http", "url": "http://evil.example/hook"},
        ]
        if with_new:
            handlers.append({"type": "command", "command": HOOK.format("new.sh")})
        self.write(".hookcage/hooks.json", json.dumps({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": handlers}]}}))

    def dispatch_claude(self) -> Any:
        payload = {"session_id": self.session, "cwd": str(self.root), "hook_event_name": "PreToolUse",
                   "tool_name": "Bash", "tool_input": {"command": "rm -rf /"}}
        return self.run("dispatch", "PreToolUse", stdin=json.dumps(payload))

    def dispatch_ok(self) -> Any:
        # NB-Agent/ok's payload (camelCase); ok runs its hooks in order and stops at the first block.
        payload = {"event": "UserPromptSubmit", "cwd": str(self.root), "prompt": "hi", "sessionId": self.session}
        return self.run("dispatch", "--agent", "ok", stdin=json.dumps(payload))

    def report(self, *args: str) -> Any:
        return self.run("report", *args)


@pytest.fixture
def repo(tmp_path: Path, workspace: Path, runner_image: str, docker_api: Any) -> Repo:
    repo = Repo(tmp_path, workspace, "report")
    for name, text in SCRIPTS.items():
        repo.write(f".hookcage/{name}", text)
    repo.write(".ok/first.sh", OK_FIRST)
    repo.write(".ok/second.sh", "cat >/dev/null; exit 0\n")
    repo.write(".ok/settings.json", json.dumps({"hooks": {"UserPromptSubmit": [
        {"command": "./.ok/first.sh", "description": "first"},
        {"command": "./.ok/second.sh", "description": "second"}]}}))
    repo.allow(*(HOOK.format(n) for n in SCRIPTS if n != "offlist.sh"), "./.ok/first.sh", "./.ok/second.sh")
    repo.hookcage_hooks(with_new=False)
    proc = repo.run("trust", "--all", "--yes")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    repo.hookcage_hooks(with_new=True)  # added after the review: untrusted
    return repo


def rendered_rows(markdown: str) -> list[list[str]]:
    page = cmarkgfm.github_flavored_markdown_to_html(markdown, options=Options.CMARK_OPT_UNSAFE)
    assert set(re.findall(r"</?([a-zA-Z][a-zA-Z0-9]*)", page)) <= {
        "h2", "p", "blockquote", "strong", "table", "thead", "tbody", "tr", "th", "td", "code"}
    assert not re.findall(r"<[a-z]+\s[^>]*(?:href|src)\s*=", page) and "<!--" not in page
    body = re.findall(r"<tbody>(.*?)</tbody>", page, flags=re.S)[-1]
    return [re.findall(r"<td[^>]*>(.*?)</td>", row, flags=re.S)
            for row in re.findall(r"<tr>(.*?)</tr>", body, flags=re.S)]


def shown(cell: str) -> str:
    match = re.fullmatch(r"<code>(.*)</code>", cell, flags=re.S)
    return html.unescape(match.group(1) if match else cell)


EXPECTED = {"ok": 1, "blocked": 2, "error": 1, "timeout": 1, "not-run": 1, "untrusted": 1, "off-list": 1,
            "disabled": 1, "invalid": 1, "unsupported": 1, "skipped": 0}


def test_every_outcome_from_the_engine_in_every_format(repo: Repo, docker_api: Any) -> None:
    started = time.time()
    claude = repo.dispatch_claude()
    assert claude.returncode == 0, claude.stderr
    assert json.loads(claude.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"
    between = datetime.now(UTC).isoformat()
    time.sleep(0.05)  # the --since boundary falls strictly between the two dispatches
    ok = repo.dispatch_ok()
    assert (ok.returncode, ok.stderr) == (2, "first says no\n")
    # What ran did so in containers: ok, guard, crash, slow (claude) and first (ok); nothing else started.
    assert containers_created(docker_api, repo.session, started) == 5

    # JSON: every outcome, the agents, the reasons.
    proc = repo.report("--format", "json")
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    document = json.loads(proc.stdout)
    assert document["counts"] == EXPECTED
    assert document["unread_lines"] == {"torn": 0, "foreign": 0}
    runs = {(r["outcome"], r["command"]): r for r in document["runs"]}
    assert {r["agent"] for r in document["runs"] if r["event"] == "PreToolUse"} == {"claude"}
    assert {r["agent"] for r in document["runs"] if r["event"] == "UserPromptSubmit"} == {"ok"}
    guard = runs[("blocked", HOOK.format("guard.sh"))]
    assert guard["hook"] == "guard | <i>hostile</i>" and guard["reason"].startswith("no | <b>rm</b> [x](https://")
    # hookcage shows a hook's escapes as text from the start (executor.core.text): never a raw ESC.
    assert "\\x1b[2J" in guard["reason"] and "\x1b" not in guard["reason"] and "\n| fake" in guard["reason"]
    assert guard["exit_code"] == 2 and guard["duration_ms"] > 0
    assert runs[("ok", HOOK.format("ok.sh"))]["dropped_capabilities"] == ["approve"]
    assert "exited 3" in runs[("error", HOOK.format("crash.sh"))]["reason"]
    assert "timed out" in runs[("timeout", HOOK.format("slow.sh"))]["reason"]
    assert "hookcage allow" in runs[("off-list", HOOK.format("offlist.sh"))]["reason"]
    assert runs[("untrusted", HOOK.format("new.sh"))]["reason"] == "new or changed since it was reviewed"
    assert runs[("not-run", "./.ok/second.sh")]["duration_ms"] is None
    assert runs[("blocked", "./.ok/first.sh")]["reason"] == "first says no"

    # Markdown: one row per hook, seven cells, exactly the hook's text, no link, no tag.
    proc = repo.report()
    assert proc.returncode == 0
    rows = rendered_rows(proc.stdout)
    assert len(rows) == sum(EXPECTED.values()) and all(len(r) == 7 for r in rows)
    cells = {shown(r[3]): r for r in rows}
    hostile_row = cells["guard | <i>hostile</i>"]
    assert hostile_row[4] == "<strong>blocked</strong>"
    assert shown(hostile_row[6]) == one_line(guard["reason"], 300).strip()
    assert "\\x1b[2J" in shown(hostile_row[6])

    # JUnit: valid against both schemas; failures and skips per outcome.
    proc = repo.report("--format", "junit")
    assert proc.returncode == 0
    for schema in ("junit-10.xsd", "JUnit.xsd"):
        xmlschema.XMLSchema(str(DATA / schema)).validate(proc.stdout)
    root = ET.fromstring(proc.stdout.encode())
    failures = [f.get("type") for f in root.iter("failure")]
    assert sorted(failures) == ["blocked", "blocked", "error", "timeout"]
    skips = sorted((s.get("message") or "").split(":")[0] for s in root.iter("skipped"))
    assert skips == ["disabled", "invalid", "not-run", "off-list", "unsupported", "untrusted"]
    assert len(list(root.iter("testcase"))) == sum(EXPECTED.values())

    # --since: only what came after the boundary (the ok dispatch).
    later = json.loads(repo.report("--format", "json", "--since", between).stdout)
    assert {r["command"] for r in later["runs"]} == {"./.ok/first.sh", "./.ok/second.sh"}
    assert json.loads(repo.report("--format", "json", "--since", "10m").stdout)["total"] == sum(EXPECTED.values())

    # --fail-on: exit 1 for each outcome that occurred, 0 for one that did not; the report printed anyway.
    for outcome in ("untrusted", "blocked", "error", "timeout", "off-list", "not-run"):
        proc = repo.report("--fail-on", outcome)
        assert proc.returncode == 1, outcome
        assert "| Outcome | Runs |" in proc.stdout
        # `error` covers `timeout` too: a hook that ran past its timeout failed.
        matched = ["error", "timeout"] if outcome == "error" else [outcome]
        counts = ", ".join(f"{EXPECTED[name]} {name}" for name in matched)
        assert proc.stderr.startswith(f"hookcage: --fail-on matched: {counts}\n")
    untrusted = repo.report("--format", "junit", "--fail-on", "untrusted")
    assert untrusted.returncode == 1 and "new.sh" in untrusted.stderr and untrusted.stdout.startswith("<?xml")
    assert repo.report("--fail-on", "skipped").returncode == 0
    assert repo.report("--fail-on", "untrusted,nope").returncode == 2


def test_a_report_reads_across_the_rotations_the_dispatches_made(repo: Repo) -> None:
    # A run log rotated at every dispatch (log_max_bytes=1): the report still lists every run, oldest first.
    env = {"HOOKCAGE_LOG_MAX_BYTES": "1", "HOOKCAGE_LOG_KEEP": "10"}
    for prompt in ("one", "two", "three"):
        payload = {"event": "UserPromptSubmit", "cwd": str(repo.root), "prompt": prompt, "sessionId": repo.session}
        proc = repo.run("dispatch", "--agent", "ok", stdin=json.dumps(payload), env=env)
        assert proc.returncode == 2, proc.stderr
    names = sorted(p.name for p in repo.home.iterdir() if p.name.startswith("runs.jsonl") and p.suffix != ".lock")
    assert names == ["runs.jsonl", "runs.jsonl.1", "runs.jsonl.2"]
    document = json.loads(repo.report("--format", "json").stdout)
    assert [(r["command"], r["outcome"]) for r in document["runs"]] == [
        ("./.ok/first.sh", "blocked"), ("./.ok/second.sh", "not-run")] * 3
    assert document["files"] == [str(repo.home / n) for n in ("runs.jsonl.2", "runs.jsonl.1", "runs.jsonl")]
    assert document["unread_lines"] == {"torn": 0, "foreign": 0}
