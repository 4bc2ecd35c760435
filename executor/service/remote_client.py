"""The client of a remote hookcage service: ``hookcage dispatch`` with ``$HOOKCAGE_URL`` set.

TCP, or TLS for ``https://``, with ``Authorization: Bearer $HOOKCAGE_TOKEN``;
never in-process: when the service cannot answer, the caller blocks
(``HOOKCAGE_ON_ERROR=deny``, the default) or lets the event through
(``allow``), saying so in one line on stderr. Standard library only, as
:mod:`executor.service.client` (whose HTTP exchange, answer and errors it
uses; ``ssl`` for ``https://`` only); :mod:`executor.entry` imports it only
when ``$HOOKCAGE_URL`` is set.

The exchange is the hand-written one of the local socket, not
``http.client``'s, for the same reason: this runs in a process the agent
starts per event, and ``http.client`` imports ``email``, ``ssl`` and
``socket``, about 26-38 ms of start-up on the development machine, more
than the whole ``http://`` client costs over the interpreter's start-up
(``benchmarks/remote_client.py``; docs/service-client.md, "Cost").

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
import time

from executor import __version__
from executor.core.envnames import PROJECT_DIR_VARS
from executor.service import client
from executor.service import wirejson as json  # json's own import costs ~7 ms (re, enum) per event
from executor.service.client import URL_VAR, Answer, ClientError, converse, decode_answer

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

REMOTE_CONNECT_TIMEOUT = 5.0
"""Seconds to resolve, reach (and, for https, shake hands with) a remote service."""
PROTOCOL = 1
"""The remote request's ``protocol``: a service that speaks another refuses (409)."""
ON_ERROR_VALUES = ("deny", "allow")


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
        timeout=_seconds(environ, "HOOKCAGE_CLIENT_TIMEOUT", client.DEFAULT_TIMEOUT),
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
    if len(raw) > client.MAX_PAYLOAD:
        # As in-process: a payload past the bound blocks, whatever HOOKCAGE_ON_ERROR says.
        line = f"hookcage: error: stdin holds more than {client.MAX_PAYLOAD // (1024 * 1024)} MiB: refused\n"
        return Answer(2, "", line)
    try:
        cwd: str | None = os.getcwd()
    except OSError:
        cwd = None
    try:
        return ask_service(event, raw, environ, agent=agent, cwd=cwd)
    except ClientError as exc:
        return fallback_answer(f"the hookcage service at {where} did not answer ({exc})", environ)
