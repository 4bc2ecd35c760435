"""The ``hookcage`` command line: a thin shell over :class:`HookExecutor`.

Each command builds the library objects, calls them and prints. Library
errors become one line on stderr (``hookcage: error: ...``), never a
traceback. ``hookcage dispatch`` is what an agent runs: whatever goes wrong,
it answers in the hook protocol (exit 1 = non-blocking error, or exit 2 =
block when ``HOOKCAGE_FAIL_CLOSED=1``).

One module per command (or command group) in this package; the root group
imports a command's module only when that command is invoked, so ``hookcage
dispatch`` does not pay for ``hookcage image build``. ``hookcage --help``
lists the commands from :data:`COMMANDS` and imports none of them (a unit
test keeps each summary there equal to its command's help). What the
commands share is in :mod:`executor.cli.common`.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

import click

from executor import __version__
from executor.cli.common import CliExit, Invocation, error
from executor.errors import HookcageError
from executor.service.answer import fail_closed_env, internal_error

COMMANDS: dict[str, tuple[str, str]] = {
    "allow": ("allow", "Add a command to the bash allow-list (the user's config.toml)."),
    "demo": ("demo", "Run a sample agent session against a repository with hostile hooks."),
    "dispatch": ("dispatch", "Answer one agent event: run its matching hooks, print the folded verdict."),
    "doctor": ("doctor", "Check what hookcage needs: engine, image, limits, runtimes; say how to fix what is missing."),
    "gc": ("gc", "Remove what killed runs left: containers whose run is over, staging folders."),
    "home": ("home", 'See and clear the persistent homes of hooks with "sandbox": {"home": "persistent"}.'),
    "image": ("image", "Build and inspect the runner image."),
    "install": ("install",
                "Take an agent over: it stops running repositories' hooks itself and routes every event here."),
    "list": ("list_hooks", "List every configured hook, its agent, scope and file, and whether it would run."),
    "report": ("report", "Turn the run log into a CI report: a Markdown table, JUnit XML or JSON, on stdout."),
    "run": ("run", "Run one command in the sandbox profile, stdin passed through, exit code returned."),
    "serve": ("serve", "Answer `hookcage dispatch` from a long-lived process (saves start-up on every event)."),
    "setup": ("setup", "Register what hookcage can use with this machine's engine (installs nothing)."),
    "trust": ("trust", "Review the project's hooks and trust them (trust on first use)."),
    "uninstall": ("install", "Put back every file `hookcage install AGENT` changed, byte for byte."),
    "validate": ("validate", "Check hook files; print each problem with its agent, file and JSON path."),
}
"""Each command's name -> (the module of this package that defines it, the first paragraph of its help).

``hookcage --help`` sorts them and shortens each summary as click shortens a
command's help, without importing the module.
"""


NO_ARGS_IS_HELP: Any = getattr(click.exceptions, "NoArgsIsHelpError", ())
"""What click raises (8.2 on; 8.1 prints the help itself) for a group run with no command: its help as is, not
as a one-line error."""


class LazyGroup(click.Group):
    """A click group whose commands are imported by name when one is invoked; its help imports none.

    Args:
        lazy_commands: command name -> (the module defining it (under ``package``):
            a module-level click command with that name; the first paragraph of
            its help, which the group's help lists).
        package: the package the modules are in.
    """

    def __init__(self, *args: Any, lazy_commands: Mapping[str, tuple[str, str]], package: str,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_commands = dict(lazy_commands)
        self.package = package

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy_commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy_commands:
            self.add_command(self._load(cmd_name))
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The ``Commands`` section as click writes it, a command not imported yet by its summary."""
        commands = [(name, self.commands.get(name) or click.Command(name, help=self.lazy_commands[name][1]))
                    for name in self.list_commands(ctx)]
        commands = [(name, command) for name, command in commands if not command.hidden]
        if commands:
            limit = formatter.width - 6 - max(len(name) for name, _ in commands)  # as click.Group's
            with formatter.section("Commands"):
                formatter.write_dl([(name, command.get_short_help_str(limit)) for name, command in commands])

    def _load(self, name: str) -> click.Command:
        module = importlib.import_module(f"{self.package}.{self.lazy_commands[name][0]}")
        for command in vars(module).values():
            if isinstance(command, click.Command) and command.name == name:
                return command
        raise RuntimeError(f"{module.__name__} defines no click command {name!r}")


@click.group(
    cls=LazyGroup, lazy_commands=COMMANDS, package=__name__,
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
        cli.main(args=args, prog_name="hookcage", standalone_mode=False, obj=Invocation(stdin))
        code = 0
    except CliExit as exc:
        code = exc.code
    except click.exceptions.Abort:
        click.echo("hookcage: aborted", err=True)
        code = 1
    except click.ClickException as exc:
        if isinstance(exc, NO_ARGS_IS_HELP):  # `hookcage`, `hookcage image`: the group's help, as it is
            click.echo(exc.format_message(), err=True)
        else:
            error(exc.format_message())
        # An agent reads exit 2 as "block": usage errors block only when fail-closed.
        code = 2 if (dispatching and fail_closed_env()) or reporting else 1
    except HookcageError as exc:
        error(str(exc))
        code = 2 if reporting else 1
    except KeyboardInterrupt:
        code = 130
    except Exception as exc:
        if os.environ.get("HOOKCAGE_DEBUG"):
            raise
        error(internal_error(exc))
        code = 2 if (dispatching and fail_closed_env()) or reporting else 1
    sys.exit(code)
