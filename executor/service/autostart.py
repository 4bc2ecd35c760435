"""The daemon's life seen from outside: started by the first event, shown and stopped on request.

Standard library only: :mod:`executor.service.client` imports this module when
an event finds no daemon (or one that retired), so it runs in the agent's
``hookcage dispatch`` with nothing else of hookcage loaded.

How the self-start works (:func:`ensure`):

1. The client found nobody on the socket (no file, or a file nobody accepts
   connections on: a killed daemon's), or the daemon there answered *retire*
   (another hookcage version or code: it has let go of the socket and is
   leaving). ``HOOKCAGE_DAEMON=off`` stops here (the caller answers in-process).
2. Take ``$HOOKCAGE_HOME/daemon.start.lock`` (``flock``; a killed holder's lock
   goes with it), waiting at most :data:`START_WAIT` seconds: concurrent first
   events start one daemon, not one each.
3. Under the lock, look again: a daemon of this very code answers ``/health``
   (another event started it meanwhile), or one is alive but not answering yet
   (it holds the socket's own lock, ``hookcage.sock.lock``: starting up): wait
   for it. Otherwise spawn ``<this interpreter> -E -c <boot> <package parent> serve
   --socket PATH --idle-timeout S --log-file $HOOKCAGE_HOME/daemon.log`` in a
   session of its own (stdin ``/dev/null``, stdout and stderr to the log, no other
   descriptor), with the site enabled (it needs hookcage's dependencies) but
   no ``PYTHON*`` variable (``-E``: one project's ``PYTHONPATH`` must not
   follow the daemon into other projects' events), and this very package
   first on its path, so it runs the client's code. The
   daemon inherits the start lock and lets go of it once it answers
   (``--ready-fd``): a caller killed while its daemon starts leaves the lock
   held by that daemon, and the next event waits for it rather than start a second.
4. Wait (bounded) until ``/health`` answers with the client's version and code
   stamp; release the lock. The daemon outlives the agent; it stops after
   ``daemon_idle_timeout`` seconds without an event.

A start that fails (cannot write the home, the daemon exits at once, it does
not answer within :data:`START_WAIT`) is one line on stderr (the agent's debug
log) and the event is answered in-process; a daemon that exited is not tried
again for :data:`RETRY_AFTER` seconds (``daemon.start.failed`` says why).

The code stamp (:func:`executor.service.client.code_stamp`) names the package
by its path and its ``__init__.py``'s identity: one ``stat`` per event. What it
cannot see (an edit of another module in place) the daemon sees itself: it
compares :func:`package_fingerprint` with the one it started with, every few
seconds, and retires when they differ.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
import time

from executor import __version__
from executor.core.envnames import DAEMON_OFF_WORDS, DAEMON_ON_WORDS, PROJECT_DIR_VARS
from executor.service import client

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import TypeVar

    T = TypeVar("T")

SWITCH_VAR = "HOOKCAGE_DAEMON"
"""``auto`` (the default): an event with no daemon starts one; ``off``: never (one that runs is used)."""
IDLE_VAR = "HOOKCAGE_DAEMON_IDLE_TIMEOUT"
DEFAULT_IDLE_TIMEOUT = 1200.0
"""Seconds a self-started daemon waits without an event before it stops (setting ``daemon_idle_timeout``)."""
MAX_IDLE_TIMEOUT = 7 * 86400.0
START_LOCK = "daemon.start.lock"
FAILED_MARK = "daemon.start.failed"
LOG_NAME = "daemon.log"
LOG_MAX = 1024 * 1024
"""Bytes past which the daemon's log is moved to ``daemon.log.1`` when a daemon starts."""
START_WAIT = 15.0
"""Seconds an event waits for a daemon to start (its imports, the engine connection) before
it answers in-process; the daemon goes on starting for the next events."""
RETRY_AFTER = 60.0
"""Seconds after a daemon that exited at start during which no event tries again."""
STOP_WAIT = 60.0
"""Seconds ``hookcage serve --stop`` waits for the daemon to finish (hooks in flight end first)."""
_BOOT = "import sys; sys.path[0] = sys.argv.pop(1); from executor.cli import main; main(sys.argv[1:])"
"""The daemon's ``-c`` program: this package's parent first on the path (not the working directory)."""
_OFF = DAEMON_OFF_WORDS
_ON = DAEMON_ON_WORDS


