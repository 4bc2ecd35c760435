"""The state of one project file a hook references (pure data).

The trust gate makes these (``executor.gates.trust.collect_references``);
the dependency finder (``executor.core.deps``) and the staging of reviewed
bytes read them. The core owns the type, so nothing in the core reaches up
to the gates for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class FileState:
    """The state of one project file a hook command references.

    ``kind`` is ``"file"``, ``"missing"`` or ``"symlink"``. For a symlink,
    ``link`` is the link's own text and ``sha256`` the hash of the file it
    leads to (``None`` when that is a directory or does not exist). ``data``
    holds the exact bytes that were hashed (``None`` when nothing was).
    ``executable`` is whether the file (the one a symlink leads to) has an
    execute bit: ``./hook.sh`` runs only if it does, so the bit is part of the
    trust hash and of the staged copy.
    """

    path: str
    kind: str
    sha256: str | None
    link: str | None = None
    data: bytes | None = field(default=None, compare=False, repr=False)
    executable: bool = False

    @property
    def mode(self) -> int:
        """The mode of the staged, read-only copy: ``0o555`` if executable, else ``0o444``."""
        return 0o555 if self.executable else 0o444
