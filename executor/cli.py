"""The ``hookcage`` command line: a thin shell over :class:`HookExecutor`.

Each command builds the library objects, calls them and prints. Library
errors become one line on stderr (``hookcage: error: ...``), never a
traceback. ``hookcage dispatch`` is what an agent runs: whatever goes wrong,
it answers in the hook protocol (exit 1 = non-blocking error, or exit 2 =
block when ``HOOKCAGE_FAIL_CLOSED=1``).
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import click

from executor import __version__
from executor.core.events import EVENTS
from executor.errors import HookcageError, PayloadError
from executor.service.answer import MAX_PAYLOAD, dispatch_bytes, fail_closed_env, internal_error


@dataclass(frozen=True)
class _Invocation:
    """What the console script hands the CLI besides arguments (click's ``obj``)."""

    stdin: bytes | None = None


class CliExit(Exception):
    """Leave the CLI with this exit code (raised where output is already printed)."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def _error(message: str) -> None:
    click.echo(f"hookcage: error: {_shown(message)}", err=True)


REDACTED = "***"
"""What :func:`executor.core.text.redact` puts in place of a secret."""


def _shown(text: str) -> str:
    """An error or a notice as people see it: one line, escapes visible, secrets redacted."""
    from executor.core.text import MESSAGE_CAP, one_line, redact

    return redact(one_line(text, MESSAGE_CAP))


def _field(value: object) -> str:
    """One field of a listing or the review (a name, a command, a path), on one line with escapes visible."""
    from executor.core.text import one_line

    return one_line(str(value))


@click.group(
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog="Docs: docs/ in the source tree. Every command has --help with an example.",
)
@click.version_option(__version__, "--version", "-V", prog_name="hookcage")
def cli() -> None:
    """Run AI coding agents' hook commands safely.

    Every hook command runs in an ephemeral, network-less container with the
    workspace read-only. Point your agent at hookcage with one line of config:

    \b
        {"hooks": {"PreToolUse": [{"hooks": [{"type": "command",
                   "command": "hookcage dispatch"}]}]}}
    """


# -- dispatch ---------------------------------------------------------------


@cli.command()
@click.argument("event", required=False)
@click.option("--agent", metavar="NAME", default=None,
              help="Answer in this agent's dialect (claude, codebuddy; `--agent help` lists them). "
                   "Default: recognised from the payload, else claude.")
@click.pass_obj
def dispatch(obj: Any, event: str | None, agent: str | None) -> None:
    """Answer one agent event: run its matching hooks, print the folded verdict.

    Reads the agent's JSON payload on stdin. EVENT may be omitted when the
    payload has "hook_event_name". Exit 0 with the verdict's JSON on stdout;
    a block rides in that JSON where the agent reads it there, else it is
    exit 2 with the reason on stderr (see docs/protocol.md).

    \b
    Example:
        echo '{"session_id":"s1","cwd":"'$PWD'","tool_name":"Bash",
               "tool_input":{"command":"rm -rf /"}}' | hookcage dispatch PreToolUse
        hookcage dispatch --agent codebuddy PreToolUse < payload.json
    """
    from executor import in_hook
    from executor.core.envnames import IN_HOOK_VAR
    from executor.dialects import DIALECTS, agent_names

    if agent != "help" and in_hook.recursing(os.environ, IN_HOOK_VAR):
        from executor.entry import refuse_recursion

        refuse_recursion()
    if agent == "help":
        _agent_help(DIALECTS)
        raise CliExit(0)
    if agent is not None and agent not in DIALECTS:
        raise click.BadParameter(f"unknown agent {agent!r}; known agents: {agent_names()} "
                                 "(hookcage dispatch --agent help)", param_hint="'--agent'")
    # The console script may have read stdin already (to offer it to the daemon first).
    raw = obj.stdin if isinstance(obj, _Invocation) and obj.stdin is not None else sys.stdin.buffer.read(MAX_PAYLOAD + 1)
    executors: list[Any] = []
    _clean_up_on_signal(executors)
    answer, executor = dispatch_bytes(event, raw, agent=agent, make_executor=_tracked(executors))
    _answer(answer.exit_code, answer.stdout, answer.stderr)
    if executor is None:
        raise CliExit(answer.exit_code)
    if executor.deferred:
        _run_after_answering(executor, answer.exit_code)
    executor.close()
    _release_staging()
    raise CliExit(answer.exit_code)


def _agent_help(dialects: Any) -> None:
    """``--agent help``: every agent, the files hookcage reads for it, how it is recognised."""
    for dialect in dialects.values():
        click.echo(f"{dialect.name:<10} {dialect.title}")
        for line in dialect.describe_sources():
            click.echo(f"{'':<12}{line}")
        for line in dialect.unsupported:
            click.echo(f"{'':<12}not supported: {line}")
    guesses = [f"{d.name} when {d.recognition or 'the payload carries ' + ', '.join(d.recognised_by)}"
               for d in dialects.values() if d.recognition or d.recognised_by]
    click.echo("Without --agent: " + "; ".join([*guesses, "else claude"]) + ".")
    click.echo("hookcage's own files (.hookcage/hooks.json, .hookcage/hooks.local.json, "
               "$HOOKCAGE_HOME/hooks.json) are read for every agent.")


def _release_staging() -> None:
    from executor.sandbox import staging

    staging.release()


def _tracked(executors: list[Any]) -> Any:
    """``make_executor`` for :func:`dispatch_bytes` that remembers what it made (for the signal handler)."""
    from executor.executor import HookExecutor

    def make(settings: Any) -> Any:
        executors.append(HookExecutor(settings))
        return executors[-1]

    return make


def _clean_up_on_signal(executors: list[Any]) -> None:
    """On SIGTERM, SIGINT or SIGHUP (an agent giving up on its hooks), leave nothing behind.

    The handler removes this dispatch's containers (``executor.abort``) and
    every staging folder this process made, then exits 128 + the signal
    number at once: nobody is waiting for an answer any more. What SIGKILL
    leaves is swept by the next dispatch and by ``hookcage gc``.
    """
    import contextlib
    import signal

    from executor.sandbox import staging

    def handler(signum: int, frame: Any) -> None:
        for other in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(other, signal.SIG_IGN)  # a second signal must not cut the cleanup short
        for executor in list(executors):
            with contextlib.suppress(Exception):  # the engine is gone: reap() removes them at expiry
                executor.abort()
        staging.remove_mine()
        os._exit(128 + signum)

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, handler)


def _answer(code: int, stdout: str, stderr: str) -> None:
    if stdout:
        sys.stdout.write(stdout)
    if stderr:
        sys.stderr.write(stderr)
    sys.stdout.flush()
    sys.stderr.flush()


def _run_after_answering(executor: Any, code: int) -> None:
    """Run ``async`` hooks in a detached child so the agent is not kept waiting."""
    pid = os.fork()
    if pid:
        os._exit(code)  # the parent has answered; the agent sees it exit now
    os.setsid()
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    try:
        executor.run_deferred()
        executor.close()
        _release_staging()
    finally:
        os._exit(0)


# -- list -------------------------------------------------------------------


_project_option = click.option(
    "--project", "project", type=click.Path(file_okay=False, path_type=Path), default=None,
    help="Project root (default: $CLAUDE_PROJECT_DIR, else the current directory).",
)


def _executor_and_root(project: Path | None) -> tuple[Any, Path]:
    from executor.executor import HookExecutor

    executor = HookExecutor()
    root = Path(os.path.realpath(project)) if project else executor.root_for(None)
    return executor, root


def _agents(agent: str | None) -> list[Any]:
    """The dialects ``--agent`` names: one, or every agent when left out."""
    from executor.dialects import DIALECTS, agent_names

    if agent is None:
        return list(DIALECTS.values())
    if agent not in DIALECTS:
        raise click.BadParameter(f"unknown agent {agent!r}; known agents: {agent_names()}",
                                 param_hint="'--agent'")
    return [DIALECTS[agent]]


_agent_option = click.option(
    "--agent", metavar="NAME", default=None,
    help="Only this agent's hook files (and hookcage's own); default: every agent's.",
)


@cli.command(name="list")
@click.option("--event", "event", default=None, help="Only hooks of this event.")
@click.option("--json", "as_json", is_flag=True, help="One JSON array, for scripts.")
@_agent_option
@_project_option
def list_hooks(event: str | None, as_json: bool, agent: str | None, project: Path | None) -> None:
    """List every configured hook, its agent, scope and file, and whether it would run.

    Reads hookcage's own hook files and every agent's (only AGENT's with
    --agent: what a session of that agent runs).

    \b
    Example:
        hookcage list --event PreToolUse
        hookcage list --agent claude
    """
    agents = _agents(agent)
    if event is not None:
        event = agents[0].event_spec(event).name if agent is not None else event
        if agent is None and event not in EVENTS and not any(d.shape.event(event) for d in agents):
            raise PayloadError(f"unknown event {event!r}; valid events: {', '.join(EVENTS)}")
    executor, root = _executor_and_root(project)
    hookset, views = executor.inventory(root, event, agents=agents)
    runtimes = _runtimes_of(executor, {v.hook.sandbox.backend for v in views})
    if as_json:
        click.echo(json.dumps([{**v.to_json(), **runtimes.get(v.hook.sandbox.backend, {})} for v in views],
                              indent=2))
        return
    for backend, said in sorted(runtimes.items()):
        from executor.sandbox.runtimes import describe

        click.echo(f"{backend} hooks run under " + (describe(said["runtime"]) if said["runtime"]
                                                    else _field(said.get("error", ""))))
    for problem in hookset.problems:
        click.echo(_field(problem), err=True)
    for f, who in _unseen(hookset.files):
        click.echo(f"{_field(f.source)}: {who}", err=True)
    for f in hookset.files:
        if f.routes:
            click.echo(f"{_field(f.source)}: {len(f.routes)} route{'s' if len(f.routes) != 1 else ''} "
                       "to hookcage dispatch (hookcage's own routing, not hooks)")
    if not views:
        click.echo(f"no hooks configured (project root {_field(root)})")
        return
    for view in views:
        h = view.hook
        runs = "yes" if view.skip is None else f"no ({view.skip.reason}: {_field(view.skip.detail)})"
        who = f"{h.agent} " if h.agent else ""
        click.echo(f"{h.id}  {h.event}  matcher={_field(h.matcher.source or '*')}  [{who}{h.scope.value}]  {_field(h.label)}")
        click.echo(f"    source: {_field(h.source)} {_field(h.json_path)}")
        if h.condition is not None:
            click.echo(f"    if: {_field(h.condition.source)}")
        click.echo(f"    sandbox: {_field(h.sandbox.describe())}  timeout: {h.timeout:g}s")
        if view.allow is not None:
            click.echo(f"    allow-list: {'allowed' if view.allow.allowed else 'NOT allowed'}"
                       + ("" if view.allow.allowed else f" ({_field(view.allow.reason)})"))
        if view.trusted is not None:
            click.echo(f"    trust: {'trusted' if view.trusted else 'NOT trusted'}"
                       + (f" ({_field(view.trust_detail)})" if view.trust_detail else ""))
        for state in view.dependencies:  # a helper's only when it cannot be had (--json: every one)
            if state.own or not state.ready:
                click.echo(f"    dependencies: {_field(state.describe())}")
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


# -- validate ---------------------------------------------------------------


@cli.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@_agent_option
@_project_option
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

    executor, root = _executor_and_root(project)
    agents = _agents(agent)
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
    unseen = dict(_unseen(files))
    for f in files:
        for problem in f.problems:
            click.echo(_field(problem))
        if f in unseen:
            click.echo(f"{_field(f.source)}: {unseen[f]}")
        errors += len(f.errors)
        if not f.problems:
            who = f"{f.agent} hook file " if f.agent else ""
            routes = f", {len(f.routes)} route{'s' if len(f.routes) != 1 else ''} to hookcage (not hooks)" if f.routes else ""
            click.echo(f"{who}{_field(f.source)}: ok ({len(f.hooks)} hook{'s' if len(f.hooks) != 1 else ''}{routes})")
    if not files:
        click.echo("no hook files found")
    if errors:
        raise CliExit(1)


# -- trust ------------------------------------------------------------------


def _hook_scope_text(hook: Any) -> str:
    who = f"{hook.agent} " if hook.agent else ""
    return f"{who}{hook.scope.value} hook {hook.id} ({_field(hook.source)} {_field(hook.json_path)})"


UNSEEN_LINES = 20
"""Problems of one file the review names before it says how many more there are."""


def _unseen(files: Sequence[Any]) -> list[tuple[Any, str]]:
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


def _show_unseen(files: Sequence[Any]) -> list[Any]:
    """Name, before the review, each repository file an agent runs itself that hookcage could not show
    whole: why, and the commands of the hooks it will not review. Returns those files."""
    unseen = _unseen(files)
    for f, who in unseen:
        click.echo(f"not reviewed: {_field(f.source)}: {who.replace(' (the problems above)', '')}:")
        for problem in f.errors[:UNSEEN_LINES]:
            click.echo(f"    {_field(problem)}")
        if len(f.errors) > UNSEEN_LINES:
            click.echo(f"    ... and {len(f.errors) - UNSEEN_LINES} more (hookcage validate {_field(f.source)} "
                       "shows them all)")
        for hook in [h for h in f.hooks if h.invalid][:UNSEEN_LINES]:
            click.echo(f"    {_field(hook.json_path)}: the agent would run: {_field(hook.command or hook.label)}")
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
        click.echo(f"    {_field(state.path)}: (does not exist yet: trusting covers its absence)")
        return 0
    data = state.data or b""
    label = f"    {_field(state.path)} ({len(data)} bytes"
    label += ", executable" if state.executable else ", not executable"
    label += f", symlink to {_field(state.link)})" if state.kind == "symlink" else ")"
    escaped = count_escapes(data)
    if escaped:
        label += (f" [{escaped} control, invisible or non-UTF-8 character(s) in it, shown as \\x.. / \\u.. "
                  "escapes on the lines marked !]")
    before = {path: (kind, digest) for path, kind, digest in previous.files} if previous is not None else {}
    old = previous.file_text.get(state.path) if previous is not None else None
    was_executable = previous is not None and state.path in previous.executable
    if state.path in before and before[state.path][0] != "missing" and was_executable != state.executable:
        click.echo(f"    {_field(state.path)}: execute bit {'added' if state.executable else 'removed'} since the last review")
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
    caps = (_field(", ".join(subject.capabilities)) if subject.capabilities
            else "no capabilities (may deny, block, ask, add context)")
    box = hook.sandbox
    widening = []
    from executor.sandbox.registry import backend

    if not backend(box.backend).contained:
        widening.append("runs on the host, not sandboxed")
    if box.image:
        widening.append(f"image {_field(box.image)}")
    if box.workspace == "rw":
        widening.append("workspace rw (may write the project)")
    if box.network != "none":
        widening.append(f"network {_field(box.network)}")
    if box.mounts:
        widening.append("mounts " + ", ".join(_field(m) for m in box.mounts))
    if box.home != "tmp":
        widening.append(f"home {_field(box.home)}")
    limits = [f"{n}={getattr(box, n)}" for n in ("memory", "cpus", "pids") if getattr(box, n) is not None]
    if limits:
        widening.append("limits " + ", ".join(limits))
    if hook.env:
        widening.append("env " + ", ".join(_field(name) for name, _ in hook.env))
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
            click.echo(f"    dependencies: {_field(need.path)}: {_field(need.problem)} - nothing can be fetched; "
                       + ("the hook will not run" if own else
                          "a helper script the hook covers (its command does not name it): the hook runs, "
                          "this script fails if the hook runs it"))
        elif not own:
            click.echo(f"    dependencies of a helper script (the hook's command does not name it): "
                       f"{_field(need.describe())}\n"
                       "      fetched like the hook's own, into a cache of its own; if they cannot be had, the hook "
                       "still runs and this script fails when it is run, as without network")
        elif need.kind == "uv":
            click.echo(f"    dependencies: {_field(need.describe())}\n"
                       "      fetched now by this machine's pip as wheels from your index; pip may start no "
                       "process here, so nothing is built and no package code runs here (a dependency that is not "
                       "a wheel is refused); installed by uv in a network-less sandbox; runs use them read-only, offline")
        else:
            how = ("every one is local: installed network-less" if not need.registry else
                   f"{_field(', '.join(need.registry))} and what they depend on from the npm registry: "
                   "installed with network, in the sandbox")
            click.echo(f"    dependencies: {_field(need.describe())}\n"
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
            left = executor.fetch_dependencies(hook, subject, lambda line: click.echo(f"    {_field(line)}"),
                                               retry=retry, seen=seen)
        except HookcageError as exc:
            failed += 1
            click.echo(f"dependencies of {_hook_scope_text(hook)} NOT fetched: {_shown(str(exc))}", err=True)
            continue
        own = [state for state in left if state.own]
        for state in left:
            if not state.own:
                helpers.setdefault(state.need.where(), state.failure or "not fetched")
        if own:
            failed += 1
            click.echo(f"dependencies of {_hook_scope_text(hook)} NOT fetched: {_shown(own[0].failure or '')}; "
                       "it will say so at every run instead of running (fix it, then run "
                       "`hookcage trust --fetch-only` again)", err=True)
    for where, why in sorted(helpers.items()):
        click.echo(f"warning: helper script {_field(where)}: its dependencies cannot be had ({_shown(why)}); "
                   "the hooks beside it run, and it fails if one of them runs it (as without network). "
                   "`hookcage trust --fetch-only` tries again", err=True)
    return failed


@cli.group(invoke_without_command=True)
@click.option("--all", "review_all", is_flag=True, help="Every untrusted hook (default when no --hook).")
@click.option("--hook", "hook_ids", multiple=True, help="Only this hook id (repeatable).")
@click.option("--yes", is_flag=True, help="Trust without asking (for scripts; combine with --all).")
@click.option("--full", is_flag=True,
              help=f"Show every file and diff whole (otherwise each stops at {REVIEW_LINES} lines, marked).")
@click.option("--fetch-only", is_flag=True,
              help="Review and trust nothing: fetch the dependencies of hooks already trusted (the store or "
                   "HOOKCAGE_TRUST_FILE) that the cache lacks (CI: a fresh HOOKCAGE_HOME).")
@_agent_option
@_project_option
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
    executor, root = _executor_and_root(project)
    from executor.config import refuse_own_dirs_in_project

    refuse_own_dirs_in_project(executor.settings.home, executor.settings.managed_dir, root)  # its store is theirs
    store = executor.trust_store()
    agents = _agents(agent)
    if fetch_only:
        # What the base branch's review fetched, for a job that got its trust from an export:
        # only hooks already trusted, as they are now (their files are the reviewed ones).
        unfetched = executor.unfetched(root, agents)
        click.echo(f"fetching the dependencies of {len(unfetched)} trusted hook(s) (not in the cache)" if unfetched
                   else f"nothing to fetch: every trusted hook in {_field(root)} has its dependencies")
        raise CliExit(1 if _fetch_dependencies(executor, unfetched) else 0)
    pending, refused = executor.pending_reviews(root, hook_ids, agents)
    for hook, why in refused:
        click.echo(f"cannot review {_hook_scope_text(hook)}: {_shown(why)}", err=True)
    files = executor.load(root, agents).files
    unseen = [] if hook_ids else _show_unseen(files)
    for problem in (p for f in files if f.scope.from_repository and not f.hooks and f not in unseen
                    for p in f.errors if p.path == "$"):  # a file refused whole (not regular, past a limit)
        click.echo(f"cannot review {_field(problem)}", err=True)
    if not pending:
        if unseen:
            click.echo(f"nothing else to review in {_field(root)}, but {len(unseen)} repository file(s) that an "
                       "agent runs itself, on the host, could not be shown (above): read them before you run it"
                       + (f"; {len(refused)} hook(s) could not be reviewed and stay untrusted" if refused else ""))
        else:
            click.echo(f"nothing to review: every project hook in {_field(root)} is trusted" if not refused else
                       f"nothing else to review in {_field(root)}: {len(refused)} hook(s) could not be reviewed "
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
        click.echo(f"    event: {hook.event}   matcher: {_field(hook.matcher.source or '*')}"
                   + (f"   if: {_field(hook.condition.source)}" if hook.condition is not None else ""))
        click.echo(f"    command: {_field(hook.command)}")
        check = executor.allowlist_check(hook, root)
        click.echo("    allow-list: " + ("allowed" if check.allowed else
                   f"NOT allowed ({_field(check.reason)}); it will not run until you run: {_field(check.suggestion)}"))
        for note in check.notes:  # a `*` entry for a program that runs others: what it still lets run
            click.echo(f"    allow-list note: {_field(note)}")
        profile = subject.profile
        click.echo(f"    sandbox: {_field(hook.sandbox.describe())}, image {_field(profile.get('image'))[:19]}, "
                   f"timeout {hook.timeout:g}s" + (f", env {_field(dict(hook.env))}" if hook.env else ""))
        caps = _field(", ".join(subject.capabilities)) or "none (may deny, block, ask, add context)"
        click.echo(f"    capabilities asked for: {caps}")
        from executor.sandbox.homes import review_notes

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
    executor, _ = _executor_and_root(None)
    records = executor.trust_store().records()
    if as_json:
        click.echo(json.dumps([r.to_json() for r in records], indent=2))
        return
    if not records:
        click.echo("no trust records")
    for r in records:
        caps = f"  capabilities: {', '.join(r.capabilities)}" if r.capabilities else ""
        click.echo(f"{r.id}  {_field(r.event)}  matcher={_field(r.matcher or '*')}  {_field(r.command)}")
        click.echo(f"    {_field(r.root)}  {_field(r.source)}  trusted {_field(r.trusted_at)}{_field(caps)}")


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
    executor, _ = _executor_and_root(None)
    store = executor.trust_store()
    removed = store.revoke_all() if revoke_all else store.revoke(ids)
    click.echo(f"revoked {removed} record(s)")
    if not revoke_all and removed < len(ids):
        raise CliExit(1)


@trust.command(name="prune")
@_project_option
def trust_prune(project: Path | None) -> None:
    """Remove records of projects or hook files that are gone, and stale versions of this project's hooks.

    \b
    Example:
        hookcage trust prune
    """
    executor, root = _executor_and_root(project)
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
    executor, _ = _executor_and_root(None)
    click.echo(executor.trust_store().export())


# -- allow-list -------------------------------------------------------------


@cli.command()
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
        raise PayloadError(f"entry {_field(entry)} holds {REDACTED}, where hookcage hid a secret (in an entry it "
                           "would match anything): copy the exact line from `hookcage list` or `hookcage trust`")
    path = settings.home / SETTINGS_FILE
    changed = update_allowlist(path, entry, kind="deny" if deny else "allow", remove=remove)
    verb = "removed from" if remove else "added to"
    what = "deny list" if deny else "allow-list"
    click.echo(f"{entry!r} {verb} the {what} in {path}" if changed else f"{entry!r}: nothing to change in {path}")
    from executor.gates.allowlist import entry_warning

    warning = None if deny or remove else entry_warning(entry)
    if warning:
        click.echo(f"warning: {_field(warning)}", err=True)


# -- sandbox: run, image, doctor, gc, demo -----------------------------------


def _parse_env_pairs(pairs: Sequence[str]) -> dict[str, str]:
    env = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise click.BadParameter(f"{pair!r} is not NAME=VALUE", param_hint="--env")
        env[name] = value
    return env


@cli.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--image", default=None, help="Image to run in (default: the runner image).")
@click.option("--workspace", type=click.Choice(["ro", "rw", "none"]), default="ro", show_default=True,
              help="How the project is mounted.")
@click.option("--network", default="none", show_default=True, help="Network (anything but none is a widening).")
@click.option("--mount", "mounts", multiple=True, help="Extra read-only mount (a path), repeatable.")
@click.option("--memory", default=None, help="Memory limit, e.g. 256m.")
@click.option("--cpus", type=float, default=None, help="CPUs, e.g. 0.5.")
@click.option("--pids", type=int, default=None, help="Most processes at once.")
@click.option("--timeout", type=float, default=60.0, show_default=True, help="Seconds before the run is killed.")
@click.option("--env", "env_pairs", multiple=True, help="NAME=VALUE for the command, repeatable.")
@_project_option
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def run(image: str | None, workspace: str, network: str, mounts: Sequence[str], memory: str | None,
        cpus: float | None, pids: int | None, timeout: float, env_pairs: Sequence[str],
        project: Path | None, command: Sequence[str]) -> None:
    """Run one command in the sandbox profile, stdin passed through, exit code returned.

    A drop-in wrapper for an existing hook line. One COMMAND word is run as a
    shell command line; several are quoted and joined. Exit 124 means the
    timeout killed it, 137 an OOM kill.

    \b
    Example:
        echo '{"tool_name":"Bash"}' | hookcage run -- ./.claude/hooks/check.sh
        hookcage run --workspace none -- 'id; cat /etc/os-release'
    """
    import shlex

    from executor.config import project_root
    from executor.core.envnames import PROJECT_DIR_VARS
    from executor.core.options import SandboxOptions
    from executor.executor import default_sandbox_factory
    from executor.sandbox.base import RunRequest
    from executor.settings import load_settings

    settings = load_settings()
    root = Path(os.path.realpath(project)) if project else project_root(None)
    line = command[0] if len(command) == 1 else shlex.join(command)
    cwd = os.path.realpath(os.getcwd())
    options = SandboxOptions(
        image=image, workspace=workspace,  # type: ignore[arg-type]
        network=network, memory=memory, cpus=cpus, pids=pids,
        mounts=tuple(os.path.realpath(m) for m in mounts),
    )
    env = {name: str(root) for name in PROJECT_DIR_VARS}
    env.update(_parse_env_pairs(env_pairs))
    stdin = b"" if sys.stdin is None or sys.stdin.isatty() else sys.stdin.buffer.read(MAX_PAYLOAD)
    request = RunRequest(command=line, stdin=stdin, cwd=cwd, env=env, timeout=timeout,
                         project_dir=str(root), options=options, output_cap=settings.output_cap)
    with default_sandbox_factory(options.backend, settings) as sandbox:
        result = sandbox.run(request)
    sys.stdout.buffer.write(result.stdout)
    sys.stderr.buffer.write(result.stderr)
    sys.stdout.flush()
    if result.truncated:
        click.echo(f"hookcage: output truncated at {settings.output_cap} bytes per stream", err=True)
    if result.timed_out:
        click.echo(f"hookcage: timed out after {timeout:g} s", err=True)
        raise CliExit(124)
    if result.oom_killed:
        click.echo("hookcage: killed: out of memory", err=True)
        raise CliExit(137)
    raise CliExit(result.exit_code if result.exit_code is not None else 1)


@cli.group()
def image() -> None:
    """Build and inspect the runner image."""


@image.command(name="build")
@click.option("--offline/--online", default=None,
              help="Force the debootstrap path (no registry) or a pull of debian:bookworm-slim. "
                   "Default: debian:bookworm-slim when the engine has it or a registry gives it "
                   "(pull attempt bounded to 20 s of silence), else offline.")
@click.option("--mirror", default=None, help="Debian mirror for debootstrap (default: from apt sources).")
@click.option("--rebuild", is_flag=True, help="Run docker build again on the existing base.")
@click.option("--force", is_flag=True, help="Re-create the base with debootstrap too.")
@click.option("--service", is_flag=True,
              help="Build the service images of compose.yaml (hookcage/service, hookcage/compose-agent) "
                   "FROM the runner, which is built first when missing or out of date; --rebuild and "
                   "--force then apply to the service images only. Needs a source checkout.")
def image_build(offline: bool | None, mirror: str | None, rebuild: bool, force: bool, service: bool) -> None:
    """Build hookcage/runner:<version> (sh, bash, python3, node + npm, uv, ruff, jq, git, shellcheck...).

    Works without a container registry: the base is made from Debian packages
    with debootstrap (needs root; when it is not installed, hookcage fetches
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


@cli.command()
def doctor() -> None:
    """Check what hookcage needs: engine, image, limits, runtimes; say how to fix what is missing.

    \b
    Example:
        hookcage doctor
    """
    from executor.provision.doctor import Probe
    from executor.sandbox.registry import backends
    from executor.settings import load_settings

    settings = load_settings()
    problems = 0

    def report(ok: bool, what: str, fix: str = "") -> None:
        nonlocal problems
        problems += not ok
        click.echo(f"[{'ok' if ok else '!!'}] {what}" + (f"\n     fix: {fix}" if not ok and fix else ""))

    report(True, f"hookcage {__version__}, home {settings.home}")
    _doctor_agents(report, settings.home)
    _doctor_dependencies(report)
    probe = Probe()  # what the checks share (the engine's client...)
    for found in backends():  # each backend's checks (executor.sandbox.registry), in order
        for check_fn in found.checks:
            for check in check_fn(settings, probe):
                click.echo("\n".join(check.lines()))
                problems += check.ok is False
                if check.stop:
                    raise CliExit(1)
    click.echo("all good" if not problems else f"{problems} problem(s) found")
    if problems:
        raise CliExit(1)


def _doctor_agents(report: Any, home: Path) -> None:
    """The agents section: routing installed, repository hooks the agent would run itself, PATH order."""
    from executor.config import project_root
    from executor.installer import agent_checks

    checks = agent_checks(home=home, user_home=os.environ.get("HOME") or str(Path.home()),
                          environ=os.environ, root=project_root())
    click.echo("agents:" if checks else "agents: none on PATH or configured in this repository")
    for check in checks:
        report(check.ok, check.what, check.fix)


def _doctor_dependencies(report: Any) -> None:
    """The trusted project hooks' scripts whose dependencies are not in the cache (this project)."""
    try:
        executor, root = _executor_and_root(None)
        _, views = executor.inventory(root)
    except HookcageError as exc:
        report(False, f"dependencies: the project's hooks could not be read ({_shown(str(exc))})")
        return
    states = {state.key: state for view in views if view.trusted for state in view.dependencies}
    if not states:
        return
    missing = [state for state in states.values() if not state.ready]
    if not missing:
        report(True, f"dependencies: the {len(states)} script(s) of trusted hooks in {_field(root)} that name "
                     "dependencies have them")
    for state in sorted(missing, key=lambda st: st.need.path):
        fix = ("fix what it names; nothing else is fetched" if state.need.problem else
               f"`hookcage trust --fetch-only` in {_field(root)}")
        what = ("a hook's own script: that hook does not run" if state.own else
                "a helper script: the hooks run, it fails if one runs it")
        report(False, f"dependencies: {_field(state.describe())} ({what})", fix)


def shutil_which(name: str) -> str | None:
    """``shutil.which`` on the absolute PATH entries outside the current directory (a checkout's
    ``./runsc`` is never what hookcage registers), imported late (start-up time matters on the
    dispatch path)."""
    import shutil

    from executor.places import outside_cwd

    return shutil.which(name, path=outside_cwd(os.environ.get("PATH", os.defpath)))


@cli.command()
@click.option("--all", "everything", is_flag=True, help="Also remove running hookcage containers.")
def gc(everything: bool) -> None:
    """Remove what killed runs left: containers whose run is over, staging folders.

    Containers go when their run is over, or when the process that started
    them (on this machine) is gone; staged files when their process is gone.

    \b
    Example:
        hookcage gc
    """
    from executor.sandbox import orphans, staging
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


# -- home: persistent hook homes --------------------------------------------


@cli.group()
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
    from executor.sandbox.homes import human, list_homes, parse_size
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
    from executor.sandbox.homes import clear_home, select_homes
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
            _error(f"could not clear {info.path}: {exc}")
            continue
        click.echo(f"cleared {info.path} ({info.usage.describe()})")
    if failed:
        raise CliExit(1)


@cli.command()
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


# -- setup: register what hookcage uses with the engine ---------------------


@cli.group()
def setup() -> None:
    """Register what hookcage can use with this machine's engine (installs nothing)."""


@setup.command(name="runsc")
@click.option("--dry-run", is_flag=True, help="Show the change to daemon.json as a diff; change nothing.")
@click.option("--force", is_flag=True, help="Replace a runsc entry that has other settings.")
@click.option("--daemon-json", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="The engine's daemon.json (default: dockerd's --config-file, else /etc/docker/daemon.json).")
def setup_runsc(dry_run: bool, force: bool, daemon_json: Path | None) -> None:
    """Register an installed gVisor (runsc) with the local Docker engine, so hooks get gVisor.

    Adds runtimes.runsc (the installed runsc, with --network=none) to
    daemon.json, keeping every other key, after a backup
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


# -- install / uninstall ----------------------------------------------------


def _mode_option(f: Any) -> Any:
    f = click.option("--managed", "mode", flag_value="managed",
                     help="The machine's policy files (needs root): the agent runs only managed hooks.")(f)
    return click.option("--user", "mode", flag_value="user", default=True,
                        help="Your own files, no admin rights (the default).")(f)


@cli.command()
@click.argument("agent")
@_mode_option
@click.option("--dry-run", is_flag=True, help="Print every file it would write or change, as a diff; write nothing.")
@click.option("--routes-only", is_flag=True,
              help="For an agent that cannot be taken over: add the routing it offers anyway "
                   "(the agent still runs repositories' hooks itself).")
def install(agent: str, mode: str, dry_run: bool, routes_only: bool) -> None:
    """Take an agent over: it stops running repositories' hooks itself and routes every event here.

    Writes the agent's routing to `hookcage dispatch --agent AGENT` (with
    --user, run by the launcher $HOOKCAGE_HOME/bin/hookcage, which every
    install rewrites) and the switch that keeps it from loading a
    repository's hooks (see docs/install.md for what each agent gets). Every file it changes is
    backed up first; running it twice changes nothing; `hookcage uninstall
    AGENT` puts back what was there.

    \b
    Example:
        hookcage install claude --dry-run
        hookcage install claude
        sudo hookcage install claude --managed
    """
    from executor import installer
    from executor.core.install import NotInstallable
    from executor.launcher import launcher_path
    from executor.settings import load_settings

    home = os.environ.get("HOME") or str(Path.home())
    settings = load_settings()
    environ = {**os.environ, "HOOKCAGE_HOME": str(settings.home)}
    # --user routes run the launcher (docs/install.md, "The program the routes run"); a
    # machine-wide policy cannot name a program in one user's home: --managed keeps the console script.
    program = launcher_path(settings.home) if mode == "user" else installer.hookcage_command()
    try:
        plan = installer.make_plan(agent, mode, home=home, environ=environ,  # type: ignore[arg-type]
                                   hookcage=program)
    except NotInstallable as exc:
        if not (routes_only and exc.offer is not None):
            click.echo(f"hookcage: cannot take {agent} over ({mode}): {exc.explanation}", err=True)
            if exc.offer is not None:
                click.echo(f"hookcage install {agent} --routes-only would add this routing:", err=True)
                click.echo(installer.diff(exc.offer), nl=False, err=True)
            raise CliExit(1) from None
        plan = exc.offer
    if dry_run:
        click.echo(installer.diff(plan), nl=False)
        if mode == "user":
            click.echo(f"# {program}: hookcage's launcher, (re)written for {sys.executable}")
        for note in plan.notes:
            click.echo(f"note: {note}")
        return
    if mode == "user":
        click.echo(installer.install_launcher(settings.home)[1])
    outcome = installer.apply(plan, home=settings.home)
    for line in outcome.lines:
        click.echo(line)
    for note in plan.notes:
        click.echo(f"note: {note}")


@cli.command()
@click.argument("agent")
@_mode_option
def uninstall(agent: str, mode: str) -> None:
    """Put back every file `hookcage install AGENT` changed, byte for byte.

    A file that changed since install wrote it is left as it is and named
    (exit 1): take hookcage's entries out by hand, then run it again.

    \b
    Example:
        hookcage uninstall claude
        sudo hookcage uninstall claude --managed
    """
    from executor import installer
    from executor.dialects import DIALECTS, agent_names
    from executor.settings import load_settings

    if agent not in DIALECTS:
        raise installer.InstallError(f"unknown agent {agent!r}; known agents: {agent_names()}")
    home = load_settings().home
    outcome = installer.uninstall(agent, mode, home=home)  # type: ignore[arg-type]
    for line in outcome.lines:
        click.echo(line)
    if not outcome.refused and (gone := installer.remove_unused_launcher(home)):
        click.echo(gone)
    if outcome.refused:
        raise CliExit(1)


# -- report -----------------------------------------------------------------


_REPORT_ERROR = 2
"""`hookcage report`'s exit code when it could not report (1 is kept for --fail-on)."""


