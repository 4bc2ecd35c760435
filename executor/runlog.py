"""The run log (one JSON line per hook considered) and ``once`` bookkeeping.

Both live under ``$HOOKCAGE_HOME``. Lines of one dispatch are appended with a
single ``write`` on an ``O_APPEND`` descriptor, so concurrent dispatches do not
interleave within a line.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any


def append_records(path: Path, records: Iterable[Mapping[str, Any]]) -> None:
    """Append records as JSON lines (file mode 0600, directory 0700)."""
    data = "".join(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in records)
    if not data:
        return
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, data.encode("utf-8"))
    finally:
        os.close(fd)


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
