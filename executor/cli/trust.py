"""``hookcage trust``: review the project's hooks and trust them; list, revoke, prune, export records."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from executor.cli.common import (
    CliExit,
    agent_option,
    executor_and_root,
    field,
    named_agents,
    project_option,
    shown,
    unseen_files,
)
from executor.errors import HookcageError, PayloadError


def _hook_scope_text(hook: Any) -> str:
    who = f"{hook.agent} " if hook.agent else ""
    return f"{who}{hook.scope.value} hook {hook.id} ({field(hook.source)} {field(hook.json_path)})"


UNSEEN_LINES = 20
"""Problems of one file the review names before it says how many more there are."""


def _show_unseen(files: Sequence[Any]) -> list[Any]:
    """Name, before the review, each repository file an agent runs itself that hookcage could not show
    whole: why, and the commands of the hooks it will not review. Returns those files."""
    unseen = unseen_files(files)
    for f, who in unseen:
        click.echo(f"not reviewed: {field(f.source)}: {who.replace(' (the problems above)', '')}:")
        for problem in f.errors[:UNSEEN_LINES]:
            click.echo(f"    {field(problem)}")
        if len(f.errors) > UNSEEN_LINES:
            click.echo(f"    ... and {len(f.errors) - UNSEEN_LINES} more (hookcage validate {field(f.source)} "
                       "shows them all)")
        for hook in [h for h in f.hooks if h.invalid][:UNSEEN_LINES]:
            click.echo(f"    {field(hook.json_path)}: the agent would run: {field(hook.command or hook.label)}")
    return [f for f, _ in unseen]


REVIEW_LINES = 200
"""Lines of one file's content (or diff) the review shows before it stops and says how to see the rest."""


def _file_lines(data: bytes) -> list[str]:
    """The lines of a file exactly (each with its newline; bytes that are not UTF-8 kept)."""
    from executor.core.text import decode_exact

    return _split_lf(decode_exact(data))


def _split_lf(text: str) -> list[str]:
    # str.splitlines also breaks at \r, \v, \f, \x1c-\x1e, \x85, U+2028/9: the review breaks at \n only.
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    return [*lines, parts[-1]] if parts[-1] else lines


def _review_line(gutter: str, line: str) -> str:
    """One line of a file or diff in the review: ``!`` in the margin when it holds escaped characters."""
    from executor.core.text import count_escapes, one_line

    ending = line.endswith("\n")
    body = line[:-1] if ending else line
    mark = "!" if count_escapes(body) else " "
    return f"     {mark}{gutter}{one_line(body)}" + ("" if ending else "  [no newline at end of file]")


def _show_lines(rendered: Sequence[str], limit: int | None, what: str) -> int:
    """Print rendered lines up to ``limit``; the number left unshown (said in a marker line)."""
    shown = rendered if limit is None else rendered[:limit]
    for line in shown:
        click.echo(line)
    hidden = len(rendered) - len(shown)
    if hidden:
        click.echo(f"      ... {hidden} more {what} lines NOT SHOWN (of {len(rendered)}): "
                   "type `full` at the prompt, or run `hookcage trust --full`")
    return hidden