@cli.command()
@click.option("--since", metavar="WHEN", default=None,
              help="Only runs since WHEN: an ISO 8601 time (2025-05-01T12:00:00Z; without an offset: "
                   "local time) or a duration back from now (30m, 2h, 1d, 1h30m).")
@click.option("--format", "fmt", type=click.Choice(["markdown", "junit", "json"]), default="markdown",
              show_default=True, help="markdown: a job summary table; junit: JUnit XML; json: every run.")
@click.option("--fail-on", "fail_on", metavar="OUTCOMES", multiple=True,
              help="Exit 1 when any of these outcomes occurred (comma-separated, repeatable), e.g. "
                   "untrusted,blocked,error,timeout. The report is printed all the same.")
@click.option("--log", "log_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="The run log to read (default: the run_log setting, $HOOKCAGE_HOME/runs.jsonl); "
                   "its rotated files FILE.1, FILE.2, ... are read too, oldest first.")
def report(since: str | None, fmt: str, fail_on: Sequence[str], log_path: Path | None) -> None:
    """Turn the run log into a CI report: a Markdown table, JUnit XML or JSON, on stdout.

    One row (test case) per hook considered: event, agent, hook, outcome (ok,
    blocked, error, timeout, not-run, untrusted, off-list, disabled, invalid,
    unsupported, skipped), duration, reason. Exit 0; 1 when --fail-on matched;
    2 when no report could be made. See docs/report.md.

    \b
    Example:
        hookcage report --since 2h >> "$GITHUB_STEP_SUMMARY"
        hookcage report --format junit > hookcage-junit.xml
        hookcage report --format json --fail-on untrusted,blocked,error,timeout
    """
    import socket
    from datetime import datetime

    from executor import runlog
    from executor.core import report as reports

    now = datetime.now().astimezone()
    try:
        since_at = reports.parse_since(since, now) if since is not None else None
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="'--since'") from None
    try:
        outcomes = reports.parse_fail_on(fail_on)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="'--fail-on'") from None
    settings = None
    if log_path is None:
        from executor.settings import load_settings

        settings = load_settings()
        log_path = settings.run_log
    try:
        with runlog.open_log(log_path) as files:
            built = reports.parse_log(((str(path), handle) for path, handle in files), since=since_at, now=now)
    except OSError as exc:
        _error(f"cannot read the run log {log_path}: {exc.strerror or exc}")
        raise CliExit(_REPORT_ERROR) from None
    if not built.files:
        if settings is None:  # a log named on the command line that is not there: a typo, not "no runs"
            _error(f"no run log at {log_path} (nor rotated files {log_path.name}.1, ...)")
            raise CliExit(_REPORT_ERROR)
        click.echo(f"hookcage: warning: no run log yet at {log_path}: no hook has been considered", err=True)
    if settings is not None and not settings.log_runs:
        click.echo("hookcage: warning: the log_runs setting is off: hooks considered now are not logged", err=True)
    if built.warning():
        click.echo(f"hookcage: warning: {built.warning()}", err=True)
    if fmt == "junit":
        text = reports.to_junit(built, hostname=socket.gethostname() or "localhost")
    elif fmt == "json":
        text = reports.to_json(built, fail_on=outcomes)
    else:
        text = reports.to_markdown(built)
    click.echo(text, nl=False)
    hits = built.matched(outcomes)
    if hits:
        _fail_on_lines(built, hits)
        raise CliExit(1)


