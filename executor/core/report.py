"""The run log turned into what CI shows: a Markdown table, JUnit XML, JSON (pure).

How this works:

1. The I/O edge (:func:`executor.runlog.open_log`) hands in each file of the
   run log, oldest first, as an iterable of raw lines.
2. :func:`parse_log` keeps one :class:`Row` per hook considered and counts
   the lines it cannot use: *torn* (a file's last line cut short: a writer
   that had not finished, or was killed) and *foreign* (anything else that is
   not a hookcage run-log record: another program's line, a record of an
   unknown shape, a record without a time when ``--since`` is asked).
   Nothing raises on a bad line.
3. :func:`classify` names each record's outcome (:data:`OUTCOMES`), the one
   vocabulary of the report, ``--fail-on`` and the JSON output.
4. :func:`to_markdown`, :func:`to_junit` and :func:`to_json` render a
   :class:`Report`. Every string from a record may come from a hostile
   repository (a hook's name, command, stderr): the Markdown puts it in code
   spans (no link, no HTML, no emphasis, ``|`` escaped), the XML keeps only
   characters XML allows, and both show control, format and invisible
   characters as visible escapes (:mod:`executor.core.text`).

No I/O, no clock: the caller passes ``now``.
"""

from __future__ import annotations

import json
import math
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from executor.core.text import one_line, sanitize

OUTCOMES: tuple[str, ...] = (
    "ok", "blocked", "error", "timeout", "not-run",
    "untrusted", "off-list", "disabled", "invalid", "unsupported", "skipped",
)
"""Every outcome a hook run can have in a report, in the order reports list them.

- ``ok``: it ran and answered without blocking (its decision, if any:
  allow, ask, defer);
- ``blocked``: it ran and blocked (exit 2, ``decision: "block"``) or denied
  the tool call;
- ``error``: it ran and failed (another exit code, garbage output, killed for
  memory, could not start), even when its ``on_error: deny`` turned the
  failure into a block (the reason says so);
- ``timeout``: it ran past its timeout and was killed;
- ``not-run``: it passed the gates but was not started (an agent that runs
  its hooks in order stopped at an earlier block, or the caller went away);
- ``untrusted``, ``off-list`` (not on the allow-list), ``disabled``,
  ``invalid`` (its config is broken), ``unsupported`` (a hook type other
  than ``command``): skipped by a gate, never launched;
- ``skipped``: skipped for a reason this version does not know.
"""
FAILURES = frozenset({"blocked", "error", "timeout"})
"""Outcomes that are a JUnit ``<failure>``; the others but ``ok`` are ``<skipped>``."""
_SKIP_REASONS = {
    "untrusted": "untrusted", "not_allowlisted": "off-list", "disabled": "disabled",
    "invalid": "invalid", "unsupported_type": "unsupported",
}
"""The run log's ``skip_reason`` -> the report's outcome."""

REPORT_VERSION = 1
"""The ``version`` of the JSON report; bumped only when a key changes meaning or goes away."""
MARKDOWN_LIMIT = 1_000_000
"""Bytes of Markdown at most: GitHub refuses a job summary past 1 MiB."""
_CELL = {"event": 60, "agent": 40, "hook": 120, "reason": 300}
"""Characters shown of each free-text cell of the Markdown table."""

