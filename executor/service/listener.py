"""Where the daemon listens: its unix socket's file, and uvicorn serving it (with ``--listen``, TCP too).

The daemon binds the socket itself (:meth:`Daemon.listen
<executor.service.daemon.Daemon.listen>`): in a directory of the user's own
(:func:`make_private`), behind a lock beside it that holds the daemon's pid
(:func:`take_lock`: one daemon per socket), once a socket file nobody accepts
connections on is gone (:func:`clear_stale`). :func:`serve` then runs the
socket's app (:mod:`executor.service.app`) with uvicorn; with ``--listen
HOST:PORT`` a second uvicorn server in the same loop answers on TCP
(:mod:`executor.service.remote`), the unix socket's server taking SIGTERM
and SIGINT for both (:func:`linked_servers`).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import logging
import os
import socket
import stat
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, Protocol

import anyio.to_thread

from executor import __version__
from executor.core.protocol import AgentAnswer
from executor.errors import HookcageError
from executor.service import client
from executor.service.dispatching import RemoteDispatchRequest, Watch
from executor.service.lifetime import Lifetime
from executor.service.metrics import ServiceMetrics
from executor.service.sandboxes import SharedSandboxes, sweep
from executor.settings import load_settings

if TYPE_CHECKING:
    import uvicorn

    from executor.service.remote import RemoteOptions

logger = logging.getLogger("hookcage.daemon")


class DaemonError(HookcageError):
    """The daemon cannot start: another one serves the socket, or the path is unusable."""


class Served(Protocol):
    """What :func:`serve` needs of the daemon it runs (:class:`executor.service.daemon.Daemon`),
    the TCP app's questions (:mod:`executor.service.remote`) among them."""

    home: Path
    socket_path: Path
    app: Any
    lifetime: Lifetime
    log_file: Path | None
    remote_task: asyncio.Future[None] | None
    shared: SharedSandboxes
    metrics: ServiceMetrics

    def listen(self) -> socket.socket: ...

    def serving(self, *servers: uvicorn.Server) -> None: ...

    def close(self) -> None: ...

    def health(self) -> dict[str, Any]: ...

    def answer_remote(self, request: RemoteDispatchRequest, watch: Watch | None = None, *,
                      roots: Sequence[Path] = (), transcript_roots: Sequence[Path] = (),
                      secrets: Sequence[Path] = ()) -> tuple[AgentAnswer, str]: ...


def serve(daemon: Served, log_level: str, warm: bool, remote: RemoteOptions | None, idle_timeout: float,
          log_file: Path | None, ready: Callable[[], None]) -> None:
    """What :meth:`Daemon.serve <executor.service.daemon.Daemon.serve>` does: log, listen (and bind
    TCP), warm the sandbox, answer with uvicorn until stopped, then close ``daemon``.

    ``ready`` is called once the socket listens (the self-start's lock goes).
    """
    import uvicorn

    log_format = "hookcage serve: %(levelname)s: %(message)s"
    if log_file is not None:
        from executor.service.autostart import open_log

        daemon.log_file = log_file
        try:
            fd = open_log(str(log_file))
        except OSError as exc:
            raise DaemonError(f"cannot open the log {log_file}: {exc.strerror or exc}") from exc
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        log_format = "%(asctime)s " + log_format
    logging.basicConfig(level=log_level.upper(), format=log_format)
    daemon.lifetime.idle_timeout = idle_timeout
    daemon.lifetime.replaceable = remote is None
    if remote is not None:
        remote.check()
    from executor.sandbox.docker.doctor import refuse_wrong_home_mapping

    refuse_wrong_home_mapping(daemon.home, load_settings().path_map)  # staging is bound from the home
    sock = daemon.listen()
    tcp: socket.socket | None = None
    try:
        if remote is not None:
            tcp = remote.bind()
        sandbox = daemon.shared.warm() if warm else None
        config = uvicorn.Config(daemon.app, log_level=log_level, access_log=False, lifespan="on",
                                http="h11", loop="asyncio", ws="none")
        logger.info("hookcage %s answering on %s (pid %d%s)", __version__, daemon.socket_path, os.getpid(),
                    f", stops after {idle_timeout:g} s idle" if idle_timeout else "")
        daemon.lifetime.start()
        ready()  # listening already: a caller that connects now is answered once uvicorn runs
        if warm:
            threading.Thread(target=sweep, args=(daemon.home, sandbox), name="hookcage-sweep", daemon=True).start()
        if remote is None or tcp is None:
            server = uvicorn.Server(config)
            daemon.serving(server)
            server.run(sockets=[sock])
        else:
            asyncio.run(_serve_both(daemon, config, sock, remote, tcp, log_level))
    finally:
        sock.close()
        if tcp is not None:
            tcp.close()
        daemon.close()


