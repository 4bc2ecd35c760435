"""`hookcage report`'s pure part (executor.core.report) and its run-log reader.

Records come from the real executor (FakeSandbox) so every outcome is the
shape hookcage really writes; the Markdown is rendered by cmark-gfm, the
renderer GitHub uses for job summaries; the JUnit XML is validated against
two published schemas (tests/data/README.md); the JSON against the schema
docs/report.md documents.
"""

from __future__ import annotations

import html
import json
import os
import re
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import cmarkgfm  # type: ignore[import-untyped, unused-ignore]
import jsonschema
import pytest
import xmlschema
from cmarkgfm.cmark import Options  # type: ignore[import-untyped, unused-ignore]
from executor_env import Env, hooks

from executor.core.report import (
    FAILURES,
    OUTCOMES,
    Report,
    classify,
    md_code,
    parse_fail_on,
    parse_log,
    parse_since,
    to_json,
    to_junit,
    to_markdown,
)
from executor.core.text import one_line
from executor.dialects import DIALECTS
from executor.runlog import append_records, open_log, rotated_files
from executor.sandbox import RunResult

DATA = Path(__file__).resolve().parents[2] / "data"
DOCS = Path(__file__).resolve().parents[3] / "docs"
NOW = datetime(2025, 5, 1, 12, 0, tzinfo=UTC)


def schemas() -> list[xmlschema.XMLSchema]:
    return [xmlschema.XMLSchema(str(DATA / "junit-10.xsd")), xmlschema.XMLSchema(str(DATA / "JUnit.xsd"))]


def lines(*records: dict[str, Any] | str) -> list[bytes]:
    return [(r if isinstance(r, str) else json.dumps(r)).encode() + b"\n" for r in records]


def report_of(*records: dict[str, Any] | str, since: datetime | None = None) -> Report:
    return parse_log([("runs.jsonl", lines(*records))], since=since, now=NOW)


def ran(**fields: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "time": "2025-05-01T11:00:00.000+00:00", "session": "s1", "event": "PreToolUse", "agent": "claude",
        "hook_id": "h0123456789a", "name": None, "scope": "project", "source": "/r/.hookcage/hooks.json",
        "command": "sh guard.sh", "sandbox": "docker", "async": False, "outcome": "ran", "skip_reason": None,
        "status": "ok", "exit_code": 0, "duration_ms": 120.5, "timed_out": False, "oom_killed": False,
        "truncated": False, "decision": None, "reason": None, "error": None, "dropped_capabilities": [],
        "env_file": None,
    }
    record.update(fields)
    return record


def skipped(reason: str, detail: str = "why", **fields: Any) -> dict[str, Any]:
    record = ran(**fields)
    for key in ("status", "exit_code", "duration_ms", "timed_out", "oom_killed", "truncated", "decision",
                "reason", "error", "dropped_capabilities", "env_file"):
        record.pop(key)
    record.update(outcome="skipped", skip_reason=reason, detail=detail)
    return record


# -- every outcome, from the executor's own records ------------------------------------------


ANSWERS = {
    "okhook": RunResult(0, duration=0.05),
    "allowhook": RunResult(0, stdout=json.dumps({"hookSpecificOutput": {
        "hookEventName": "PreToolUse", "permissionDecision": "allow",
        "permissionDecisionReason": "pre-approved"}}).encode()),
    "guard": RunResult(2, stderr=b"rm -rf is not allowed"),
    "denier": RunResult(0, stdout=json.dumps({"hookSpecificOutput": {
        "hookEventName": "PreToolUse", "permissionDecision": "deny",
        "permissionDecisionReason": "denied by policy"}}).encode()),
    "crash": RunResult(3, stderr=b"Traceback: boom"),
    "garbage": RunResult(0, stdout=b"{not json}"),  # starts and ends like JSON: a parse failure (Claude Code)
    "slow": RunResult(None, timed_out=True, duration=1.0),
    "hog": RunResult(137, oom_killed=True),
    "strict": RunResult(5, stderr=b"cannot reach the linter"),
    "first": RunResult(2, stderr=b"stop here"),
}