def _fail_on_lines(built: Any, hits: Sequence[str]) -> None:
    """On stderr: what --fail-on matched, one line per hook (the first 20)."""
    counts = ", ".join(f"{built.counts[o]} {o}" for o in hits)
    click.echo(f"hookcage: --fail-on matched: {counts}", err=True)
    seen: dict[tuple[str, str], int] = {}
    for row in built.rows:
        if row.outcome in hits:
            key = (row.outcome, row.hook_id)
            seen[key] = seen.get(key, 0) + 1
    for shown, ((outcome, hook_id), runs) in enumerate(seen.items()):
        if shown == 20:
            click.echo(f"hookcage:   ... and {len(seen) - 20} more hooks", err=True)
            break
        row = next(r for r in built.rows if r.outcome == outcome and r.hook_id == hook_id)
        times = f" ({runs} runs)" if runs > 1 else ""
        click.echo(f"hookcage:   {outcome}: {_field(row.event)} hook {_field(row.hook)} [{_field(hook_id)}]"
                   f"{times} in {_field(row.source)}: {_field(row.reason)}"[:1000], err=True)


# -- serve ------------------------------------------------------------------


@cli.command()
@click.option("--socket", "socket_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Unix socket to listen on (default: $HOOKCAGE_HOME/hookcage.sock; "
                   "callers find another one through $HOOKCAGE_SOCKET).")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="info",
              show_default=True, help="What the daemon logs to stderr.")
