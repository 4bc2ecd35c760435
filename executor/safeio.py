"""Reading a file a repository put there, without being stalled by it.

Every file hookcage reads from a project (hook files, the scripts a trust
review hashes, an agent's settings file ``install`` edits) is opened here,
by :func:`read_regular`:

1. ``stat`` the path first (following symlinks, unless ``follow=False``) and
   refuse anything that is not a regular file (a FIFO, a character or block
   device, a socket, a directory) without opening it: a committed symlink to
   ``/dev/tty`` is never opened, so it cannot read the user's typing, and one
   to ``/dev/ptmx`` allocates nothing;
2. open with ``O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC`` (and
   ``O_NOFOLLOW`` when ``follow=False``): an open never waits for a FIFO's
   writer, even when the path was swapped for one after step 1;
3. ``fstat`` the open file and refuse it again unless it is regular (what
   was opened is what is checked), and refuse it when it is larger than the
   limit;
4. read at most ``limit + 1`` bytes: a file that grows while it is read is
   refused too, never read to its end.

Refusals are :class:`Unreadable`, one line naming the file's kind or the
limit and the figure. Nothing here blocks: a regular file's read does not wait
for a writer, and anything else is refused before it is read.
"""

from __future__ import annotations

import errno
import os
import stat

from executor.errors import HookcageError

_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
_CHUNK = 1024 * 1024


class Unreadable(HookcageError):
    """A file hookcage will not read: its kind, its size, or an error of the system.

    ``reason`` is one line without the path (the caller names the file).
    """

    def __init__(self, reason: str, *, missing: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.missing = missing
        """It does not exist (or a component of its path is not a directory)."""


def kind(mode: int) -> str:
    """What a file of ``mode`` is, in words (``"a FIFO"``, ``"a character device"``, ...)."""
    if stat.S_ISREG(mode):
        return "a regular file"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISLNK(mode):
        return "a symlink"
    return "not a regular file"


def size_text(size: int) -> str:
    """``4 MiB``, ``256 KiB`` or ``1000 bytes``: a limit as the docs write it."""
    if size >= 1024 * 1024 and size % (1024 * 1024) == 0:
        return f"{size // (1024 * 1024)} MiB"
    if size >= 1024 and size % 1024 == 0:
        return f"{size // 1024} KiB"
    return f"{size} bytes"


def _limit(limit: int, what: str) -> str:
    return f"{size_text(limit)}, the limit of {what}" if what else size_text(limit)


def _refuse_kind(mode: int) -> None:
    if not stat.S_ISREG(mode):
        raise Unreadable(f"is {kind(mode)}, not a regular file: refused without reading it")


def _os_error(exc: OSError) -> Unreadable:
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        return Unreadable("does not exist", missing=True)
    if exc.errno == errno.ELOOP:
        return Unreadable("is a symlink, or has too many levels of symlinks: refused")
    return Unreadable(f"cannot be read: {exc.strerror or exc}")


def open_regular(path: str | os.PathLike[str], *, follow: bool = True, dir_fd: int | None = None) -> int:
    """Open a regular file for reading without blocking; the caller closes the descriptor.

    Args:
        path: the file (relative to ``dir_fd`` when given).
        follow: follow a symlink at the last component (its target is checked);
            ``False``: a symlink there is refused (``O_NOFOLLOW``).
        dir_fd: a directory descriptor ``path`` is relative to.

    Raises:
        Unreadable: it does not exist (``missing``), is not a regular file, or
            cannot be opened; nothing was read.
    """
    try:
        before = os.stat(path, dir_fd=dir_fd, follow_symlinks=follow)
    except (OSError, ValueError) as exc:
        raise _os_error(exc) if isinstance(exc, OSError) else Unreadable(f"cannot be read: {exc}") from None
    _refuse_kind(before.st_mode)
    flags = _FLAGS | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags, dir_fd=dir_fd)
    except OSError as exc:
        raise _os_error(exc) from None
    try:
        _refuse_kind(os.fstat(fd).st_mode)  # what was opened, should the path have changed meanwhile
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_fd(fd: int, limit: int, what: str = "") -> bytes:
    """At most ``limit`` bytes of an open regular file (see :func:`open_regular`).

    ``what`` names whose limit it is in the refusal (``"a YAML hook file"``).

    Raises:
        Unreadable: larger than ``limit`` (by its size, or by what a read
            returned), or a read failed.
    """
    try:
        size = os.fstat(fd).st_size
        if size > limit:
            raise Unreadable(f"is larger than {_limit(limit, what)} ({size} bytes): refused")
        chunks: list[bytes] = []
        total = 0
        while total <= limit:
            chunk = os.read(fd, min(_CHUNK, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    except BlockingIOError:
        raise Unreadable("would block while being read: refused") from None
    except OSError as exc:
        raise Unreadable(f"cannot be read: {exc.strerror or exc}") from None
    if total > limit:
        raise Unreadable(f"grew past {_limit(limit, what)} while being read: refused")
    return b"".join(chunks)


def read_regular(path: str | os.PathLike[str], limit: int, *, follow: bool = True,
                 dir_fd: int | None = None, what: str = "") -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes, read without ever blocking.

    Raises:
        Unreadable: see :func:`open_regular` and :func:`read_fd`.
    """
    fd = open_regular(path, follow=follow, dir_fd=dir_fd)
    try:
        return read_fd(fd, limit, what)
    finally:
        os.close(fd)