async def _serve_both(daemon: Served, config: uvicorn.Config, sock: socket.socket, remote: RemoteOptions,
                      tcp: socket.socket, log_level: str) -> None:
    """The unix socket (local mode, as without ``--listen``) and TCP (remote mode) in one loop.

    Two uvicorn servers: TLS and the app differ per listener. The unix
    socket's server takes SIGTERM/SIGINT and passes them on; its shutdown
    waits for the TCP server's requests in flight before the sandboxes close.
    """
    import uvicorn

    from executor.service.remote import address_of, build_remote_app

    # Room on the worker threads for every TCP dispatch at once, besides the socket's callers.
    limiter = anyio.to_thread.current_default_thread_limiter()
    limiter.total_tokens = max(limiter.total_tokens, remote.max_concurrent + 40)
    address = address_of(tcp, remote.tls)
    app = build_remote_app(daemon, remote, address)
    tcp_config = uvicorn.Config(app, log_level=log_level, access_log=False, lifespan="off",
                                http="h11", loop="asyncio", ws="none", **remote.uvicorn_ssl())
    local, tcp_server = linked_servers(config, tcp_config)
    daemon.serving(local, tcp_server)
    daemon.remote_task = asyncio.ensure_future(tcp_server.serve(sockets=[tcp]))

    failed: list[str] = []

    def ended(task: asyncio.Future[None]) -> None:
        if not local.should_exit:  # not asked to stop: the TCP listener died on its own
            error = None if task.cancelled() else task.exception()
            failed.append(f"the TCP listener on {address} stopped: {error or 'cancelled'}")
            logger.error("%s", failed[-1])
            local.should_exit = True

    daemon.remote_task.add_done_callback(ended)
    logger.info("hookcage %s answering on %s (remote mode, bearer token required)", __version__, address)
    if not remote.project_roots:
        logger.warning("no --project-root: a TCP caller may name any directory this service can read as its "
                       "project, outside its own files (docs/service.md#every-path-a-request-names)")
    await local.serve(sockets=[sock])
    if failed:
        raise DaemonError(failed[0])  # exit 1, not the 0 of a requested stop


def linked_servers(config: uvicorn.Config, tcp_config: uvicorn.Config) -> tuple[uvicorn.Server, uvicorn.Server]:
    """The unix socket's server (it takes SIGTERM/SIGINT and passes them on) and the TCP listener's."""
    import uvicorn

    class Follower(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield  # the leader's

    class Leader(uvicorn.Server):
        def __init__(self, config: uvicorn.Config, follower: uvicorn.Server) -> None:
            super().__init__(config)
            self.follower = follower

        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            super().handle_exit(sig, frame)
            self.follower.handle_exit(sig, frame)

    follower = Follower(tcp_config)
    return Leader(config, follower), follower


def make_private(folder: Path) -> None:
    """Make the socket's directory 0700 (refusing one that is shared or someone else's)."""
    info = os.stat(folder)
    if info.st_uid != os.geteuid():
        raise DaemonError(f"{folder} belongs to another user: the socket needs a directory of yours")
    if info.st_mode & 0o077:
        if info.st_mode & (stat.S_ISVTX | stat.S_IWOTH):
            raise DaemonError(f"{folder} is shared with other users: put the socket in a directory of its own")
        os.chmod(folder, 0o700)
        logger.info("made %s private (0700)", folder)


def take_lock(lock_path: Path, path: Path) -> int:
    """Hold an exclusive lock for the daemon's lifetime (one daemon per socket)."""
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        holder = os.read(fd, 32).decode("ascii", "replace").strip() or "?"
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            raise DaemonError(f"another hookcage daemon (pid {holder}) is serving {path}") from None
        raise
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


def clear_stale(path: Path) -> None:
    """Remove a socket file nobody accepts connections on; refuse if someone does."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(info.st_mode):
        raise DaemonError(f"{path} exists and is not a socket: refusing to replace it")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(str(path))
    except (ConnectionRefusedError, FileNotFoundError):
        os.unlink(path)  # left by a daemon that was killed
        logger.info("removed stale socket %s", path)
        return
    except OSError:
        pass  # busy (timed out): someone is there
    finally:
        probe.close()
    running = client.health(str(path))
    pid = running.get("pid") if running else "?"
    raise DaemonError(f"another hookcage daemon (pid {pid}) answers on {path}")
