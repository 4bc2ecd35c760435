"""The run log (one JSON line per hook considered) and ``once`` bookkeeping.

Both live under ``$HOOKCAGE_HOME``. The log is bounded whatever a repository
puts in a hook:

* every string in a record is cut at :data:`FIELD_CAP` characters (a 3.9 MB
  command once added 2.5 MB per event); the record then names the cut
  fields in ``"truncated_fields"`` (``"command"``, ``"env_file.text"``);
* of one event, at most :data:`MAX_SKIPS_LOGGED` skipped hooks are logged one
  by one; the rest are one record per skip reason that counts them
  (:func:`cap_event`), so a file of many handlers cannot add megabytes per
  event (every hook that ran is logged);
* past ``max_bytes`` the file is rotated: ``runs.jsonl`` becomes
  ``runs.jsonl.1``, ``.1`` becomes ``.2``, ... and the oldest past ``keep``
  is removed.

Lines of one dispatch are appended with one ``write`` on an ``O_APPEND``
descriptor, under a lock (``runs.jsonl.lock``) that rotation takes too, so
concurrent dispatches neither interleave within a line nor lose one to a
rotation. A line a killed writer left unfinished is closed with a newline
before the next write, so it never swallows the next record.

Readers (``hookcage report``) open every file of the log under the same lock
(:func:`open_log`): they see each line once, whatever rotates meanwhile.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import stat
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

from executor.core.text import cap_text

FIELD_CAP = 4096
"""Characters kept of any one string in a run-log record."""
DEFAULT_MAX_BYTES = 10 * 1024 * 1024
"""Size past which the run log is rotated (the ``log_max_bytes`` setting)."""
DEFAULT_KEEP = 3
"""Rotated files kept, ``runs.jsonl.1`` (newest) to ``runs.jsonl.3`` (the ``log_keep`` setting)."""
LOCK_TIMEOUT = 10.0
"""Seconds a dispatch waits for the log's lock before it gives up on its lines (never on its verdict)."""


MAX_SKIPS_LOGGED = 100
"""Skipped hooks of one event logged one by one; the rest are counted (:func:`cap_event`)."""


def cap_event(records: list[dict[str, Any]], limit: int = MAX_SKIPS_LOGGED) -> list[dict[str, Any]]:
    """One event's records with at most ``limit`` skipped ones; the others counted.

    Every record of a hook that ran is kept. Skipped records past ``limit`` are
    replaced by one record per ``skip_reason``: the first such record, its hook
    fields kept, with ``"omitted": N`` (how many it stands for, itself included)
    and a ``detail`` saying so, which ``hookcage report`` reads as one skipped row.
    """
    skipped = [r for r in records if r.get("outcome") == "skipped"]
    if len(skipped) <= limit:
        return records
    kept: list[dict[str, Any]] = []
    summaries: dict[Any, dict[str, Any]] = {}
    seen = 0
    for record in records:
        if record.get("outcome") != "skipped":
            kept.append(record)
            continue
        seen += 1
        if seen <= limit:
            kept.append(record)
            continue
        reason = record.get("skip_reason")
        summary = summaries.get(reason)
        if summary is None:
            summary = summaries[reason] = {**record, "omitted": 0}
        summary["omitted"] += 1
    for summary in summaries.values():
        summary["detail"] = (f"{summary['omitted']} hooks skipped ({summary.get('skip_reason')}) at this event, "
                             f"this one and {summary['omitted'] - 1} more, not logged one by one "
                             f"(at most {limit} skipped hooks an event are)")
        kept.append(summary)
    return kept


