"""What ``hookcage install AGENT`` writes, planned without I/O.

An agent is taken over in two moves: its events are **routed** to
``hookcage dispatch --agent NAME`` (one entry per event, in the agent's own
file), and the agent's **switch** that stops it loading repositories' hooks
itself is set. Each agent's dialect plans both
(:meth:`executor.dialects.base.Dialect.install`) from the current content of
the files it would change, handed in by the edge (:data:`Read`), and returns
a :class:`Plan`: the whole new content of each file. The edge
(:mod:`executor.installer`) shows it as a diff, or backs the files up and
writes them; ``uninstall`` puts back what was there.

This module holds the pieces every agent's plan shares: the route entries
(:func:`routes`), merging them into an agent's Claude-Code-shaped settings
without touching anything else (:func:`merge_routes`, :func:`claude_shaped`)
or into the flat ``{"hooks": {event: [entry, ...]}}`` files of ok, Copilot
CLI and Cursor (:func:`merge_flat`), keeping a file's own bytes when nothing
changes (:func:`json_edit`), and taking routes out again (:func:`unroute`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from executor.errors import HookcageError

InstallMode = Literal["user", "managed"]
Read = Callable[[str], bytes | None]
"""The current content of a file (``None``: it does not exist), handed in by the edge."""

NEVER_ROUTED = frozenset({"WorktreeCreate", "FileChanged", "MessageDisplay"})
"""Claude Code's events a blanket route must not take: WorktreeCreate's hook replaces
worktree creation, FileChanged's matcher is the list of files to watch, MessageDisplay
fires per streamed chunk (../shared/AGENTS.md, "Routing traps")."""


@dataclass(frozen=True)
class FileEdit:
    """One file ``install`` writes: its whole new content (``None``: remove it)."""

    path: str
    content: bytes | None
    mode: int = 0o644
    why: str = ""


@dataclass(frozen=True)
class Plan:
    """Everything ``install`` would write for one agent, and what is left to do by hand."""

    agent: str
    mode: InstallMode
    edits: tuple[FileEdit, ...]
    notes: tuple[str, ...] = ()


class NotInstallable(HookcageError):
    """The agent cannot be taken over (or not in this mode).

    Attributes:
        explanation: one paragraph: what would still run outside hookcage.
        offer: the routing that can still be added, or None.
    """

    def __init__(self, explanation: str, offer: Plan | None = None) -> None:
        super().__init__(explanation)
        self.explanation = explanation
        self.offer = offer


def dispatch_command(hookcage: str, agent: str) -> str:
    """The route's command: ``<hookcage> dispatch --agent NAME`` (quoted when the path needs it)."""
    import shlex

    return f"{shlex.quote(hookcage)} dispatch --agent {agent}"


def routes(events: Iterable[str], command: str, *, matcher_events: Iterable[str] = ()) -> dict[str, Any]:
    """Claude-Code-shaped route entries: every event to ``command``.

    Args:
        events: the agent's event names to route (never :data:`NEVER_ROUTED`).
        command: what each route runs (:func:`dispatch_command`).
        matcher_events: the events that take a matcher: their group gets ``"matcher": "*"``.
    """
    with_matcher = set(matcher_events)
    hooks: dict[str, Any] = {}
    for event in events:
        if event in NEVER_ROUTED:
            continue
        group: dict[str, Any] = {"hooks": [{"type": "command", "command": command}]}
        if event in with_matcher:
            group = {"matcher": "*", **group}
        hooks[event] = [group]
    return {"hooks": hooks}


def _is_route(handler: Any, command: str) -> bool:
    return isinstance(handler, dict) and handler.get("command") == command


def superseded(old: Any, new: str) -> bool:
    """Whether ``old`` is hookcage's route written for another program than ``new`` (same arguments).

    An install that routes to another ``hookcage`` (the launcher after the console script, an
    interpreter that moved) replaces such routes instead of adding a second one: two routes
    would answer every event twice.
    """
    import shlex

    from executor.core.hooks import is_self_route

    if not isinstance(old, str) or old == new or not (is_self_route(old) and is_self_route(new)):
        return False
    return shlex.split(old)[1:] == shlex.split(new)[1:]