@click.option("--listen", metavar="HOST:PORT", default=None,
              help="Also answer on TCP (remote mode: the service's own settings, a bearer token "
                   "required); [::1]:PORT for IPv6, port 0 for any free port.")
@click.option("--token-file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="The token's file (first line; mode 0600). Default: $HOOKCAGE_TOKEN, "
                   "else the file $HOOKCAGE_TOKEN_FILE.")
@click.option("--tls-cert", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="PEM certificate (chain) for HTTPS on --listen; with --tls-key.")
@click.option("--tls-key", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="PEM private key for --tls-cert.")
@click.option("--max-body", type=click.IntRange(min=1), default=16 * 1024 * 1024, show_default=True,
              help="Bytes a TCP request body may have (413 past it).")
@click.option("--max-concurrent", type=click.IntRange(min=1), default=8, show_default=True,
              help="TCP dispatches answered at once.")
@click.option("--max-queue", type=click.IntRange(min=0), default=64, show_default=True,
              help="TCP dispatches waiting for a slot (503 with Retry-After past it).")
@click.option("--project-root", "project_roots", multiple=True, type=click.Path(path_type=Path),
              help="Only projects inside this directory may be named over TCP (repeatable; default: any).")
@click.option("--transcript-root", "transcript_roots", multiple=True, type=click.Path(path_type=Path),
              help="Transcripts named over TCP may also lie in this directory, not only in the caller's "
                   "project (repeatable; default: none).")
