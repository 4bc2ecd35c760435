"""``hookcage dispatch``: what an agent runs on every event (answers in the hook protocol)."""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from executor.cli.common import CliExit, Invocation
from executor.service.answer import MAX_PAYLOAD, dispatch_bytes


@click.command()
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
        in_hook.refuse_recursion()
    if agent == "help":
        _agent_help(DIALECTS)
        raise CliExit(0)
    if agent is not None and agent not in DIALECTS:
        raise click.BadParameter(f"unknown agent {agent!r}; known agents: {agent_names()} "
                                 "(hookcage dispatch --agent help)", param_hint="'--agent'")
    # The console script may have read stdin already (to offer it to the daemon first).
    raw = obj.stdin if isinstance(obj, Invocation) and obj.stdin is not None else sys.stdin.buffer.read(MAX_PAYLOAD + 1)
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
    from executor.prepare import staging

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

    from executor.prepare import staging

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
