"""The engine side of one spare (a pooled container waiting for its job).

Its attach connection and its dedicated overlay files (``SpareHandle``),
where a file of its overlay tree goes (``tree_file``), whether it is still
waiting (``alive``), and the reviewed bytes written into its files at job
time (``write_overlays``). Which spares to keep is
:mod:`executor.sandbox.poolbook`'s (pure); :mod:`executor.sandbox.pool`
makes and uses them.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import socket
import ssl
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from executor.sandbox.docker import BACKEND_ERRORS, buffered, close_attached
from executor.sandbox.poolwire import WOULD_BLOCK


@dataclass
class SpareHandle:
    """The engine side of a spare: its attach connection and overlay files."""

    attached: Any = None
    sock: socket.socket | None = None
    folder: str | None = None
    overlays: dict[str, int] = field(default_factory=dict)
    """Container path -> open descriptor of its dedicated host file."""
    environment: dict[str, str] = field(default_factory=dict)
    """The environment the container was created with (a job sends only what differs)."""
    protocol: int = 3
    """The job protocol its program speaks: 3 the sh bootstrap, 4 the job runner (``warmjob.encode_job``)."""
    transcript: str | None = None
    """Its own folder, bound read-only over the transcript's (``poolkeys.transcript_folder_target``)."""

    def close(self) -> None:
        """Close the connection and the files, remove the folder; safe to call twice."""
        attached, self.attached, self.sock = self.attached, None, None
        if attached is not None:
            with contextlib.suppress(*BACKEND_ERRORS):
                close_attached(attached)
        for fd in self.overlays.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        self.overlays = {}
        if self.folder:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None
        self.transcript = None


def tree_file(folder: str, project: str, target: str) -> str:
    """Where a spare keeps the file of ``target`` in its tree (``folder/tree/<path under project>``).

    The folders on the way are made readable: the tree's are the workspace's in the container.
    """
    tree = os.path.join(folder, "tree")
    path = os.path.join(tree, os.path.relpath(os.path.normpath(target), project))
    os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
    parent = os.path.dirname(path)
    while True:
        os.chmod(parent, 0o755)
        if parent == tree:
            return path
        parent = os.path.dirname(parent)


def alive(handle: SpareHandle) -> bool:
    """An idle pooled container's attach socket: silent while it waits, readable once it ended."""
    if handle.sock is None:
        return False
    try:
        readable, _, _ = select.select([handle.sock], [], [], 0)
        if not readable and not buffered(handle.sock):
            return True
        if not isinstance(handle.sock, ssl.SSLSocket):
            return False
        # Over TLS the socket also turns readable for records with no data in
        # them (a session ticket): alive if reading finds none; any data or
        # the end means it is not waiting any more.
        handle.sock.setblocking(False)
        handle.sock.recv(1)
    except WOULD_BLOCK:
        return True
    except (OSError, ValueError):
        return False
    return False


def write_overlays(handle: SpareHandle, overlays: Mapping[str, str]) -> None:
    """Write each staged file's bytes into the container's dedicated file, in place.

    Raises:
        OSError: a staged file cannot be read, or the container has no file
            for that target (then the run goes cold).
    """
    for target, staged in overlays.items():
        fd = handle.overlays.get(os.path.normpath(target))
        if fd is None:
            raise FileNotFoundError(f"no pooled overlay file for {target}")
        with open(staged, "rb") as source:
            data = source.read()
        os.ftruncate(fd, 0)
        view = memoryview(data)
        offset = 0
        while offset < len(view):
            offset += os.pwrite(fd, view[offset:], offset)
        # No fsync: the container reads the same inode through the page cache.
        # The container is used once, so the file is written once: close it now,
        # or executing it (`./hook.sh`) fails with ETXTBSY while we hold it open.
        del handle.overlays[os.path.normpath(target)]
        os.close(fd)


def link_transcript(handle: SpareHandle, transcript: str | None) -> None:
    """Give the container the session's transcript: a hard link in its own transcript folder.

    A link, not a copy: the hook reads the transcript as the agent keeps writing it (as
    a bind of the file shows it), at no cost however long it has grown, and the folder is
    bound read-only. Nothing is linked when the transcript is missing or is not a regular
    file (the cold path binds nothing then either): lstat first and the link made without
    following a symlink, then the link checked again (a file swapped for a symlink in
    between is unlinked; inside the container it would resolve against the container's
    own tree anyway).

    Raises:
        OSError: a regular transcript could not be linked (another file system, a file
            this user may not link): the run goes cold, where the file itself is bound.
    """
    if handle.transcript is None or not transcript:
        return
    source = os.path.normpath(transcript)
    try:
        if not stat.S_ISREG(os.lstat(source).st_mode):
            return
    except (OSError, ValueError):
        return
    link = os.path.join(handle.transcript, os.path.basename(source))
    os.link(source, link, follow_symlinks=False)
    if not stat.S_ISREG(os.lstat(link).st_mode):
        os.unlink(link)


__all__ = ["SpareHandle", "alive", "link_transcript", "tree_file", "write_overlays"]
