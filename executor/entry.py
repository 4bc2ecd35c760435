"""The ``hookcage`` console script: ``dispatch`` through the service when one answers.

An agent spawns ``hookcage dispatch`` for every event, so this path imports
the standard library only (:mod:`executor.service.client`, and
:mod:`executor.service.remote_client` when ``$HOOKCAGE_URL`` is set):

- with ``$HOOKCAGE_URL`` set, every ``dispatch`` is answered by the service
  there, or by the ``HOOKCAGE_ON_ERROR`` fallback when it cannot answer:
  never in-process (an agent's container may hold hookcage without its
  dependencies, and its own settings are not the service's);
- otherwise it asks the local daemon (``hookcage serve``) and, when that
  cannot answer, and for every other command, hands over to
  :func:`executor.cli.main`, with the stdin it already read.
"""

from __future__ import annotations

import _socket
import itertools
import os
import sys

from executor.core.envnames import IN_HOOK_VAR
from executor.service import client

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import NoReturn


def forwardable(args: Sequence[str]) -> tuple[bool, str | None, str | None]:
    """Whether ``args`` are a plain ``dispatch [EVENT] [--agent NAME]`` the daemon can answer.

    Returns:
        Whether to offer the call to the daemon, its EVENT and its ``--agent``.
        Anything else (other options, ``--help``, ``--agent help``, extra
        arguments) is left to the in-process CLI, which owns usage errors and
        reads stdin only when it must. An agent name the daemon does not know
        is refused by it (409), and the CLI then reports it.
    """
    if not args or args[0] != "dispatch":
        return False, None, None
    event: str | None = None
    agent: str | None = None
    rest = list(args[1:])
    while rest:
        arg = rest.pop(0)
        if arg == "--agent" and agent is None and rest:
            agent = rest.pop(0)
        elif arg.startswith("--agent=") and agent is None:
            agent = arg.partition("=")[2]
        elif arg.startswith("-") or event is not None:
            return False, None, None
        else:
            event = arg
    if agent is not None and (not agent or agent == "help" or agent.startswith("-")):
        return False, None, None
    return True, event, agent


def through_daemon(event: str | None, raw: bytes, environ: Mapping[str, str], *, agent: str | None = None) -> client.Answer | None:
    """Answer one event through the daemon, starting it when none runs; None when the caller must
    answer in-process.

    With no daemon on the socket (or one that retired), the daemon is started
    (:func:`executor.service.autostart.ensure`, unless ``HOOKCAGE_DAEMON=off``) and
    asked once more.

    Args:
        event: the EVENT argument of ``hookcage dispatch`` (None when left out).
        raw: the agent's stdin, already read.
        environ: the caller's environment (``os.environ``).
        agent: the ``--agent`` argument (None when left out).
    """
    if not hasattr(_socket, "AF_UNIX") or environ.get("HOOKCAGE_NO_DAEMON") or environ.get("HOOKCAGE_DEBUG"):
        return None
    path = client.socket_path(environ)
    if path is None:
        return None
    outcome, answer = client.ask_daemon(path, event, raw, environ, agent)
    if outcome in (client.ABSENT, client.RETIRED):
        from executor.service import autostart

        if autostart.enabled(environ) and autostart.ensure(environ, path):
            outcome, answer = client.ask_daemon(path, event, raw, environ, agent)
    return answer if outcome == client.ANSWERED else None


def read_stdin() -> bytes | None:
    """The agent's stdin, one byte past the bound (a larger payload is refused); None when unreadable."""
    if sys.stdin is None:
        return None
    try:
        return sys.stdin.buffer.read(client.MAX_PAYLOAD + 1)
    except (OSError, ValueError):
        return None


def wants_help(args: Sequence[str]) -> bool:
    """Whether ``dispatch`` is asked for help (``--help``, ``-h``, ``--agent help``): nothing to answer."""
    rest = list(args[1:])
    return any(a in ("--help", "-h", "--agent=help") for a in rest) or any(
        a == "--agent" and b == "help" for a, b in itertools.pairwise(rest))


def remote_dispatch(args: Sequence[str]) -> NoReturn:
    """``hookcage dispatch`` with ``$HOOKCAGE_URL`` set: the service's answer, or the fallback."""
    from executor.service import remote_client  # only with HOOKCAGE_URL set: not on a local event

    forward, event, agent = forwardable(args)
    if forward:
        raw = read_stdin()
        try:
            answer = remote_client.remote(event, b"" if raw is None else raw, os.environ, agent=agent)
        except KeyboardInterrupt:
            sys.exit(130)  # as the in-process CLI exits on Ctrl-C
    else:
        answer = remote_client.fallback_answer(
            f"with {client.URL_VAR} set, hookcage dispatch takes [EVENT] [--agent NAME] only, "
            f"not {' '.join(args[1:])[:200]!r}", os.environ)
    client.write_answer(answer)
    sys.exit(answer.exit_code)


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Console-script entry point."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["dispatch"] and os.environ.get(IN_HOOK_VAR):
        from executor import in_hook  # only when set: one module less on every other event

        if in_hook.recursing(os.environ, IN_HOOK_VAR):
            in_hook.refuse_recursion()
    if args[:1] == ["dispatch"] and os.environ.get(client.URL_VAR) and not wants_help(args):
        remote_dispatch(args)
    forward, event, agent = forwardable(args)
    raw: bytes | None = None
    if forward and not os.environ.get(client.URL_VAR):
        raw = read_stdin()  # None: the in-process path reads again and reports it as it always has
        if raw is not None:
            try:
                answer = through_daemon(event, raw, os.environ, agent=agent)
            except KeyboardInterrupt:
                sys.exit(130)  # as the in-process CLI exits on Ctrl-C
            if answer is not None:
                client.write_answer(answer)
                sys.exit(answer.exit_code)
    from executor.launcher import enable_site

    enable_site()  # started by the launcher (python -IS): the in-process CLI needs site-packages
    try:
        from executor.cli import main as cli_main
    except ImportError as exc:
        missing_dependencies(args, exc)
    cli_main(args, stdin=raw)


def missing_dependencies(args: Sequence[str], exc: ImportError) -> NoReturn:
    """The in-process CLI cannot load (hookcage installed without its dependencies): say so in one line."""
    if list(args) in (["--version"], ["-V"]):
        from executor import __version__

        sys.stdout.write(f"hookcage, version {__version__}\n")  # what the CLI prints
        sys.exit(0)
    dispatching = args[:1] == ["dispatch"]
    missing = exc.name or str(exc)
    sys.stderr.write(
        f"hookcage: error: this hookcage cannot run in-process: module {missing!r} is missing "
        "(installed without its dependencies?); here only `hookcage dispatch` with HOOKCAGE_URL works "
        "(see docs/service-client.md)\n")
    fail_closed = os.environ.get("HOOKCAGE_FAIL_CLOSED", "").strip().lower() in ("1", "true", "yes", "on")
    sys.exit(2 if dispatching and fail_closed else 1)


if __name__ == "__main__":
    main()
