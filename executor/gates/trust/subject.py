"""The trust hash: :class:`TrustSubject` (everything a hook is trusted with; its
digest is the trust hash) and :class:`TrustRecord` (what the store keeps of it).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from executor.core.files import FileState
from executor.core.text import decode_exact
from executor.errors import TrustStoreError

TRUST_FORMAT = 1
"""The version of the trust hash and of the store document."""

ISOLATION_KEY = "isolation"
"""The profile key a hook's kernel isolation is in; only present when it is gVisor."""
GVISOR_ISOLATION = "gvisor"

MAX_FILE_TEXT = 256 * 1024
"""Bytes of each referenced file kept in a trust record for the next review's diff.

Kept exactly: decoded as UTF-8 with each byte that is not kept as a stand-in
(``surrogateescape``; the JSON store writes it as ``\\udcXX``), so the diff
shows a changed invalid byte. Records written before kept replacement
characters instead; whether a file changed is decided on its sha256 either way.
"""

FILE_KINDS = ("file", "missing", "symlink")


_HEX_DIGEST = re.compile(r"[0-9a-f]{64}\Z")


def _canonical_json(value: Any) -> str:
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False,
        default=_plain,
    )


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"a trust subject holds a {type(value).__name__}, which is not JSON")


@dataclass(frozen=True)
class TrustSubject:
    """Everything a repository hook is trusted with; its digest is the trust hash.

    ``profile`` is the full sandbox profile the executor will launch with
    (image id or digest, workspace, network, mounts, env, limits, timeout),
    as plain JSON values; ``capabilities`` the granted ones.
    """

    root: str
    source: str
    event: str
    matcher: str | None
    type: str
    command: str
    files: tuple[FileState, ...]
    profile: Mapping[str, Any]
    capabilities: tuple[str, ...]
    agent: str = ""
    """The agent whose file the hook is in (its dialect decides what its answer means)."""
    selectors: tuple[tuple[str, str | None], ...] = ()
    """Further payload fields the hook matches on (an agent's file patterns), as written."""
    direct: tuple[str, ...] = field(default=(), compare=False)
    """The paths among ``files`` that the command itself names (what the hook runs), as
    opposed to what it covers beside them; not hashed (the command is)."""
    condition: str | None = None
    """The handler's ``if`` rule as written: a changed condition is a changed hook."""

    def canonical(self) -> str:
        """The subject as canonical JSON (sorted keys, no spaces, ASCII).

        Raises:
            TypeError: the profile holds a value that is not JSON.
        """
        return _canonical_json({
            "format": TRUST_FORMAT,
            "root": self.root,
            "source": self.source,
            "event": self.event,
            "matcher": self.matcher,
            "type": self.type,
            "command": self.command,
            # The execute bit is appended only when set, so the hash of a hook
            # whose files carry none is what it was before the bit was covered.
            "files": [
                [f.path, f.kind, f.sha256, f.link, *(["x"] if f.executable else [])]
                for f in sorted(self.files, key=_by_path)
            ],
            "profile": self.profile,
            "capabilities": sorted(set(self.capabilities)),
            # Only when set: records of hookcage's own hooks keep the hash they had.
            **({"agent": self.agent} if self.agent else {}),
            **({"selectors": [list(pair) for pair in self.selectors]} if self.selectors else {}),
            **({"if": self.condition} if self.condition is not None else {}),
        })

    def digest(self) -> str:
        """The trust hash: sha256 (hex) of :meth:`canonical`."""
        return hashlib.sha256(self.canonical().encode("ascii")).hexdigest()

    def covering_digests(self) -> tuple[str, ...]:
        """The digests whose record lets this subject run: its own, and for a run under
        gVisor also the digest of the same hook reviewed under a shared kernel.

        The profile of a run under gVisor holds ``"isolation": "gvisor"``; a run
        under a shared-kernel runtime has no such key (so records written before
        the runtime was covered count as reviewed under a shared kernel). A
        review covers runs with the same or stronger isolation, never weaker:
        trusted under gVisor, a run under runc needs a review of its own.
        """
        own = self.digest()
        if self.profile.get(ISOLATION_KEY) != GVISOR_ISOLATION:
            return (own,)
        shared = {key: value for key, value in self.profile.items() if key != ISOLATION_KEY}
        return (own, replace(self, profile=shared).digest())


def _by_path(state: FileState) -> str:
    return state.path


