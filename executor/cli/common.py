"""What the command modules of :mod:`executor.cli` share.

The exit a command takes once its output is printed (:class:`CliExit`),
how an error or a field is printed (one line, escapes visible, secrets
redacted), and the ``--project`` and ``--agent`` options with what they
resolve to.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click


@dataclass(frozen=True)
class Invocation:
    """What the console script hands the CLI besides arguments (click's ``obj``)."""

    stdin: bytes | None = None


class CliExit(Exception):
    """Leave the CLI with this exit code (raised where output is already printed)."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def error(message: str) -> None:
    """Print ``hookcage: error: MESSAGE`` on stderr, as people see it (:func:`shown`)."""
    click.echo(f"hookcage: error: {shown(message)}", err=True)


REDACTED = "***"
"""What :func:`executor.core.text.redact` puts in place of a secret."""


def shown(text: str) -> str:
    """An error or a notice as people see it: one line, escapes visible, secrets redacted."""
    from executor.core.text import MESSAGE_CAP, one_line, redact

    return redact(one_line(text, MESSAGE_CAP))


def field(value: object) -> str:
    """One field of a listing or the review (a name, a command, a path), on one line with escapes visible."""
    from executor.core.text import one_line

    return one_line(str(value))


project_option = click.option(
    "--project", "project", type=click.Path(file_okay=False, path_type=Path), default=None,
    help="Project root (default: $CLAUDE_PROJECT_DIR, else the current directory).",
)


def executor_and_root(project: Path | None) -> tuple[Any, Path]:
    """A :class:`~executor.executor.HookExecutor` and the project root (``--project``, else its own guess)."""
    from executor.executor import HookExecutor

    executor = HookExecutor()
    root = Path(os.path.realpath(project)) if project else executor.root_for(None)
    return executor, root


def named_agents(agent: str | None) -> list[Any]:
    """The dialects ``--agent`` names: one, or every agent when left out."""
    from executor.dialects import DIALECTS, agent_names

    if agent is None:
        return list(DIALECTS.values())
    if agent not in DIALECTS:
        raise click.BadParameter(f"unknown agent {agent!r}; known agents: {agent_names()}",
                                 param_hint="'--agent'")
    return [DIALECTS[agent]]


agent_option = click.option(
    "--agent", metavar="NAME", default=None,
    help="Only this agent's hook files (and hookcage's own); default: every agent's.",
)


def unseen_files(files: Sequence[Any]) -> list[tuple[Any, str]]:
    """The repository files hookcage could not show whole (a problem that drops a file, an entry
    or a hook) whose agent runs them itself, on the host, and a line saying so."""
    from executor.dialects import DIALECTS

    out = []
    for f in files:
        if not (f.scope.from_repository and f.errors):
            continue
        runners = [d.title for d in DIALECTS.values() if d.runs_repository_hooks and (
            d.name == f.agent or any(f.source.endswith("/" + name) for name in d.also_runs))]
        if runners:
            who = f"{runners[0]} runs" if len(runners) == 1 else f"{' and '.join(runners)} run"
            out.append((f, f"{who} this file's hooks {'itself' if len(runners) == 1 else 'themselves'}, on the "
                           "host, without hookcage; hookcage could not show all of it (the problems above)"))
    return out
