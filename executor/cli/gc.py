"""``hookcage gc``: remove what killed runs left (containers, staging folders)."""

from __future__ import annotations

import click


@click.command()
@click.option("--all", "everything", is_flag=True, help="Also remove running hookcage containers.")
def gc(everything: bool) -> None:
    """Remove what killed runs left: containers whose run is over, staging folders.

    Containers go when their run is over, or when the process that started
    them (on this machine) is gone; staged files when their process is gone.

    \b
    Example:
        hookcage gc
    """
    from executor.prepare import staging
    from executor.sandbox import orphans
    from executor.sandbox.docker import default_client, reap
    from executor.settings import load_settings

    root = load_settings().home / staging.STAGING
    folders = staging.sweep(root) if root.is_dir() else 0
    click.echo(f"removed {folders} staging folder(s)")
    client = default_client()
    try:
        removed = reap(client, include_running_expired=True, everything=everything)
        removed += orphans.remove_orphans(client)
    finally:
        client.close()
    click.echo(f"removed {removed} container(s)")
