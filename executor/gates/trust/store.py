"""The trust store: :class:`TrustStore`, one JSON document of records, changed under
a lock and written by an atomic rename (see :mod:`executor.gates.trust`).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

import filelock

from executor import filecache
from executor.errors import TrustStoreError
from executor.gates.trust.references import O_CLOEXEC, os_reason
from executor.gates.trust.subject import TRUST_FORMAT, TrustRecord, TrustSubject

LOCK_TIMEOUT = 30.0
"""Seconds to wait for another process's write to the store."""


_MIN_PREFIX = 6
_HEX_PREFIX = re.compile(rf"[0-9a-f]{{{_MIN_PREFIX},64}}\Z")


class TrustStore:
    """The user's trusted digests (a JSON file) plus read-only extra trust files.

    Args:
        path: the store, ``$HOOKCAGE_HOME/trust.json``; created on first write.
        extra: trust files in the export format (``HOOKCAGE_TRUST_FILE``),
            only ever read.

    Every method raises :class:`TrustStoreError` when the store or an extra
    file is corrupt or unreadable, or a write fails (the store is then left as
    it was).
    """

    def __init__(self, path: Path, *, extra: Sequence[Path] = ()) -> None:
        self.path = Path(path)
        self.extra = tuple(Path(p) for p in extra)
        self._filelock: filelock.FileLock | None = None

    @property
    def _lock(self) -> filelock.FileLock:
        """The store's write lock, made on first write (reading needs none)."""
        if self._filelock is None:
            self._filelock = filelock.FileLock(f"{self.path}.lock", timeout=LOCK_TIMEOUT, mode=0o600)
        return self._filelock

    def is_trusted(self, digest: str | Iterable[str]) -> bool:
        """True when ``digest`` (or one of several: :meth:`TrustSubject.covering_digests`) is in
        the store or in an extra trust file."""
        wanted = {digest} if isinstance(digest, str) else set(digest)
        return any(r.digest in wanted for r in self.records())

    def records(self) -> list[TrustRecord]:
        """Every record, the store's first, then each extra file's (oldest first in each)."""
        seen: set[str] = set()
        out: list[TrustRecord] = []
        for group in [self._load_store(cached=True), *(self._load_extra(p) for p in self.extra)]:
            for record in sorted(group.values(), key=lambda r: (r.trusted_at, r.digest)):
                if record.digest not in seen:
                    seen.add(record.digest)
                    out.append(record)
        return out

    def find(self, id_or_digest_prefix: str) -> TrustRecord | None:
        """The one record whose digest starts with the prefix (at least 6 hex digits).

        Returns:
            The record, or None when none or several match, or the prefix is too short.
        """
        prefix = _prefix(id_or_digest_prefix)
        if prefix is None:
            return None
        matches = [r for r in self.records() if r.digest.startswith(prefix)]
        return matches[0] if len(matches) == 1 else None

    def add(self, records: Iterable[TrustRecord]) -> None:
        """Trust these records (a record with the same digest is replaced)."""
        new = list(records)

        def change(stored: dict[str, TrustRecord]) -> int:
            for record in new:
                stored[record.digest] = record
            return len(new)

        self._update(change)

    def revoke(self, ids: Iterable[str]) -> int:
        """Remove the store's records matching any id or digest prefix (>= 6 hex digits).

        Returns:
            How many were removed. Records of extra files are never removed.
        """
        prefixes = [p for p in map(_prefix, ids) if p is not None]
        return self.prune(lambda r: not any(r.digest.startswith(p) for p in prefixes))

    def revoke_all(self) -> int:
        """Remove every record of the store; returns how many."""
        return self.prune(lambda r: False)

    def prune(self, keep: Callable[[TrustRecord], bool]) -> int:
        """Remove the store's records for which ``keep`` is false; returns how many."""

        def change(stored: dict[str, TrustRecord]) -> int:
            gone = [d for d, r in stored.items() if not keep(r)]
            for digest in gone:
                del stored[digest]
            return len(gone)

        return self._update(change)

    def export(self) -> str:
        """All records (store and extra files) as JSON text, the format extra files are read in."""
        return _document({r.digest: r for r in self.records()})

    def previous(self, subject: TrustSubject) -> TrustRecord | None:
        """The latest record of the same hook with another digest, to diff against at review.

        The same hook is the same root, source, event and matcher; a record
        with the same command too is preferred.
        """
        digest = subject.digest()
        key = (subject.root, subject.source, subject.event, subject.matcher)
        same = [
            r for r in self.records()
            if (r.root, r.source, r.event, r.matcher) == key and r.digest != digest
        ]
        best = [r for r in same if r.command == subject.command] or same
        return max(best, key=lambda r: (r.trusted_at, r.digest), default=None)

    # -- reading and writing ------------------------------------------------------

    def _update(self, change: Callable[[dict[str, TrustRecord]], int]) -> int:
        """Read, change and write the store under its lock; write only when something changed."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as exc:
            raise TrustStoreError(f"cannot create {self.path.parent} for the trust store ({os_reason(exc)})") from exc
        try:
            with self._lock:
                stored = self._load_store()
                changed = change(stored)
                if changed:
                    self._write(stored)
                return changed
        except filelock.Timeout as exc:
            raise TrustStoreError(
                f"timed out after {LOCK_TIMEOUT:g}s waiting for the trust store lock {self._lock.lock_file}"
                " (another hookcage is writing; if none is, remove the lock file)"
            ) from exc
        except OSError as exc:
            raise TrustStoreError(f"cannot lock the trust store ({self._lock.lock_file}: {os_reason(exc)})") from exc

    def _load_store(self, *, cached: bool = False) -> dict[str, TrustRecord]:
        """The store's records; ``cached``: shared with other calls (:mod:`executor.filecache`),
        not to be changed (a write reads afresh, under the lock)."""
        path = self.path

        def parse(raw: bytes) -> dict[str, TrustRecord]:
            return _parse(raw, lambda problem: _store_trouble(path, problem))

        try:
            if cached:
                return filecache.FILES.load(path, ("trust store", str(path)), path.read_bytes, parse)
            raw = path.read_bytes()
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise TrustStoreError(_store_trouble(path, f"cannot be read ({os_reason(exc)})")) from exc
        return parse(raw)

    def _load_extra(self, path: Path) -> dict[str, TrustRecord]:
        """An extra trust file's records (shared: :mod:`executor.filecache`; never written)."""
        def parse(raw: bytes) -> dict[str, TrustRecord]:
            return _parse(raw, lambda problem: f"trust file {path} (HOOKCAGE_TRUST_FILE) {problem}: "
                          "fix it or stop pointing at it")

        try:
            return filecache.FILES.load(path, ("trust file", str(path)), path.read_bytes, parse)
        except OSError as exc:
            raise TrustStoreError(
                f"trust file {path} (HOOKCAGE_TRUST_FILE) cannot be read ({os_reason(exc)})"
            ) from exc

    def _write(self, records: Mapping[str, TrustRecord]) -> None:
        """Replace the store atomically: temp file, fsync, rename, fsync the directory."""
        data = _document(records).encode("ascii")
        directory = self.path.parent
        try:
            fd, temp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=directory)
        except OSError as exc:
            raise TrustStoreError(f"cannot write the trust store {self.path} ({os_reason(exc)})") from exc
        try:
            with os.fdopen(fd, "wb") as out:  # mkstemp made it 0600
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temp, self.path)
        except BaseException as exc:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            if isinstance(exc, OSError):
                raise TrustStoreError(
                    f"cannot write the trust store {self.path} ({os_reason(exc)}); it was left as it was"
                ) from exc
            raise
        try:
            dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | O_CLOEXEC)
        except OSError:
            return
        # The rename is done; a file system that cannot fsync a directory keeps it all the same.
        with contextlib.suppress(OSError):
            os.fsync(dir_fd)
        os.close(dir_fd)


