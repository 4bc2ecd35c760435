"""``hookcage allow``: add to, remove from or show the bash allow-list."""

from __future__ import annotations

import click

from executor.cli.common import REDACTED, field
from executor.errors import PayloadError


@click.command()
@click.argument("entry", required=False)
@click.option("--deny", is_flag=True, help="Add ENTRY to the deny list (deny entries win).")
@click.option("--remove", is_flag=True, help="Remove ENTRY from the user's lists.")
@click.option("--list", "show", is_flag=True, help="Show every entry and where it comes from.")
def allow(entry: str | None, deny: bool, remove: bool, show: bool) -> None:
    """Add a command to the bash allow-list (the user's config.toml).

    An entry is a command in shell words; a final `*` word allows any further
    arguments; `*` inside a word globs within it; $CLAUDE_PROJECT_DIR stands
    for the project root. Only commands on the list are ever launched.

    \b
    Example:
        hookcage allow 'npm test'
        hookcage allow 'sh $CLAUDE_PROJECT_DIR/.hookcage/guard.sh'
        hookcage allow --list
    """
    from executor.settings import SETTINGS_FILE, load_settings, update_allowlist

    settings = load_settings()
    if show or entry is None:
        if entry is not None:
            raise click.UsageError("--list takes no ENTRY")
        from executor.settings import read_toml

        for label, path in (("managed", settings.managed_dir / SETTINGS_FILE), ("user", settings.home / SETTINGS_FILE)):
            section = read_toml(path).get("allowlist", {})
            for kind in ("allow", "deny"):
                for item in section.get(kind, []) if isinstance(section, dict) else []:
                    click.echo(f"{kind:5}  {item}    ({label}: {path})")
        for item in settings.allow_append.splitlines():
            if item.strip():
                click.echo(f"allow  {item.strip()}    (HOOKCAGE_ALLOW_APPEND)")
        return
    import shlex

    try:
        if not shlex.split(entry):
            raise ValueError("empty")
    except ValueError as exc:
        raise PayloadError(f"entry {entry!r} is not a command in shell words ({exc})") from exc
    if REDACTED in entry and not (deny or remove):
        # A suggestion copied from the agent's message or the run log has its secrets
        # redacted as ***; as an entry, *** would glob: it would allow any secret there.
        raise PayloadError(f"entry {field(entry)} holds {REDACTED}, where hookcage hid a secret (in an entry it "
                           "would match anything): copy the exact line from `hookcage list` or `hookcage trust`")
    path = settings.home / SETTINGS_FILE
    changed = update_allowlist(path, entry, kind="deny" if deny else "allow", remove=remove)
    verb = "removed from" if remove else "added to"
    what = "deny list" if deny else "allow-list"
    click.echo(f"{entry!r} {verb} the {what} in {path}" if changed else f"{entry!r}: nothing to change in {path}")
    from executor.gates.allowlist import entry_warning

    warning = None if deny or remove else entry_warning(entry)
    if warning:
        click.echo(f"warning: {field(warning)}", err=True)
