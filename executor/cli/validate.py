"""``hookcage validate``: check hook files, each problem with its agent, file and JSON path."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import click

from executor.cli.common import (
    CliExit,
    agent_option,
    executor_and_root,
    field,
    named_agents,
    project_option,
    unseen_files,
)
from executor.errors import PayloadError


@click.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@agent_option
@project_option
def validate(paths: Sequence[Path], agent: str | None, project: Path | None) -> None:
    """Check hook files; print each problem with its agent, file and JSON path.

    With no PATH, checks every hook file hookcage reads for the project:
    its own and every agent's (only AGENT's with --agent). A PATH is read as
    the file of the agent whose place it is in (.gemini/settings.json: Gemini
    CLI), or with --agent. Exits 1 if any file has an error (warnings alone
    exit 0).

    \b
    Example:
        hookcage validate .hookcage/hooks.json
        hookcage validate --agent gemini
    """
    from executor.config import file_format, guess_scope, load_hook_file, read_hook_files
    from executor.core.hooks import HookFile

    executor, root = executor_and_root(project)
    agents = named_agents(agent)
    files: list[HookFile] = []
    if paths:
        for path in paths:
            if not path.exists():
                raise PayloadError(f"{path}: no such file")
            scope, dialect = guess_scope(path, executor.settings, agents)
            if agent is not None:
                dialect = agents[0]
            loaded = load_hook_file(path, scope, root, dialect, file_format(path, dialect))
            if loaded is not None:
                files.append(loaded)
    else:
        files = read_hook_files(executor.settings, root, agents)
    errors = 0
    unseen = dict(unseen_files(files))
    for f in files:
        for problem in f.problems:
            click.echo(field(problem))
        if f in unseen:
            click.echo(f"{field(f.source)}: {unseen[f]}")
        errors += len(f.errors)
        if not f.problems:
            who = f"{f.agent} hook file " if f.agent else ""
            routes = f", {len(f.routes)} route{'s' if len(f.routes) != 1 else ''} to hookcage (not hooks)" if f.routes else ""
            click.echo(f"{who}{field(f.source)}: ok ({len(f.hooks)} hook{'s' if len(f.hooks) != 1 else ''}{routes})")
    if not files:
        click.echo("no hook files found")
    if errors:
        raise CliExit(1)
