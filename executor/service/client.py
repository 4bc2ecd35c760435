"""The client side of ``hookcage serve``: forward one ``hookcage dispatch``.

Two ways to reach the service:

- **local** (the default): the daemon's unix socket, same user, same
  machine; whenever it cannot answer, the caller answers in-process.
- **remote** (``$HOOKCAGE_URL`` set, e.g. an agent in another container):
  TCP, or TLS for ``https://``, with ``Authorization: Bearer $HOOKCAGE_TOKEN``;
  never in-process: when the service cannot answer, the caller blocks
  (``HOOKCAGE_ON_ERROR=deny``, the default) or lets the event through
  (``allow``), saying so in one line on stderr.

Standard library only, and only the cheap parts of it (``_json`` through
:mod:`executor.service.wirejson`, ``os``, ``_socket``, ``_thread``, ``sys``, ``binascii``; ``ssl`` for ``https://`` only):
this module is imported by every event an agent sends, so each import is
paid on every tool call, and an agent's container may hold hookcage installed
without its dependencies (``pip install --no-deps``). ``http.client`` alone
costs more start-up than the rest together (it pulls in ``email`` and
``ssl``), so the one HTTP/1.1 exchange is spoken by hand; the server is our
own (uvicorn), and anything that is not exactly the answer we expect counts
as "no answer". ``socket.py`` is skipped too: it builds enums of every
constant and imports ``selectors`` at import time (about 4 ms measured, on a
path whose whole budget is 60 ms); its C core ``_socket`` has all we use.

How the local path works:

1. :func:`socket_path` finds the socket: ``$HOOKCAGE_SOCKET``, else
   ``$HOOKCAGE_HOME/hookcage.sock``, else the platform's config directory
   (what ``platformdirs`` gives the settings) ``/hookcage.sock``.
2. :func:`encode_request` puts the event, the ``--agent`` name (None when
   not given), the agent's stdin bytes (base64), the caller's environment
   that can change a verdict (:func:`forwarded_env`), the hookcage home the
   caller would use and its working directory in one JSON body.
3. :func:`ask_daemon` connects (0.2 s), sends ``POST /dispatch``, waits for the
   answer (``$HOOKCAGE_CLIENT_TIMEOUT``, default 600 s) and returns it. With no
   daemon on the socket (no file, nobody listening) or one that answers
   *retire* (410: another version or code, leaving), the caller
   (:func:`executor.entry.through_daemon`) starts one (:mod:`executor.service.autostart`,
   which uses this module; not with ``HOOKCAGE_DAEMON=off``) and asks again.
   No answer (``None``) means the caller must answer in-process
   instead: no daemon after all, a socket owned by someone else, a refusal (409:
   the daemon cannot promise the in-process answer, e.g. another Docker
   engine or an agent it does not know), an answer that does not name the agent's
   dialect it was written in (a daemon that predates dialects), a closed
   connection, or anything unexpected.

How the remote path works (:func:`remote`):

1. :func:`parse_url` reads ``$HOOKCAGE_URL`` (``http(s)://HOST[:PORT][/PREFIX]``),
   :func:`remote_token` the token (``$HOOKCAGE_TOKEN``, else the first line of
   ``$HOOKCAGE_TOKEN_FILE``).
2. :func:`encode_remote_request` builds the same body with ``"protocol": 1``
   and, of the environment, only the project-dir variables: the service
   uses its own settings, home and engine, and nothing else of the caller's
   is sent (no ``HOOKCAGE_*`` variable, so never the token).
3. :func:`remote_exchange` resolves and connects within
   ``$HOOKCAGE_CONNECT_TIMEOUT`` (default 5 s; name resolution included,
   on a thread of its own), completes TLS when asked, sends ``POST
   PREFIX/dispatch`` and waits for the whole answer within
   ``$HOOKCAGE_CLIENT_TIMEOUT``.
4. Anything but a verdict (refused, unresolvable, timed out, 401, 409, 413,
   5xx, closed mid-answer, garbage) is a :class:`ClientError` whose message
   is the reason, and :func:`fallback_answer` turns it into the
   ``HOOKCAGE_ON_ERROR`` answer (``HOOKCAGE_FAIL_CLOSED=1`` forces deny).
   No message ever holds the token.
"""

from __future__ import annotations

import _socket
import _thread
import binascii
import os
import stat
import sys
import time