def _show_file(state: Any, previous: Any, limit: int | None) -> int:
    """Show one referenced file for review: its content, or a diff against the reviewed version.

    Whether it changed is decided on its bytes (the sha256 the record keeps);
    the diff is computed on the exact lines, bytes that are not UTF-8 and
    invisible characters shown as escapes. Returns how many lines were not
    shown (``limit`` cut them; ``None`` shows everything).
    """
    import difflib

    from executor.core.text import count_escapes

    if state.kind == "missing":
        click.echo(f"    {field(state.path)}: (does not exist yet: trusting covers its absence)")
        return 0
    data = state.data or b""
    label = f"    {field(state.path)} ({len(data)} bytes"
    label += ", executable" if state.executable else ", not executable"
    label += f", symlink to {field(state.link)})" if state.kind == "symlink" else ")"
    escaped = count_escapes(data)
    if escaped:
        label += (f" [{escaped} control, invisible or non-UTF-8 character(s) in it, shown as \\x.. / \\u.. "
                  "escapes on the lines marked !]")
    before = {path: (kind, digest) for path, kind, digest in previous.files} if previous is not None else {}
    old = previous.file_text.get(state.path) if previous is not None else None
    was_executable = previous is not None and state.path in previous.executable
    if state.path in before and before[state.path][0] != "missing" and was_executable != state.executable:
        click.echo(f"    {field(state.path)}: execute bit {'added' if state.executable else 'removed'} since the last review")
    if state.path in before and before[state.path] == (state.kind, state.sha256):
        click.echo(label + " - unchanged since the last review (same bytes)")
        return 0
    lines = _file_lines(data)
    if old is not None:
        from executor.gates.trust import MAX_FILE_TEXT

        diff = list(difflib.unified_diff(_split_lf(old), lines, "reviewed", "now", n=3))[2:]
        if diff:
            click.echo(label + " - changed since the last review:")
            if len(old.encode("utf-8", "surrogateescape")) >= MAX_FILE_TEXT:
                click.echo(f"      (the reviewed version was kept only up to {MAX_FILE_TEXT // 1024} KiB: "
                           "what lies past that shows as added)")
            return _show_lines([_review_line("", line) for line in diff], limit, "diff")
        click.echo(label + " - changed since the last review (its bytes differ; the kept copy of the "
                   "reviewed version shows no difference), now:")
    else:
        click.echo(label + (" - new since the last review:" if previous is not None else ":"))
    return _show_lines([_review_line("| ", line) for line in lines], limit, "content")


def _asks_for(hook: Any, subject: Any) -> str:
    """The frame repeated at the prompt: what trusting grants beyond deny/block/ask/context."""
    caps = (field(", ".join(subject.capabilities)) if subject.capabilities
            else "no capabilities (may deny, block, ask, add context)")
    box = hook.sandbox
    widening = []
    from executor.sandbox.backends import contained

    if not contained(box.backend):
        widening.append("runs on the host, not sandboxed")
    if box.image:
        widening.append(f"image {field(box.image)}")
    if box.workspace == "rw":
        widening.append("workspace rw (may write the project)")
    if box.network != "none":
        widening.append(f"network {field(box.network)}")
    if box.mounts:
        widening.append("mounts " + ", ".join(field(m) for m in box.mounts))
    if box.home != "tmp":
        widening.append(f"home {field(box.home)}")
    limits = [f"{n}={getattr(box, n)}" for n in ("memory", "cpus", "pids") if getattr(box, n) is not None]
    if limits:
        widening.append("limits " + ", ".join(limits))
    if hook.env:
        widening.append("env " + ", ".join(field(name) for name, _ in hook.env))
    sandbox = "; ".join(widening) if widening else "the default sandbox (read-only workspace, no network)"
    return f"    >>> This hook asks for: {caps}. Sandbox: {sandbox}."


def _ask_trust(frame: str, hidden: bool, show_all: Any) -> bool:
    """Ask whether to trust; while part of the review is unseen, ``y`` is refused until ``full``."""
    while hidden:
        answer = click.prompt("    Part of this review was cut. Type `full` to see all of it, or n to skip "
                              "this hook [full/N]", default="n", show_default=False).strip().lower()
        if answer == "full":
            show_all()
            click.echo(frame)
            hidden = False
        elif answer in ("y", "yes"):
            click.echo("    not yet: the review was cut and you have not seen all of it; type `full` first")
        elif answer in ("n", "no", ""):
            return False
        else:
            click.echo("    answer full or n")
    return click.confirm("    Trust this hook?", default=False)