@pytest.fixture
def every_outcome(env: Env) -> Env:
    (env.home / "config.toml").write_text(
        '[allowlist]\nallow = ["okhook", "allowhook", "guard", "denier", "crash", "garbage", "slow", "hog", '
        '"strict", "first", "second", "off", "web", "broken", "projhook"]\n')
    env.write("user", {"hooks": {
        "PreToolUse": [{"hooks": [
            {"type": "command", "command": c} for c in
            ("okhook", "allowhook", "guard", "denier", "crash", "garbage", "slow", "hog")] + [
            {"type": "command", "command": "strict", "on_error": "deny"},
            {"type": "command", "command": "rm -rf /"},                       # off the allow-list
            {"type": "command", "command": "off", "enabled": False},          # disabled
            {"type": "http", "url": "http://example.invalid/hook"},           # unsupported
            {"type": "command", "command": "broken", "timeout": "soon"},      # invalid
        ]}],
        "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "first"},
                                        {"type": "command", "command": "second"}]}],
    }})
    env.write("project", hooks("PreToolUse", "projhook"))  # never reviewed: untrusted
    ex, _ = env.executor(lambda req: ANSWERS.get(req.command, RunResult(0)))
    with ex:
        ex.dispatch("PreToolUse", env.payload())
        # ok runs its hooks in order and stops at the first block: "second" is never started.
        ex.dispatch("UserPromptSubmit", {"session_id": "s1", "cwd": str(env.project), "prompt": "hi"},
                    dialect=DIALECTS["ok"])
    return env


@pytest.fixture
def env(tmp_path: Path) -> Env:
    return Env(tmp_path)


def read_report(path: Path, **kwargs: Any) -> Report:
    with open_log(path) as files:
        return parse_log(((str(p), f) for p, f in files), now=NOW, **kwargs)


def test_the_executors_records_give_every_outcome(every_outcome: Env) -> None:
    report = read_report(every_outcome.home / "runs.jsonl")
    by_hook = {row.command or row.hook: row for row in report.rows}
    expected = {
        "okhook": "ok", "allowhook": "ok", "guard": "blocked", "denier": "blocked", "crash": "error",
        "garbage": "error", "slow": "timeout", "hog": "error", "strict": "error", "rm -rf /": "off-list",
        "off": "disabled", "": "unsupported", "broken": "invalid", "projhook": "untrusted",
        "first": "blocked", "second": "not-run",
    }
    got = {command: by_hook[command].outcome for command in expected if command}
    got[""] = next(r.outcome for r in report.rows if r.command == "")
    assert got == expected
    assert (report.torn, report.foreign) == (0, 0)
    assert set(OUTCOMES) - {o for o, n in report.counts.items() if n} == {"skipped"}  # all but the unknown reason
    # What each row says, from the record (block reasons and decisions are logged for this).
    assert by_hook["guard"].reason == "rm -rf is not allowed"
    assert by_hook["denier"].reason == "denied by policy" and by_hook["denier"].decision == "deny"
    assert by_hook["allowhook"].reason == "pre-approved" and by_hook["allowhook"].decision == "allow"
    assert "exited 3" in by_hook["crash"].reason and "boom" in by_hook["crash"].reason
    assert "not valid JSON" in by_hook["garbage"].reason
    assert "timed out" in by_hook["slow"].reason
    assert "out of memory" in by_hook["hog"].reason
    assert "on_error is deny: denied" in by_hook["strict"].reason
    assert "hookcage allow" in by_hook["rm -rf /"].reason
    assert "changed since it was reviewed" in by_hook["projhook"].reason
    assert by_hook["second"].duration_ms is None and "not started" in by_hook["second"].reason
    assert by_hook["slow"].duration_ms == 1000.0
    assert {r.agent for r in report.rows if r.event == "PreToolUse"} == {"claude"}
    assert {r.agent for r in report.rows if r.event == "UserPromptSubmit"} == {"ok"}