from executor import __version__
from executor.core.envnames import AGENT_CONFIG_VARS, PROJECT_DIR_VARS
from executor.service import wirejson as json  # json's own import costs ~7 ms (re, enum) per event

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

SOCKET_NAME = "hookcage.sock"
"""The daemon's socket, in ``$HOOKCAGE_HOME``."""
MAX_PAYLOAD = 256 * 1024 * 1024
"""Bytes of stdin accepted, as ``hookcage dispatch`` in-process accepts them (one more is read: a larger payload is refused)."""
CONNECT_TIMEOUT = 0.2
"""Seconds to reach the daemon; a unix socket answers at once or not at all."""
DEFAULT_TIMEOUT = 600.0
"""Seconds to wait for the answer once the request is sent (hooks run meanwhile)."""
REMOTE_CONNECT_TIMEOUT = 5.0
"""Seconds to resolve, reach (and, for https, shake hands with) a remote service."""
PROTOCOL = 1
"""The remote request's ``protocol``: a service that speaks another refuses (409)."""
URL_VAR = "HOOKCAGE_URL"
"""Set: ``hookcage dispatch`` asks the service there and never answers in-process."""
TOKEN_VARS = ("HOOKCAGE_TOKEN", "HOOKCAGE_TOKEN_FILE")
"""Where the bearer token comes from, in this order (never forwarded in a body)."""
ON_ERROR_VALUES = ("deny", "allow")
BASE_ENV_VARS = ("PATH", "HOME", "LANG")
"""What a ``host`` hook inherits from the caller (``executor.sandbox.host.default_base_env``)."""
DOCKER_ENV_VARS = ("DOCKER_HOST", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH")
"""What picks the Docker engine (docker-py's ``kwargs_from_env``)."""
AGENT_ENV_VARS = ("CLAUDE_ENV_FILE",)
"""What the agent hands its hooks (the environment file SessionStart hooks append to)."""
_MAX_HEAD = 64 * 1024
_MAX_BODY = 64 * 1024 * 1024


class ClientError(Exception):
    """The daemon did not give a usable answer (the caller answers in-process)."""


class Answer:
    """The daemon's answer: what ``hookcage dispatch`` prints and its exit code."""

    __slots__ = ("exit_code", "stderr", "stdout")

    def __init__(self, exit_code: int, stdout: str, stderr: str) -> None:
        self.exit_code = exit_code
        self.stdout = stdout
        self.stderr = stderr

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Answer):
            return NotImplemented
        return (self.exit_code, self.stdout, self.stderr) == (other.exit_code, other.stdout, other.stderr)

    def __hash__(self) -> int:
        return hash((self.exit_code, self.stdout, self.stderr))

    def __repr__(self) -> str:
        return f"Answer({self.exit_code!r}, {self.stdout!r}, {self.stderr!r})"


# -- where the daemon is -------------------------------------------------------


def default_home(environ: Mapping[str, str], platform: str = sys.platform) -> str | None:
    """The hookcage home the settings would use for this environment; None when unsure.

    ``$HOOKCAGE_HOME`` (``~`` expanded), else ``platformdirs.user_config_dir("hookcage")``
    re-done by hand: ``$XDG_CONFIG_HOME`` when it is absolute, else
    ``~/.config`` (Linux) or ``~/Library/Application Support`` (macOS).
    """
    home = environ.get("HOOKCAGE_HOME")
    if home:
        return os.path.expanduser(home)
    if platform in ("win32", "cygwin") or "HOOKCAGE_HOME" in environ:
        return None
    xdg = environ.get("XDG_CONFIG_HOME", "")
    if xdg.startswith("/"):
        return os.path.join(xdg, "hookcage")
    user_home = environ.get("HOME")
    if user_home is None:
        import pwd  # what os.path.expanduser falls back to, as platformdirs does

        user_home = pwd.getpwuid(os.getuid()).pw_dir
    elif not user_home.startswith("/"):
        # platformdirs then asks the password database instead of HOME; a guess
        # that differs would be another home, so leave this case in-process.
        return None
    base = "/Library/Application Support" if platform == "darwin" else "/.config"
    return user_home.rstrip("/") + base + "/hookcage"


