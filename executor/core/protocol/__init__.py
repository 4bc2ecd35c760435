"""The hook protocol (Claude Code dialect), with no I/O.

How this works:

1. :func:`build_stdin` turns the agent's payload into the bytes every matching
   hook reads on stdin (the payload passed through, ``hook_event_name`` set).
2. :func:`parse_outcome` turns one hook's exit code, stdout and stderr into a
   :class:`HookOutcome`: 0 = success (stdout is JSON when its first non-blank
   character is ``{``, else plain text), 2 = block with stderr as the reason
   (on events that can block; elsewhere it is shown to the user), anything
   else = a non-blocking error. Timeouts and OOM kills are errors too: data,
   never exceptions. Two exits are findings rather than verdicts: 126/127
   (the command could not be run: the error names the program and how to
   get it) and an exit 2 whose last stderr line is the shell's own error (a
   failed redirection, a syntax error: the error says what the sandbox
   refused and which option allows it). :func:`apply_on_error` turns an
   error into a denial for hooks whose ``on_error`` is ``deny``.
3. :func:`fold` combines the outcomes of every hook of one event, in config
   order, into one :class:`Verdict`: deny > defer > ask > allow; any block
   blocks; ``continue: false`` wins; contexts and system messages
   concatenate; two different input rewrites become ``ask`` naming both.
4. The agent's dialect (:meth:`executor.dialects.base.Dialect.render`) turns
   the verdict into hookcage's own answer to the agent, in its words; for
   Claude Code: exit 0 with the folded JSON on stdout
   (``{}`` when there is nothing to say); a block rides in that JSON where
   the agent reads it there (``permissionDecision: "deny"``,
   ``decision.behavior: "deny"`` or ``decision: "block"``), else it is exit 2
   with the reason on stderr. :func:`executor.dialects.resolve_dialect`
   picks the dialect from ``--agent`` or recognises it from the payload.

Every string that reaches the agent passes :func:`executor.core.text.sanitize`
(terminal escapes, controls, bidi and invisible characters shown as visible
escapes such as ``\\x1b``, nothing dropped) and is capped at 10,000
characters; the dialect's ``render`` applies it once more to whatever it writes, so no
path around the parser reaches the agent raw. hookcage's own lines come
first in the system message, one line each, secrets redacted.

The package, by job: :mod:`.values` (:class:`HookOutcome`, :class:`Verdict`,
:class:`AgentAnswer` and the JSON helpers :func:`dumps` and :func:`join` every
dialect renders with), :mod:`.parsing` (:func:`build_stdin`, :class:`HookRun`,
:func:`parse_outcome` and the findings for exits that are not verdicts),
:mod:`.answers` (what stdout says on exit 0: the JSON answer, WorktreeCreate's
path), :mod:`.folding` (:func:`apply_on_error`, :func:`restrict`, :func:`fold`,
:func:`fail_verdict`, :func:`worktree_answer`).
"""

from __future__ import annotations

from executor.core.protocol.answers import MAX_JSON_DEPTH, PATH_CAP
from executor.core.protocol.folding import (
    CAPABILITIES,
    HOOK_MESSAGES_MIN,
    NOTE_CAP,
    PROBLEM_NOTES,
    apply_on_error,
    error_outcome,
    fail_verdict,
    fold,
    restrict,
    worktree_answer,
)
from executor.core.protocol.parsing import HOME_ADVICE, HookRun, build_stdin, parse_outcome
from executor.core.protocol.values import (
    DECISION_RANK,
    UNSET,
    AgentAnswer,
    Decision,
    HookOutcome,
    SandboxFacts,
    Status,
    Verdict,
    dumps,
    join,
)

__all__ = [
    "CAPABILITIES",
    "DECISION_RANK",
    "HOME_ADVICE",
    "HOOK_MESSAGES_MIN",
    "MAX_JSON_DEPTH",
    "NOTE_CAP",
    "PATH_CAP",
    "PROBLEM_NOTES",
    "UNSET",
    "AgentAnswer",
    "Decision",
    "HookOutcome",
    "HookRun",
    "SandboxFacts",
    "Status",
    "Verdict",
    "apply_on_error",
    "build_stdin",
    "dumps",
    "error_outcome",
    "fail_verdict",
    "fold",
    "join",
    "parse_outcome",
    "restrict",
    "worktree_answer",
]
