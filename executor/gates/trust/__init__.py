"""Trust on first use for repository hooks: the trust hash and the trust store.

How this works::

    words of the command ──collect_references──▶ FileState per referenced file
                                                  (path, kind, sha256, link, the bytes)
    hook + files + sandbox profile + capabilities ──TrustSubject.digest()──▶ sha256
    TrustStore(path).is_trusted(digest)  ◀── TrustRecord written at review

A project or local hook runs only when its *trust subject* hashes to a digest
the user trusted. The subject is everything that decides what the hook does:
the project root, the hook file, event, matcher, type and command, the state
of every project file the command names, the full sandbox profile and the
granted capabilities. Change any of it and the hook is untrusted again.

References are collected in two passes. The first resolves every word, one
path component at a time as the kernel does, and refuses (``UnsafeReference``)
any path that leaves the project: ``..`` past the root, an absolute path that
only looks inside, a symlink (or a chain, or a directory symlink) pointing
out. Nothing is read until every word has passed. The second pass reads each
file once, walking down from the root with ``O_NOFOLLOW`` at every component,
so a file swapped for a symlink meanwhile is refused, not followed; the bytes
kept in :attr:`FileState.data` are the bytes that were hashed and the bytes the
executor stages over the workspace path.

The store is one JSON document ``{"format": 1, "records": {digest: record}}``.
Every change is a read-modify-write under a ``filelock`` lock beside it, and
lands with an atomic rename of a fsynced temporary file, so a reader (readers
do not lock) sees the old document or the new one, never half of one. A
corrupt store is never written over: every operation raises
:class:`~executor.errors.TrustStoreError` naming the repair. Extra trust files
(``HOOKCAGE_TRUST_FILE``, the export format) are read, never written.

The package, by job: :mod:`.references` (which project files a command
references, and reading them: :func:`collect_references`), :mod:`.scripts`
(what a command runs and what its scripts load: :func:`command_words`,
:func:`collect_loaded`), :mod:`.subject` (the trust hash: :class:`TrustSubject`,
:class:`TrustRecord`) and :mod:`.store` (:class:`TrustStore`).
"""

from __future__ import annotations

from executor.gates.trust.references import (
    MAX_REFERENCE_DEPTH,
    MAX_REFERENCED_FILE,
    MAX_REFERENCED_FILES,
    MAX_WALKED_PATHS,
    UnsafeReference,
    collect_references,
)
from executor.gates.trust.scripts import collect_loaded, command_words, loaded_words
from executor.gates.trust.store import TrustStore
from executor.gates.trust.subject import MAX_FILE_TEXT, TRUST_FORMAT, TrustRecord, TrustSubject

__all__ = [
    "MAX_FILE_TEXT",
    "MAX_REFERENCED_FILE",
    "MAX_REFERENCED_FILES",
    "MAX_REFERENCE_DEPTH",
    "MAX_WALKED_PATHS",
    "TRUST_FORMAT",
    "TrustRecord",
    "TrustStore",
    "TrustSubject",
    "UnsafeReference",
    "collect_loaded",
    "collect_references",
    "command_words",
    "loaded_words",
]