def socket_path(environ: Mapping[str, str]) -> str | None:
    """The daemon's socket for this environment (``$HOOKCAGE_SOCKET`` first); None when unknown."""
    explicit = environ.get("HOOKCAGE_SOCKET")
    if explicit:
        return os.path.expanduser(explicit)
    home = default_home(environ)
    return os.path.join(home, SOCKET_NAME) if home else None


def forwarded_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The part of the caller's environment a verdict can depend on.

    Every ``HOOKCAGE_*`` variable (settings are read from them, in any
    letter case), the project-dir variables, what a ``host`` hook inherits
    (PATH, HOME, LANG), what picks the Docker engine and the agent's
    ``CLAUDE_ENV_FILE``.
    """
    keep = {*PROJECT_DIR_VARS, *BASE_ENV_VARS, *DOCKER_ENV_VARS, *AGENT_ENV_VARS, *AGENT_CONFIG_VARS}
    return {
        name: value for name, value in environ.items()
        if name in keep or (name.upper().startswith("HOOKCAGE_") and name.upper() not in TOKEN_VARS)
    }


# -- the request and the answer -------------------------------------------------


def encode_request(
    event: str | None, raw: bytes, environ: Mapping[str, str], cwd: str | None, agent: str | None = None
) -> bytes:
    """The JSON body of ``POST /dispatch``."""
    body = {
        "version": __version__,
        "code": code_stamp(),
        "event": event,
        "agent": agent,
        "payload_b64": binascii.b2a_base64(raw, newline=False).decode("ascii"),
        "env": forwarded_env(environ),
        "home": default_home(environ),
        "cwd": cwd,
    }
    return json.dumps(body).encode("utf-8")


def decode_answer(status: int, body: bytes, agent: str | None = None) -> Answer:
    """The daemon's answer from a ``/dispatch`` response.

    Args:
        status: the HTTP status.
        body: the response body.
        agent: the ``--agent`` asked for (None: the daemon recognised it).

    Raises:
        ClientError: not a 200 with ``{"exit_code": int, "stdout": str, "stderr": str,
            "agent": str}``, or answered for another agent than the one asked for.
    """
    if status != 200:
        raise ClientError(f"the daemon answered HTTP {status}: {body[:200]!r}")
    try:
        data = json.loads(body)
    except ValueError as exc:
        raise ClientError("the daemon's answer is not JSON") from exc
    if not isinstance(data, dict):
        raise ClientError("the daemon's answer is not a JSON object")
    code, out, err = data.get("exit_code"), data.get("stdout"), data.get("stderr")
    if type(code) is not int or not 0 <= code <= 255 or not isinstance(out, str) or not isinstance(err, str):
        raise ClientError("the daemon's answer lacks exit_code, stdout or stderr")
    answered_as = data.get("agent")
    if not isinstance(answered_as, str) or (agent is not None and answered_as != agent):
        # A daemon that predates dialects would answer every agent in Claude Code's.
        raise ClientError(f"the daemon answered as agent {answered_as!r}, not {agent or 'recognised'!r}")
    return Answer(code, out, err)


def _request_head(method: str, target: str, length: int) -> bytes:
    return (
        f"{method} {target} HTTP/1.1\r\nHost: hookcage\r\nUser-Agent: hookcage/{__version__}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {length}\r\nConnection: close\r\n\r\n"
    ).encode("ascii")


def parse_response(data: bytes) -> tuple[int, bytes] | None:
    """Status and body of a complete HTTP/1.1 response; None while more bytes are needed.

    Raises:
        ClientError: the bytes are not an HTTP/1.1 response with a Content-Length.
    """
    end = data.find(b"\r\n\r\n")
    if end < 0:
        if len(data) > _MAX_HEAD:
            raise ClientError("response head too large")
        return None
    lines = data[:end].decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        raise ClientError(f"not an HTTP response: {lines[0][:80]!r}")
    length: int | None = None
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep:
            raise ClientError("malformed response header")
        name = name.strip().lower()
        if name == "transfer-encoding":
            raise ClientError("unexpected transfer-encoding")
        if name == "content-length":
            value = value.strip()
            if not value.isdigit() or (length is not None and int(value) != length):
                raise ClientError("bad content-length")
            length = int(value)
    if length is None or length > _MAX_BODY:
        raise ClientError("response without a usable content-length")
    body = data[end + 4:]
    if len(body) < length:
        return None
    return int(parts[1]), body[:length]


def exchange(
    path: str, method: str, target: str, body: bytes, *, connect_timeout: float, timeout: float
) -> tuple[int, bytes]:
    """One HTTP request over the unix socket at ``path``; the status and body.

    Raises:
        OSError: the socket is missing, refuses, times out or breaks (``TimeoutError``
            included).
        ClientError: the connection closed before a whole response, or it is not HTTP.
    """
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(connect_timeout)
        sock.connect(path)
        return converse(sock, _request_head(method, target, len(body)) + body, timeout)
    finally:
        sock.close()


def converse(sock: Any, request: bytes, timeout: float) -> tuple[int, bytes]:
    """Send ``request`` on a connected socket and read one whole response within ``timeout`` seconds.

    Raises:
        OSError: the connection breaks or the time is up (``TimeoutError``).
        ClientError: the connection closed before a whole response, or it is not HTTP.
    """
    deadline = time.monotonic() + timeout
    sock.settimeout(timeout)
    try:
        sock.sendall(request)
    except OSError as exc:
        # A server may answer before it has read the whole body (413 on Content-Length) and
        # close: the answer may still be there to read, and says more than a reset.
        answer = _answer_left(sock, deadline)
        if answer is None:
            raise exc from None
        return answer
    data = b""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("timed out")
        sock.settimeout(left)
        chunk = sock.recv(256 * 1024)
        if not chunk:
            # The service went away (killed, restarted) before answering in full.
            raise ClientError("the connection closed before the answer was complete")
        data += chunk
        response = parse_response(data)
        if response is not None:
            return response


def _answer_left(sock: Any, deadline: float) -> tuple[int, bytes] | None:
    """A whole response already received on a connection that broke while sending; None without one."""
    data = b""
    try:
        while (left := deadline - time.monotonic()) > 0:
            sock.settimeout(min(left, 1.0))
            chunk = sock.recv(256 * 1024)
            if not chunk:
                break
            data += chunk
            if (response := parse_response(data)) is not None:
                return response
    except (OSError, ClientError):
        pass
    return None


def _timeout(environ: Mapping[str, str]) -> float:
    try:
        value = float(environ.get("HOOKCAGE_CLIENT_TIMEOUT") or DEFAULT_TIMEOUT)
    except ValueError:
        return DEFAULT_TIMEOUT
    return value if 0 < value <= 7 * 86400 else DEFAULT_TIMEOUT


def code_stamp() -> str:
    """This hookcage's code, as the daemon must match it: ``PACKAGE_DIR:INODE:SIZE:MTIME_NS`` of
    ``executor/__init__.py`` (one ``stat`` per event; the daemon watches its other files itself)."""
    import executor

    init = os.path.abspath(executor.__file__ or "")
    try:
        info = os.stat(init)
    except OSError:
        return f"{os.path.dirname(init)}:?"
    return f"{os.path.dirname(init)}:{info.st_ino}:{info.st_size}:{info.st_mtime_ns}"


ANSWERED, ABSENT, RETIRED, IN_PROCESS = "answered", "absent", "retired", "in-process"
"""What asking the daemon came to (:func:`ask_daemon`)."""
RETIRE_STATUS = 410
"""The daemon's answer to a caller of another version or code: it has let go of its socket and is
leaving; nothing has run. The caller starts the daemon of its own code (:mod:`executor.service.autostart`)."""


def ask_daemon(
    path: str, event: str | None, raw: bytes, environ: Mapping[str, str], agent: str | None
) -> tuple[str, Answer | None]:
    """One ``POST /dispatch`` on the socket at ``path``: what it came to, and the answer when there is one.

    :data:`ABSENT`: no socket file, or nobody accepts connections on it (a killed
    daemon's); :data:`RETIRED`: the daemon there is of other code and is leaving;
    :data:`IN_PROCESS`: anything else that is not a verdict (a refusal, a socket of
    someone else, a connection closed mid-answer, no answer in time).
    """
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return ABSENT, None
    except OSError:
        return IN_PROCESS, None
    if not (stat.S_ISSOCK(info.st_mode) and info.st_uid == os.geteuid()):
        return IN_PROCESS, None  # never talk to someone else's socket, nor replace a file that is not one
    try:
        cwd: str | None = os.getcwd()
    except OSError:
        cwd = None
    try:
        body = encode_request(event, raw, environ, cwd, agent)
    except ValueError:  # a lone surrogate in the environment (not UTF-8 encodable)
        return IN_PROCESS, None
    try:
        status, answer = exchange(path, "POST", "/dispatch", body,
                                  connect_timeout=CONNECT_TIMEOUT, timeout=_timeout(environ))
    except (ConnectionRefusedError, FileNotFoundError):
        return ABSENT, None  # nothing has been sent: nobody there
    except (OSError, ClientError):
        return IN_PROCESS, None
    if status == RETIRE_STATUS:
        return RETIRED, None
    try:
        return ANSWERED, decode_answer(status, answer, agent)
    except ClientError:
        return IN_PROCESS, None


def health(path: str, *, timeout: float = 1.0) -> dict[str, object] | None:
    """The daemon's ``/health`` answer at ``path``; None when nobody answers there like a daemon."""
    try:
        status, body = exchange(path, "GET", "/health", b"", connect_timeout=timeout, timeout=timeout)
        data = json.loads(body) if status == 200 else None
    except (OSError, ClientError, ValueError):
        return None
    return data if isinstance(data, dict) and "pid" in data else None


def write_answer(answer: Answer) -> None:
    """Print an answer as ``hookcage dispatch`` does: stdout, then stderr, then flush."""
    if answer.stdout:
        sys.stdout.write(answer.stdout)
    if answer.stderr:
        sys.stderr.write(answer.stderr)
    sys.stdout.flush()
    sys.stderr.flush()


# -- the remote service: HOOKCAGE_URL ---------------------------------------------------


class Remote:
    """Where a remote service answers: ``http(s)://HOST[:PORT][/PREFIX]``, parsed."""

    __slots__ = ("host", "port", "prefix", "scheme")

    def __init__(self, scheme: str, host: str, port: int, prefix: str) -> None:
        self.scheme = scheme
        self.host = host
        self.port = port
        self.prefix = prefix

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Remote):
            return NotImplemented
        return (self.scheme, self.host, self.port, self.prefix) == (other.scheme, other.host, other.port, other.prefix)

    def __hash__(self) -> int:
        return hash((self.scheme, self.host, self.port, self.prefix))

    def __repr__(self) -> str:
        return f"Remote({self.scheme!r}, {self.host!r}, {self.port!r}, {self.prefix!r})"

    @property
    def authority(self) -> str:
        """``HOST:PORT`` as a ``Host`` header writes it (an IPv6 address in brackets)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    def __str__(self) -> str:
        return f"{self.scheme}://{self.authority}{self.prefix}"


_DEFAULT_PORTS = {"http": 80, "https": 443}
_HOST_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._")
_PATH_CHARS = _HOST_CHARS | frozenset("/~!$&'()*+,;=:@%")


def parse_url(url: str) -> Remote:
    """The service's address from ``$HOOKCAGE_URL``.

    Raises:
        ClientError: not ``http(s)://HOST[:PORT][/PREFIX]``; the message never
            repeats the value (it may hold a secret pasted by mistake).
    """
    usage = "HOOKCAGE_URL must look like http(s)://HOST[:PORT][/PREFIX]"
    scheme, sep, rest = url.strip().partition("://")
    scheme = scheme.lower()
    if not sep or scheme not in _DEFAULT_PORTS:
        raise ClientError(f"{usage}: the scheme must be http or https")
    authority, slash, path = rest.partition("/")
    if "?" in rest or "#" in rest:
        raise ClientError(f"{usage}: no query or fragment")
    if "@" in authority:
        raise ClientError(f"{usage}: no user or password in it (the token goes in HOOKCAGE_TOKEN)")
    port_text = ""
    if authority.startswith("["):
        host, bracket, tail = authority[1:].partition("]")
        if not bracket or not host or not all(c in "0123456789abcdefABCDEF:." for c in host):
            raise ClientError(f"{usage}: a bad IPv6 address")
        if tail:
            if not tail.startswith(":"):
                raise ClientError(f"{usage}: a bad port")
            port_text = tail[1:]
    else:
        host, colon, port_text = authority.partition(":")
        if colon and not port_text:
            raise ClientError(f"{usage}: a bad port")
        if not host or not all(c in _HOST_CHARS for c in host):
            raise ClientError(f"{usage}: a bad host name")
    if port_text:
        if not (port_text.isascii() and port_text.isdigit() and 0 < int(port_text) < 65536):
            raise ClientError(f"{usage}: a bad port")
        port = int(port_text)
    else:
        port = _DEFAULT_PORTS[scheme]
    prefix = ("/" + path).rstrip("/") if slash else ""
    if not all(c in _PATH_CHARS for c in prefix):
        raise ClientError(f"{usage}: a bad path")
    return Remote(scheme, host.lower(), port, prefix)


def remote_token(environ: Mapping[str, str]) -> str:
    """The bearer token: ``$HOOKCAGE_TOKEN``, else the first line of ``$HOOKCAGE_TOKEN_FILE``.

    Raises:
        ClientError: no token, an unreadable or empty file, or characters an
            HTTP header cannot carry (the message never shows the token).
    """
    token = environ.get("HOOKCAGE_TOKEN", "")
    where = "HOOKCAGE_TOKEN"
    if not token:
        path = environ.get("HOOKCAGE_TOKEN_FILE", "")
        if not path:
            raise ClientError("no token: set HOOKCAGE_TOKEN or HOOKCAGE_TOKEN_FILE")
        where = f"the first line of HOOKCAGE_TOKEN_FILE {path}"
        try:
            with open(os.path.expanduser(path), "rb") as handle:
                first = handle.readline(64 * 1024)
        except OSError as exc:
            raise ClientError(f"cannot read HOOKCAGE_TOKEN_FILE {path}: {exc.strerror or type(exc).__name__}") from None
        try:
            token = first.decode("utf-8")
        except UnicodeDecodeError:
            raise ClientError(f"{where} is not text") from None
    token = token.strip()
    if not token:
        raise ClientError(f"{where} is empty")
    if not all("!" <= c <= "~" for c in token):
        raise ClientError(f"{where} holds characters an HTTP header cannot carry (spaces, control or non-ASCII)")
    return token


def remote_env(environ: Mapping[str, str]) -> dict[str, str]:
    """What of the caller's environment a remote service uses: the project-dir variables only."""
    return {name: environ[name] for name in PROJECT_DIR_VARS if name in environ}


