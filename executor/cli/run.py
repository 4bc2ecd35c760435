"""``hookcage run``: one command in the sandbox profile, stdin passed through, exit code returned."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

import click

from executor.cli.common import CliExit, project_option
from executor.service.answer import MAX_PAYLOAD


def _parse_env_pairs(pairs: Sequence[str]) -> dict[str, str]:
    env = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise click.BadParameter(f"{pair!r} is not NAME=VALUE", param_hint="--env")
        env[name] = value
    return env


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
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
@project_option
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