def cap_record(record: Mapping[str, Any], cap: int = FIELD_CAP) -> dict[str, Any]:
    """``record`` with every string (nested ones too) cut at ``cap`` characters.

    The cut fields are listed, by dotted path, in ``"truncated_fields"``.
    """
    cut: list[str] = []

    def walk(value: Any, where: str) -> Any:
        if isinstance(value, str):
            if len(value) > cap:
                cut.append(where)
                return cap_text(value, cap)
            return value
        if isinstance(value, Mapping):
            return {key: walk(item, f"{where}.{key}" if where else str(key)) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [walk(item, f"{where}[{i}]") for i, item in enumerate(value)]
        return value

    capped: dict[str, Any] = walk(record, "")
    if cut:
        capped["truncated_fields"] = cut
    return capped


def append_records(
    path: Path,
    records: Iterable[Mapping[str, Any]],
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    keep: int = DEFAULT_KEEP,
) -> None:
    """Append records as JSON lines (file mode 0600, directory 0700), capped and rotated.

    Args:
        path: the log file.
        records: one mapping per line; strings are cut (:func:`cap_record`).
        max_bytes: rotate first when this write would take the file past it
            (0: never rotate).
        keep: rotated files kept (``path.1`` ... ``path.<keep>``).

    Raises:
        OSError: the log cannot be written (or its lock not taken in
            :data:`LOCK_TIMEOUT`); callers keep their verdict.
    """
    from filelock import FileLock

    data = b"".join(_line(cap_record(r)) for r in records)
    if not data:
        return
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        regular = stat.S_ISREG(os.stat(path).st_mode)
    except FileNotFoundError:
        regular = True
    if not regular:  # a FIFO or /dev/stderr: nothing to rotate, nothing to lock
        _append(path, data)
        return
    with FileLock(str(path) + ".lock", timeout=LOCK_TIMEOUT, mode=0o600):
        if max_bytes > 0:
            try:
                size = os.stat(path).st_size
            except FileNotFoundError:
                size = 0
            if size > 0 and size + len(data) > max_bytes:
                rotate(path, keep)
        _append(path, data, close_torn=True)


def _line(record: Mapping[str, Any]) -> bytes:
    # ASCII JSON: whoever `cat`s or `tail -f`s the log sees a hostile hook's
    # escapes, bidi overrides and C1 controls as \uXXXX, never interpreted
    # (and a lone surrogate, which JSON allows, can always be written).
    return (json.dumps(record, ensure_ascii=True, default=str) + "\n").encode("ascii")


def _append(path: Path, data: bytes, *, close_torn: bool = False) -> None:
    flags = os.O_APPEND | os.O_CREAT
    try:
        fd = os.open(path, flags | (os.O_RDWR if close_torn else os.O_WRONLY), 0o600)
    except PermissionError:
        if not close_torn:
            raise
        fd, close_torn = os.open(path, flags | os.O_WRONLY, 0o600), False  # write-only: cannot look
    try:
        if close_torn:
            # A writer killed mid-line left no newline: end its fragment here, or our first
            # record would be glued to it and lost to every reader. (Under the lock: no
            # writer is mid-line now.)
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                data = b"\n" + data
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def rotate(path: Path, keep: int = DEFAULT_KEEP) -> None:
    """Shift ``path`` to ``path.1``, ``path.1`` to ``path.2``, ...; drop what passes ``keep``.

    The caller holds the log's lock.
    """
    keep = max(keep, 1)
    oldest = path.with_name(f"{path.name}.{keep}")
    oldest.unlink(missing_ok=True)
    for index in range(keep - 1, 0, -1):
        older = path.with_name(f"{path.name}.{index}")
        if older.exists():
            os.replace(older, path.with_name(f"{path.name}.{index + 1}"))
    if path.exists():
        os.replace(path, path.with_name(f"{path.name}.1"))


def rotated_files(path: Path) -> list[Path]:
    """The rotated files of the log at ``path`` that exist, oldest first (``.3``, ``.2``, ``.1``).

    Every ``path.N`` is listed, also past today's ``log_keep`` (left by a larger one).
    """
    pattern = re.compile(re.escape(path.name) + r"\.([1-9][0-9]{0,8})")
    try:
        names = os.listdir(path.parent)
    except (FileNotFoundError, NotADirectoryError):
        return []
    found = [(int(m.group(1)), name) for name in names if (m := pattern.fullmatch(name))]
    return [path.parent / name for _, name in sorted(found, reverse=True)]


@contextlib.contextmanager
def open_log(path: Path) -> Iterator[list[tuple[Path, IO[bytes]]]]:
    """Open every file of the run log at ``path``, oldest first, as one snapshot.

    The files are listed and opened under the writers' lock, which is then
    let go: writers go on (rotation renames files, it does not change them),
    and the reader sees every line that was written before it, once. Where
    the lock cannot be taken (a log in a read-only folder, a lock held past
    :data:`LOCK_TIMEOUT`) the files are opened without it. A file that is
    missing is left out; none at all gives ``[]``.

    Raises:
        OSError: a file of the log cannot be read, or is not a regular file
            (a FIFO would never end).
    """
    opened: list[tuple[Path, IO[bytes]]] = []
    try:
        with _reading_lock(path):
            for file in [*rotated_files(path), path]:
                try:
                    # Non-blocking: opening a FIFO to read would wait for a writer.
                    fd = os.open(file, os.O_RDONLY | os.O_NONBLOCK)
                except FileNotFoundError:
                    continue
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    os.close(fd)
                    raise OSError(f"{file} is not a regular file")
                opened.append((file, os.fdopen(fd, "rb")))
        yield opened
    finally:
        for _, each in opened:
            each.close()


@contextlib.contextmanager
def _reading_lock(path: Path) -> Iterator[None]:
    """The writers' lock if it can be had, else nothing (a reader must not need to write)."""
    from filelock import FileLock, Timeout

    if not path.parent.is_dir():  # nothing to read, and no folder to create for a lock
        yield
        return
    lock = FileLock(str(path) + ".lock", timeout=LOCK_TIMEOUT, mode=0o600)
    try:
        lock.acquire()
    except (OSError, Timeout):
        yield
        return
    try:
        yield
    finally:
        lock.release()


def claim_once(state_dir: Path, session_id: str, hook_id: str) -> bool:
    """Claim the one run of a ``once`` hook in a session; False if already claimed.

    The claim is an exclusive file creation, so two concurrent dispatches of
    the same session cannot both win.
    """
    session_key = hashlib.sha256(session_id.encode()).hexdigest()[:32]
    folder = state_dir / "once" / session_key
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        fd = os.open(folder / hook_id, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    os.close(fd)
    return True