def encode_remote_request(
    event: str | None, raw: bytes, environ: Mapping[str, str], cwd: str | None, agent: str | None = None
) -> bytes:
    """The JSON body of ``POST PREFIX/dispatch`` to a remote service (``"protocol": 1``)."""
    body = {
        "version": __version__,
        "protocol": PROTOCOL,
        "event": event,
        "agent": agent,
        "payload_b64": binascii.b2a_base64(raw, newline=False).decode("ascii"),
        "env": remote_env(environ),
        "home": None,
        "cwd": cwd,
    }
    return json.dumps(body).encode("utf-8")


def _seconds(environ: Mapping[str, str], name: str, default: float) -> float:
    """A positive number of seconds from ``environ[name]`` (at most a week), else ``default``."""
    try:
        value = float(environ.get(name) or default)
    except ValueError:
        return default
    return value if 0 < value <= 7 * 86400 else default


def _resolve(host: str, port: int, timeout: float) -> list[tuple[int, Any]]:
    """``(family, address)`` of ``host``, within ``timeout`` seconds.

    ``getaddrinfo`` cannot be interrupted and a silent name server makes it
    wait for the resolver's own retries, so it runs on a thread of its own
    that is left behind when the time is up (the process exits soon after).

    Raises:
        ClientError: the name does not resolve, or not in time.
    """
    done = _thread.allocate_lock()
    done.acquire()
    result: list[Any] = []

    def work() -> None:
        try:
            result.append(_socket.getaddrinfo(host, port, 0, _socket.SOCK_STREAM))
        except Exception as exc:  # gaierror, UnicodeError (a bad IDNA name), ...
            result.append(exc)
        finally:
            done.release()

    _thread.start_new_thread(work, ())
    if not done.acquire(timeout=timeout):
        raise ClientError(f"cannot resolve {host} within {timeout:g} s")
    [found] = result
    if isinstance(found, BaseException):
        why = found.args[1] if isinstance(found, OSError) and len(found.args) > 1 else type(found).__name__
        raise ClientError(f"cannot resolve {host}: {why}")
    addresses = [(entry[0], entry[4]) for entry in found if entry[0] in (_socket.AF_INET, _socket.AF_INET6)]
    if not addresses:
        raise ClientError(f"cannot resolve {host}: no IPv4 or IPv6 address")
    return addresses