def _show_dependencies(subject: Any) -> None:
    """The review's lines about what the hook's scripts need fetched (network is used only then)."""
    from executor.core.deps import find_needs, own_need

    for need in find_needs(subject.files):
        own = own_need(need, subject.direct)
        if need.problem:
            click.echo(f"    dependencies: {field(need.path)}: {field(need.problem)} - nothing can be fetched; "
                       + ("the hook will not run" if own else
                          "a helper script the hook covers (its command does not name it): the hook runs, "
                          "this script fails if the hook runs it"))
        elif not own:
            click.echo(f"    dependencies of a helper script (the hook's command does not name it): "
                       f"{field(need.describe())}\n"
                       "      fetched like the hook's own, into a cache of its own; if they cannot be had, the hook "
                       "still runs and this script fails when it is run, as without network")
        elif need.kind == "uv":
            click.echo(f"    dependencies: {field(need.describe())}\n"
                       "      fetched now by this machine's pip as wheels from your index; pip may start no "
                       "process here, so nothing is built and no package code runs here (a dependency that is not "
                       "a wheel is refused); installed by uv in a network-less sandbox; runs use them read-only, offline")
        else:
            how = ("every one is local: installed network-less" if not need.registry else
                   f"{field(', '.join(need.registry))} and what they depend on from the npm registry: "
                   "installed with network, in the sandbox")
            click.echo(f"    dependencies: {field(need.describe())}\n"
                       f"      npm install --ignore-scripts in a sandbox with no workspace ({how}; nothing runs "
                       "on this machine); runs use them read-only through NODE_PATH, offline")


def _fetch_dependencies(executor: Any, trusted: Sequence[tuple[Any, Any]], *, retry: bool = True) -> int:
    """Fetch the dependencies of these trusted hooks, each script once; how many hooks cannot run for it.

    A hook's own script whose dependencies cannot be had stops that hook (it says so at
    every run); a helper script's is named once and stops nothing.
    """
    failed = 0
    seen: set[str] = set()
    helpers: dict[str, str] = {}
    for hook, subject in trusted:
        try:
            left = executor.fetch_dependencies(hook, subject, lambda line: click.echo(f"    {field(line)}"),
                                               retry=retry, seen=seen)
        except HookcageError as exc:
            failed += 1
            click.echo(f"dependencies of {_hook_scope_text(hook)} NOT fetched: {shown(str(exc))}", err=True)
            continue
        own = [state for state in left if state.own]
        for state in left:
            if not state.own:
                helpers.setdefault(state.need.where(), state.failure or "not fetched")
        if own:
            failed += 1
            click.echo(f"dependencies of {_hook_scope_text(hook)} NOT fetched: {shown(own[0].failure or '')}; "
                       "it will say so at every run instead of running (fix it, then run "
                       "`hookcage trust --fetch-only` again)", err=True)
    for where, why in sorted(helpers.items()):
        click.echo(f"warning: helper script {field(where)}: its dependencies cannot be had ({shown(why)}); "
                   "the hooks beside it run, and it fails if one of them runs it (as without network). "
                   "`hookcage trust --fetch-only` tries again", err=True)
    return failed


@click.group(invoke_without_command=True)
@click.option("--all", "review_all", is_flag=True, help="Every untrusted hook (default when no --hook).")
@click.option("--hook", "hook_ids", multiple=True, help="Only this hook id (repeatable).")
@click.option("--yes", is_flag=True, help="Trust without asking (for scripts; combine with --all).")
@click.option("--full", is_flag=True,
              help=f"Show every file and diff whole (otherwise each stops at {REVIEW_LINES} lines, marked).")
@click.option("--fetch-only", is_flag=True,
              help="Review and trust nothing: fetch the dependencies of hooks already trusted (the store or "
                   "HOOKCAGE_TRUST_FILE) that the cache lacks (CI: a fresh HOOKCAGE_HOME).")
