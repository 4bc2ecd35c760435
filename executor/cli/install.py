"""``hookcage install`` / ``uninstall``: take an agent over, and put back what that changed."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

from executor.cli.common import CliExit


def _mode_option(f: Any) -> Any:
    f = click.option("--managed", "mode", flag_value="managed",
                     help="The machine's policy files (needs root): the agent runs only managed hooks.")(f)
    return click.option("--user", "mode", flag_value="user", default=True,
                        help="Your own files, no admin rights (the default).")(f)


@click.command()
@click.argument("agent")
@_mode_option
@click.option("--dry-run", is_flag=True, help="Print every file it would write or change, as a diff; write nothing.")
@click.option("--routes-only", is_flag=True,
              help="For an agent that cannot be taken over: add the routing it offers anyway "
                   "(the agent still runs repositories' hooks itself).")
def install(agent: str, mode: str, dry_run: bool, routes_only: bool) -> None:
    """Take an agent over: it stops running repositories' hooks itself and routes every event here.

    Writes the agent's routing to `hookcage dispatch --agent AGENT` (with
    --user, run by the launcher $HOOKCAGE_HOME/bin/hookcage, which every
    install rewrites) and the switch that keeps it from loading a
    repository's hooks (see docs/install.md for what each agent gets). Every file it changes is
    backed up first; running it twice changes nothing; `hookcage uninstall
    AGENT` puts back what was there.

    \b
    Example:
        hookcage install claude --dry-run
        hookcage install claude
        sudo hookcage install claude --managed
    """
    from executor import installer
    from executor.core.install import NotInstallable
    from executor.launcher import launcher_path
    from executor.settings import load_settings

    home = os.environ.get("HOME") or str(Path.home())
    settings = load_settings()
    environ = {**os.environ, "HOOKCAGE_HOME": str(settings.home)}
    # --user routes run the launcher (docs/install.md, "The program the routes run"); a
    # machine-wide policy cannot name a program in one user's home: --managed keeps the console script.
    program = launcher_path(settings.home) if mode == "user" else installer.hookcage_command()
    try:
        plan = installer.make_plan(agent, mode, home=home, environ=environ,  # type: ignore[arg-type]
                                   hookcage=program)
    except NotInstallable as exc:
        if not (routes_only and exc.offer is not None):
            click.echo(f"hookcage: cannot take {agent} over ({mode}): {exc.explanation}", err=True)
            if exc.offer is not None:
                click.echo(f"hookcage install {agent} --routes-only would add this routing:", err=True)
                click.echo(installer.diff(exc.offer), nl=False, err=True)
            raise CliExit(1) from None
        plan = exc.offer
    if dry_run:
        click.echo(installer.diff(plan), nl=False)
        if mode == "user":
            click.echo(f"# {program}: hookcage's launcher, (re)written for {sys.executable}")
        for note in plan.notes:
            click.echo(f"note: {note}")
        return
    if mode == "user":
        click.echo(installer.install_launcher(settings.home)[1])
    outcome = installer.apply(plan, home=settings.home)
    for line in outcome.lines:
        click.echo(line)
    for note in plan.notes:
        click.echo(f"note: {note}")


@click.command()
@click.argument("agent")
@_mode_option
def uninstall(agent: str, mode: str) -> None:
    """Put back every file `hookcage install AGENT` changed, byte for byte.

    A file that changed since install wrote it is left as it is and named
    (exit 1): take hookcage's entries out by hand, then run it again.

    \b
    Example:
        hookcage uninstall claude
        sudo hookcage uninstall claude --managed
    """
    from executor import installer
    from executor.dialects import DIALECTS, agent_names
    from executor.settings import load_settings

    if agent not in DIALECTS:
        raise installer.InstallError(f"unknown agent {agent!r}; known agents: {agent_names()}")
    home = load_settings().home
    outcome = installer.uninstall(agent, mode, home=home)  # type: ignore[arg-type]
    for line in outcome.lines:
        click.echo(line)
    if not outcome.refused and (gone := installer.remove_unused_launcher(home)):
        click.echo(gone)
    if outcome.refused:
        raise CliExit(1)
