"""Route entries for the agents whose hook files are not Claude Code's shape (pure).

``hookcage install`` adds one entry per event that runs ``hookcage dispatch
--agent NAME``. Claude-Code-shaped files go through
:func:`executor.core.install.merge_routes`; the flat ``{"hooks": {event:
[entry, ...]}}`` files of ok, Copilot CLI and Cursor go through
:func:`merge_flat` here. Both keep every other key and entry, add nothing
already there, and keep the file's own bytes when nothing changes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from executor.core.install import FileEdit, Read, json_bytes, merge_routes, read_json


def merge_flat(existing: Mapping[str, Any], entries: Mapping[str, Mapping[str, Any]], command_key: str,
               ) -> dict[str, Any]:
    """``existing`` with one flat entry per event added (idempotent).

    Args:
        existing: the agent's file, decoded.
        entries: event -> the entry to add there.
        command_key: the entry's key holding the command (``command``, Copilot's ``bash``): an
            entry of the event with the same command is hookcage's route already.
    """
    merged = dict(existing)
    hooks = dict(merged["hooks"]) if isinstance(merged.get("hooks"), dict) else {}
    for event, entry in entries.items():
        current = list(hooks[event]) if isinstance(hooks.get(event), list) else []
        command = entry[command_key]
        if not any(isinstance(e, dict) and e.get(command_key) == command for e in current):
            current.append(dict(entry))
        hooks[event] = current
    merged["hooks"] = hooks
    return merged


def json_edit(read: Read, path: str, update: Any, why: str) -> FileEdit:
    """The edit of a JSON settings file: ``update(current) -> new`` (its own bytes kept when unchanged)."""
    raw = read(path)
    current = read_json(read, path)
    new = update(current)
    content = raw if raw is not None and new == current else json_bytes(new)
    return FileEdit(path, content, why=why)


def claude_shaped(read: Read, path: str, new_routes: Mapping[str, Any], why: str) -> FileEdit:
    """The edit adding Claude-Code-shaped ``new_routes`` to the JSON file at ``path``."""
    return json_edit(read, path, lambda current: merge_routes(current, new_routes), why)


def events_list(events: Iterable[str]) -> str:
    """Events named for people: ``A, B and C``."""
    names = list(events)
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
