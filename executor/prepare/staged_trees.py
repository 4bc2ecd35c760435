"""Staged trees shared by the daemon's runs of the same reviewed bytes (issue 23).

A repository's hook runs the bytes that were hashed: :meth:`HookExecutor._stage`
writes them to ``$HOOKCAGE_HOME/staging/run-<pid>-*/tree/...`` and the run
lays that tree over the workspace, read-only. In-process that is once per
process. The daemon would write and remove the same few files for every
event (a few directories, a file; 1-15 ms on a busy disk), so it keeps each
tree while it is used, and for :data:`IDLE` seconds after:

- a tree is known by what it holds: the project root and, for each file, its
  path, mode and SHA-256. Another content is another tree, never this one;
- before a tree is lent again, every file and directory in it is ``lstat``-ed
  and compared with what was written (device, inode, size, mode, mtime,
  ctime): a tree anybody changed (the files are read-only and the folder is
  private, but the user's own host hooks could) is dropped and written anew;
- a tree is removed once no run holds it and it was not used for
  :data:`IDLE` seconds (or more than :data:`MAX_TREES` wait), and all of them
  when the daemon stops. They are ``run-<pid>-*`` folders like any other
  staged folder: a killed daemon's are swept by the next process.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from executor.core.files import FileState

IDLE = 120.0
"""Seconds an unused tree is kept."""
MAX_TREES = 32
"""Unused trees kept at most; the least recently used go first."""

_Seen = tuple[int, int, int, int, int, int]


def tree_key(files: Sequence[FileState], root: Path) -> str:
    """What a staged tree holds, as one digest: the project root, and each file's path, mode and bytes."""
    digest = hashlib.sha256(str(root).encode("utf-8", "surrogateescape") + b"\0")
    for state in sorted(files, key=lambda f: f.path):
        if state.data is None:
            continue
        digest.update(state.path.encode("utf-8", "surrogateescape") + b"\0" + oct(state.mode).encode() + b"\0")
        digest.update(hashlib.sha256(state.data).digest())
    return digest.hexdigest()


@dataclass
class _Tree:
    folder: Path
    overlays: dict[str, str]
    seen: dict[str, _Seen]
    users: int = 0
    last_used: float = field(default_factory=time.monotonic)


def _look(path: str) -> _Seen:
    info = os.lstat(path)
    return (info.st_dev, info.st_ino, info.st_size, info.st_mode, info.st_mtime_ns, info.st_ctime_ns)


def _walk(folder: Path) -> dict[str, _Seen]:
    seen = {}
    for top, dirs, names in os.walk(folder):
        for name in (*dirs, *names):
            path = os.path.join(top, name)
            seen[path] = _look(path)
    return seen


class StagedTrees:
    """The daemon's staged trees, lent to runs and given back."""

    def __init__(self) -> None:
        self._trees: dict[str, _Tree] = {}
        self._retired: dict[Path, _Tree] = {}  # changed on disk while lent: removed once given back
        self._lock = threading.Lock()
        self.reused = 0
        """Trees lent again without writing them."""

    def lend(self, key: str, build: Callable[[], tuple[Path, dict[str, str]]]) -> dict[str, str]:
        """The overlays of tree ``key``, written by ``build`` (the staged folder and its overlays)
        unless a tree of that key is there, unchanged."""
        with self._lock:
            tree = self._trees.get(key)
            if tree is not None:
                tree.users += 1
        if tree is not None:
            try:
                same = _walk(tree.folder) == tree.seen
            except OSError:
                same = False
            if same:
                self.reused += 1
                return dict(tree.overlays)
            with self._lock:  # changed: never lent again, removed when its last run gives it back
                if self._trees.get(key) is tree:
                    del self._trees[key]
                self._retired[tree.folder] = tree
            self.give_back(tree.folder)
        folder, overlays = build()
        fresh = _Tree(folder, dict(overlays), _walk(folder), users=1)
        with self._lock:
            if key not in self._trees:  # else another run built it meanwhile: this one stays its own
                self._trees[key] = fresh
        return overlays

    def give_back(self, folder: Path) -> bool:
        """A run is over with the tree in ``folder``. False when ``folder`` is no tree of these
        (the caller removes it)."""
        now = time.monotonic()
        doomed: list[Path] = []
        with self._lock:
            tree = self._retired.get(folder) or next(
                (t for t in self._trees.values() if t.folder == folder), None)
            if tree is None:
                return False
            tree.users -= 1
            tree.last_used = now
            if folder in self._retired and tree.users <= 0:
                del self._retired[folder]
                doomed.append(folder)
            idle = sorted((t for t in self._trees.values() if t.users <= 0), key=lambda t: t.last_used)
            for number, old in enumerate(idle):
                if now - old.last_used > IDLE or len(idle) - number > MAX_TREES:
                    doomed.append(old.folder)
                    self._trees = {k: t for k, t in self._trees.items() if t is not old}
        for gone in doomed:
            shutil.rmtree(gone, ignore_errors=True)
        return True

    def close(self) -> None:
        """Remove every tree (the daemon stops: no run holds one any more)."""
        with self._lock:
            folders = [tree.folder for tree in (*self._trees.values(), *self._retired.values())]
            self._trees.clear()
            self._retired.clear()
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)
