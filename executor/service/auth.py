"""The TCP service's credentials and address: the bearer token, ``HOST:PORT``.

``hookcage serve --listen HOST:PORT`` answers on TCP only with a token
(:func:`load_token`): ``--token-file PATH``, else ``$HOOKCAGE_TOKEN``, else
the file named by ``$HOOKCAGE_TOKEN_FILE``. A token file's first line is the
token (surrounding white space stripped). Group and others may neither read
nor write the file (like ssh's keys: a token anyone on the machine can read
is nobody's secret), and it must be this user's or root's (any owner when
the service runs as root, as in a container with a bind-mounted secret). A token must be at least
:data:`MIN_TOKEN` characters of visible ASCII (it travels in an HTTP header).

Every request on TCP is checked by :func:`bearer_matches`, which compares
bytes with :func:`hmac.compare_digest` (constant time).
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import stat
from collections.abc import Mapping
from pathlib import Path

from executor.errors import HookcageError

MIN_TOKEN = 16
"""Characters a token must have at least."""
TOKEN_VAR = "HOOKCAGE_TOKEN"
TOKEN_FILE_VAR = "HOOKCAGE_TOKEN_FILE"
_MAX_TOKEN_FILE = 64 * 1024


class ServiceConfigError(HookcageError):
    """``hookcage serve --listen`` cannot start: no usable token, address, certificate..."""


def _check_token(token: str, where: str) -> str:
    if not token:
        raise ServiceConfigError(f"{where}: empty; the TCP service needs a token")
    if len(token) < MIN_TOKEN:
        raise ServiceConfigError(
            f"{where}: the token has {len(token)} characters, at least {MIN_TOKEN} are needed "
            f"(e.g. python3 -c 'import secrets; print(secrets.token_urlsafe(32))')"
        )
    if not all(33 <= ord(char) <= 126 for char in token):
        raise ServiceConfigError(f"{where}: the token holds characters other than visible ASCII")
    return token


def read_token_file(path: Path) -> str:
    """The first line of a token file, stripped.

    Raises:
        ServiceConfigError: the file cannot be read, is not a regular file, is
            someone else's, or is readable or writable by group or others.
    """
    where = f"token file {path}"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise ServiceConfigError(f"cannot read {where}: {exc.strerror or exc}") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ServiceConfigError(f"{where}: not a regular file")
        if os.geteuid() != 0 and info.st_uid not in (os.geteuid(), 0):
            # root reads a user's 0600 file (a container's bind-mounted secret): its owner knows the token anyway.
            raise ServiceConfigError(f"{where}: belongs to another user (uid {info.st_uid})")
        if info.st_mode & 0o077:
            raise ServiceConfigError(
                f"{where}: group or others may read or write it (mode {stat.S_IMODE(info.st_mode):04o}); "
                f"run chmod 600 {path}"
            )
        data = os.read(fd, _MAX_TOKEN_FILE)
    finally:
        os.close(fd)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ServiceConfigError(f"{where}: not UTF-8 text") from exc
    return _check_token(text.split("\n", 1)[0].strip(), where)


def load_token(token_file: Path | None, environ: Mapping[str, str]) -> str:
    """The service's token: ``--token-file``, else ``$HOOKCAGE_TOKEN``, else ``$HOOKCAGE_TOKEN_FILE``.

    Raises:
        ServiceConfigError: none is given, or the one given is unusable (the message says which).
    """
    if token_file is not None:
        return read_token_file(token_file)
    if TOKEN_VAR in environ:
        return _check_token(environ[TOKEN_VAR].strip(), TOKEN_VAR)
    if environ.get(TOKEN_FILE_VAR):
        return read_token_file(Path(environ[TOKEN_FILE_VAR]))
    raise ServiceConfigError(
        f"--listen needs a token: give --token-file PATH, or set {TOKEN_VAR} or {TOKEN_FILE_VAR}"
    )


def bearer_matches(header: bytes | None, token: bytes) -> bool:
    """Whether an ``Authorization`` header value is ``Bearer <token>`` (constant-time comparison)."""
    if header is None:
        return False
    scheme, _, given = header.strip().partition(b" ")
    if scheme.lower() != b"bearer":
        return False
    return hmac.compare_digest(given.strip(), token)


def parse_listen(value: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` for IPv6) into a host and a port (0: any free port).

    Raises:
        ServiceConfigError: not of that form, or the port is not 0-65535.
    """
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ServiceConfigError(f"--listen {value!r}: expected HOST:PORT, e.g. 127.0.0.1:8765 or [::1]:8765")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ServiceConfigError(f"--listen {value!r}: {host!r} is not an IPv6 address") from None
    elif ":" in host:
        raise ServiceConfigError(f"--listen {value!r}: write an IPv6 address in brackets, e.g. [::1]:8765")
    return host, int(port)