def _connect(remote: Remote, timeout: float, ca_file: str | None) -> Any:
    """A socket connected to ``remote`` (TLS completed for ``https``) within ``timeout`` seconds.

    Raises:
        ClientError: cannot resolve, refused, unreachable, timed out, or TLS failed.
    """
    deadline = time.monotonic() + timeout
    context = _tls_context(ca_file) if remote.scheme == "https" else None
    addresses = _resolve(remote.host, remote.port, timeout)
    why = "no address"
    for family, address in addresses:
        left = deadline - time.monotonic()
        if left <= 0:
            raise ClientError(f"no connection within {timeout:g} s")
        if context is not None:
            import socket  # ssl needs a socket.socket (ssl imports socket anyway)

            sock: Any = socket.socket(family, socket.SOCK_STREAM)
        else:
            sock = _socket.socket(family, _socket.SOCK_STREAM)
        try:
            sock.settimeout(left)
            sock.connect(address)
        except TimeoutError:
            sock.close()
            raise ClientError(f"no connection within {timeout:g} s") from None
        except OSError as exc:
            sock.close()
            why = _os_reason(exc)
            continue
        if context is None:
            return sock
        return _handshake(context, sock, remote.host, max(deadline - time.monotonic(), 0.001), timeout)
    raise ClientError(why)