@dataclass(frozen=True)
class TrustRecord:
    """One trusted digest, with what was reviewed (for listing and for the next diff)."""

    digest: str
    root: str
    source: str
    event: str
    matcher: str | None
    command: str
    files: tuple[tuple[str, str, str | None], ...]
    file_text: Mapping[str, str]
    profile: Mapping[str, Any]
    capabilities: tuple[str, ...]
    trusted_at: str
    executable: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        """The short id people type: the digest's first 12 characters."""
        return self.digest[:12]

    @classmethod
    def of(cls, subject: TrustSubject, now: str) -> TrustRecord:
        """The record of trusting ``subject`` at ``now`` (ISO 8601, UTC)."""
        files = sorted(subject.files, key=_by_path)
        return cls(
            digest=subject.digest(),
            root=subject.root,
            source=subject.source,
            event=subject.event,
            matcher=subject.matcher,
            command=subject.command,
            files=tuple((f.path, f.kind, f.sha256) for f in files),
            file_text={f.path: decode_exact(f.data[:MAX_FILE_TEXT]) for f in files if f.data is not None},
            profile=json.loads(_canonical_json(subject.profile)),
            capabilities=tuple(sorted(set(subject.capabilities))),
            trusted_at=now,
            executable=tuple(f.path for f in files if f.executable),
        )

    def to_json(self) -> dict[str, Any]:
        """The record as plain JSON values (what the store and exports hold)."""
        return {
            "digest": self.digest,
            "root": self.root,
            "source": self.source,
            "event": self.event,
            "matcher": self.matcher,
            "command": self.command,
            "files": [list(f) for f in self.files],
            "file_text": dict(self.file_text),
            "profile": dict(self.profile),
            "capabilities": list(self.capabilities),
            "trusted_at": self.trusted_at,
            "executable": list(self.executable),
        }

    @classmethod
    def from_json(cls, data: Any) -> TrustRecord:
        """Validate and build a record from :meth:`to_json`'s shape (unknown keys ignored).

        Raises:
            TrustStoreError: the shape is wrong; the message says where.
        """
        if not isinstance(data, dict):
            raise TrustStoreError("a trust record must be an object")
        digest = _field(data, "digest", str)
        if not _HEX_DIGEST.match(digest):
            raise TrustStoreError(f"trust record digest {digest[:80]!r} is not a sha256 hex digest")
        where = f"trust record {digest[:12]}"
        matcher = data.get("matcher")
        if matcher is not None and not isinstance(matcher, str):
            raise TrustStoreError(f"{where}: 'matcher' must be a string or null")
        files = _field(data, "files", list, where)
        for entry in files:
            if not (
                isinstance(entry, list) and len(entry) == 3
                and isinstance(entry[0], str) and entry[1] in FILE_KINDS
                and (entry[2] is None or (isinstance(entry[2], str) and _HEX_DIGEST.match(entry[2])))
            ):
                raise TrustStoreError(f"{where}: each of 'files' must be [path, kind, sha256 or null]")
        file_text = _field(data, "file_text", dict, where)
        if not all(isinstance(v, str) for v in file_text.values()):
            raise TrustStoreError(f"{where}: 'file_text' must map paths to strings")
        capabilities = _field(data, "capabilities", list, where)
        if not all(isinstance(c, str) for c in capabilities):
            raise TrustStoreError(f"{where}: 'capabilities' must be a list of strings")
        executable = data.get("executable", [])
        if not isinstance(executable, list) or not all(isinstance(p, str) for p in executable):
            raise TrustStoreError(f"{where}: 'executable' must be a list of paths")
        return cls(
            digest=digest,
            root=_field(data, "root", str, where),
            source=_field(data, "source", str, where),
            event=_field(data, "event", str, where),
            matcher=matcher,
            command=_field(data, "command", str, where),
            files=tuple((e[0], e[1], e[2]) for e in files),
            file_text=file_text,
            profile=_field(data, "profile", dict, where),
            capabilities=tuple(capabilities),
            trusted_at=_field(data, "trusted_at", str, where),
            executable=tuple(executable),
        )


def _field(data: Mapping[str, Any], key: str, kind: type[Any], where: str = "trust record") -> Any:
    value = data.get(key)
    if not isinstance(value, kind):
        raise TrustStoreError(f"{where}: {key!r} must be a{'n' if kind is dict else ''} {_KIND_NAMES[kind]}")
    return value


_KIND_NAMES: dict[type[Any], str] = {str: "string", list: "list", dict: "object"}