def _without_superseded(groups: list[Any], commands: Iterable[str], key: str = "command") -> list[Any]:
    """Claude-Code-shaped ``groups`` without hookcage's routes that ``commands`` supersede."""
    news = list(commands)
    kept = []
    for group in groups:
        if isinstance(group, dict) and isinstance(group.get("hooks"), list):
            handlers = [h for h in group["hooks"]
                        if not (isinstance(h, dict) and any(superseded(h.get(key), c) for c in news))]
            if not handlers and group["hooks"]:
                continue
            if len(handlers) != len(group["hooks"]):
                group = {**group, "hooks": handlers}
        kept.append(group)
    return kept


def merge_routes(existing: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """``existing`` settings with ``new``'s route groups added (idempotent).

    Every other key, event and hook of ``existing`` is kept as it is, in its
    order; a route already there (the same command on the event) is not added
    twice, and one written for another ``hookcage`` program (:func:`superseded`)
    is replaced.
    """
    merged = dict(existing)
    hooks = dict(merged.get("hooks") or {}) if isinstance(merged.get("hooks"), dict) else {}
    for event, groups in new.get("hooks", {}).items():
        current = list(hooks.get(event) or []) if isinstance(hooks.get(event), list) else []
        current = _without_superseded(current, [h["command"] for g in groups for h in g["hooks"]])
        for group in groups:
            commands = [h["command"] for h in group["hooks"]]
            present = any(
                isinstance(g, dict) and isinstance(g.get("hooks"), list)
                and any(_is_route(h, c) for h in g["hooks"] for c in commands)
                for g in current
            )
            if not present:
                current.append(group)
        hooks[event] = current
    merged["hooks"] = hooks
    return merged


def unroute(existing: Mapping[str, Any], command: str) -> dict[str, Any]:
    """``existing`` without hookcage's route entries (``command``); groups and events left empty go too."""
    result = dict(existing)
    hooks = result.get("hooks")
    if not isinstance(hooks, dict):
        return result
    kept: dict[str, Any] = {}
    for event, groups in hooks.items():
        if not isinstance(groups, list):
            kept[event] = groups
            continue
        left = []
        for group in groups:
            if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                handlers = [h for h in group["hooks"] if not _is_route(h, command)]
                if not handlers:
                    continue
                group = {**group, "hooks": handlers}
            left.append(group)
        if left:
            kept[event] = left
    if kept:
        result["hooks"] = kept
    else:
        result.pop("hooks", None)
    return result


def json_bytes(value: Any) -> bytes:
    """A settings file as ``install`` writes it: 2-space indent, a trailing newline."""
    return (json.dumps(value, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def read_json(read: Read, path: str) -> dict[str, Any]:
    """A JSON object file's content (``{}`` when absent or empty).

    Raises:
        NotInstallable: the file is not a JSON object (install never overwrites what it cannot merge).
    """
    raw = read(path)
    if raw is None or not raw.strip():
        return {}
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise NotInstallable(f"{path} is not valid JSON ({exc}); fix it first: install never overwrites "
                             "a file it cannot merge") from None
    if not isinstance(data, dict):
        raise NotInstallable(f"{path} is not a JSON object; fix it first: install never overwrites a file "
                             "it cannot merge")
    return data


def merge_flat(existing: Mapping[str, Any], entries: Mapping[str, Mapping[str, Any]], command_key: str,
               ) -> dict[str, Any]:
    """``existing`` with one flat entry per event added (idempotent).

    Args:
        existing: the agent's file, decoded.
        entries: event -> the entry to add there.
        command_key: the entry's key holding the command (``command``, Copilot's ``bash``): an
            entry of the event with the same command is hookcage's route already; one with a
            :func:`superseded` command is replaced.
    """
    merged = dict(existing)
    hooks = dict(merged["hooks"]) if isinstance(merged.get("hooks"), dict) else {}
    for event, entry in entries.items():
        current = list(hooks[event]) if isinstance(hooks.get(event), list) else []
        command = entry[command_key]
        current = [e for e in current if not (isinstance(e, dict) and superseded(e.get(command_key), command))]
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