def enabled(environ: Mapping[str, str]) -> bool:
    """Whether an event may start the daemon: ``$HOOKCAGE_DAEMON``, else the setting ``daemon`` of
    ``$HOOKCAGE_HOME/config.toml``, else of the managed ``config.toml``, is not ``off``.

    Read only when no daemon answered (the files are not opened on the fast path). A value the
    settings would refuse counts as unset here (``hookcage doctor`` names it).
    """
    value = environ.get(SWITCH_VAR, "").strip() or _config_value(environ, "daemon", _switch) or ""
    return value.strip().lower() not in _OFF


def _switch(value: object) -> str | None:
    return value if isinstance(value, str) and value.strip().lower() in (*_OFF, *_ON) else None


def _config_value(environ: Mapping[str, str], key: str, check: Callable[[object], T | None]) -> T | None:
    """``check(value)`` of ``key`` in the first ``config.toml`` where it is valid (``check`` does not
    answer None): the user's (``$HOOKCAGE_HOME``), then the managed one; None when neither has it."""
    import tomllib  # only when no daemon answered

    home = client.default_home(environ)
    managed = os.path.expanduser(environ.get("HOOKCAGE_MANAGED_DIR") or "/etc/hookcage")
    for folder in (home, managed):
        if not folder:
            continue
        try:
            with open(os.path.join(folder, "config.toml"), "rb") as handle:
                found = check(tomllib.load(handle).get(key))
        except (OSError, ValueError):
            continue
        if found is not None:
            return found
    return None


def _say(line: str) -> None:
    """One line on stderr: the agent keeps it in its debug log."""
    try:
        sys.stderr.write(" ".join(f"hookcage: {line}".split())[:600] + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


# -- what the daemon is started with --------------------------------------------------


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds if 0 <= seconds <= MAX_IDLE_TIMEOUT else None


def idle_timeout(environ: Mapping[str, str]) -> float:
    """The setting ``daemon_idle_timeout`` as :class:`executor.settings.Settings` reads it.

    ``$HOOKCAGE_DAEMON_IDLE_TIMEOUT``, else ``$HOOKCAGE_HOME/config.toml``, else the
    managed ``config.toml``, else :data:`DEFAULT_IDLE_TIMEOUT`. A value the settings
    would refuse counts as unset here (``hookcage doctor`` and every in-process call name it).
    """
    value = _number(environ[IDLE_VAR]) if environ.get(IDLE_VAR, "").strip() else None
    if value is not None:
        return value
    found = _config_value(environ, "daemon_idle_timeout", _number)
    return DEFAULT_IDLE_TIMEOUT if found is None else found


def daemon_argv(socket_path: str, idle: float, log: str) -> list[str]:
    """The self-started daemon's command line: this interpreter, this package, ``serve``."""
    import executor

    parent = os.path.dirname(os.path.dirname(os.path.abspath(executor.__file__)))
    # -E: the PYTHON* variables of whichever agent started it (a repository's settings may set
    # them) do not follow the daemon into every later event of other projects.
    return [sys.executable, "-E", "-c", _BOOT, parent, "serve", "--socket", socket_path,
            "--idle-timeout", f"{idle:g}", "--log-file", log]


def daemon_env(environ: Mapping[str, str], home: str) -> dict[str, str]:
    """The daemon's environment: the caller's, without what names one project or agent run.

    It reads every caller's own variables per request; its own ``HOOKCAGE_HOME`` is the caller's.
    """
    drop = {*PROJECT_DIR_VARS, *client.AGENT_ENV_VARS, "HOOKCAGE_IN_HOOK", "HOOKCAGE_SOCKET"}
    env = {name: value for name, value in environ.items() if name not in drop}
    env["HOOKCAGE_HOME"] = home
    return env


def open_log(path: str) -> int:
    """The daemon's log for appending (0600), moved to ``.1`` first when past :data:`LOG_MAX`.

    Raises:
        OSError: it cannot be opened.
    """
    try:
        if os.stat(path).st_size > LOG_MAX:
            os.replace(path, path + ".1")
    except OSError:
        pass
    return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)


# -- the code a daemon runs ----------------------------------------------------------------


def package_fingerprint(package_dir: str | None = None) -> tuple[tuple[str, int, int, int], ...]:
    """Every file of the package (not ``__pycache__``, hidden or ``~`` files) by path, inode, size, mtime.

    A daemon compares it with the one it started with: an upgrade in place or an
    edit of an editable install changes it (about 1 ms for the whole package).
    """
    if package_dir is None:
        import executor

        package_dir = os.path.dirname(os.path.abspath(executor.__file__))
    found: list[tuple[str, int, int, int]] = []
    stack = [package_dir]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            name = entry.name
            if name == "__pycache__" or name.startswith(".") or name.endswith("~"):
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                    continue
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            found.append((entry.path, info.st_ino, info.st_size, info.st_mtime_ns))
    return tuple(sorted(found))