@agent_option
@project_option
@click.pass_context
def trust(ctx: click.Context, review_all: bool, hook_ids: Sequence[str], yes: bool, full: bool,
          fetch_only: bool, agent: str | None, project: Path | None) -> None:
    """Review the project's hooks and trust them (trust on first use).

    Covers the project's hooks in hookcage's own files and in every agent's
    (.claude/settings.json, .gemini/settings.json, .cursor/hooks.json, ...;
    only AGENT's with --agent).

    Shows each new or changed project hook: event, matcher, command, the files
    it references (content, or a diff against what you reviewed before), its
    sandbox profile and the capabilities it asks for, repeated at the prompt.
    Control and invisible characters are shown as escapes (\\x1b, \\u202e).
    A file or diff longer than the review shows is marked, and `y` is refused
    until you have typed `full` to see it all. Only trusted hooks run; any
    change needs review again.

    \b
    Example:
        hookcage trust                  # interactive review
        hookcage trust --full           # every file and diff whole
        hookcage trust --all --yes      # scripts: trust everything as it is now
        hookcage trust --fetch-only     # CI: dependencies of hooks trusted by HOOKCAGE_TRUST_FILE
    """
    if ctx.invoked_subcommand is not None:
        return
    if fetch_only and (review_all or hook_ids or yes or full):
        raise click.UsageError("--fetch-only reviews nothing: it takes no --all, --hook, --yes or --full")
    executor, root = executor_and_root(project)
    from executor.config import refuse_own_dirs_in_project

    refuse_own_dirs_in_project(executor.settings.home, executor.settings.managed_dir, root)  # its store is theirs
    store = executor.trust_store()
    agents = named_agents(agent)
    if fetch_only:
        # What the base branch's review fetched, for a job that got its trust from an export:
        # only hooks already trusted, as they are now (their files are the reviewed ones).
        unfetched = executor.unfetched(root, agents)
        click.echo(f"fetching the dependencies of {len(unfetched)} trusted hook(s) (not in the cache)" if unfetched
                   else f"nothing to fetch: every trusted hook in {field(root)} has its dependencies")
        raise CliExit(1 if _fetch_dependencies(executor, unfetched) else 0)
    pending, refused = executor.pending_reviews(root, hook_ids, agents)
    for hook, why in refused:
        click.echo(f"cannot review {_hook_scope_text(hook)}: {shown(why)}", err=True)
    files = executor.load(root, agents).files
    unseen = [] if hook_ids else _show_unseen(files)
    for problem in (p for f in files if f.scope.from_repository and not f.hooks and f not in unseen
                    for p in f.errors if p.path == "$"):  # a file refused whole (not regular, past a limit)
        click.echo(f"cannot review {field(problem)}", err=True)
    if not pending:
        if unseen:
            click.echo(f"nothing else to review in {field(root)}, but {len(unseen)} repository file(s) that an "
                       "agent runs itself, on the host, could not be shown (above): read them before you run it"
                       + (f"; {len(refused)} hook(s) could not be reviewed and stay untrusted" if refused else ""))
        else:
            click.echo(f"nothing to review: every project hook in {field(root)} is trusted" if not refused else
                       f"nothing else to review in {field(root)}: {len(refused)} hook(s) could not be reviewed "
                       "(above) and stay untrusted; every other project hook is trusted")
        unready = executor.unfetched(root, agents)  # and what could not be had before: named, not retried
        fetchable = [(hook, subject) for hook, subject in unready
                     if any(not st.ready and not st.failure for st in executor.dependency_states(subject))]
        if fetchable:
            click.echo(f"fetching the dependencies of {len(fetchable)} trusted hook(s) (not in the cache)")
        failed = _fetch_dependencies(executor, unready, retry=False)
        raise CliExit(1 if refused or failed or unseen else 0)
    interactive = not yes
    if interactive and not sys.stdin.isatty():
        raise PayloadError("stdin is not a terminal: review interactively, or pass --all --yes to trust every hook as it is")
    trusted = []
    for i, (hook, subject) in enumerate(pending, 1):
        previous = store.previous(subject)
        click.echo(f"[{i}/{len(pending)}] {_hook_scope_text(hook)}"
                   + (" - CHANGED since it was reviewed" if previous else " - new"))
        click.echo(f"    event: {hook.event}   matcher: {field(hook.matcher.source or '*')}"
                   + (f"   if: {field(hook.condition.source)}" if hook.condition is not None else ""))
        click.echo(f"    command: {field(hook.command)}")
        check = executor.allowlist_check(hook, root)
        click.echo("    allow-list: " + ("allowed" if check.allowed else
                   f"NOT allowed ({field(check.reason)}); it will not run until you run: {field(check.suggestion)}"))
        for note in check.notes:  # a `*` entry for a program that runs others: what it still lets run
            click.echo(f"    allow-list note: {field(note)}")
        profile = subject.profile
        click.echo(f"    sandbox: {field(hook.sandbox.describe())}, image {field(profile.get('image'))[:19]}, "
                   f"timeout {hook.timeout:g}s" + (f", env {field(dict(hook.env))}" if hook.env else ""))
        caps = field(", ".join(subject.capabilities)) or "none (may deny, block, ask, add context)"
        click.echo(f"    capabilities asked for: {caps}")
        from executor.prepare.homes import review_notes

        for note in review_notes(hook.sandbox.home, subject.capabilities):
            click.echo(f"    {note}")
        _show_dependencies(subject)
        click.echo("    files it references:" if subject.files else "    files it references: none")
        hidden = [state for state in subject.files
                  if _show_file(state, previous, None if full else REVIEW_LINES)]
        # The frame: after the content (which cannot move the cursor: every escape is shown,
        # not sent), right above the prompt, so no file can scroll it away or paint over it.
        frame = _asks_for(hook, subject)
        click.echo(frame)

        def show_all(states: Sequence[Any] = tuple(hidden), before: Any = previous) -> None:
            for state in states:
                _show_file(state, before, None)

        if interactive and not _ask_trust(frame, bool(hidden), show_all):
            click.echo("    not trusted")
            continue
        trusted.append((hook, subject))
    executor.grant([subject for _, subject in trusted])
    click.echo(f"trusted {len(trusted)} of {len(pending)} hook(s); records in {executor.settings.trust_store_file}")
    if unseen:
        click.echo(f"not reviewed: {len(unseen)} repository file(s) that an agent runs itself, on the host, "
                   "could not be shown (listed before the review)")
    failed = _fetch_dependencies(executor, trusted, retry=False)
    if refused or failed or unseen:
        raise CliExit(1)