_DURATION = re.compile(r"(?:[0-9]{1,12}[smhdw])+")
_DURATION_PART = re.compile(r"([0-9]+)([smhdw])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


@dataclass(frozen=True)
class Row:
    """One hook considered at one event, as a report shows it.

    Strings are the record's own (exact, unescaped: the renderers escape);
    a field the record lacks is ``""`` (``None`` for numbers).
    """

    outcome: str
    reason: str
    time: datetime | None
    time_text: str
    session: str
    event: str
    agent: str
    hook_id: str
    hook: str
    """How people see the hook: its name, else its command."""
    scope: str
    source: str
    command: str
    sandbox: str
    is_async: bool
    exit_code: int | None
    duration_ms: float | None
    decision: str | None
    dropped: tuple[str, ...] = ()


@dataclass(frozen=True)
class Report:
    """The rows of a run log (or of its part since ``since``) and what could not be read."""

    rows: tuple[Row, ...]
    generated: datetime
    since: datetime | None = None
    files: tuple[str, ...] = ()
    torn: int = 0
    foreign: int = 0
    counts: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        counts = dict.fromkeys(OUTCOMES, 0)
        for row in self.rows:
            counts[row.outcome] += 1
        object.__setattr__(self, "counts", counts)

    def matched(self, fail_on: Iterable[str]) -> list[str]:
        """The outcomes of ``fail_on`` that occurred, in :data:`OUTCOMES` order."""
        wanted = set(fail_on)
        return [o for o in OUTCOMES if o in wanted and self.counts[o]]

    def warning(self) -> str:
        """One sentence on the lines that could not be read, or ``""``."""
        if not (self.torn or self.foreign):
            return ""
        parts = [f"{self.torn} torn (cut short by a writer that did not finish)"] if self.torn else []
        if self.foreign:
            parts.append(f"{self.foreign} foreign (not a hookcage run-log record)")
        lines = self.torn + self.foreign
        return f"{lines} line{'s' if lines != 1 else ''} of the run log not read: {', '.join(parts)}"


# -- reading ----------------------------------------------------------------


def classify(record: Mapping[str, Any]) -> str | None:
    """The outcome (:data:`OUTCOMES`) of one run-log record; ``None``: not a run-log record."""
    kind = record.get("outcome")
    if kind == "skipped":
        return _SKIP_REASONS.get(str(record.get("skip_reason")), "skipped")
    if kind != "ran":
        return None
    status = record.get("status")
    if record.get("timed_out") is True:
        return "timeout"
    if status == "error" or (isinstance(record.get("error"), str) and record["error"]):
        return "error"
    if status == "block" or record.get("decision") in ("deny", "block"):
        return "blocked"
    if status == "ok":
        return "ok"
    if status is None:
        return "not-run"
    return None  # a status this version does not know: not guessed


def parse_time(text: str) -> datetime | None:
    """A record's ``time`` (ISO 8601; without an offset: UTC), or ``None``."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=True, default=str)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) and value >= 0 else None


def _reason(outcome: str, record: Mapping[str, Any]) -> str:
    decision = record.get("decision")
    if outcome in ("error", "timeout"):
        why = _text(record.get("error")) or ("timed out" if outcome == "timeout" else "failed")
        if decision in ("deny", "block"):
            why += f" (its on_error is deny: {'denied' if decision == 'deny' else 'blocked'})"
        return why
    if outcome == "not-run":
        return "not started: an earlier hook of this event blocked, or the caller went away"
    if outcome == "ok" or outcome == "blocked":
        why = _text(record.get("reason"))
        if not why and isinstance(decision, str) and decision:
            why = f"decision: {decision}"
        dropped = record.get("dropped_capabilities")
        if isinstance(dropped, list) and dropped:
            note = "dropped: " + ", ".join(_text(d) for d in dropped)
            why = f"{why}; {note}" if why else note
        return why
    detail = _text(record.get("detail"))
    if outcome == "skipped":
        return f"{_text(record.get('skip_reason'))}: {detail}" if detail else _text(record.get("skip_reason"))
    return detail


def row_of(record: Mapping[str, Any]) -> Row | None:
    """The report's row for one run-log record, or ``None`` when it is not one."""
    if not isinstance(record.get("event"), str) or not isinstance(record.get("hook_id"), str):
        return None
    outcome = classify(record)
    if outcome is None:
        return None
    time_text = _text(record.get("time"))
    exit_code = record.get("exit_code")
    dropped = record.get("dropped_capabilities")
    decision = record.get("decision")
    return Row(
        outcome=outcome,
        reason=_reason(outcome, record),
        time=parse_time(time_text) if time_text else None,
        time_text=time_text,
        session=_text(record.get("session")),
        event=record["event"],
        agent=_text(record.get("agent")),
        hook_id=record["hook_id"],
        hook=_text(record.get("name")) or _text(record.get("command")) or record["hook_id"],
        scope=_text(record.get("scope")),
        source=_text(record.get("source")),
        command=_text(record.get("command")),
        sandbox=_text(record.get("sandbox")),
        is_async=record.get("async") is True,
        exit_code=exit_code if isinstance(exit_code, int) and not isinstance(exit_code, bool) else None,
        # A hook that was never started has no duration (older versions logged garbage there).
        duration_ms=None if outcome == "not-run" else _number(record.get("duration_ms")),
        decision=decision if isinstance(decision, str) and decision else None,
        dropped=tuple(_text(d) for d in dropped) if isinstance(dropped, list) else (),
    )


def _record(line: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):  # not JSON, not UTF-8, nested past the parser, digits past int
        return None
    return value if isinstance(value, dict) else None


def parse_log(
    files: Iterable[tuple[str, Iterable[bytes]]], *, since: datetime | None = None, now: datetime,
) -> Report:
    """Read the lines of a run log's files (oldest first) into a :class:`Report`.

    Args:
        files: ``(name, lines)`` per file; each line as read, with its ``\\n``
            (a file's last line without one was cut short).
        since: keep only the records of this time or later (a record with no
            time it can read is then counted foreign).
        now: when the report is made.
    """
    rows: list[Row] = []
    names: list[str] = []
    torn = foreign = 0
    for name, lines in files:
        names.append(name)
        for line in lines:
            complete = line.endswith(b"\n")
            if not line.strip():
                continue
            record = _record(line)
            row = row_of(record) if record is not None else None
            if row is None:
                if complete:
                    foreign += 1
                else:
                    torn += 1
                continue
            if since is not None:
                if row.time is None:
                    foreign += 1
                    continue
                if row.time < since:
                    continue
            rows.append(row)
    return Report(tuple(rows), generated=now, since=since, files=tuple(names), torn=torn, foreign=foreign)


def parse_since(text: str, now: datetime) -> datetime:
    """``--since``: an ISO 8601 time (without an offset: ``now``'s zone) or a duration back from ``now``.

    Durations are whole numbers with a unit, ``s``, ``m``, ``h``, ``d`` or
    ``w``, and add up: ``30m``, ``2h``, ``1d``, ``1h30m``.

    Raises:
        ValueError: neither, or a time no calendar holds; the message says what is accepted.
    """
    value = text.strip()
    if _DURATION.fullmatch(value):
        seconds = sum(int(n) * _UNITS[unit] for n, unit in _DURATION_PART.findall(value))
        try:
            return now - timedelta(seconds=seconds)
        except OverflowError:
            raise ValueError(f"{text!r} reaches back before the year 1") from None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"{text!r} is neither an ISO 8601 time (2025-05-01, 2025-05-01T12:00:00Z) "
                         "nor a duration (30m, 2h, 1d, 1h30m)") from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=now.tzinfo)


