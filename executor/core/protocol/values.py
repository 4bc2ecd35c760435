"""The protocol's values: what a hook said, the folded verdict, hookcage's answer.

Plain frozen dataclasses and the two JSON helpers every dialect renders with
(:func:`dumps`, :func:`join`); :mod:`executor.core.protocol` tells how they are used.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from executor.core.text import MESSAGE_CAP, cap_text

Decision = Literal["allow", "deny", "ask", "defer"]
Status = Literal["ok", "block", "error"]

DECISION_RANK: Mapping[str, int] = {"allow": 0, "ask": 1, "defer": 2, "deny": 3}


class _Unset:
    """Marks "the hook did not rewrite the tool output" (``None`` is a valid rewrite)."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


@dataclass(frozen=True)
class HookOutcome:
    """What one hook said, parsed. Strings are already sanitised and capped.

    Attributes:
        hook: how the hook is named in messages (its name or command).
        status: ``ok``, ``block`` (exit 2 or ``decision: "block"``) or
            ``error`` (it could not answer: crash, timeout, garbage).
        decision: a permission decision, on events that carry one.
        reason: why it blocked, or its ``permissionDecisionReason``.
        error: what went wrong, for ``status == "error"``.
        notes: parts of the answer that were ignored, and why.
        updated_output: the rewritten tool output, or ``UNSET``.
        worktree_path: the path a WorktreeCreate hook answered (the last
            non-empty line of its stdout, or ``hookSpecificOutput.worktreePath``).
    """

    hook: str
    status: Status = "ok"
    exit_code: int | None = 0
    decision: Decision | None = None
    reason: str | None = None
    continue_: bool = True
    stop_reason: str | None = None
    suppress_output: bool = False
    system_message: str | None = None
    additional_context: str | None = None
    updated_input: dict[str, Any] | None = None
    updated_output: Any = UNSET
    error: str | None = None
    notes: tuple[str, ...] = ()
    hook_id: str = ""
    worktree_path: str | None = None


@dataclass(frozen=True)
class Verdict:
    """The folded answer of every hook that ran for one event.

    ``worktree_path`` is WorktreeCreate's answer: the one path its hooks
    printed, ``None`` when the creation fails (then ``blocked`` is set and
    ``reason`` says why); :func:`worktree_answer` turns it into the answer.
    """

    event: str
    outcomes: tuple[HookOutcome, ...] = ()
    blocked: bool = False
    reason: str | None = None
    decision: Decision | None = None
    decision_reason: str | None = None
    continue_: bool = True
    stop_reason: str | None = None
    suppress_output: bool = False
    system_message: str | None = None
    additional_context: str | None = None
    updated_input: dict[str, Any] | None = None
    updated_output: Any = UNSET
    notes: tuple[str, ...] = field(default=())
    worktree_path: str | None = None

    @property
    def blocks(self) -> bool:
        """The agent must not go on with what it was doing (block or deny)."""
        return self.continue_ and (self.blocked or self.decision == "deny")


@dataclass(frozen=True)
class AgentAnswer:
    """hookcage's own answer: the exit code and the two streams."""

    exit_code: int
    stdout: str
    stderr: str


class SandboxFacts(Protocol):
    """Where a hook ran, as far as its error messages need (``SandboxOptions`` fits)."""

    @property
    def backend(self) -> str: ...

    @property
    def workspace(self) -> str: ...

    @property
    def network(self) -> str: ...


NAME_CAP = 200
"""Characters of a hook's name (or command) in hookcage's messages."""


def dumps(value: Any) -> str:
    """JSON text that can always be written as UTF-8.

    A lone surrogate (``"\\ud800"`` in the JSON it came from) cannot be encoded
    as UTF-8; such text falls back to ASCII escapes, which keep it exactly.
    """
    text = json.dumps(value, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value)
    return text


def join(parts: Iterable[str | None], sep: str = "\n") -> str | None:
    kept = [p for p in parts if p]
    return cap_text(sep.join(kept), MESSAGE_CAP) if kept else None
