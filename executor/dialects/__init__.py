"""The agents hookcage speaks to, one module each (see :mod:`executor.dialects.base`).

Every module of this package that defines ``DIALECT`` is an agent; adding an
agent is one new module plus its tests. :data:`DIALECTS` lists them by the
name ``--agent`` takes, Claude Code (the canonical dialect) first.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping
from typing import Any

from executor.core import policy
from executor.core.conditions import ConditionContext
from executor.core.events import EventSpec
from executor.core.hooks import HookSpec
from executor.dialects.base import Dialect
from executor.errors import PayloadError


def _discover() -> dict[str, Dialect]:
    found: dict[str, Dialect] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: (i.name != "claude", i.name)):
        if info.name == "base":
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        dialect = getattr(module, "DIALECT", None)
        if isinstance(dialect, Dialect):
            if dialect.name in found:
                raise RuntimeError(f"two dialects are called {dialect.name!r}")
            found[dialect.name] = dialect
    return found


DIALECTS: Mapping[str, Dialect] = _discover()
"""The agents ``--agent`` knows, by name (Claude Code first)."""
DEFAULT_DIALECT: Dialect = DIALECTS["claude"]


def _alias_groups() -> dict[str, tuple[str, ...]]:
    natives: dict[str, list[str]] = {}
    for dialect in DIALECTS.values():
        for native, canonical in dialect.tool_names.items():
            natives.setdefault(canonical, [])
            if native not in natives[canonical] and native != canonical:
                natives[canonical].append(native)
    groups = {canonical: (canonical, *names) for canonical, names in natives.items()}
    return {name: group for group in groups.values() for name in group}


_ALIAS_GROUPS = _alias_groups()


def tool_aliases(name: str) -> tuple[str, ...]:
    """A tool name and every agent's name for the same tool, Claude Code's first
    (``execute_command`` -> ``("Bash", "execute_command", "run_shell_command", ...)``);
    just the name when no agent knows it. Built from each dialect's ``tool_names``."""
    return _ALIAS_GROUPS.get(name, (name,))


def selects(
    event: EventSpec, hook: HookSpec, payload: Mapping[str, Any], context: ConditionContext | None = None
) -> bool:
    """Does ``hook`` fire for this (canonical) payload, tool names meeting across every agent's
    (:func:`executor.core.policy.selects` with :func:`tool_aliases`; ``context`` for ``if`` rules)."""
    return policy.selects(event, hook, payload, tool_aliases, context)


def canonical_tool(name: str) -> str:
    """Claude Code's name for a tool any agent names ``name`` (the name itself when none)."""
    return tool_aliases(name)[0]


def agent_names() -> str:
    """The known agent names, comma-separated, for messages."""
    return ", ".join(DIALECTS)


def get_dialect(name: str) -> Dialect:
    """The dialect of the agent called ``name``.

    Raises:
        PayloadError: no such agent; the message lists the known ones.
    """
    try:
        return DIALECTS[name]
    except KeyError:
        raise PayloadError(
            f"unknown agent {name!r}; known agents: {agent_names()} (hookcage dispatch --agent help)"
        ) from None


def detect_dialect(payload: Mapping[str, Any]) -> Dialect:
    """The agent recognised from its payload; Claude Code when none is (the canonical dialect)."""
    for dialect in DIALECTS.values():
        if dialect.recognises(payload):
            return dialect
    return DEFAULT_DIALECT


def resolve_dialect(agent: str | None, payload: Mapping[str, Any]) -> Dialect:
    """``--agent`` when given (raises :class:`PayloadError` when unknown), else recognised from the payload."""
    return get_dialect(agent) if agent is not None else detect_dialect(payload)


__all__ = ["DEFAULT_DIALECT", "DIALECTS", "Dialect", "agent_names", "canonical_tool", "detect_dialect",
           "get_dialect", "resolve_dialect", "selects", "tool_aliases"]
