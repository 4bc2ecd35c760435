"""The daemon (``hookcage serve``): ``hookcage dispatch`` without a Python start-up per event.

How this works:

1. :meth:`Daemon.serve` takes a lock next to the socket (one daemon per
   socket), removes a stale socket file (one nobody accepts connections on),
   binds ``$HOOKCAGE_HOME/hookcage.sock`` itself (mode 0600, in a 0700
   directory; uvicorn's own ``uds=`` would make it 0666) and runs a FastAPI
   app on it (:mod:`executor.service.app`) with uvicorn
   (:mod:`executor.service.listener`).
2. The process keeps what is worth keeping between events: the imported
   code, and the sandboxes ``sandbox_factory`` builds (for ``docker``, an
   engine connection and a warm pool of started containers), one per
   sandbox profile, shared by every request and closed when the daemon
   stops, which removes the pool's containers (:mod:`executor.service.sandboxes`). ``host`` sandboxes hold nothing
   and are made per request from the caller's PATH, HOME and LANG, as they
   would be in the caller's own process.
3. Everything that decides a verdict is looked at for every request: the
   settings (the caller's ``HOOKCAGE_*`` variables and the ``config.toml``
   files: :mod:`executor.service.forwarding`), the hook files, the trust store and the allow-list. What was
   parsed is kept by file identity and re-read when the file changed
   (:mod:`executor.filecache`: never stale); image ids are kept while the
   engine reports no image event (:mod:`executor.service.image_ids`); runs
   of the same reviewed bytes share a staged tree
   (:mod:`executor.prepare.staged_trees`), and an executor is closed (its
   staged files given back) after its answer has gone.
4. ``POST /dispatch`` answers through :func:`executor.service.answer.dispatch_bytes`,
   the function ``hookcage dispatch`` runs in-process, so both print the same
   answer, exit with the same code and write the same run log. Where the
   daemon cannot promise that (another installation or version, a path
   relative to the caller's working directory, settings that do not load,
   another Docker engine, an ``--agent`` it does not know), it refuses with
   409 before running anything, and the client answers in-process. The
   answer names the agent dialect it was written in (``--agent``, or the one
   recognised from the payload); the client takes no answer that does not.
5. ``async`` hooks run on the daemon's own threads once the answer is known;
   the daemon waits for them when it stops.
6. A caller that hangs up (an agent that gave up and killed its ``hookcage
   dispatch``) is noticed within :data:`DISCONNECT_POLL` seconds: its
   dispatch is cancelled (:meth:`HookExecutor.abort`: nothing more is judged
   or started, its containers are removed, so its runs end at once and
   their staged files go with them). Runs served by the warm pool are not
   reached and end at their timeout. At start, the daemon removes what
   killed processes left: staging folders (:mod:`executor.prepare.staging`) and
   containers whose owning process is gone (:mod:`executor.sandbox.orphans`).
7. One project cannot starve the daemon: at most :data:`MAX_PER_PROJECT`
   events of one project root are in flight on the socket
   (:data:`REMOTE_PER_PROJECT` on TCP) and :data:`~executor.service.app.MAX_IN_FLIGHT` in all; one
   more is refused at once (:class:`Busy`: 409 and the caller answers
   in-process; 503 on TCP), and a request that finds no worker thread within
   :data:`START_WAIT` seconds is refused too, never left waiting.
8. Its life (:mod:`executor.service.lifetime`): with ``--idle-timeout`` it
   stops once nothing has been in flight that long (the self-started daemon,
   :mod:`executor.service.autostart`). A caller of another version or code
   (``code``: :func:`executor.service.client.code_stamp`) is answered 410
   *retire*, nothing run; so is every caller once the package's files changed
   on disk: the daemon lets go of its socket and its lock at once (a new daemon
   may start on it), finishes what is in flight, removes its pool and exits 0.
   ``POST /stop`` (``hookcage serve --stop``) does the same. A daemon with
   ``--listen`` is never retired by a caller; it logs that its code changed.
9. With ``--listen HOST:PORT`` (:mod:`executor.service.remote`) a second
   uvicorn server in the same loop answers on TCP, behind a bearer token, in
   *remote mode* (:meth:`Daemon.answer_remote`): the service's own settings
   and environment, the caller's project only. The socket's app and answers
   are the same as without it. Both listeners count into one
   :class:`~executor.service.metrics.ServiceMetrics`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from executor import __version__
from executor.config import project_root
from executor.core.hooks import DOCKER_SOCKETS
from executor.core.protocol import AgentAnswer
from executor.dialects import DIALECTS, resolve_dialect
from executor.executor import HookExecutor, SandboxFactory
from executor.prepare import staging
from executor.prepare.staged_trees import StagedTrees
from executor.sandbox.base import Sandbox
from executor.service import client, listener
from executor.service.answer import dispatch_bytes, fail_closed_env, internal_error
from executor.service.app import build_local_app
from executor.service.dispatching import (
    PROTOCOL,
    BadRequest,
    Busy,
    DispatchRequest,
    Refusal,
    RemoteDispatchRequest,
    Retire,
    Watch,
    decode_payload,
)
from executor.service.forwarding import (
    caller_settings,
    host_base_env,
    project_environ,
    remote_environ,
)
from executor.service.keepout import PathRefused, make_fence
from executor.service.lifetime import Lifetime
from executor.service.listener import DaemonError, clear_stale, make_private, take_lock
from executor.service.metrics import ServiceMetrics, agent_label, dispatch_outcome, event_label
from executor.service.sandboxes import SharedSandboxes, pooled_sandbox_factory
from executor.settings import Settings, default_home, load_settings

if TYPE_CHECKING:
    import uvicorn

    from executor.service.remote import RemoteOptions

logger = logging.getLogger("hookcage.daemon")

MAX_PER_PROJECT = 8
"""Dispatches of one project root at once on the socket; one more is refused (409, in-process)."""
REMOTE_PER_PROJECT = 4
"""Dispatches of one project root at once on TCP (half the default ``--max-concurrent``); one
more is refused with 503 and ``Retry-After``."""


# -- the HTTP surface ------------------------------------------------------------------


def _shown_path(path: str) -> str:
    return path if path.isprintable() else repr(path)


class Daemon:
    """The long-lived process behind ``hookcage serve``.

    Args:
        socket_path: where to listen (default ``$HOOKCAGE_HOME/hookcage.sock``).
        sandbox_factory: builds the shared sandboxes (all backends but
            ``host``), once per profile (:data:`~executor.service.sandboxes.SANDBOX_SETTINGS`); by default
            :func:`~executor.service.sandboxes.pooled_sandbox_factory` (docker with a warm pool).
        home: the installation served (default :func:`executor.settings.default_home`).
        async_workers: threads for ``async`` hooks.
    """

    def __init__(
        self,
        socket_path: Path | None = None,
        *,
        sandbox_factory: SandboxFactory = pooled_sandbox_factory,
        home: Path | None = None,
        async_workers: int = 4,
    ) -> None:
        self.home = Path(home) if home is not None else default_home()
        self.socket_path = Path(socket_path) if socket_path is not None else self.home / client.SOCKET_NAME
        self._lock = threading.RLock()
        self.shared = SharedSandboxes(sandbox_factory, self._lock)
        self._trees = StagedTrees()
        self._async = ThreadPoolExecutor(max_workers=async_workers, thread_name_prefix="hookcage-async")
        self._closer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hookcage-close")
        """Closes the executors of answered dispatches (their staged files) after the answer."""
        self._closed = False
        self._lock_fd: int | None = None
        self._socket_inode: int | None = None
        self.remote_task: asyncio.Future[None] | None = None
        """The TCP listener's server (``--listen``): the socket's shutdown waits for it."""
        self._projects: dict[str, int] = {}  # dispatches in flight per project root (fairness)
        self._projects_lock = threading.Lock()
        self._servers: list[uvicorn.Server] = []
        self._retiring: str | None = None
        self._ready_fd: int | None = None
        self.log_file: Path | None = None
        self.lifetime = Lifetime(self.retire)
        self.metrics = ServiceMetrics(pools=self.shared.pool_stats, alive=self.shared.containers_alive)
        self.app = build_local_app(self)

    # -- answering --------------------------------------------------------------------

    def answer(self, request: DispatchRequest, watch: Watch | None = None) -> tuple[AgentAnswer, str]:
        """What ``hookcage dispatch`` would print in the caller's process, and the agent it is for.

        Raises:
            Refusal: the caller must answer in-process; nothing has run yet.
        """
        self.shared.note_event()  # the warm pools refill out of an agent's burst of events
        try:
            return self._answer_local(request, watch)
        except Refusal:
            self.metrics.dispatched("local", agent_label(request.agent), "unknown", "refused", None)
            raise
        finally:
            self.shared.note_event()

    def _answer_local(self, request: DispatchRequest, watch: Watch | None) -> tuple[AgentAnswer, str]:
        self._check_code(request)
        if request.agent is not None and request.agent not in DIALECTS:
            raise Refusal(f"unknown agent {request.agent!r}: the caller's command line reports it")
        env = request.env
        mine = {name: os.environ.get(name, "") for name in client.DOCKER_ENV_VARS}
        if {name: env.get(name, "") for name in client.DOCKER_ENV_VARS} != mine:
            raise Refusal("the caller's Docker engine settings (DOCKER_*) differ from the daemon's")
        settings = caller_settings(env, request.home, self.home)
        raw, payload = decode_payload(request.payload_b64, Refusal)
        agent = resolve_dialect(request.agent, payload).name  # what dispatch_bytes answers in
        environ = project_environ(env, payload, request.cwd)
        with self.project_slot(project_root(payload, environ), MAX_PER_PROJECT):
            return self.run_dispatch(request.event, raw, agent=request.agent, answered_as=agent, settings=settings,
                                     environ=environ, base_env=host_base_env(env), fail_closed=fail_closed_env(env),
                                     watch=watch, listener="local",
                                     event_label=event_label(agent, request.event, payload))

    def _check_code(self, request: DispatchRequest) -> None:
        """Refuse a caller of other code than this daemon's; retire for it when this daemon may be replaced.

        Raises:
            Retire: another version or code stamp, or this daemon's own files changed (it is leaving).
            Refusal: the same, for a daemon that is not replaced by its callers (``--listen``).
        """
        why = None
        if request.version != __version__:
            why = f"the caller is hookcage {request.version}, this daemon {__version__}"
        elif request.code is not None and request.code != self.lifetime.code:
            why = f"the caller runs hookcage from {request.code.split(':')[0]}, this daemon other code"
        elif self.lifetime.code_changed:
            why = "hookcage's files changed on disk since this daemon started"
        if why is None:
            return
        if not self.lifetime.replaceable:
            raise Refusal(why)
        self.retire(why)
        raise Retire(why)

    def retire(self, reason: str) -> None:
        """Leave: let go of the socket and its lock now (a new daemon may start on them), finish what
        is in flight, close the sandboxes (the pool's containers go) and exit 0. Idempotent."""
        with self._lock:
            if self._retiring is not None:
                return
            self._retiring = reason
            inode, self._socket_inode = self._socket_inode, None
            lock_fd, self._lock_fd = self._lock_fd, None
            servers = list(self._servers)
        logger.info("stopping: %s", reason)
        if inode is not None:
            with contextlib.suppress(FileNotFoundError):
                if os.lstat(self.socket_path).st_ino == inode:
                    self.socket_path.unlink()
        if lock_fd is not None:
            os.close(lock_fd)
        for server in servers:
            server.should_exit = True

    def serving(self, *servers: uvicorn.Server) -> None:
        """The uvicorn servers to stop when the daemon retires (one asked to retire before is stopped at once)."""
        with self._lock:
            self._servers = list(servers)
            retiring = self._retiring is not None
        if retiring:
            for server in servers:
                server.should_exit = True

    def answer_remote(self, request: RemoteDispatchRequest, watch: Watch | None = None, *,
                      roots: Sequence[Path] = (), transcript_roots: Sequence[Path] = (),
                      secrets: Sequence[Path] = ()) -> tuple[AgentAnswer, str]:
        """The answer to a remote (TCP) caller: ``hookcage dispatch`` in the service's own environment,
        for the caller's project.

        The service's settings, user scope, Docker engine and host environment
        are its own (the caller's ``HOOKCAGE_*``, ``home``, ``HOME`` and
        ``DOCKER_*`` are ignored); the project comes from the caller
        (:func:`remote_environ`). Another hookcage ``version`` is no reason
        to refuse; another ``protocol`` is. ``roots``: the project directories
        callers may name (``--project-root``; any when empty);
        ``transcript_roots``: where transcripts outside the project may be
        (``--transcript-root``); ``secrets``: files of the service's own (its
        token file, TLS files) no request path may lead to, besides
        :meth:`keep_out`.

        Raises:
            Refusal: nothing has run; the message says why.
            PathRefused: a path of the request is malformed (400) or out of bounds (403); nothing has run.
            BadRequest: ``payload_b64`` is not base64.
        """
        try:
            return self._answer_remote(request, watch, roots, transcript_roots, secrets)
        except (Refusal, PathRefused):
            self.metrics.dispatched("remote", agent_label(request.agent), "unknown", "refused", None)
            raise
        except BadRequest:
            self.metrics.rejected(422)
            raise

    def keep_out(self, secrets: Sequence[Path] = ()) -> list[Path]:
        """What no remote request's path may lead to: the service's home, socket, settings' files,
        cache, the engine's sockets and credentials (``DOCKER_CERT_PATH``, ``~/.docker``), and ``secrets``."""
        from executor.cachedir import cache_dir

        paths = [self.home, self.socket_path, *(Path(path) for path in DOCKER_SOCKETS), *secrets]
        settings: Settings | None = None
        with contextlib.suppress(Exception):  # settings that do not load: dispatch_bytes says so
            settings = load_settings()
            paths += [settings.home, settings.managed_dir, settings.trust_store_file, settings.run_log,
                      settings.state_dir]
            paths += [path for path in (settings.trust_file, settings.log_file) if path is not None]
        with contextlib.suppress(Exception):
            paths.append(cache_dir())
        # The engine's credentials: its unix socket wherever it is, its TLS client files, and the
        # client configuration (registry logins) in ~/.docker.
        engines = [os.environ.get("DOCKER_HOST", ""), getattr(settings, "engine", None) or ""]
        paths += [Path(url[len("unix://"):]) for url in engines if url.startswith("unix://")]
        docker_config = os.environ.get("DOCKER_CONFIG") or os.path.join(os.path.expanduser("~"), ".docker")
        paths += [Path(p) for p in (os.environ.get("DOCKER_CERT_PATH"), docker_config,
                                    os.environ.get("HOOKCAGE_TOKEN_FILE")) if p]
        return paths

    def _answer_remote(self, request: RemoteDispatchRequest, watch: Watch | None, roots: Sequence[Path],
                       transcript_roots: Sequence[Path], secrets: Sequence[Path]) -> tuple[AgentAnswer, str]:
        if request.protocol != PROTOCOL:
            raise Refusal(f"the caller speaks protocol {request.protocol}, this service {PROTOCOL}")
        if request.agent is not None and request.agent not in DIALECTS:
            raise Refusal(f"unknown agent {request.agent!r}; known agents: {', '.join(sorted(DIALECTS))}")
        raw, payload = decode_payload(request.payload_b64, BadRequest)
        dialect = resolve_dialect(request.agent, payload)
        agent = dialect.name
        payloads = [payload]
        with contextlib.suppress(Exception):  # an event it cannot resolve: dispatch_bytes answers that
            payloads.append(dialect.canonical_payload(dialect.resolve_event(request.event, payload), payload))
        fence = make_fence(self.keep_out(secrets), roots, transcript_roots)
        environ, fenced = remote_environ(request.env, payloads, request.cwd, os.environ, fence)
        with self.project_slot(project_root(payload, environ), REMOTE_PER_PROJECT):
            return self.run_dispatch(request.event, raw, agent=request.agent, answered_as=agent, settings=None,
                                     environ=environ, base_env=host_base_env(os.environ),
                                     fail_closed=fail_closed_env(), watch=watch, listener="remote",
                                     event_label=event_label(agent, request.event, payload),
                                     transcripts=fenced.transcripts)

    @contextlib.contextmanager
    def project_slot(self, root: Path, limit: int) -> Iterator[None]:
        """Hold one of ``limit`` places of ``root`` for a dispatch: one project's events (a
        repository whose hooks stall, a flood from one caller) never take every worker.

        Raises:
            Busy: ``limit`` dispatches of ``root`` are in flight already; nothing has run.
        """
        key = str(root)
        with self._projects_lock:
            held = self._projects.get(key, 0)
            if held >= limit:
                raise Busy(f"{held} events of the project {_shown_path(key)} are in flight already "
                           f"(at most {limit} a project at once)")
            self._projects[key] = held + 1
        try:
            yield
        finally:
            with self._projects_lock:
                left = self._projects.pop(key) - 1
                if left:
                    self._projects[key] = left

    def run_dispatch(
        self, event: str | None, raw: bytes, *, agent: str | None, answered_as: str, settings: Settings | None,
        environ: Mapping[str, str], base_env: Mapping[str, str], fail_closed: bool, watch: Watch | None = None,
        listener: str = "local", event_label: str = "unknown", transcripts: Mapping[str, str] | None = None,
    ) -> tuple[AgentAnswer, str]:
        """Answer one event through :func:`dispatch_bytes` with the daemon's shared sandboxes.

        Args:
            event, raw, agent, settings: as :func:`dispatch_bytes` takes them
                (``settings`` None: loaded in this process's environment).
            answered_as: the dialect the answer is written in (named in the reply).
            environ: what the executor reads the project root and agents' files from.
            base_env: what ``host`` hooks start from.
            fail_closed: block (exit 2) on an internal error.
            watch: lets the HTTP handler cancel the dispatch.
            listener, event_label: how the dispatch is counted in the metrics.
            transcripts: remote mode: the only transcripts mounted, each as the
                real file the keep-out judged (None: as in-process).
        """
        factory = self.shared.factory_for(base_env)

        watch = watch or Watch()
        ran: list[Mapping[str, Any]] = []

        def observe(records: Sequence[Mapping[str, Any]]) -> None:
            ran.extend(records)
            self.metrics.records(listener, records)

        def make_executor(settings: Settings) -> HookExecutor:
            executor = HookExecutor(settings, sandbox_factory=factory, environ=environ, cancel=watch.cancel,
                                    on_records=observe, transcripts=transcripts)
            executor.unstage_at_close = True  # closed once the answer is on its way (below)
            executor.staged_trees = self._trees  # runs of the same reviewed bytes share one staged tree
            watch.executors.append(executor)
            return executor

        started = time.monotonic()
        in_flight = self.metrics.in_flight.labels(listener)
        in_flight.inc()
        try:
            with self.lifetime.activity():
                answer, executor = dispatch_bytes(event, raw, agent=agent, settings=settings,
                                                  make_executor=make_executor, environ=environ)
        except Exception as exc:
            # What `hookcage dispatch` prints for a bug (main()); the traceback goes to our log.
            logger.exception("internal error while dispatching")
            code = 2 if fail_closed else 1
            answer, executor = AgentAnswer(code, "", f"hookcage: error: {internal_error(exc)}\n"), None
        finally:
            in_flight.dec()
        outcome = "cancelled" if watch.cancel.is_set() else dispatch_outcome(answer.exit_code, ran)
        self.metrics.dispatched(listener, answered_as, event_label, outcome, time.monotonic() - started)
        if executor is not None:
            # Its staged files are removed (and async hooks run) on another thread: the answer
            # does not wait for the disk.
            if executor.deferred:
                self.lifetime.begin()  # its async hooks keep the daemon awake
                try:
                    self._async.submit(self._run_deferred, executor)
                except RuntimeError:  # stopping: run them here rather than drop them
                    self._run_deferred(executor)
            else:
                try:
                    self._closer.submit(executor.close)
                except RuntimeError:  # stopping: do it here rather than drop it
                    executor.close()
        return answer, answered_as

    def _run_deferred(self, executor: HookExecutor) -> None:
        try:
            executor.run_deferred()
        except Exception:
            logger.exception("async hooks failed")
        finally:
            executor.close()
            self.lifetime.end()

    def shared_sandbox(self, backend: str, settings: Settings) -> Sandbox:
        """The daemon-wide sandbox for a backend and profile, built on first use (:class:`SharedSandboxes`).

        Raises:
            SandboxError: the daemon is stopping, or the factory failed.
        """
        return self.shared.get(backend, settings)

    def sandboxes(self) -> list[dict[str, Any]]:
        """The shared sandboxes built so far, for ``GET /health`` (:meth:`SharedSandboxes.health`)."""
        return self.shared.health()

    def health(self) -> dict[str, Any]:
        """``GET /health`` on the socket (and, with the token, on TCP)."""
        life = self.lifetime
        return {"version": __version__, "code": life.code, "pid": os.getpid(), "home": str(self.home),
                "socket": str(self.socket_path), "sandboxes": self.sandboxes(),
                "started": life.started, "uptime": round(life.uptime(), 3), "idle_timeout": life.idle_timeout,
                "idle": round(life.idle_for(), 3), "requests": life.requests,
                "log_file": str(self.log_file) if self.log_file else None, "retiring": self._retiring}

    # -- the socket -------------------------------------------------------------------

    def listen(self) -> socket.socket:
        """Lock, clear a stale socket file, bind (0600) and listen.

        Raises:
            DaemonError: another daemon serves the socket, or the path is unusable.
        """
        path = self.socket_path
        parent = path.parent
        try:
            return self._listen(path, parent)
        except BaseException:
            if self._lock_fd is not None:
                os.close(self._lock_fd)
                self._lock_fd = None
            raise

    def _listen(self, path: Path, parent: Path) -> socket.socket:
        try:
            parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            make_private(parent)
            self._lock_fd = take_lock(path.with_name(path.name + ".lock"), path)
            clear_stale(path)
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            old = os.umask(0o177)  # never world-connectable, not even for a moment
            try:
                sock.bind(str(path))
            finally:
                os.umask(old)
            os.chmod(path, 0o600)
            self._socket_inode = os.lstat(path).st_ino
            sock.listen(128)
        except OSError as exc:
            raise DaemonError(f"cannot listen on {path}: {exc.strerror or exc}") from exc
        return sock

    def serve(self, *, log_level: str = "info", warm: bool = True, remote: RemoteOptions | None = None,
              idle_timeout: float = 0.0, log_file: Path | None = None, ready_fd: int | None = None) -> None:
        """Listen and answer until SIGTERM or SIGINT (or idle, retired, ``/stop``); then wait for
        requests in flight and close.

        Args:
            log_level: what goes to stderr.
            warm: prepare the docker sandbox first; once answering, sweep what killed processes left (a thread).
            remote: also answer on TCP, in remote mode (:mod:`executor.service.remote`).
            idle_timeout: stop after this many seconds with nothing in flight (0: never).
            log_file: append the log (and stdout, stderr) to this file instead of stderr.
            ready_fd: a descriptor closed once the daemon answers, or when it fails to start (the
                self-start's lock: :mod:`executor.service.autostart`); no hook inherits it.

        Raises:
            DaemonError: another daemon serves the socket, or the path is unusable.
            ServiceConfigError: the TCP options are unusable or the address cannot be bound
                (nothing listens then).
        """
        self._ready_fd = ready_fd
        if ready_fd is not None:
            with contextlib.suppress(OSError):
                os.set_inheritable(ready_fd, False)
        try:
            listener.serve(self, log_level, warm, remote, idle_timeout, log_file, ready=self._ready)
        finally:
            self._ready()

    def _ready(self) -> None:
        """Close the ``ready_fd`` of :meth:`serve` (once: its number may be reused afterwards)."""
        fd, self._ready_fd = self._ready_fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    def close(self) -> None:
        """Wait for ``async`` hooks, close the shared sandboxes (a pool removes its
        containers), remove the socket."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            shared, ids = self.shared.detach()
            inode, self._socket_inode = self._socket_inode, None
            lock_fd, self._lock_fd = self._lock_fd, None
        for kept in ids:
            kept.close()
        self.lifetime.close()
        # Nothing is answered on the socket any more: let go of it first, so the next event starts
        # a new daemon rather than wait for this one's pool to be removed.
        if inode is not None:
            with contextlib.suppress(FileNotFoundError):
                if os.lstat(self.socket_path).st_ino == inode:
                    self.socket_path.unlink()
        if lock_fd is not None:
            os.close(lock_fd)
        self._async.shutdown(wait=True)
        self._closer.shutdown(wait=True)
        self._trees.close()
        for sandbox in shared:
            try:
                sandbox.close()
            except Exception:
                logger.exception("closing a sandbox failed")
        staging.release()  # its owner lock file, once its runs' folders are gone


