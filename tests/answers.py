"""Helpers for tests of hooks' answers and hookcage's: literal hook output in, outcomes out (no I/O)."""

from __future__ import annotations

import json
from typing import Any

from executor.core.events import get_event
from executor.core.protocol import HookOutcome, parse_outcome


def parse(
    event: str, stdout: bytes = b"", *, code: int | None = 0, stderr: bytes = b"", hook: str = "h"
) -> HookOutcome:
    """One Claude-Code-dialect hook's answer to ``event``, parsed."""
    return parse_outcome(get_event(event), hook, code, stdout, stderr)


def js(value: Any) -> bytes:
    return json.dumps(value).encode()


def specific(event: str, **fields: Any) -> bytes:
    """A hook's JSON answer with only ``hookSpecificOutput``."""
    return js({"hookSpecificOutput": {"hookEventName": event, **fields}})


def strict_json(text: str) -> Any:
    """Parse like a strict agent would: no NaN, no Infinity."""

    def refuse(name: str) -> Any:
        raise ValueError(name)

    return json.loads(text, parse_constant=refuse)
