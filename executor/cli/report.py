"""``hookcage report``: the run log as a CI report (Markdown, JUnit XML or JSON)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from executor.cli.common import CliExit, error, field

_REPORT_ERROR = 2
"""`hookcage report`'s exit code when it could not report (1 is kept for --fail-on)."""


@click.command()
@click.option("--since", metavar="WHEN", default=None,
              help="Only runs since WHEN: an ISO 8601 time (2025-05-01T12:00:00Z; without an offset: "
                   "local time) or a duration back from now (30m, 2h, 1d, 1h30m).")
@click.option("--format", "fmt", type=click.Choice(["markdown", "junit", "json"]), default="markdown",
              show_default=True, help="markdown: a job summary table; junit: JUnit XML; json: every run.")
@click.option("--fail-on", "fail_on", metavar="OUTCOMES", multiple=True,
              help="Exit 1 when any of these outcomes occurred (comma-separated, repeatable), e.g. "
                   "untrusted,blocked,error,timeout. The report is printed all the same.")
@click.option("--log", "log_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="The run log to read (default: the run_log setting, $HOOKCAGE_HOME/runs.jsonl); "
                   "its rotated files FILE.1, FILE.2, ... are read too, oldest first.")
def report(since: str | None, fmt: str, fail_on: Sequence[str], log_path: Path | None) -> None:
    """Turn the run log into a CI report: a Markdown table, JUnit XML or JSON, on stdout.

    One row (test case) per hook considered: event, agent, hook, outcome (ok,
    blocked, error, timeout, not-run, untrusted, off-list, disabled, invalid,
    unsupported, skipped), duration, reason. Exit 0; 1 when --fail-on matched;
    2 when no report could be made. See docs/report.md.

    \b
    Example:
        hookcage report --since 2h >> "$GITHUB_STEP_SUMMARY"
        hookcage report --format junit > hookcage-junit.xml
        hookcage report --format json --fail-on untrusted,blocked,error,timeout
    """
    import socket
    from datetime import datetime

    from executor import runlog
    from executor.core import report as reports

    now = datetime.now().astimezone()
    try:
        since_at = reports.parse_since(since, now) if since is not None else None
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="'--since'") from None
    try:
        outcomes = reports.parse_fail_on(fail_on)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="'--fail-on'") from None
    settings = None
    if log_path is None:
        from executor.settings import load_settings

        settings = load_settings()
        log_path = settings.run_log
    try:
        with runlog.open_log(log_path) as files:
            built = reports.parse_log(((str(path), handle) for path, handle in files), since=since_at, now=now)
    except OSError as exc:
        error(f"cannot read the run log {log_path}: {exc.strerror or exc}")
        raise CliExit(_REPORT_ERROR) from None
    if not built.files:
        if settings is None:  # a log named on the command line that is not there: a typo, not "no runs"
            error(f"no run log at {log_path} (nor rotated files {log_path.name}.1, ...)")
            raise CliExit(_REPORT_ERROR)
        click.echo(f"hookcage: warning: no run log yet at {log_path}: no hook has been considered", err=True)
    if settings is not None and not settings.log_runs:
        click.echo("hookcage: warning: the log_runs setting is off: hooks considered now are not logged", err=True)
    if built.warning():
        click.echo(f"hookcage: warning: {built.warning()}", err=True)
    if fmt == "junit":
        text = reports.to_junit(built, hostname=socket.gethostname() or "localhost")
    elif fmt == "json":
        text = reports.to_json(built, fail_on=outcomes)
    else:
        text = reports.to_markdown(built)
    click.echo(text, nl=False)
    hits = built.matched(outcomes)
    if hits:
        _fail_on_lines(built, hits)
        raise CliExit(1)


def _fail_on_lines(built: Any, hits: Sequence[str]) -> None:
    """On stderr: what --fail-on matched, one line per hook (the first 20)."""
    counts = ", ".join(f"{built.counts[o]} {o}" for o in hits)
    click.echo(f"hookcage: --fail-on matched: {counts}", err=True)
    seen: dict[tuple[str, str], int] = {}
    for row in built.rows:
        if row.outcome in hits:
            key = (row.outcome, row.hook_id)
            seen[key] = seen.get(key, 0) + 1
    for shown, ((outcome, hook_id), runs) in enumerate(seen.items()):
        if shown == 20:
            click.echo(f"hookcage:   ... and {len(seen) - 20} more hooks", err=True)
            break
        row = next(r for r in built.rows if r.outcome == outcome and r.hook_id == hook_id)
        times = f" ({runs} runs)" if runs > 1 else ""
        click.echo(f"hookcage:   {outcome}: {field(row.event)} hook {field(row.hook)} [{field(hook_id)}]"
                   f"{times} in {field(row.source)}: {field(row.reason)}"[:1000], err=True)