@click.option("--idle-timeout", type=click.FloatRange(min=0, max=7 * 86400), default=0.0,
              help="Stop after this many seconds with no event in flight (default 0: never; the daemon an "
                   "event starts gets the setting daemon_idle_timeout).")
@click.option("--log-file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Append the log (and anything printed) to this file instead of stderr.")
@click.option("--status", "show_status", is_flag=True,
              help="Show the daemon answering on the socket (pid, version, uptime, idle timeout, requests, "
                   "pool) and exit; exit 1 when none answers.")
@click.option("--ready-fd", type=click.IntRange(min=3), default=None, hidden=True,
              help="A descriptor to close once answering (the start lock of the event that started the daemon).")
@click.option("--stop", "stop_daemon", is_flag=True,
              help="Stop the daemon answering on the socket (requests in flight are answered first) and exit.")
def serve(socket_path: Path | None, log_level: str, listen: str | None, token_file: Path | None,
          tls_cert: Path | None, tls_key: Path | None, max_body: int, max_concurrent: int, max_queue: int,
          project_roots: tuple[Path, ...], transcript_roots: tuple[Path, ...], idle_timeout: float,
          log_file: Path | None, show_status: bool, ready_fd: int | None, stop_daemon: bool) -> None:
    """Answer `hookcage dispatch` from a long-lived process (saves start-up on every event).

    Keeps the code loaded and the sandboxes (engine connections) open; reads
    settings, hook files, trust and the allow-list afresh for every event.
    `hookcage dispatch` uses it when it answers on the socket, starts it when
    none does (unless HOOKCAGE_DAEMON=off), and runs in-process otherwise.
    Stop it with SIGTERM, Ctrl-C or `hookcage serve --stop`. See docs/daemon.md.

    With --listen HOST:PORT it also answers agents on other machines or in
    containers over TCP (HTTPS with --tls-cert/--tls-key), for its own
    settings and hooks and the caller's project, behind a bearer token. See
    docs/service.md.

    \b
    Example:
        hookcage serve --status
        hookcage serve --stop
        hookcage serve &
        echo '{"session_id":"s1","prompt":"hi"}' | hookcage dispatch UserPromptSubmit
        HOOKCAGE_TOKEN_FILE=~/.config/hookcage/token hookcage serve --listen 0.0.0.0:8765
    """
    if show_status or stop_daemon:
        _serve_control(socket_path, stop=stop_daemon)
        return
    from executor.service.daemon import Daemon

    remote = None
    if listen is not None:
        from executor.service.auth import load_token, parse_listen
        from executor.service.remote import RemoteOptions

        host, port = parse_listen(listen)
        remote = RemoteOptions(host, port, load_token(token_file, os.environ), tls_cert=tls_cert, tls_key=tls_key,
                               max_body=max_body, max_concurrent=max_concurrent, max_queue=max_queue,
                               project_roots=project_roots, transcript_roots=transcript_roots,
                               token_file=token_file or (Path(os.environ["HOOKCAGE_TOKEN_FILE"])
                                                         if os.environ.get("HOOKCAGE_TOKEN_FILE") else None))
        remote.check()
    else:
        context = click.get_current_context()
        tcp_only = ("token_file", "tls_cert", "tls_key", "max_body", "max_concurrent", "max_queue", "project_roots",
                   "transcript_roots")
        given = [param.opts[0] for param in context.command.params if param.name in tcp_only
                 and context.get_parameter_source(param.name) is not click.core.ParameterSource.DEFAULT]
        if given:
            raise click.UsageError(f"{', '.join(given)} go{'es' if len(given) == 1 else ''} with --listen HOST:PORT")
    Daemon(socket_path).serve(log_level=log_level, remote=remote, idle_timeout=idle_timeout, log_file=log_file,
                              ready_fd=ready_fd)


