"""Helpers shared by the unit and integration suites."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def commands_in(hooks: dict[str, Any] | str) -> list[str]:
    """Every ``command`` string of a hook file (dict or JSON text); [] when it does not parse."""
    if isinstance(hooks, str):
        try:
            hooks = json.loads(hooks)
        except ValueError:
            return []
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if isinstance(value.get("command"), str):
                found.append(value["command"])
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(hooks)
    return found


def allow(home: Path, entries: Iterable[str]) -> None:
    """Put exact allow-list entries in ``home/config.toml`` (what `hookcage allow` would do)."""
    path = home / "config.toml"
    existing: list[str] = []
    if path.exists():
        import tomllib

        existing = tomllib.loads(path.read_text()).get("allowlist", {}).get("allow", [])
    merged = list(dict.fromkeys([*existing, *entries]))
    path.write_text("[allowlist]\nallow = " + json.dumps(merged) + "\n")


def containers_created(client: Any, session: str, since: float) -> int:
    """How many containers the engine created for hookcage ``session`` since ``since`` (its event log)."""
    import time

    events = client.events(since=int(since) - 1, until=int(time.time()) + 1, decode=True,
                           filters={"type": "container", "event": "create",
                                    "label": f"hookcage.session={session}"})
    return sum(1 for _ in events)
