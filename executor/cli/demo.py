"""``hookcage demo``: a sample agent session against a repository with hostile hooks."""

from __future__ import annotations

import click

from executor.cli.common import CliExit


@click.command()
def demo() -> None:
    """Run a sample agent session against a repository with hostile hooks.

    Builds the runner image first when it is missing or out of date (a few minutes).

    \b
    Example:
        hookcage demo
    """
    from executor.demo import run_demo
    from executor.provision.images import build_runner_image, runner_image_current
    from executor.provision.recipe import RUNNER_IMAGE
    from executor.sandbox.docker import default_client

    client = default_client()
    if not runner_image_current(client):
        click.echo(f"{RUNNER_IMAGE} is missing or out of date: building it (a few minutes)...", err=True)
        build_runner_image(client, log=lambda line: click.echo(f"  {line}", err=True))
    if not run_demo(click.echo):
        raise CliExit(1)