@trust.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="One JSON array, for scripts.")
def trust_list(as_json: bool) -> None:
    """List trust records (the store and HOOKCAGE_TRUST_FILE).

    \b
    Example:
        hookcage trust list --json
    """
    executor, _ = executor_and_root(None)
    records = executor.trust_store().records()
    if as_json:
        click.echo(json.dumps([r.to_json() for r in records], indent=2))
        return
    if not records:
        click.echo("no trust records")
    for r in records:
        caps = f"  capabilities: {', '.join(r.capabilities)}" if r.capabilities else ""
        click.echo(f"{r.id}  {field(r.event)}  matcher={field(r.matcher or '*')}  {field(r.command)}")
        click.echo(f"    {field(r.root)}  {field(r.source)}  trusted {field(r.trusted_at)}{field(caps)}")


@trust.command(name="revoke")
@click.argument("ids", nargs=-1)
@click.option("--all", "revoke_all", is_flag=True, help="Revoke every record.")
def trust_revoke(ids: Sequence[str], revoke_all: bool) -> None:
    """Revoke trust records by id (or digest prefix), or --all.

    \b
    Example:
        hookcage trust revoke 3f2a9c01b7de
    """
    if not ids and not revoke_all:
        raise click.UsageError("give record ids, or --all")
    executor, _ = executor_and_root(None)
    store = executor.trust_store()
    removed = store.revoke_all() if revoke_all else store.revoke(ids)
    click.echo(f"revoked {removed} record(s)")
    if not revoke_all and removed < len(ids):
        raise CliExit(1)


@trust.command(name="prune")
@project_option
def trust_prune(project: Path | None) -> None:
    """Remove records of projects or hook files that are gone, and stale versions of this project's hooks.

    \b
    Example:
        hookcage trust prune
    """
    executor, root = executor_and_root(project)
    current: set[str] = set()
    for hook in executor.load(root).hooks:
        if hook.scope.from_repository:
            try:
                current.update(executor.trust_subject(hook, root).covering_digests())
            except HookcageError:
                continue

    def keep(record: Any) -> bool:
        if not Path(record.root).is_dir() or not Path(record.source).is_file():
            return False
        return record.root != str(root) or record.digest in current

    click.echo(f"pruned {executor.trust_store().prune(keep)} record(s)")


@trust.command(name="export")
def trust_export() -> None:
    """Print every trust record as JSON, for HOOKCAGE_TRUST_FILE (CI, headless agents).

    \b
    Example:
        hookcage trust export > /ci/trust.json
        HOOKCAGE_TRUST_FILE=/ci/trust.json hookcage dispatch < event.json
    """
    executor, _ = executor_and_root(None)
    click.echo(executor.trust_store().export())