def _tls_context(ca_file: str | None) -> Any:
    """The TLS settings: the system's trusted CAs, or ``$HOOKCAGE_CA_FILE``'s; host names checked.

    Raises:
        ClientError: the CA file cannot be read or holds no certificate.
    """
    import ssl

    try:
        return ssl.create_default_context(cafile=ca_file or None)
    except (OSError, ssl.SSLError, ValueError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc) or type(exc).__name__
        raise ClientError(f"cannot use HOOKCAGE_CA_FILE {ca_file}: {why}") from None


def _handshake(context: Any, sock: Any, host: str, left: float, timeout: float) -> Any:
    import ssl

    try:
        sock.settimeout(left)
        return context.wrap_socket(sock, server_hostname=host)
    except ssl.SSLCertVerificationError as exc:
        sock.close()
        raise ClientError(f"TLS: {exc.verify_message or 'certificate verify failed'}") from None
    except TimeoutError:
        sock.close()
        raise ClientError(f"no TLS handshake within {timeout:g} s") from None
    except (ssl.SSLError, OSError) as exc:
        sock.close()
        reason = getattr(exc, "reason", None)
        raise ClientError(f"TLS: {reason or _os_reason(exc)}") from None


def _os_reason(exc: OSError) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, ConnectionResetError):
        return "connection reset"
    if isinstance(exc, BrokenPipeError):
        return "connection closed while sending"
    return exc.strerror or type(exc).__name__


