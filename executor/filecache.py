"""Parsed files kept between calls, never stale: the daemon reads each file's stat, not its bytes.

How this works (standard library only):

1. A file is known by its identity: ``(st_dev, st_ino, st_size, st_mtime_ns,
   st_ctime_ns)``, taken by one ``stat`` (``lstat`` for a file read without
   following symlinks) *before* its bytes are read. ``ctime`` is the kernel's
   own: nobody can set it back (``os.utime`` moves it forward), so an edit
   that keeps the size and puts the old ``mtime`` back still changes it.
2. :func:`load` returns what ``parse`` made of the bytes the last time,
   when the identity is the same and the entry is not *racy*; else it calls
   ``read`` (the caller's own reader, with its own limits and errors) and,
   when the bytes differ from the entry's, ``parse``.
3. Racy (git's "racy clean"): a file changed in the same timestamp tick as
   it was read would keep its identity. So an entry whose file's ``mtime`` or
   ``ctime`` is not older than :data:`RACY_NS` before the moment it was read
   is re-validated by its bytes at every use (a read and a hash, no parse)
   until a read at a later moment makes it settled. The margin covers coarse
   file-system clocks (jiffies, 1 s on ext3, 2 s on FAT would not be
   cached: see 4) and the wall clock against the kernel's coarse one.
4. Only files on local file systems whose attributes the kernel keeps
   itself are known by identity (:data:`LOCAL_FS`, by the mount table of
   ``st_dev``). On any other (NFS, CIFS, FUSE, a device not in the mount
   table) every use re-reads the bytes (no parse when they are the same):
   a network file system's cached attributes could hide an edit.
5. Only regular files: anything else (missing, a FIFO, a directory) goes
   to ``read`` every time, which says what it says without the cache.
   Errors of ``read`` or ``parse`` are never cached.

The value returned is shared between calls: ``parse`` must return something
nobody changes (frozen dataclasses, tuples), or the caller copies it.
:func:`memo` keeps values of pure functions of their arguments (allow-list
checks, a script's imports), which cannot go stale.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import os
import stat
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")

RACY_NS = 2_000_000_000
"""An entry is settled once its file's mtime and ctime are this much older than the moment it
was read (nanoseconds); until then its bytes are compared at every use."""
MAX_ENTRIES = 1024
"""Files remembered at once; the least recently used go first."""
MOUNTS_TTL_NS = 1_000_000_000
"""How long the mount table read for :func:`local_device` is used (a device number freed by an
unmount and taken by a network mount is seen within it; entries are compared by bytes meanwhile
only if they were racy)."""
LOCAL_FS = frozenset({
    "ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "overlay", "zfs", "f2fs", "ramfs", "bcachefs",
    "jfs", "reiserfs", "nilfs2",
})
"""File systems whose ``stat`` is the kernel's own truth (no attribute cache of a server)."""

Identity = tuple[int, int, int, int, int]


@dataclass
class _Entry:
    identity: Identity
    digest: bytes
    read_ns: int
    value: Any


def identity_of(info: os.stat_result) -> Identity:
    """``(dev, ino, size, mtime_ns, ctime_ns)``."""
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


class _Mounts:
    """``st_dev`` -> file system type, from ``/proc/self/mountinfo`` (re-read after :data:`MOUNTS_TTL_NS`)."""

    def __init__(self) -> None:
        self._types: dict[int, str] = {}
        self._read_ns = -MOUNTS_TTL_NS - 1
        self._lock = threading.Lock()

    def fs_type(self, dev: int) -> str | None:
        now = time.monotonic_ns()
        with self._lock:
            if now - self._read_ns > MOUNTS_TTL_NS:
                self._types = _mount_types()
                self._read_ns = now
            return self._types.get(dev)


def _mount_types() -> dict[int, str]:
    types: dict[int, str] = {}
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                fields = line.split()
                try:
                    major, minor = fields[2].split(":")
                    fs = fields[fields.index("-") + 1]
                except (IndexError, ValueError):
                    continue
                dev = os.makedev(int(major), int(minor))
                # A device mounted twice with two types (never seen): not local.
                types[dev] = fs if types.get(dev, fs) == fs else "?"
    except OSError:
        pass  # no /proc: nothing is known as local, every use compares bytes
    return types


_MOUNTS = _Mounts()


def local_device(dev: int) -> bool:
    """Whether files of device ``dev`` are on a local file system (:data:`LOCAL_FS`)."""
    return _MOUNTS.fs_type(dev) in LOCAL_FS


