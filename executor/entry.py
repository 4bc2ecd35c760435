"""The ``hookcage`` console script: ``dispatch`` through the daemon when one answers.

An agent spawns ``hookcage dispatch`` for every event, so this path imports
the standard library only (:mod:`executor.service.client`) until it knows the daemon
(``hookcage serve``) cannot answer: then, and for every other command, it
hands over to :func:`executor.cli.main`, with the stdin it already read.
"""

from __future__ import annotations

import os
import sys

from executor.core.envnames import IN_HOOK_VAR
from executor.service import client

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
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


def refuse_recursion() -> NoReturn:
    """A ``hookcage dispatch`` run by a hook (its environment says so) answers at once.

    No configuration can make hookcage call itself: an agent's file whose
    hook routes to hookcage, run on the host, would otherwise loop.
    """
    sys.stdout.write("{}\n")
    sys.stderr.write("hookcage: dispatch called from inside a hook: nothing run (hookcage never calls itself)\n")
    sys.exit(0)


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Console-script entry point."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["dispatch"] and os.environ.get(IN_HOOK_VAR):
        refuse_recursion()
    forward, event, agent = forwardable(args)
    raw: bytes | None = None
    if forward and sys.stdin is not None:
        try:
            raw = sys.stdin.buffer.read(client.MAX_PAYLOAD + 1)  # one more: a larger payload is refused
        except (OSError, ValueError):
            raw = None  # the in-process path reads again and reports it as it always has
        if raw is not None:
            try:
                answer = client.forward(event, raw, os.environ, agent=agent)
            except KeyboardInterrupt:
                sys.exit(130)  # as the in-process CLI exits on Ctrl-C
            if answer is not None:
                client.write_answer(answer)
                sys.exit(answer.exit_code)
    from executor.cli import main as cli_main

    cli_main(args, stdin=raw)


if __name__ == "__main__":
    main()