# -- starting one ---------------------------------------------------------------------------


def _same_code(health: Mapping[str, object] | None) -> bool:
    return health is not None and health.get("version") == __version__ and health.get("code") == client.code_stamp()


def _lock(path: str, deadline: float) -> int | None:
    """``path`` opened and locked exclusively, waiting until ``deadline``; None when the time is up.

    Raises:
        OSError: it cannot be opened or locked.
    """
    import fcntl

    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return fd
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    raise
            if time.monotonic() >= deadline:
                os.close(fd)
                return None
            time.sleep(0.02)
    except BaseException:
        with contextlib.suppress(OSError):
            os.close(fd)
        raise


def daemon_alive(socket_path: str) -> int | None:
    """The pid written in the socket's lock (``hookcage.sock.lock``) while a daemon holds it; else None.

    A daemon takes that lock before it binds and keeps it until it has let go of
    the socket: held means one is starting, serving or hung.
    """
    import fcntl

    try:
        fd = os.open(socket_path + ".lock", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            text = os.read(fd, 32).decode("ascii", "replace").strip()
            return int(text) if text.isdigit() else 0
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _recent_failure(mark: str) -> bool:
    try:
        age = time.time() - os.stat(mark).st_mtime
    except OSError:
        return False
    return 0 <= age < RETRY_AFTER


def ensure(environ: Mapping[str, str], socket_path: str) -> bool:
    """Start the daemon for this caller unless one answers; whether one of this code answers now.

    Says one line on stderr when it could not (see the module's docstring);
    never raises, never waits past about :data:`START_WAIT` seconds.
    """
    home = client.default_home(environ)
    if home is None or not enabled(environ):
        return False
    if _recent_failure(os.path.join(home, FAILED_MARK)):
        return False  # said when it failed; in-process until it is tried again
    deadline = time.monotonic() + START_WAIT
    try:
        os.makedirs(home, mode=0o700, exist_ok=True)
        lock = _lock(os.path.join(home, START_LOCK), deadline)
    except OSError as exc:
        _say(f"cannot start the daemon ({exc.strerror or exc} on {exc.filename or home}): answered in-process")
        return False
    if lock is None:
        _say(f"another event has been starting the daemon for {START_WAIT:g} s: answered in-process")
        return False
    try:
        return _start_locked(environ, home, socket_path, deadline, lock)
    finally:
        os.close(lock)


def _start_locked(environ: Mapping[str, str], home: str, socket_path: str, deadline: float, lock: int) -> bool:
    log = os.path.join(home, LOG_NAME)
    while True:
        health = client.health(socket_path, timeout=0.5)
        if _same_code(health):
            return True  # another event started it meanwhile
        alive = daemon_alive(socket_path)
        if alive is None:
            break
        if health is not None:
            _say(f"a daemon of other code (hookcage {health.get('version')}, pid {health.get('pid')}) keeps "
                 f"{socket_path}: answered in-process (hookcage serve --stop ends it)")
            return False
        # One holds the socket (starting, busy, or leaving): never a second one on it.
        if time.monotonic() >= deadline:
            _say(f"the daemon (pid {alive or '?'}) on {socket_path} does not answer (see {log}): "
                 "answered in-process")
            return False
        time.sleep(0.05)
    idle = idle_timeout(environ)
    try:
        out = open_log(log)
    except OSError as exc:
        _say(f"cannot start the daemon ({exc.strerror or exc} on {log}): answered in-process")
        return False
    import subprocess  # only here: its import costs what no answered event should pay

    try:
        os.write(out, f"{time.strftime('%Y-%m-%d %H:%M:%S')} hookcage: started by hookcage dispatch "
                      f"(pid {os.getpid()}): no daemon answered on {socket_path}\n".encode())
        # The daemon holds the start lock too until it answers: a caller killed meanwhile leaves
        # it held, so the next event waits for this daemon instead of starting a second one.
        proc = subprocess.Popen([*daemon_argv(socket_path, idle, log), "--ready-fd", str(lock)],
                                stdin=subprocess.DEVNULL, stdout=out, stderr=out, close_fds=True, pass_fds=(lock,),
                                start_new_session=True, cwd=home, env=daemon_env(environ, home))
    except (OSError, ValueError) as exc:
        _fail(home, f"cannot run {sys.executable or 'the interpreter'} ({getattr(exc, 'strerror', None) or exc})")
        return False
    finally:
        os.close(out)
    answered = _wait_health(socket_path, deadline, proc)
    code = proc.poll()
    if code is None:
        proc.returncode = 0  # never reaped here: it outlives this process (and no ResourceWarning says so)
    if answered:
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(home, FAILED_MARK))
        return True
    if code is not None:
        _fail(home, f"the daemon exited at start (status {code}; see {log})")
    elif client.health(socket_path, timeout=0.5) is not None:
        _say(f"the daemon on {socket_path} runs other code than this hookcage (see {log}): answered in-process")
    else:
        _say(f"the daemon (pid {proc.pid}) is still starting after {START_WAIT:g} s (see {log}): answered in-process")
    return False


