"""``hookcage doctor``: check what hookcage needs and say how to fix what is missing."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from executor import __version__
from executor.cli.common import CliExit, executor_and_root, field, shown
from executor.errors import HookcageError


@click.command()
def doctor() -> None:
    """Check what hookcage needs: engine, image, limits, runtimes; say how to fix what is missing.

    \b
    Example:
        hookcage doctor
    """
    from executor.provision.doctor import Probe
    from executor.sandbox.backends import doctor_checks
    from executor.settings import load_settings

    settings = load_settings()
    problems = 0

    def report(ok: bool, what: str, fix: str = "") -> None:
        nonlocal problems
        problems += not ok
        click.echo(f"[{'ok' if ok else '!!'}] {what}" + (f"\n     fix: {fix}" if not ok and fix else ""))

    report(True, f"hookcage {__version__}, home {settings.home}")
    _doctor_agents(report, settings.home)
    _doctor_dependencies(report)
    probe = Probe()  # what the checks share (the engine's client...)
    for check in doctor_checks(settings, probe):  # each backend's checks, in order
        click.echo("\n".join(check.lines()))
        problems += check.ok is False
        if check.stop:
            raise CliExit(1)
    click.echo("all good" if not problems else f"{problems} problem(s) found")
    if problems:
        raise CliExit(1)


def _doctor_agents(report: Any, home: Path) -> None:
    """The agents section: routing installed, repository hooks the agent would run itself, PATH order."""
    from executor.config import project_root
    from executor.installer import agent_checks

    checks = agent_checks(home=home, user_home=os.environ.get("HOME") or str(Path.home()),
                          environ=os.environ, root=project_root())
    click.echo("agents:" if checks else "agents: none on PATH or configured in this repository")
    for check in checks:
        report(check.ok, check.what, check.fix)


def _doctor_dependencies(report: Any) -> None:
    """The trusted project hooks' scripts whose dependencies are not in the cache (this project)."""
    try:
        executor, root = executor_and_root(None)
        _, views = executor.inventory(root)
    except HookcageError as exc:
        report(False, f"dependencies: the project's hooks could not be read ({shown(str(exc))})")
        return
    states = {state.key: state for view in views if view.trusted for state in view.dependencies}
    if not states:
        return
    missing = [state for state in states.values() if not state.ready]
    if not missing:
        report(True, f"dependencies: the {len(states)} script(s) of trusted hooks in {field(root)} that name "
                     "dependencies have them")
    for state in sorted(missing, key=lambda st: st.need.path):
        fix = ("fix what it names; nothing else is fetched" if state.need.problem else
               f"`hookcage trust --fetch-only` in {field(root)}")
        what = ("a hook's own script: that hook does not run" if state.own else
                "a helper script: the hooks run, it fails if one runs it")
        report(False, f"dependencies: {field(state.describe())} ({what})", fix)