INCLUDES = {"error": ("error", "timeout")}
"""``--fail-on`` names that cover more than their own outcome: a hook that timed out failed too."""


def parse_fail_on(values: Iterable[str]) -> tuple[str, ...]:
    """``--fail-on`` values (each comma-separated) as outcome names (``error`` brings ``timeout``).

    Raises:
        ValueError: a name that is not an outcome (the message lists them).
    """
    names = [n.strip() for value in values for n in value.split(",") if n.strip()]
    unknown = [n for n in names if n not in OUTCOMES]
    if unknown:
        raise ValueError(f"unknown outcome{'s' if len(unknown) > 1 else ''} "
                         f"{', '.join(repr(n) for n in unknown)}; known: {', '.join(OUTCOMES)}")
    return tuple(dict.fromkeys(o for n in names for o in INCLUDES.get(n, (n,))))


# -- Markdown ---------------------------------------------------------------


def md_code(text: str, cap: int | None = None) -> str:
    """``text`` as a Markdown code span fit for a table cell: shown as written, never markup.

    Inside a code span nothing is a link (autolinks included), HTML, an
    entity, emphasis, an emoji code or a mention; ``|`` is escaped (GFM splits
    cells before it reads spans); the fence is longer than any run of
    backticks inside. Controls and invisible characters are escapes and the
    text is one line (:func:`executor.core.text.one_line`).
    """
    shown = one_line(text, cap).strip()
    if not shown:
        return ""
    shown = shown.replace("|", "\\|")
    longest = max((len(run) for run in re.findall(r"`+", shown)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if shown.startswith("`") or shown.endswith("`") else ""
    return f"{fence}{pad}{shown}{pad}{fence}"


def _md_when(row: Row) -> str:
    return row.time.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S") if row.time else ""


def _duration(ms: float | None) -> str:
    if ms is None:
        return ""
    return f"{ms:.0f} ms" if ms < 1000 else f"{ms / 1000:.2f} s"


def _md_row(row: Row) -> str:
    outcome = f"**{row.outcome}**" if row.outcome in FAILURES else row.outcome
    cells = [_md_when(row), md_code(row.event, _CELL["event"]), md_code(row.agent, _CELL["agent"]),
             md_code(row.hook, _CELL["hook"]), outcome, _duration(row.duration_ms),
             md_code(row.reason, _CELL["reason"])]
    return "| " + " | ".join(cells) + " |"


def _since_text(report: Report) -> str:
    if report.since is None:
        return ""
    return " since " + report.since.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _priority(row: Row) -> int:
    return 0 if row.outcome in FAILURES else 2 if row.outcome == "ok" else 1


def to_markdown(report: Report, *, limit: int = MARKDOWN_LIMIT) -> str:
    """A job summary (``$GITHUB_STEP_SUMMARY``): counts by outcome, then one row per hook run.

    Past ``limit`` bytes, rows are left out, ``ok`` ones first, then skipped
    ones (failures last); what is left out is counted under the table.
    """
    total = len(report.rows)
    head = ["## hookcage report", ""]
    head.append(f"{total} hook{'s' if total != 1 else ''} considered{_since_text(report)}"
                + (f" ({', '.join(md_code(name.rsplit('/', 1)[-1]) for name in report.files)})"
                   if report.files else "") + ".")
    head.append("")
    if report.warning():
        head += [f"> **Warning:** {report.warning()}.", ""]
    if not total:
        return "\n".join([*head, "No hook ran or was skipped in this run log."]) + "\n"
    head += ["| Outcome | Runs |", "| :-- | --: |"]
    head += [f"| {o} | {n} |" for o, n in report.counts.items() if n]
    head += ["", "| Time (UTC) | Event | Agent | Hook | Outcome | Duration | Reason |",
             "| :-- | :-- | :-- | :-- | :-- | --: | :-- |"]
    lines = [_md_row(row) for row in report.rows]
    size = sum(len(line.encode()) + 1 for line in (*head, *lines))
    if size <= limit:
        return "\n".join([*head, *lines]) + "\n"
    # Keep the failures, then the skips, then the rest, while they fit (room left for the note).
    budget = limit - sum(len(line.encode()) + 1 for line in head) - 400
    keep: set[int] = set()
    for index in sorted(range(total), key=lambda i: (_priority(report.rows[i]), i)):
        cost = len(lines[index].encode()) + 1
        if cost > budget:
            break
        budget -= cost
        keep.add(index)
    left = [report.rows[i] for i in range(total) if i not in keep]
    counts = {o: sum(1 for r in left if r.outcome == o) for o in OUTCOMES}
    note = (f"{len(left)} more run{'s' if len(left) != 1 else ''} not shown "
            f"({', '.join(f'{n} {o}' for o, n in counts.items() if n)}): GitHub takes at most 1 MiB "
            "of job summary; `hookcage report --format json` lists every run.")
    return "\n".join([*head, *(lines[i] for i in sorted(keep)), "", note]) + "\n"


# -- JUnit XML --------------------------------------------------------------


def _xml(text: str, cap: int | None = 2000) -> str:
    # sanitize() already shows every control character as an escape; this is the
    # guarantee that whatever remains is a character XML 1.0 allows.
    return _NOT_XML.sub("\ufffd", sanitize(text, cap))


def _xml_line(text: str, cap: int | None = 500) -> str:
    return _NOT_XML.sub("\ufffd", one_line(text, cap))


def _xml_name(text: str, cap: int, default: str) -> str:
    # Names are xs:token with a minimum length in Ant's schema: never blank.
    return " ".join(_xml_line(text, cap).split()) or default


def _seconds(ms: float | None) -> str:
    return f"{(ms or 0.0) / 1000:.3f}"


def _junit_when(moment: datetime) -> str:
    # Ant's schema takes a time without an offset: UTC.
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")


def _details(row: Row) -> str:
    fields = [("outcome", row.outcome), ("reason", row.reason), ("event", row.event), ("agent", row.agent),
              ("hook", row.hook), ("hook id", row.hook_id), ("scope", row.scope), ("source", row.source),
              ("command", row.command), ("sandbox", row.sandbox), ("session", row.session),
              ("time", row.time_text),
              ("exit code", "" if row.exit_code is None else str(row.exit_code)),
              ("decision", row.decision or ""), ("dropped capabilities", ", ".join(row.dropped))]
    return "\n".join(f"{name}: {_xml_line(value, 1000)}" for name, value in fields if value)


def to_junit(report: Report, *, hostname: str = "localhost") -> str:
    """JUnit XML: a test suite per event, a test case per hook run.

    Blocks, errors and timeouts are ``<failure>`` (``type`` names the
    outcome); skipped and not-run hooks are ``<skipped>``. Valid against Ant's
    JUnit schema and the Jenkins xunit plugin's ``junit-10.xsd``, whatever the
    hooks printed: returned as ASCII (other characters as references).
    """
    suites: dict[str, list[Row]] = {}
    for row in report.rows:
        suites.setdefault(row.event, []).append(row)
    root = ET.Element("testsuites")
    properties = [("hookcage.since", report.since.isoformat() if report.since else ""),
                  ("hookcage.files", " ".join(report.files)),
                  ("hookcage.torn_lines", str(report.torn)), ("hookcage.foreign_lines", str(report.foreign))]
    for index, (event, rows) in enumerate(list(suites.items()) or [("hookcage", [])]):
        times = [r.time for r in rows if r.time is not None]
        failures = sum(1 for r in rows if r.outcome in FAILURES)
        skipped = sum(1 for r in rows if r.outcome != "ok" and r.outcome not in FAILURES)
        suite = ET.SubElement(root, "testsuite", {
            "name": _xml_name(event, 200, "hookcage"), "timestamp": _junit_when(min(times, default=report.generated)),
            "hostname": _xml_name(hostname, 200, "localhost"), "tests": str(len(rows)),
            "failures": str(failures), "errors": "0", "skipped": str(skipped),
            "time": _seconds(sum(r.duration_ms or 0.0 for r in rows)),
            "package": "hookcage", "id": str(index),
        })
        props = ET.SubElement(suite, "properties")
        for name, value in properties:
            ET.SubElement(props, "property", {"name": name, "value": _xml_line(value, 4000)})
        seen: dict[tuple[str, str], int] = {}
        for row in rows:
            classname = f"{_xml_name(row.agent, 40, 'hookcage')}.{_xml_name(row.scope, 40, 'unknown')}"
            name = _xml_name(row.hook, 200, row.hook_id) + (f" @ {_xml_name(row.time_text, 60, '')}"
                                                              if row.time_text.strip() else "")
            seen[(classname, name)] = seen.get((classname, name), 0) + 1
            if seen[(classname, name)] > 1:  # the same hook at the same moment: still one case each
                name += f" #{seen[(classname, name)]}"
            case = ET.SubElement(suite, "testcase", {"name": name, "classname": classname,
                                                     "time": _seconds(row.duration_ms)})
            message = _xml_line(f"{row.outcome}: {row.reason}" if row.reason else row.outcome, 500)
            if row.outcome in FAILURES:
                failure = ET.SubElement(case, "failure", {"type": row.outcome, "message": message})
                failure.text = _details(row)
            elif row.outcome != "ok":
                ET.SubElement(case, "skipped", {"message": message}).text = _details(row)
        ET.SubElement(suite, "system-out").text = _xml(report.warning())
        ET.SubElement(suite, "system-err").text = ""
    ET.indent(root, space="  ")
    body = bytes(ET.tostring(root, encoding="us-ascii")).decode("ascii")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + body + "\n"


# -- JSON -------------------------------------------------------------------


def run_json(row: Row) -> dict[str, Any]:
    """One run as the JSON report lists it (docs/report.md, docs/report.schema.json)."""
    return {
        "time": row.time_text or None, "session": row.session, "event": row.event, "agent": row.agent or None,
        "hook_id": row.hook_id, "hook": row.hook, "scope": row.scope or None, "source": row.source or None,
        "command": row.command, "sandbox": row.sandbox or None, "async": row.is_async,
        "outcome": row.outcome, "reason": row.reason or None, "exit_code": row.exit_code,
        "duration_ms": row.duration_ms, "decision": row.decision, "dropped_capabilities": list(row.dropped),
    }


def to_json(report: Report, *, fail_on: Sequence[str] = ()) -> str:
    """The report as one JSON object of a stable shape (``version`` :data:`REPORT_VERSION`).

    ASCII only: every other character is a ``\\u`` escape, so the exact
    strings of the log come through and no terminal interprets them.
    """
    document = {
        "version": REPORT_VERSION,
        "generated": report.generated.isoformat(),
        "since": report.since.isoformat() if report.since else None,
        "files": list(report.files),
        "total": len(report.rows),
        "counts": report.counts,
        "unread_lines": {"torn": report.torn, "foreign": report.foreign},
        "fail_on": list(fail_on),
        "failed": report.matched(fail_on),
        "runs": [run_json(row) for row in report.rows],
    }
    return json.dumps(document, ensure_ascii=True, indent=2) + "\n"