def test_a_never_started_run_is_logged_without_a_duration(every_outcome: Env) -> None:
    # Regression: it was logged with the machine's uptime (time.monotonic() - 0) as its duration.
    record = next(r for r in every_outcome.log() if r["command"] == "second")
    assert record["status"] is None and record["duration_ms"] is None


@pytest.mark.parametrize(("record", "outcome"), [
    (ran(), "ok"),
    (ran(decision="ask"), "ok"),
    (ran(decision="defer"), "ok"),
    (ran(status="block", decision="block", exit_code=2), "blocked"),
    (ran(decision="deny"), "blocked"),
    (ran(status="error", error="exited 1"), "error"),
    (ran(status="ok", decision="deny", error="exited 1"), "error"),       # on_error deny, permission event
    (ran(status="block", decision="block", error="exited 1"), "error"),  # on_error deny, blocking event
    (ran(status="error", timed_out=True, error="timed out after 60 s"), "timeout"),
    (ran(status="ok", decision="deny", timed_out=True, error="timed out"), "timeout"),
    (ran(status=None, exit_code=None), "not-run"),
    (skipped("untrusted"), "untrusted"),
    (skipped("not_allowlisted"), "off-list"),
    (skipped("disabled"), "disabled"),
    (skipped("invalid"), "invalid"),
    (skipped("unsupported_type"), "unsupported"),
    (skipped("a_reason_of_a_later_version"), "skipped"),
    (ran(status="a_status_of_a_later_version"), None),
    (ran(outcome="exploded"), None),
    ({"hello": "world"}, None),
])
def test_classify(record: dict[str, Any], outcome: str | None) -> None:
    assert classify(record) == outcome


def test_an_unknown_skip_reason_is_reported_with_the_reason() -> None:
    (row,) = report_of(skipped("quota", "over the quota")).rows
    assert (row.outcome, row.reason) == ("skipped", "quota: over the quota")


# -- reading the log: torn and foreign lines -------------------------------------------------