def _serve_control(socket_path: Path | None, *, stop: bool) -> None:
    """``hookcage serve --status`` / ``--stop``: only ``--socket`` goes with them."""
    from executor.service import autostart, client

    context = click.get_current_context()
    given = [param.opts[0] for param in context.command.params
             if param.name not in ("socket_path", "show_status", "stop_daemon", "ready_fd")
             and context.get_parameter_source(param.name) is not click.core.ParameterSource.DEFAULT]
    if given or (stop and context.params["show_status"]):
        raise click.UsageError(f"--status and --stop take --socket only, not {', '.join(given) or 'each other'}")
    path = str(socket_path) if socket_path else client.socket_path(os.environ)
    if path is None:
        raise click.UsageError("no socket to look at: set HOOKCAGE_HOME or give --socket")
    if stop:
        pid, ended = autostart.stop(path)
        if pid is None:
            click.echo(f"no hookcage daemon answers on {path}: nothing to stop")
        elif ended:
            click.echo(f"stopped the hookcage daemon (pid {pid}) on {path}")
        else:
            _error(f"the hookcage daemon (pid {pid}) is still finishing after {autostart.STOP_WAIT:g} s "
                   "(hooks in flight)")
            raise CliExit(1)
        return
    health = client.health(path, timeout=5.0)
    if health is None:
        click.echo(f"no hookcage daemon answers on {path}"
                   + ("" if autostart.enabled(os.environ) else " (HOOKCAGE_DAEMON=off: no event starts one)"))
        raise CliExit(1)
    click.echo(f"hookcage daemon on {path}")
    for line in autostart.status_lines(health, path):
        click.echo(f"  {line}")