class FileCache:
    """What ``parse`` made of files, by path and key, valid while the file's identity says so."""

    def __init__(self, max_entries: int = MAX_ENTRIES) -> None:
        self._entries: OrderedDict[Hashable, _Entry] = OrderedDict()
        self._lock = threading.Lock()
        self.max_entries = max_entries
        self.hits = 0
        """Answers from the cache without reading the file."""
        self.checked = 0
        """Answers from the cache after reading the bytes (racy, or not a local file system)."""
        self.parsed = 0
        """Answers parsed afresh."""

    def load(self, path: str | os.PathLike[str], key: Hashable, read: Callable[[], bytes],
             parse: Callable[[bytes], T], *, follow: bool = True) -> T:
        """``parse(read())``, or what it gave last time for the same bytes of the same file.

        Args:
            path: the file ``read`` reads (``stat``-ed the same way: ``follow``).
            key: everything besides the bytes that ``parse`` depends on (the path included).
            read: the caller's reader; whatever it raises goes to the caller, uncached.
            parse: bytes -> value; its errors go to the caller, uncached.
            follow: whether ``read`` follows a symlink at ``path``.
        """
        try:
            info = os.stat(path) if follow else os.lstat(path)
        except (OSError, ValueError):
            info = None
        if info is None or not stat.S_ISREG(info.st_mode):
            with self._lock:
                self._entries.pop(key, None)
            return parse(read())
        identity = identity_of(info)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
        if entry is not None and entry.identity == identity and _settled(info, entry.read_ns) \
                and local_device(info.st_dev):
            self.hits += 1
            return entry.value  # type: ignore[no-any-return]
        read_ns = time.time_ns()  # before the read: an edit after it is newer than this
        data = read()
        digest = hashlib.sha256(data).digest()
        if entry is not None and entry.digest == digest:
            self.checked += 1
            value = entry.value
        else:
            self.parsed += 1
            value = parse(data)
        with self._lock:
            self._entries[key] = _Entry(identity, digest, read_ns, value)
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        return value  # type: ignore[no-any-return]

    def clear(self) -> None:
        """Forget every entry."""
        with self._lock:
            self._entries.clear()


def _settled(info: os.stat_result, read_ns: int) -> bool:
    """Whether the file's last change is older than its read by more than :data:`RACY_NS`."""
    return max(info.st_mtime_ns, info.st_ctime_ns) < read_ns - RACY_NS


FILES = FileCache()
"""The process's cache: hook files, ``config.toml``, trust stores (one per process; the daemon's
requests share it, an in-process dispatch fills it once)."""


class Memo:
    """Values of a pure function by its (hashable) arguments, the least recently used dropped."""

    def __init__(self, max_entries: int = 512) -> None:
        self._values: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()
        self.max_entries = max_entries

    def get(self, key: Hashable, make: Callable[[], T]) -> T:
        """The value for ``key``, made by ``make`` the first time."""
        with self._lock:
            if key in self._values:
                self._values.move_to_end(key)
                return self._values[key]  # type: ignore[no-any-return]
        value = make()
        with self._lock:
            self._values[key] = value
            while len(self._values) > self.max_entries:
                self._values.popitem(last=False)
        return value

    def put(self, key: Hashable, value: Any) -> None:
        """Keep ``value`` for ``key`` (replacing what was there)."""
        with self._lock:
            self._values[key] = value
            self._values.move_to_end(key)
            while len(self._values) > self.max_entries:
                self._values.popitem(last=False)

    def clear(self) -> None:
        """Forget every value."""
        with self._lock:
            self._values.clear()


def clear_all() -> None:
    """Forget everything cached in this process (tests; the daemon never needs it)."""
    FILES.clear()
    for memo in MEMOS:
        memo.clear()


MEMOS: list[Memo] = []


def memo(max_entries: int = 512) -> Memo:
    """A new :class:`Memo`, cleared by :func:`clear_all`."""
    made = Memo(max_entries)
    MEMOS.append(made)
    return made


_REALPATHS: contextvars.ContextVar[dict[Hashable, Any] | None] = contextvars.ContextVar("hookcage_realpaths", default=None)


@contextlib.contextmanager
def one_look() -> Iterator[None]:
    """Within this block (one dispatch), a path is resolved once (:func:`realpath`): one event
    sees one state of its symlinks, and the next event resolves them afresh."""
    token = _REALPATHS.set({})
    try:
        yield
    finally:
        _REALPATHS.reset(token)


def realpath(path: str | os.PathLike[str]) -> str:
    """``os.path.realpath``, resolved once per :func:`one_look` block."""
    seen = _REALPATHS.get()
    name = os.fspath(path)
    if seen is None:
        return resolve(name)
    found = seen.get(name)
    if found is None:
        found = seen[name] = resolve(name)
    return found


_O_PATH = getattr(os, "O_PATH", 0)


def resolve(name: str) -> str:
    """What ``os.path.realpath(name)`` answers, with the kernel's walk where it can: an existing
    path is opened (``O_PATH``) and named by ``/proc/self/fd`` (3 system calls, not one ``lstat``
    per component); a missing last component is its resolved parent's child. Anything else (a
    relative or unnormalised path, a dangling symlink, a loop, no ``/proc``) is
    ``os.path.realpath``'s."""
    if not _O_PATH or not name.startswith("/") or name.startswith("//") or os.path.normpath(name) != name:
        return os.path.realpath(name)
    try:
        fd = os.open(name, _O_PATH | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        parent, base = os.path.split(name)
        if parent == name or not base:
            return os.path.realpath(name)
        try:
            os.lstat(name)
        except (FileNotFoundError, NotADirectoryError):
            return os.path.join(resolve(parent), base)  # nothing there: realpath keeps the name
        except (OSError, ValueError):
            return os.path.realpath(name)
        return os.path.realpath(name)  # a dangling symlink: realpath follows its text
    except (OSError, ValueError):
        return os.path.realpath(name)
    try:
        found = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return os.path.realpath(name)
    finally:
        os.close(fd)
    if not found.startswith("/") or found.endswith(" (deleted)"):
        return os.path.realpath(name)
    return found


def per_look(key: Hashable, make: Callable[[], T]) -> T:
    """``make()``, once per :func:`one_look` block (every time outside one)."""
    seen = _REALPATHS.get()
    if seen is None:
        return make()
    if key not in seen:
        seen[key] = make()
    return seen[key]  # type: ignore[no-any-return]