def test_a_torn_last_line_and_foreign_lines_are_counted_not_fatal() -> None:
    good = json.dumps(ran()).encode()
    files = [
        ("runs.jsonl.1", [good + b"\n", b"not json at all\n", b"[1, 2]\n", b'{"some": "other tool"}\n',
                          b"\xff\xfe garbage \x00\n", b"[" * 100_000 + b"\n", b'{"n": ' + b"9" * 5000 + b"}\n",
                          b"\n", b"   \n", json.dumps(ran(outcome="exploded")).encode() + b"\n",
                          json.dumps(ran(event=["PreToolUse"])).encode() + b"\n",
                          json.dumps(ran(hook_id=7)).encode() + b"\n"]),
        ("runs.jsonl", [good + b"\n", good[: len(good) // 2]]),  # a writer killed mid-line
    ]
    report = parse_log(files, now=NOW)
    assert len(report.rows) == 2
    assert (report.torn, report.foreign) == (1, 9)
    assert report.files == ("runs.jsonl.1", "runs.jsonl")
    assert report.warning() == ("10 lines of the run log not read: 1 torn (cut short by a writer that did not "
                                "finish), 9 foreign (not a hookcage run-log record)")


def test_a_last_line_without_its_newline_that_is_whole_is_kept() -> None:
    report = parse_log([("runs.jsonl", [json.dumps(ran()).encode()])], now=NOW)
    assert len(report.rows) == 1 and report.torn == 0


def test_wrongly_typed_fields_of_a_record_do_not_break_the_report() -> None:
    record = ran(duration_ms="fast", exit_code=True, name=["a"], session=None, dropped_capabilities="approve",
                 decision=7, time=12345, async_="yes", agent={"x": 1})
    (row,) = report_of(record).rows
    assert row.duration_ms is None and row.exit_code is None and row.time is None and row.decision is None
    assert row.hook == '["a"]' and row.session == "" and row.dropped == () and row.agent == '{"x": 1}'
    for text in (to_markdown(report_of(record)), to_json(report_of(record)), to_junit(report_of(record))):
        assert text
    for duration in (float("nan"), float("inf"), -5):
        assert report_of(ran(duration_ms=duration)).rows[0].duration_ms is None


def test_rows_keep_the_logs_order_across_files() -> None:
    files = [(f"runs.jsonl.{n}", lines(ran(hook_id=f"h{n}"))) for n in (3, 2, 1)]
    files.append(("runs.jsonl", lines(ran(hook_id="h0"))))
    assert [r.hook_id for r in parse_log(files, now=NOW).rows] == ["h3", "h2", "h1", "h0"]


# -- --since ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "back"), [
    ("30m", timedelta(minutes=30)), ("2h", timedelta(hours=2)), ("1d", timedelta(days=1)),
    ("1w", timedelta(weeks=1)), ("45s", timedelta(seconds=45)), ("1h30m", timedelta(hours=1, minutes=30)),
    (" 2h ", timedelta(hours=2)), ("0m", timedelta(0)),
])
def test_since_a_duration(text: str, back: timedelta) -> None:
    assert parse_since(text, NOW) == NOW - back


@pytest.mark.parametrize(("text", "moment"), [
    ("2025-04-30T08:00:00Z", datetime(2025, 4, 30, 8, tzinfo=UTC)),
    ("2025-04-30T10:00:00+02:00", datetime(2025, 4, 30, 8, tzinfo=UTC)),
    ("2025-04-30", datetime(2025, 4, 30, tzinfo=timezone(timedelta(hours=-5)))),  # now's zone
    ("2025-04-30 08:00", datetime(2025, 4, 30, 8, tzinfo=timezone(timedelta(hours=-5)))),
])
def test_since_an_iso_time(text: str, moment: datetime) -> None:
    now = NOW.astimezone(timezone(timedelta(hours=-5)))
    assert parse_since(text, now) == moment


@pytest.mark.parametrize("text", ["yesterday", "", "-1h", "1.5h", "2h ago", "1y", "h", "2025-13-01",
                                  "2025-02-30T00:00", "99999999999d", "9" * 5000 + "d"])
def test_since_refuses_what_it_cannot_read(text: str) -> None:
    with pytest.raises(ValueError, match=r"neither an ISO 8601 time|reaches back"):
        parse_since(text, NOW)


def test_since_keeps_records_at_or_after_the_time_whatever_their_offset() -> None:
    records = [ran(hook_id="before", time="2025-05-01T09:59:59.999+00:00"),
               ran(hook_id="at", time="2025-05-01T12:00:00+02:00"),
               ran(hook_id="after-naive", time="2025-05-01T10:00:01"),   # no offset: UTC
               ran(hook_id="undated", time="sometime"),
               ran(hook_id="no-time", time=None)]
    report = report_of(*records, since=datetime(2025, 5, 1, 10, tzinfo=UTC))
    assert [r.hook_id for r in report.rows] == ["at", "after-naive"]
    assert report.foreign == 2  # cannot be placed in time
    assert [r.hook_id for r in report_of(*records).rows] == ["before", "at", "after-naive", "undated", "no-time"]


# -- --fail-on -------------------------------------------------------------------------------


def test_fail_on_names() -> None:
    assert parse_fail_on(["untrusted,blocked", " error , timeout", "blocked", ""]) == (
        "untrusted", "blocked", "error", "timeout")
    with pytest.raises(ValueError, match=r"unknown outcomes 'blockd', 'errors'; known: ok, blocked"):
        parse_fail_on(["blockd,errors"])
    report = report_of(ran(), ran(status="error", error="x"), skipped("untrusted"))
    assert report.matched(["untrusted", "blocked", "error"]) == ["error", "untrusted"]
    assert report.matched(["blocked", "timeout"]) == []
    # A hook that timed out failed: `--fail-on error` catches it (`timeout` alone names only those).
    assert parse_fail_on(["error"]) == ("error", "timeout")
    assert parse_fail_on(["timeout"]) == ("timeout",)
    timed_out = report_of(ran(), ran(status="error", timed_out=True, error="timed out after 1s"))
    assert timed_out.matched(parse_fail_on(["error"])) == ["timeout"]
    assert timed_out.matched(parse_fail_on(["blocked"])) == []


# -- hostile strings -------------------------------------------------------------------------


HOSTILE = [
    "a | b | c", "line one\nline two\r\n| fake | row | x | y | z | w |", "<b>bold</b><script>alert(1)</script>",
    "<img src=x onerror=alert(1)>", "<!-- hide the rest", "[click](https://evil.example/x)",
    "![pixel](https://evil.example/p.png)", "https://evil.example/a", "www.evil.example", "mail me@evil.example",
    "xmpp:me@evil.example", "&lt;b&gt; &amp; &#60;", "**bold** _it_ ~~s~~", "`code` ``more`` ```fence```",
    "``", "`", "trailing backslash \\", "\\| escaped pipe", ":smile: @octocat #123",
    "\x1b[2J\x1b]52;c;ZXZpbA==\x07 clear", "\u202egnp.exe", "zero\u200bwidth", "nul\x00byte", "lone \ud800 surrogate",
    "\ufffe\uffff nonchars", "]]> cdata end", "\x0b\x0c\x1f controls", "é ünïcödé 漢字 🎉", "   ", "",
    "x" * 20_000,
]


def hostile_report() -> Report:
    records = []
    for i, text in enumerate(HOSTILE):
        records.append(ran(hook_id=f"h{i}", name=text or None, command=text, reason=text,
                           status="block", decision="block", event=text or "Stop", agent=text, source=text))
        records.append(skipped("untrusted", detail=text, hook_id=f"s{i}", name=text or None, command=text))
        records.append(ran(hook_id=f"e{i}", status="error", error=text, command=text))
    return report_of(*records)


def rendered_rows(markdown: str) -> list[list[str]]:
    page = cmarkgfm.github_flavored_markdown_to_html(markdown, options=Options.CMARK_OPT_UNSAFE)
    tables = re.findall(r"<table>.*?</table>", page, flags=re.S)
    body = re.search(r"<tbody>(.*?)</tbody>", tables[-1], flags=re.S)
    assert body is not None
    return [re.findall(r"<td[^>]*>(.*?)</td>", row, flags=re.S)
            for row in re.findall(r"<tr>(.*?)</tr>", body.group(1), flags=re.S)]


def shown(cell: str) -> str:
    """What a reader sees in a cell: the code span's text."""
    match = re.fullmatch(r"<code>(.*)</code>", cell, flags=re.S)
    return html.unescape(match.group(1)) if match else html.unescape(cell)


def test_markdown_of_hostile_hooks_renders_as_their_text_and_nothing_else() -> None:
    report = hostile_report()
    markdown = to_markdown(report)
    page = cmarkgfm.github_flavored_markdown_to_html(markdown, options=Options.CMARK_OPT_UNSAFE)
    # Raw HTML is let through by this renderer (CMARK_OPT_UNSAFE): none may come from a hook.
    tags = set(re.findall(r"</?([a-zA-Z][a-zA-Z0-9]*)", page))
    assert tags <= {"h2", "p", "blockquote", "strong", "table", "thead", "tbody", "tr", "th", "td", "code"}, tags
    assert not re.findall(r"<[a-z]+\s[^>]*(?:href|src)\s*=", page) and "<!--" not in page
    rows = rendered_rows(markdown)
    assert len(rows) == len(report.rows)
    assert all(len(cells) == 7 for cells in rows)
    for row, cells in zip(report.rows, rows, strict=True):
        assert shown(cells[3]) == one_line(row.hook, 120).strip()  # exactly the hook, escapes visible
        assert shown(cells[6]) == one_line(row.reason, 300).strip()
        assert shown(cells[1]) == one_line(row.event, 60).strip()


@pytest.mark.parametrize("text", HOSTILE)
def test_md_code_shows_the_text_in_one_cell(text: str) -> None:
    markdown = f"| a | b |\n| - | - |\n| {md_code(text)} | end |\n"
    (cells,) = rendered_rows(markdown)
    assert len(cells) == 2 and cells[1] == "end"
    assert shown(cells[0]) == one_line(text).strip()


def test_junit_of_hostile_hooks_is_valid_against_both_schemas() -> None:
    report = hostile_report()
    xml = to_junit(report, hostname="ci-runner")
    assert xml.isascii()
    for schema in schemas():
        schema.validate(xml)
    document = schemas()[0].to_dict(xml)
    cases = [case for suite in document["testsuite"] for case in suite["testcase"]]
    assert len(cases) == len(report.rows)
    # What a hook printed comes back, its controls as visible escapes.
    import xml.etree.ElementTree as ET

    failures = ET.fromstring(xml.encode()).findall(".//failure")
    messages = {f.get("message") for f in failures}
    assert "blocked: <b>bold</b><script>alert(1)</script>" in messages
    assert "blocked: \\x1b[2J\\x1b]52;c;ZXZpbA==\\x07 clear" in messages
    assert "blocked: lone \\ud800 surrogate" in messages
    assert "blocked: line one\\nline two\\r\\n| fake | row | x | y | z | w |" in messages


def test_junit_maps_outcomes_to_failures_and_skips(every_outcome: Env) -> None:
    import xml.etree.ElementTree as ET

    report = read_report(every_outcome.home / "runs.jsonl")
    xml = to_junit(report)
    for schema in schemas():
        schema.validate(xml)
    root = ET.fromstring(xml.encode())
    cases = root.findall(".//testcase")
    assert len(cases) == len(report.rows)
    for case, row in zip(cases, report.rows, strict=True):
        failure, skip = case.find("failure"), case.find("skipped")
        if row.outcome in FAILURES:
            assert failure is not None and failure.get("type") == row.outcome and skip is None
        elif row.outcome == "ok":
            assert failure is None and skip is None
        else:
            assert skip is not None and failure is None
            assert (skip.get("message") or "").startswith(row.outcome)
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == ["PreToolUse", "UserPromptSubmit"]
    pre = suites[0]
    assert (pre.get("tests"), pre.get("failures"), pre.get("skipped")) == ("14", "7", "5")


def test_an_empty_report_is_still_a_valid_junit_document() -> None:
    xml = to_junit(report_of())
    for schema in schemas():
        schema.validate(xml)
    assert 'tests="0"' in xml


def test_junit_names_repeated_runs_apart() -> None:
    import xml.etree.ElementTree as ET

    xml = to_junit(report_of(ran(), ran(), ran()))
    names = [c.get("name") for c in ET.fromstring(xml.encode()).iter("testcase")]
    assert len(set(names)) == 3


# -- JSON ------------------------------------------------------------------------------------


def json_schema() -> dict[str, Any]:
    schema: dict[str, Any] = json.loads((DOCS / "report.schema.json").read_text())
    return schema


def test_json_is_of_the_documented_shape(every_outcome: Env) -> None:
    report = read_report(every_outcome.home / "runs.jsonl")
    document = json.loads(to_json(report, fail_on=("untrusted", "blocked")))
    jsonschema.validate(document, json_schema())
    assert document["failed"] == ["blocked", "untrusted"]
    assert document["total"] == len(document["runs"]) == sum(document["counts"].values())
    assert list(document["counts"]) == list(OUTCOMES)
    # Every key (and every outcome) is described in docs/report.md.
    doc = (DOCS / "report.md").read_text()
    keys = set(document) | set(document["runs"][0]) | set(document["unread_lines"])
    assert not [k for k in sorted(keys) if f"`{k}`" not in doc]
    assert not [o for o in OUTCOMES if f"`{o}`" not in doc]


def test_json_keeps_a_hooks_exact_strings_in_ascii() -> None:
    report = hostile_report()
    text = to_json(report)
    assert text.isascii()
    document = json.loads(text)
    jsonschema.validate(document, json_schema())
    assert [r["command"] for r in document["runs"]] == [r.command for r in report.rows]


# -- Markdown size ---------------------------------------------------------------------------


def test_markdown_past_the_limit_keeps_failures_and_says_what_it_left_out() -> None:
    records = [ran(hook_id=f"ok{i}", reason="fine " * 40) for i in range(300)]
    records.insert(150, ran(hook_id="bad", status="error", error="boom"))
    records.insert(10, skipped("untrusted", hook_id="new"))
    report = report_of(*records)
    markdown = to_markdown(report, limit=20_000)
    assert len(markdown.encode()) <= 20_000
    assert "boom" in markdown and "why" in markdown
    left = int(re.search(r"(\d+) more runs not shown \((\d+) ok\)", markdown).group(1))  # type: ignore[union-attr]
    assert len(rendered_rows(markdown)) == len(report.rows) - left
    assert "| ok | 300 |" in markdown  # the counts are whole
    # Under the limit: every row.
    assert len(rendered_rows(to_markdown(report))) == len(report.rows)


def test_markdown_of_an_empty_log() -> None:
    markdown = to_markdown(report_of(since=NOW))
    assert "0 hooks considered since 2025-05-01 12:00:00 UTC" in markdown
    assert "No hook ran" in markdown


# -- the run log: reading it whole, writing after a killed writer ----------------------------


def test_open_log_reads_every_rotated_file_oldest_first(tmp_path: Path) -> None:
    log = tmp_path / "runs.jsonl"
    for i in range(30):
        append_records(log, [ran(hook_id=f"h{i}", pad="p" * 300)], max_bytes=1500, keep=50)
    (tmp_path / "runs.jsonl.lock").touch()
    (tmp_path / "runs.jsonl.01").write_text("not ours\n")
    (tmp_path / "runs.jsonl.1.bak").write_text("not ours\n")
    (tmp_path / "other.jsonl.1").write_text("not ours\n")
    names = [p.name for p in rotated_files(log)]
    assert names == sorted(names, key=lambda n: -int(n.rsplit(".", 1)[1])) and len(names) > 5
    report = read_report(log)
    assert [r.hook_id for r in report.rows] == [f"h{i}" for i in range(30)]
    assert report.foreign == 0


def test_open_log_of_a_log_that_is_not_there(tmp_path: Path) -> None:
    with open_log(tmp_path / "nowhere" / "runs.jsonl") as files:
        assert files == []
    assert not (tmp_path / "nowhere").exists()  # reading creates nothing


def test_open_log_refuses_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "runs.jsonl"
    os.mkfifo(fifo)
    (tmp_path / "runs.jsonl.1").write_text(json.dumps(ran()) + "\n")
    with pytest.raises(OSError, match="not a regular file"), open_log(fifo):
        pass


def test_open_log_reads_when_the_lock_cannot_be_taken(tmp_path: Path) -> None:
    # A log copied out of CI, in a folder the reader may not write: no lock, still a report.
    log = tmp_path / "runs.jsonl"
    append_records(log, [ran()])
    (tmp_path / "runs.jsonl.lock").unlink()
    (tmp_path / "runs.jsonl.lock").mkdir()  # no lock file can be opened there (not even by root)
    assert len(read_report(log).rows) == 1


def test_a_line_a_killed_writer_left_does_not_swallow_the_next_record(tmp_path: Path) -> None:
    # Regression: the next record was appended to the fragment, and both were lost to readers.
    log = tmp_path / "runs.jsonl"
    append_records(log, [ran(hook_id="before")])
    with open(log, "ab") as f:
        f.write(json.dumps(ran(hook_id="killed")).encode()[:40])
    append_records(log, [ran(hook_id="after")])
    report = read_report(log)
    assert [r.hook_id for r in report.rows] == ["before", "after"]
    assert report.foreign == 1  # the fragment, now a line of its own