def _wait_health(socket_path: str, deadline: float, proc: object) -> bool:
    while True:
        if proc is not None and proc.poll() is not None:  # type: ignore[attr-defined]
            return False
        health = client.health(socket_path, timeout=max(0.05, min(1.0, deadline - time.monotonic())))
        if health is not None:
            return _same_code(health)
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.03)


def _fail(home: str, why: str) -> None:
    """Say why the daemon did not start, and leave it alone for :data:`RETRY_AFTER` seconds."""
    _say(f"{why}: answered in-process (no new try for {RETRY_AFTER:g} s)")
    with contextlib.suppress(OSError):
        fd = os.open(os.path.join(home, FAILED_MARK), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, (why + "\n").encode("utf-8", "replace"))
        finally:
            os.close(fd)


# -- hookcage serve --status / --stop -----------------------------------------------------------


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def status_lines(health: Mapping[str, object], socket_path: str) -> list[str]:
    """``hookcage serve --status``: what a running daemon says of itself, one fact a line."""
    lines = [f"pid: {health.get('pid')}"]
    version = health.get("version")
    same = _same_code(health)
    lines.append(f"version: {version}" + ("" if same else f" (this hookcage is {__version__} at "
                                           f"{client.code_stamp().split(':')[0]}: the next event retires it)"))
    code = health.get("code")
    if isinstance(code, str):
        lines.append(f"code: {code.split(':')[0]}")
    lines.append(f"socket: {health.get('socket') or socket_path}")
    if health.get("log_file"):
        lines.append(f"log: {health['log_file']}")
    uptime = health.get("uptime")
    if isinstance(uptime, int | float):
        lines.append(f"uptime: {_duration(uptime)}")
    idle = health.get("idle_timeout")
    if isinstance(idle, int | float):
        idle_for = health.get("idle")
        since = f" (idle for {_duration(idle_for)})" if isinstance(idle_for, int | float) else ""
        lines.append(f"idle timeout: {'never' if not idle else f'{idle:g} s'}{since}")
    if "requests" in health:
        lines.append(f"requests: {health['requests']}")
    for sandbox in health.get("sandboxes") or []:  # type: ignore[attr-defined]
        if not isinstance(sandbox, dict):
            continue
        pool = sandbox.get("pool")
        shown = ", ".join(f"{k} {v}" for k, v in pool.items()) if isinstance(pool, dict) else "none"
        profile = sandbox.get("profile")
        profile = profile if isinstance(profile, dict) else {}
        lines.append(f"pool ({sandbox.get('backend')}, {profile.get('runtime', '?')}): {shown}")
    if health.get("retiring"):
        lines.append(f"stopping: {health['retiring']}")
    return lines


def _running(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie nobody reaped yet has ended)."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):  # gone, or another user's process has the number now
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rpartition(b")")[2].split()[:1] != [b"Z"]
    except OSError:
        return True  # no /proc: kill(0) said it is there


def stop(socket_path: str, *, wait: float = STOP_WAIT) -> tuple[int | None, bool]:
    """Ask the daemon on ``socket_path`` to stop (``POST /stop``) and wait until its process is gone.

    Returns:
        Its pid (None when nobody answered) and whether it ended within ``wait`` seconds.
    """
    health = client.health(socket_path, timeout=5.0)
    if health is None:
        return None, True
    pid = health.get("pid")
    pid = pid if isinstance(pid, int) else None
    try:
        status, _ = client.exchange(socket_path, "POST", "/stop", b"{}", connect_timeout=5.0, timeout=30.0)
    except (OSError, client.ClientError):
        status = 0
    if status != 200 and pid is not None:
        import signal

        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)  # a daemon without /stop: what systemctl stop does
    deadline = time.monotonic() + wait
    while pid is not None and time.monotonic() < deadline:
        if not _running(pid):
            return pid, True
        time.sleep(0.05)
    return pid, pid is None

