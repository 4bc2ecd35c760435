"""``hookcage list``: every configured hook, its agent, scope and file, and whether it would run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from executor.cli.common import (
    agent_option,
    executor_and_root,
    field,
    named_agents,
    project_option,
    unseen_files,
)
from executor.core.events import EVENTS
from executor.errors import HookcageError, PayloadError


@click.command(name="list")
@click.option("--event", "event", default=None, help="Only hooks of this event.")
@click.option("--json", "as_json", is_flag=True, help="One JSON array, for scripts.")
@agent_option
@project_option
def list_hooks(event: str | None, as_json: bool, agent: str | None, project: Path | None) -> None:
    """List every configured hook, its agent, scope and file, and whether it would run.

    Reads hookcage's own hook files and every agent's (only AGENT's with
    --agent: what a session of that agent runs).

    \b
    Example:
        hookcage list --event PreToolUse
        hookcage list --agent claude
    """
    agents = named_agents(agent)
    if event is not None:
        event = agents[0].event_spec(event).name if agent is not None else event
        if agent is None and event not in EVENTS and not any(d.shape.event(event) for d in agents):
            raise PayloadError(f"unknown event {event!r}; valid events: {', '.join(EVENTS)}")
    executor, root = executor_and_root(project)
    hookset, views = executor.inventory(root, event, agents=agents)
    runtimes = _runtimes_of(executor, {v.hook.sandbox.backend for v in views})
    if as_json:
        click.echo(json.dumps([{**v.to_json(), **runtimes.get(v.hook.sandbox.backend, {})} for v in views],
                              indent=2))
        return
    for backend, said in sorted(runtimes.items()):
        from executor.sandbox.runtimes import describe

        click.echo(f"{backend} hooks run under " + (describe(said["runtime"]) if said["runtime"]
                                                    else field(said.get("error", ""))))
    for problem in hookset.problems:
        click.echo(field(problem), err=True)
    for f, who in unseen_files(hookset.files):
        click.echo(f"{field(f.source)}: {who}", err=True)
    for f in hookset.files:
        if f.routes:
            click.echo(f"{field(f.source)}: {len(f.routes)} route{'s' if len(f.routes) != 1 else ''} "
                       "to hookcage dispatch (hookcage's own routing, not hooks)")
    if not views:
        click.echo(f"no hooks configured (project root {field(root)})")
        return
    for view in views:
        h = view.hook
        runs = "yes" if view.skip is None else f"no ({view.skip.reason}: {field(view.skip.detail)})"
        who = f"{h.agent} " if h.agent else ""
        click.echo(f"{h.id}  {h.event}  matcher={field(h.matcher.source or '*')}  [{who}{h.scope.value}]  {field(h.label)}")
        click.echo(f"    source: {field(h.source)} {field(h.json_path)}")
        if h.condition is not None:
            click.echo(f"    if: {field(h.condition.source)}")
        click.echo(f"    sandbox: {field(h.sandbox.describe())}  timeout: {h.timeout:g}s")
        if view.allow is not None:
            click.echo(f"    allow-list: {'allowed' if view.allow.allowed else 'NOT allowed'}"
                       + ("" if view.allow.allowed else f" ({field(view.allow.reason)})"))
        if view.trusted is not None:
            click.echo(f"    trust: {'trusted' if view.trusted else 'NOT trusted'}"
                       + (f" ({field(view.trust_detail)})" if view.trust_detail else ""))
        for state in view.dependencies:  # a helper's only when it cannot be had (--json: every one)
            if state.own or not state.ready:
                click.echo(f"    dependencies: {field(state.describe())}")
        click.echo(f"    runs: {runs}")


def _runtimes_of(executor: Any, backends: set[str]) -> dict[str, dict[str, str]]:
    """``{backend: {"runtime": ..., "isolation": "gvisor" | "shared kernel"}}`` for container backends."""
    from executor.sandbox.runtimes import isolation

    out: dict[str, dict[str, str]] = {}
    for backend in sorted(backends):
        try:
            runtime = executor.runtime_of(backend)
        except HookcageError as exc:
            out[backend] = {"runtime": "", "isolation": "", "error": f"runtime unknown ({exc})"}
            continue
        if runtime is not None:
            out[backend] = {"runtime": runtime, "isolation": isolation(runtime)}
    return out
