"""Staging folders (``$HOOKCAGE_HOME/staging``): owned while in use, swept once their owner is gone.

What is staged there: the reviewed bytes a run binds over the workspace
(``run-*``, :mod:`executor.prepare.request`), a run's environment file (``env-*``,
:mod:`executor.prepare.homes`), a dependency fetch's work folder (``deps-*``,
:mod:`executor.prepare.depcache`) and the daemon's warm-pool overlay files
(``hookcage-pool-<pid>-*``, :mod:`executor.sandbox.poolrefill`).

Each process removes its own folders when its runs end. What a killed
process leaves is found by its owner:

* a folder made here is named ``<kind>-<pid>-<random>``, and before making
  it the process takes an exclusive ``flock`` on ``.owner-<pid>`` (held
  until the process, and any child it forked, has exited; the kernel drops
  it even on SIGKILL). A sweep that can take that lock knows the owner is
  gone, whatever became of the pid since; one that cannot leaves the
  folders alone;
* a pool folder (no owner lock) is its process's while that pid is alive;
* a folder of an older hookcage (no pid in its name) is stale once it is
  older than the longest hook timeout plus a margin (:data:`STALE_AFTER`).

:func:`sweep` runs when a process first dispatches, when ``hookcage serve``
starts and in ``hookcage gc``. :func:`remove_mine` is what ``hookcage
dispatch`` runs on SIGTERM, before it exits.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import shutil
import tempfile
import threading
import time
from pathlib import Path

STAGING = "staging"
"""The staging folder's name in ``$HOOKCAGE_HOME``."""
STALE_AFTER = 24 * 3600.0 + 600.0
"""Seconds after which a folder with no owner in its name is stale (the longest hook timeout, 24 h, plus 10 min)."""
_OWNER = ".owner-"
_OWNED = re.compile(r"(?:run|env|deps)-([0-9]{1,10})-[A-Za-z0-9_]+\Z")
_POOL = re.compile(r"hookcage-pool-([0-9]{1,10})-[A-Za-z0-9_]+\Z")
_LEGACY = re.compile(r"(?:run|env|deps)-[A-Za-z0-9_]+\Z")

_lock = threading.Lock()
_owners: dict[Path, tuple[int, int, Path]] = {}  # staging root -> (pid, fd, path) of the lock held there
_mine: set[str] = set()
_swept: set[str] = set()


def staging_root(home: Path) -> Path:
    """``home/staging``, made private (0700) if missing."""
    path = home / STAGING
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def new_folder(root: Path, kind: str) -> Path:
    """A fresh private folder ``<kind>-<pid>-<random>`` in ``root``, owned by this process.

    Raises:
        OSError: the folder or the owner lock cannot be made.
    """
    with _lock:
        _hold_owner_lock(root)
        folder = tempfile.mkdtemp(prefix=f"{kind}-{os.getpid()}-", dir=root)
        if len(_mine) > 256:  # a long-lived process: forget what its runs removed
            _mine.intersection_update({f for f in _mine if os.path.lexists(f)})
        _mine.add(folder)
    return Path(folder)


def _hold_owner_lock(root: Path) -> None:
    pid = os.getpid()
    held = _owners.get(root)
    if held is not None and held[0] == pid:
        return
    path = root / f"{_OWNER}{pid}"
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # a sweep holds it a moment when an earlier pid died
            mine, there = os.fstat(fd), os.stat(path, follow_symlinks=False)
        except OSError:
            os.close(fd)
            raise
        if (mine.st_dev, mine.st_ino) == (there.st_dev, there.st_ino):
            _owners[root] = (pid, fd, path)
            return
        os.close(fd)  # that sweep removed the file we opened: take the new one


def remove_mine() -> None:
    """Remove every folder this process made, and its owner lock (for a signal handler: no lock taken)."""
    for folder in list(_mine):
        shutil.rmtree(folder, ignore_errors=True)
    _mine.clear()
    for root in list(_owners):
        _drop_owner(_owners.pop(root))


def release() -> None:
    """Give up the owner lock (and its file) once none of this process's folders is left.

    For a process about to exit (the end of ``hookcage dispatch``, or of the
    child that ran its ``async`` hooks, which inherited the lock): without it
    the empty lock file would wait for the next sweep.
    """
    with _lock:
        _mine.intersection_update({folder for folder in _mine if os.path.lexists(folder)})
        if _mine:
            return
        for root in list(_owners):
            _drop_owner(_owners.pop(root))


def _drop_owner(owner: tuple[int, int, Path]) -> None:
    _, fd, path = owner
    with contextlib.suppress(OSError):
        path.unlink()
    with contextlib.suppress(OSError):
        os.close(fd)


def sweep(root: Path, *, now: float | None = None) -> int:
    """Remove the folders in ``root`` whose owner is gone (see the module docstring).

    Returns:
        How many folders were removed.
    """
    now = time.time() if now is None else now
    try:
        entries = list(os.scandir(root))
    except OSError:
        return 0
    by_pid: dict[int, list[str]] = {}
    pools: dict[int, list[str]] = {}
    locks: set[int] = set()
    removed = 0
    for entry in entries:
        name = entry.name
        if name.startswith(_OWNER):
            with contextlib.suppress(ValueError):
                locks.add(int(name[len(_OWNER):]))
            continue
        try:
            is_dir = entry.is_dir(follow_symlinks=False)
        except OSError:
            continue
        if not is_dir:
            continue
        owned, pool = _OWNED.match(name), _POOL.match(name)
        if owned:
            by_pid.setdefault(int(owned[1]), []).append(entry.path)
        elif pool:
            pools.setdefault(int(pool[1]), []).append(entry.path)
        elif _LEGACY.match(name):
            with contextlib.suppress(OSError):
                if entry.stat(follow_symlinks=False).st_mtime + STALE_AFTER < now:
                    removed += _remove(entry.path)
    me = os.getpid()
    for pid in sorted(set(by_pid) | locks):
        if pid == me:
            continue
        folders = by_pid.get(pid, [])
        if pid in locks:
            removed += _sweep_locked(root / f"{_OWNER}{pid}", folders)
        elif folders and not _alive(pid):
            removed += sum(_remove(folder) for folder in folders)
    for pid, folders in pools.items():
        if pid != me and not _alive(pid):
            removed += sum(_remove(folder) for folder in folders)
    return removed


def sweep_once(home: Path) -> int:
    """:func:`sweep` ``home``'s staging folder, once per process (the first dispatch's)."""
    root = home / STAGING
    key = str(root)
    with _lock:
        if key in _swept:
            return 0
        _swept.add(key)
    if not root.is_dir():
        return 0
    return sweep(root)


def _sweep_locked(lock_path: Path, folders: list[str]) -> int:
    """Remove ``folders`` and the owner lock if the owner is gone (its lock can be taken)."""
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return 0
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                return 0  # its owner (or a child it forked) is alive
            raise
        removed = sum(_remove(folder) for folder in folders)
        with contextlib.suppress(OSError):
            lock_path.unlink()
        return removed
    finally:
        os.close(fd)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    except OverflowError:
        return False
    return True


def _remove(folder: str) -> int:
    shutil.rmtree(folder, ignore_errors=True)
    return 0 if os.path.lexists(folder) else 1
