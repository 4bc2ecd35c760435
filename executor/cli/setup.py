"""``hookcage setup runsc``: register an installed gVisor with the local Docker engine."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click


@click.group()
def setup() -> None:
    """Register what hookcage can use with this machine's engine (installs nothing)."""


@setup.command(name="runsc")
@click.option("--dry-run", is_flag=True, help="Show the change to daemon.json as a diff; change nothing.")
@click.option("--force", is_flag=True, help="Replace a runsc entry that has other settings.")
@click.option("--daemon-json", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="The engine's daemon.json (default: dockerd's --config-file, else /etc/docker/daemon.json).")
def setup_runsc(dry_run: bool, force: bool, daemon_json: Path | None) -> None:
    """Register an installed gVisor (runsc) with the local Docker engine, so hooks get gVisor.

    gVisor's runsc install adds runtimes.runsc (the installed runsc, with
    --network=none) to daemon.json, keeping every other key, after a backup
    (daemon.json.hookcage-<UTC>.bak); reloads dockerd with SIGHUP (running
    containers are untouched); checks the engine lists runsc and that a
    container under it answers with gVisor's kernel. Running it again changes
    nothing. With the default runtime setting (auto), hooks then run under gVisor.

    \b
    Example:
        apt-get install runsc && hookcage setup runsc
    """
    from executor.provision.runsc import LocalDockerd
    from executor.provision.runsc import setup_runsc as register

    runsc = shutil_which("runsc")
    engine: Any = None
    if runsc:  # not installed: refused before any engine call
        engine = LocalDockerd()
    outcome = register(engine, runsc=runsc, daemon_json=daemon_json, force=force, dry_run=dry_run)
    for line in outcome.lines:
        click.echo(line)


def shutil_which(name: str) -> str | None:
    """``shutil.which`` on the absolute PATH entries outside the current directory (a checkout's
    ``./runsc`` is never what hookcage registers), imported late (start-up time matters on the
    dispatch path)."""
    import shutil

    from executor.places import outside_cwd

    return shutil.which(name, path=outside_cwd(os.environ.get("PATH", os.defpath)))