def remote_exchange(
    remote: Remote, body: bytes, token: str, *, connect_timeout: float, timeout: float, ca_file: str | None = None
) -> tuple[int, bytes]:
    """``POST PREFIX/dispatch`` to ``remote``; the status and body.

    Raises:
        ClientError: no connection, no whole answer within ``timeout`` seconds,
            the connection broke, or what came back is not HTTP.
    """
    sock = _connect(remote, connect_timeout, ca_file)
    head = (
        f"POST {remote.prefix}/dispatch HTTP/1.1\r\nHost: {remote.authority}\r\n"
        f"User-Agent: hookcage/{__version__}\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode("ascii")
    try:
        return converse(sock, head + body, timeout)
    except TimeoutError:
        raise ClientError(f"no answer within {timeout:g} s") from None
    except OSError as exc:
        raise ClientError(_os_reason(exc)) from None
    finally:
        sock.close()


_STATUS_REASONS = {
    401: "the token was refused",
    403: "forbidden",
    404: "no /dispatch there: is HOOKCAGE_URL a hookcage service?",
    413: "the request is larger than the service accepts",
    503: "the service is busy",
}


def _detail(body: bytes, token: str) -> str:
    """The ``detail`` of a refusal, on one line, capped, the token blanked out."""
    try:
        data = json.loads(body)
    except ValueError:
        return ""
    detail = data.get("detail") if isinstance(data, dict) else None
    if not isinstance(detail, str):
        return ""
    text = "".join(c if c.isprintable() else " " for c in detail)
    if token:
        text = text.replace(token, "***")
    text = " ".join(text.split())
    return text[:200] + ("..." if len(text) > 200 else "")


def ask_service(
    event: str | None, raw: bytes, environ: Mapping[str, str], *, agent: str | None = None, cwd: str | None = None
) -> Answer:
    """The remote service's answer to one event.

    Raises:
        ClientError: it did not answer with a verdict; the message says why
            (without the token).
    """
    remote = parse_url(environ.get(URL_VAR, ""))
    token = remote_token(environ)
    try:
        body = encode_remote_request(event, raw, environ, cwd, agent)
    except ValueError:  # a lone surrogate in a project-dir variable
        raise ClientError("a project-dir variable is not UTF-8") from None
    status, answer = remote_exchange(
        remote, body, token,
        connect_timeout=_seconds(environ, "HOOKCAGE_CONNECT_TIMEOUT", REMOTE_CONNECT_TIMEOUT),
        timeout=_seconds(environ, "HOOKCAGE_CLIENT_TIMEOUT", DEFAULT_TIMEOUT),
        ca_file=environ.get("HOOKCAGE_CA_FILE") or None,
    )
    if status != 200:
        reason = _STATUS_REASONS.get(status, "")
        detail = _detail(answer, token)
        parts = [p for p in (reason, detail) if p]
        raise ClientError(f"HTTP {status}" + (f": {'; '.join(parts)}" if parts else ""))
    try:
        return decode_answer(status, answer, agent)
    except ClientError as exc:
        raise ClientError(str(exc).replace("the daemon", "the service")) from None


def on_error(environ: Mapping[str, str]) -> tuple[bool, str]:
    """Whether to let an event through when the service cannot answer, and what decided it.

    ``HOOKCAGE_FAIL_CLOSED`` (true) forces deny; otherwise ``HOOKCAGE_ON_ERROR``:
    ``deny`` (default) or ``allow``; any other value denies.
    """
    if environ.get("HOOKCAGE_FAIL_CLOSED", "").strip().lower() in ("1", "true", "yes", "on"):
        return False, "HOOKCAGE_FAIL_CLOSED=1"
    value = environ.get("HOOKCAGE_ON_ERROR", "").strip().lower() or "deny"
    if value not in ON_ERROR_VALUES:
        shown = "".join(c for c in value[:20] if c.isprintable())
        return False, f"HOOKCAGE_ON_ERROR={shown!r} is not deny or allow"
    return value == "allow", f"HOOKCAGE_ON_ERROR={value}"


def fallback_answer(what: str, environ: Mapping[str, str]) -> Answer:
    """The answer when the service cannot give one: exit 2 (blocked) or 0 (allowed), one line on stderr.

    Args:
        what: what went wrong, e.g. ``the hookcage service at URL did not answer (REASON)``.
        environ: where ``HOOKCAGE_ON_ERROR`` and ``HOOKCAGE_FAIL_CLOSED`` are read.
    """
    allow, why = on_error(environ)
    verdict = "allowed" if allow else "blocked"
    line = " ".join(f"hookcage: error: {what}: {verdict} ({why})".split())
    return Answer(0 if allow else 2, "", line + "\n")


def remote(event: str | None, raw: bytes, environ: Mapping[str, str], *, agent: str | None = None) -> Answer:
    """Answer one event through the service at ``$HOOKCAGE_URL``; never None, never in-process.

    Args:
        event: the EVENT argument of ``hookcage dispatch`` (None when left out).
        raw: the agent's stdin, already read.
        environ: the caller's environment (``os.environ``).
        agent: the ``--agent`` argument (None when left out).
    """
    url = environ.get(URL_VAR, "")
    try:
        where = str(parse_url(url))
    except ClientError:
        where = URL_VAR
    if len(raw) > MAX_PAYLOAD:
        # As in-process: a payload past the bound blocks, whatever HOOKCAGE_ON_ERROR says.
        line = f"hookcage: error: stdin holds more than {MAX_PAYLOAD // (1024 * 1024)} MiB: refused\n"
        return Answer(2, "", line)
    try:
        cwd: str | None = os.getcwd()
    except OSError:
        cwd = None
    try:
        return ask_service(event, raw, environ, agent=agent, cwd=cwd)
    except ClientError as exc:
        return fallback_answer(f"the hookcage service at {where} did not answer ({exc})", environ)
