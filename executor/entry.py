"""The ``hookcage`` console script: ``dispatch`` through the daemon when one answers.

An agent spawns ``hookcage dispatch`` for every event, so this path imports
the standard library only (:mod:`executor.client`) until it knows the daemon
(``hookcage serve``) cannot answer: then, and for every other command, it
hands over to :func:`executor.cli.main`, with the stdin it already read.
"""

from __future__ import annotations

import os
import sys

from executor import client

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import NoReturn


def forwardable(args: Sequence[str]) -> tuple[bool, str | None]:
    """Whether ``args`` are a plain ``dispatch [EVENT]`` the daemon can answer, and the EVENT.

    Anything else (options, ``--help``, extra arguments) is left to the
    in-process CLI, which owns usage errors and reads stdin only when it must.
    """
    if not args or args[0] != "dispatch" or len(args) > 2:
        return False, None
    if len(args) == 2:
        if args[1].startswith("-"):
            return False, None
        return True, args[1]
    return True, None


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Console-script entry point."""
    args = list(sys.argv[1:] if argv is None else argv)
    forward, event = forwardable(args)
    raw: bytes | None = None
    if forward and sys.stdin is not None:
        try:
            raw = sys.stdin.buffer.read(client.MAX_PAYLOAD)
        except (OSError, ValueError):
            raw = None  # the in-process path reads again and reports it as it always has
        if raw is not None:
            try:
                answer = client.forward(event, raw, os.environ)
            except KeyboardInterrupt:
                sys.exit(130)  # as the in-process CLI exits on Ctrl-C
            if answer is not None:
                client.write_answer(answer)
                sys.exit(answer.exit_code)
    from executor.cli import main as cli_main

    cli_main(args, stdin=raw)


if __name__ == "__main__":
    main()