def _prefix(text: str) -> str | None:
    prefix = text.strip().lower()
    return prefix if _HEX_PREFIX.match(prefix) else None


def _document(records: Mapping[str, TrustRecord]) -> str:
    body = {"format": TRUST_FORMAT, "records": {d: r.to_json() for d, r in records.items()}}
    return json.dumps(body, indent=2, sort_keys=True, ensure_ascii=True) + "\n"


def _store_trouble(path: Path, problem: str) -> str:
    aside = shlex.quote(f"{path}.bad")
    return (
        f"trust store {path} {problem}: move it aside (mv {shlex.quote(str(path))} {aside})"
        " and review again with `hookcage trust`"
    )


def _parse(raw: bytes, trouble: Callable[[str], str]) -> dict[str, TrustRecord]:
    """Parse a store or export document.

    Args:
        raw: the file's bytes.
        trouble: builds the one-line error message from what is wrong.
    """
    try:
        doc = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise TrustStoreError(trouble(f"is corrupt (not UTF-8 at byte {exc.start})")) from exc
    except json.JSONDecodeError as exc:
        raise TrustStoreError(trouble(f"is corrupt ({exc.msg} at line {exc.lineno})")) from exc
    except RecursionError as exc:
        raise TrustStoreError(trouble("is corrupt (nested too deeply)")) from exc
    if not isinstance(doc, dict):
        raise TrustStoreError(trouble("is corrupt (not a JSON object)"))
    version = doc.get("format")
    if version != TRUST_FORMAT or isinstance(version, bool):
        if isinstance(version, int) and not isinstance(version, bool) and version > TRUST_FORMAT:
            raise TrustStoreError(trouble(
                f"has format {version}, from a newer hookcage (this one reads format {TRUST_FORMAT};"
                " upgrading hookcage fixes it too)"
            ))
        if "format" not in doc:
            raise TrustStoreError(trouble("is corrupt (no format number)"))
        raise TrustStoreError(trouble(f"is corrupt (format {json.dumps(version)[:20]}, expected {TRUST_FORMAT})"))
    records = doc.get("records")
    if not isinstance(records, dict):
        raise TrustStoreError(trouble("is corrupt ('records' must be an object)"))
    out: dict[str, TrustRecord] = {}
    for digest, data in records.items():
        try:
            record = TrustRecord.from_json(data)
        except TrustStoreError as exc:
            raise TrustStoreError(trouble(f"is corrupt ({exc})")) from exc
        if record.digest != digest:
            raise TrustStoreError(trouble(f"is corrupt (record {digest[:12]!r} holds digest {record.digest[:12]})"))
        out[digest] = record
    return out