# -- entry point ------------------------------------------------------------


def main(argv: Sequence[str] | None = None, *, stdin: bytes | None = None) -> NoReturn:
    """Console-script entry point: run the CLI, turn every error into one line.

    Args:
        argv: the arguments (default ``sys.argv[1:]``).
        stdin: the bytes ``dispatch`` reads instead of stdin, when the caller
            already read them (:mod:`executor.entry`).
    """
    args = list(sys.argv[1:] if argv is None else argv)
    dispatching = bool(args) and args[0] == "dispatch"
    reporting = bool(args) and args[0] == "report"  # its exit 1 means "--fail-on matched": errors are 2
    if dispatching:
        # Warnings from the library (a container that would not go away, say)
        # must not land on stderr, which the agent may show as a block reason;
        # `serve` configures its own logging.
        logging.getLogger("executor").addHandler(logging.NullHandler())
        logging.getLogger("executor").propagate = False
    try:
        cli.main(args=args, prog_name="hookcage", standalone_mode=False, obj=_Invocation(stdin))
        code = 0
    except CliExit as exc:
        code = exc.code
    except click.exceptions.Abort:
        click.echo("hookcage: aborted", err=True)
        code = 1
    except click.ClickException as exc:
        _error(exc.format_message())
        # An agent reads exit 2 as "block": usage errors block only when fail-closed.
        code = 2 if (dispatching and fail_closed_env()) or reporting else 1
    except HookcageError as exc:
        _error(str(exc))
        code = 2 if reporting else 1
    except KeyboardInterrupt:
        code = 130
    except Exception as exc:
        if os.environ.get("HOOKCAGE_DEBUG"):
            raise
        _error(internal_error(exc))
        code = 2 if (dispatching and fail_closed_env()) or reporting else 1
    sys.exit(code)
