"""``hookcage home``: see and clear the persistent homes of hooks."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

import click

from executor.cli.common import CliExit, error


@click.group()
def home() -> None:
    """See and clear the persistent homes of hooks with "sandbox": {"home": "persistent"}.

    Each such hook keeps a writable HOME under $HOOKCAGE_HOME/homes/<project
    hash>/<hook id>/; past the home_cap setting it is mounted read-only.

    \b
    Example:
        hookcage home list
        hookcage home clear --hook h53cdfe4f4b2
    """


@home.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="One JSON array, for scripts.")
def home_list(as_json: bool) -> None:
    """List every persistent home: project, hook id, size, and whether it is over its cap.

    \b
    Example:
        hookcage home list
    """
    from executor.prepare.homes import human, list_homes, parse_size
    from executor.settings import load_settings

    settings = load_settings()
    cap = parse_size(settings.home_cap)
    infos = list_homes(settings.home)
    if as_json:
        click.echo(json.dumps([
            {"project": i.project, "hook_id": i.hook_id, "path": str(i.path), "bytes": i.usage.size,
             "complete": i.usage.complete, "over_cap": i.usage.over(cap)} for i in infos
        ], indent=2))
        return
    if not infos:
        click.echo(f"no persistent homes in {settings.home / 'homes'}")
        return
    for info in infos:
        over = f"  OVER the {settings.home_cap} cap: read-only until cleared" if info.usage.over(cap) else ""
        click.echo(f"{info.hook_id}  {info.usage.describe()}  {info.project or '(project unknown)'}{over}")
        click.echo(f"    {info.path}")
    click.echo(f"{len(infos)} home(s), {human(sum(i.usage.size for i in infos))} in all; cap {settings.home_cap} each")


@home.command(name="clear")
@click.option("--hook", "hook_ids", multiple=True, help="Only this hook's home (repeatable).")
@click.option("--project", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Only the homes of this project root.")
@click.option("--all", "clear_all", is_flag=True, help="Every home (needed when neither --hook nor --project).")
def home_clear(hook_ids: Sequence[str], project: Path | None, clear_all: bool) -> None:
    """Empty persistent homes (the hooks start afresh; the folders stay).

    \b
    Example:
        hookcage home clear --hook h53cdfe4f4b2
        hookcage home clear --project .
        hookcage home clear --all
    """
    from executor.prepare.homes import clear_home, select_homes
    from executor.settings import load_settings

    if not (hook_ids or project or clear_all):
        raise click.UsageError("say which homes: --hook ID, --project DIR, or --all")
    settings = load_settings()
    root = os.path.realpath(project) if project else None
    infos = select_homes(settings.home, hook_ids=tuple(hook_ids), project=root)
    if not infos:
        click.echo("no matching persistent home")
        raise CliExit(1 if hook_ids or project else 0)
    failed = 0
    for info in infos:
        try:
            clear_home(info.path)
        except OSError as exc:
            failed += 1
            error(f"could not clear {info.path}: {exc}")
            continue
        click.echo(f"cleared {info.path} ({info.usage.describe()})")
    if failed:
        raise CliExit(1)
