"""The client side of ``hookcage serve``: forward one ``hookcage dispatch``.

Two ways to reach the service:

- **local** (the default, this module): the daemon's unix socket, same user, same
  machine; whenever it cannot answer, the caller answers in-process.
- **remote** (``$HOOKCAGE_URL`` set, e.g. an agent in another container;
  :mod:`executor.service.remote_client`, imported only then):
  TCP, or TLS for ``https://``, with ``Authorization: Bearer $HOOKCAGE_TOKEN``;
  never in-process: when the service cannot answer, the caller blocks
  (``HOOKCAGE_ON_ERROR=deny``, the default) or lets the event through
  (``allow``), saying so in one line on stderr.

Standard library only, and only the cheap parts of it (``_json`` through
:mod:`executor.service.wirejson`, ``os``, ``_socket``, ``sys``, ``binascii``):
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
"""

from __future__ import annotations

import _socket
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
URL_VAR = "HOOKCAGE_URL"
"""Set: ``hookcage dispatch`` asks the service there and never answers in-process."""
TOKEN_VARS = ("HOOKCAGE_TOKEN", "HOOKCAGE_TOKEN_FILE")
"""Where the bearer token comes from, in this order (never forwarded in a body)."""
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
