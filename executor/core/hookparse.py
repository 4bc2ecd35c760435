"""A hook file of Claude Code's shape, whole: its top level, its events, its matcher groups (pure, no I/O).

A hook file has Claude Code's shape::

    {"hooks": {"PreToolUse": [{"matcher": "Bash",
                               "hooks": [{"type": "command", "command": "..."}]}]},
     "disableAllHooks": false, "allowManagedHooksOnly": false}

:func:`parse_hook_file` turns the decoded JSON of one file into a
:class:`~executor.core.hooks.HookFile`: one :class:`~executor.core.hooks.HookSpec`
per handler (:func:`~executor.core.hooks.parse_handler`), in file order, and a
:class:`~executor.core.hooks.Problem` for everything wrong, each naming the file
and the JSON path. A handler with an error is kept (so it can be listed and
logged as ``invalid``) but never runs; a file whose top level is wrong yields
no hooks. Agents whose files have another shape walk their events with
:func:`event_lists`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from executor.core.hooks import (
    HOOKCAGE_FILES,
    Collector,
    FileShape,
    HookFile,
    HookSpec,
    Scope,
    parse_handler,
)


def parse_hook_file(
    data: Any, *, scope: Scope, source: str, project_root: str | None = None,
    shape: FileShape = HOOKCAGE_FILES,
) -> HookFile:
    """Validate the decoded JSON of one hook file and flatten its handlers.

    Args:
        data: the file's decoded JSON.
        scope: which scope the file belongs to (decides what it may ask for).
        source: the file's path, for messages.
        project_root: the project root, to resolve and check ``mounts``.
        shape: the agent whose file it is (hookcage's own by default).
    """
    out = Collector(source, shape.agent)
    if not isinstance(data, dict):
        out.error("$", "the top level must be a JSON object")
        return HookFile(source, scope, problems=tuple(out.problems), agent=shape.agent)
    disable_all = _flag(data, "disableAllHooks", out)
    managed_only = _flag(data, "allowManagedHooksOnly", out)
    if shape.agent:
        # The agent's own switch for its own loader (`hookcage install` sets it so the agent
        # stops running repository hooks itself): hookcage still runs them, through its gates.
        managed_only = False
    if managed_only and scope is not Scope.MANAGED:
        out.warn("$.allowManagedHooksOnly", "only honoured in the managed hook file; ignored here")
        managed_only = False
    if "allowlist" in data and scope is not Scope.MANAGED:
        out.warn("$.allowlist", "the allow-list is set in config.toml, never in a hook file; ignored")
    hooks = data.get("hooks", {})
    specs: list[HookSpec] = []
    if not isinstance(hooks, dict):
        out.error("$.hooks", "must be an object mapping event names to matcher groups")
        hooks = {}
    for _, event, epath, groups in event_lists(hooks, shape, out, "matcher groups"):
        for gi, group in enumerate(groups):
            specs.extend(_parse_group(group, f"{epath}[{gi}]", event, scope, project_root, out, shape))
    return HookFile(source, scope, tuple(specs), tuple(out.problems), disable_all, managed_only,
                    shape.agent, tuple(out.routes))


def event_lists(
    hooks: Mapping[str, Any], shape: FileShape, out: Collector, what: str
) -> Iterator[tuple[str, str, str, list[Any]]]:
    """Each event of a file's ``hooks`` object: (the name as written, the event it is filed
    under, its JSON path, its array); an unknown name or a value that is not an array of
    ``what`` is a problem instead."""
    for name, items in hooks.items():
        epath = f"$.hooks.{name}"
        event = shape.event(name)
        if event is None:
            out.error(epath, f"unknown event {name!r}; valid events: {shape.event_list()}")
            continue
        if not isinstance(items, list):
            out.error(epath, f"must be an array of {what}", event)
            continue
        yield name, event, epath, items


def _flag(data: Mapping[str, Any], key: str, out: Collector) -> bool:
    value = data.get(key, False)
    if not isinstance(value, bool):
        out.error(f"$.{key}", "must be true or false")
        return False
    return value


def _parse_group(
    group: Any, path: str, event: str, scope: Scope, root: str | None, out: Collector,
    shape: FileShape,
) -> list[HookSpec]:
    if not isinstance(group, dict):
        out.error(path, "a matcher group must be an object with 'matcher' and 'hooks'", event)
        return []
    raw_matcher = group.get("matcher")
    if raw_matcher is not None and not isinstance(raw_matcher, str):
        out.error(f"{path}.matcher", "must be a string", event)
        return []
    matcher = shape.compile(raw_matcher)
    if matcher.error:
        # Not fatal: the group never fires (or the event ignores matchers), and saying so is enough.
        effect = "this group never fires" if shape.spec(event).matcher_field else f"{event} ignores matchers"
        out.warn(f"{path}.matcher", f"{matcher.error} ({effect})", event)
    for key in group.keys() - {"matcher", "hooks"} - shape.ignored_keys:
        out.warn(f"{path}.{key}", "unknown key, ignored", event)
    handlers = group.get("hooks")
    if not isinstance(handlers, list):
        out.error(f"{path}.hooks", "must be an array of hook handlers", event)
        return []
    specs = []
    for hi, raw in enumerate(handlers):
        spec = parse_handler(raw, f"{path}.hooks[{hi}]", event, matcher, scope, root, out, shape=shape)
        if spec is not None:
            specs.append(spec)
    return specs
