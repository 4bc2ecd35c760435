"""``hookcage serve``: answer ``hookcage dispatch`` from a long-lived process; its --status and --stop."""

from __future__ import annotations

import os
from pathlib import Path

import click

from executor.cli.common import CliExit, error


@click.command()
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
            error(f"the hookcage daemon (pid {pid}) is still finishing after {autostart.STOP_WAIT:g} s "
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
