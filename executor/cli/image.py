"""``hookcage image build``: the runner image (and with --service, compose.yaml's images)."""

from __future__ import annotations

import click


@click.group()
def image() -> None:
    """Build and inspect the runner image."""


@image.command(name="build")
@click.option("--offline/--online", default=None,
              help="Force the mmdebstrap path (no registry) or a pull of debian:bookworm-slim. "
                   "Default: debian:bookworm-slim when the engine has it or a registry gives it "
                   "(pull attempt bounded to 20 s of silence), else offline.")
@click.option("--mirror", default=None, help="Debian mirror for mmdebstrap, http(s) or file: (default: from apt sources).")
@click.option("--rebuild", is_flag=True, help="Run docker build again on the existing base.")
@click.option("--force", is_flag=True, help="Re-create the base with mmdebstrap too.")
@click.option("--service", is_flag=True,
              help="Build the service images of compose.yaml (hookcage/service, hookcage/compose-agent) "
                   "FROM the runner, which is built first when missing or out of date; --rebuild and "
                   "--force then apply to the service images only. Needs a source checkout.")
def image_build(offline: bool | None, mirror: str | None, rebuild: bool, force: bool, service: bool) -> None:
    """Build hookcage/runner:<version> (sh, bash, python3, node + npm, uv, ruff, jq, git, shellcheck...).

    Works without a container registry: the base is made from Debian packages
    with mmdebstrap (needs root; when it is not installed, hookcage fetches
    it with apt into its cache, nothing system-wide) and imported into the engine. With
    --service, also the images compose.yaml runs, from wheels prepared on this
    machine (nothing is downloaded inside a build; see docs/compose.md).

    \b
    Example:
        sudo hookcage image build --offline
        hookcage image build --service
    """
    def log(line: str) -> None:
        click.echo(line, err=True)

    if service:
        from executor.provision.service_image import (
            AGENT_IMAGE,
            SERVICE_IMAGE,
            build_service_images,
        )

        ids = build_service_images(offline=offline, mirror=mirror, rebuild=rebuild, force=force, log=log)
        click.echo(f"{SERVICE_IMAGE} {ids[0]}")
        click.echo(f"{AGENT_IMAGE} {ids[1]}")
        return
    from executor.provision.images import build_runner_image
    from executor.provision.recipe import RUNNER_IMAGE

    image_id = build_runner_image(offline=offline, mirror=mirror, rebuild=rebuild, force=force, log=log)
    click.echo(f"{RUNNER_IMAGE} {image_id}")
