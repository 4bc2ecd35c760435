"""What every agent's dialect implements (pure, no I/O): the one interface per agent.

An agent reads its hooks from its own files, sends its own payload and reads
its own answer. A dialect says, for one agent:

1. **where its hooks live**: :meth:`Dialect.sources` lists the files per scope
   (paths computed from the project root, ``HOME`` and the environment handed
   in; the config edge reads them);
2. **how a file reads**: :meth:`Dialect.parse` turns one decoded file into the
   existing :class:`~executor.core.hooks.HookFile` of hook specs (Claude Code's
   shape by default, through a :class:`~executor.core.hooks.FileShape`);
3. **its events and tools**: native event names map to the canonical catalog
   (:mod:`executor.core.events`) where a twin exists; an event with no twin is
   carried under its own name (``FileShape.own_events``) and matched only by
   that agent's hooks; its tool names map to Claude Code's
   (``Dialect.tool_names``), so matchers meet across agents
   (:func:`executor.dialects.tool_aliases`);
4. **payload in**: :meth:`Dialect.resolve_event` and
   :meth:`Dialect.canonical_payload` turn the agent's stdin into the canonical
   (Claude Code) payload the gates, matchers and hookcage's own hooks see;
   :meth:`Dialect.hook_input` is what this agent's own hooks read (its payload
   as it sent it);
5. **answers**: :meth:`Dialect.parse_answer` reads one of this agent's hooks'
   answers into the canonical :class:`~executor.core.protocol.HookOutcome` (so
   an input rewrite in any spelling passes the same capability gate), and
   :meth:`Dialect.render` writes hookcage's folded verdict in the agent's
   answer.

The defaults are Claude Code's (the canonical dialect): an agent that speaks
it with a few differences overrides only those. Adding an agent is one module
in this package that defines ``DIALECT`` (found by :mod:`executor.dialects`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from executor.core.events import EVENTS, EventSpec
from executor.core.hookparse import event_lists, parse_hook_file
from executor.core.hooks import HOOKCAGE_FILES, Collector, FileShape, HookFile, HookSpec, Scope
from executor.core.install import InstallMode, NotInstallable, Plan, Read
from executor.core.protocol import (
    UNSET,
    AgentAnswer,
    HookOutcome,
    HookRun,
    Verdict,
    build_stdin,
    dumps,
    join,
    worktree_answer,
)
from executor.core.text import sanitize
from executor.errors import PayloadError

FileFormat = Literal["json", "yaml", "toml"]


@dataclass(frozen=True)
class Where:
    """What a dialect needs to name its files: the project root, ``HOME``, the environment."""

    root: str | None
    home: str
    environ: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class HookSource:
    """One file an agent reads hooks from.

    Attributes:
        scope: managed, user, project or local.
        path: absolute; with ``glob``, its last part is a pattern (``*.json``).
        format: how the file is decoded.
        condition: when the agent itself loads it (for ``--agent help`` and
            ``hookcage list``; hookcage reads it regardless, and its hooks pass
            hookcage's gates).
        unless_exists: a file whose existence means the agent does not read
            this one (an agent that reads only the first file it finds, as
            infer does); hookcage then does not read it either.
    """

    scope: Scope
    path: str
    glob: bool = False
    format: FileFormat = "json"
    condition: str = ""
    unless_exists: str | None = None


@dataclass(frozen=True)
class HookInput:
    """What one hook reads: its stdin, and environment variables its agent sets for it."""

    stdin: bytes
    env: Mapping[str, str] = field(default_factory=dict)


BlockForm = Literal["exit2", "decision", "permission", "permission_request"]
"""How an answer carries a block: exit 2 + stderr, or one of Claude Code's JSON forms."""

CLAUDE_DECISION_EVENTS: frozenset[str] = frozenset({
    "UserPromptSubmit", "UserPromptExpansion", "PostToolUse", "PostToolUseFailure", "PostToolBatch",
    "Stop", "SubagentStop", "ConfigChange", "PreCompact", "TaskCreated",
})
"""Events whose block Claude Code reads from top-level ``decision: "block"`` + ``reason``.

From the "Decision control" table of Claude Code's hooks reference
(code.claude.com/docs/en/hooks): UserPromptSubmit, UserPromptExpansion,
PostToolUse, PostToolUseFailure, PostToolBatch, Stop, SubagentStop,
ConfigChange and PreCompact use "Top-level ``decision``"; TaskCreated takes
"Exit code or top-level ``decision``". TeammateIdle and TaskCompleted block
by exit code 2 only (their JSON ``continue: false`` stops the teammate, which
is something else), so they are not here. PreToolUse and PermissionRequest
have forms of their own (:meth:`Dialect.block_form`).
"""


class Dialect:
    """One agent's hook files, payload and answers. The defaults are Claude Code's.

    Attributes:
        name: what ``--agent`` calls it.
        title: the agent, for ``--agent help``.
        shape: how its Claude-Code-shaped files differ from hookcage's own
            (event names, own events, timeout unit, matchers).
        project_dir_var: the variable its hooks read the project root from.
        recognised_by: payload keys that, all present as strings, identify the
            agent when ``--agent`` is not given (empty: never guessed).
        serial: its hooks run one after another and stop at the first block
            (else in parallel, folded).
        json_blocks: blocks ride in the JSON answer on the events where the
            agent reads them there; ``False``: every block is exit 2.
        decision_events: events whose block is top-level ``decision: "block"``.
        input_key: the ``hookSpecificOutput`` key of a PreToolUse input rewrite.
        unsupported: what hookcage does not do for this agent, and why (docs,
            ``--agent help``).
    """

    name: str = "claude"
    title: str = "Claude Code"
    shape: FileShape = HOOKCAGE_FILES
    project_dir_var: str = "CLAUDE_PROJECT_DIR"
    tool_names: Mapping[str, str] = {}
    """The agent's tool names -> Claude Code's (``run_shell_command`` -> ``Bash``), as
    matchers tested against Claude Code's names may spell them: they join the aliases
    every matcher is tested with (:func:`executor.dialects.tool_aliases`). An agent
    whose hooks' matchers are tested against its own names instead (Copilot CLI's
    ``bash``, ok's, jcode's) maps its payloads itself and adds none: Claude Code's
    matchers are case-sensitive, and ``bash`` is not ``Bash`` there."""
    recognised_by: tuple[str, ...] = ()
    recognition: str = ""
    """How the agent is recognised without ``--agent``, for people (default: from ``recognised_by``)."""
    serial: bool = False
    json_blocks: bool = True
    decision_events: frozenset[str] = CLAUDE_DECISION_EVENTS
    input_key: str = "updatedInput"
    unsupported: tuple[str, ...] = ()
    json_comments: bool = False
    """The agent's JSON files may hold ``//`` and ``/* */`` comments (it strips them before
    parsing, as Gemini CLI does): hookcage reads them the same way (:mod:`executor.core.jsonc`)."""
    takeover: str = ""
    """Why ``hookcage install`` cannot take this agent over (one paragraph: what would still run
    outside hookcage, and what routing can still be added); empty for agents that override
    :meth:`install`."""

    also_runs: tuple[str, ...] = ()
    """Other agents' repository files (relative to the project) this agent runs the hooks of
    itself (Cursor and Copilot CLI: Claude Code's ``.claude/settings.json``): what hookcage
    cannot read of them is named for this agent too."""

    def unread_sources(self, where: Where) -> list[tuple[HookSource, str]]:
        """Files the agent runs hooks from that hookcage does not read (their shape is not
        documented), and why: each one that holds ``hooks`` is named in the review, never
        passed over (:func:`executor.config.unread_files`)."""
        return []

    @property
    def runs_repository_hooks(self) -> bool:
        """The agent runs a repository's hook files itself, on the host, whatever hookcage does
        (it cannot be taken over: :attr:`takeover`). hookcage's review is then the user's only
        view of them, so what hookcage cannot read there is named, never passed over."""
        return bool(self.takeover)

    # -- files ---------------------------------------------------------------------------

    def sources(self, where: Where) -> list[HookSource]:
        """Every file this agent reads hooks from, in config order (whether or not it exists)."""
        return []

    def parse(self, data: Any, *, scope: Scope, source: str, project_root: str | None,
              environ: Mapping[str, str] | None = None) -> HookFile:
        """One decoded hook file -> its hook specs and problems (Claude Code's shape by default)."""
        return parse_hook_file(data, scope=scope, source=source, project_root=project_root,
                               shape=self.shape)

    # -- payload in ----------------------------------------------------------------------

    def recognises(self, payload: Mapping[str, Any]) -> bool:
        """The payload carries every key this agent is recognised by."""
        return bool(self.recognised_by) and all(isinstance(payload.get(k), str) for k in self.recognised_by)

    def event_name(self, payload: Mapping[str, Any]) -> Any:
        """The event name the payload itself carries (``None`` when it has none)."""
        return payload.get("hook_event_name")

    def resolve_event(self, arg: str | None, payload: Mapping[str, Any]) -> EventSpec:
        """The event, from the EVENT argument and/or the payload, in this agent's names or canonical ones.

        Raises:
            PayloadError: neither is given, they differ, or the name is unknown to this agent.
        """
        from_payload = self.event_name(payload)
        if from_payload is not None and not isinstance(from_payload, str):
            raise PayloadError("payload field 'hook_event_name' must be a string")
        name = arg or from_payload
        if not name:
            raise PayloadError(
                "no event: give it as an argument (hookcage dispatch PreToolUse) "
                "or in the payload's 'hook_event_name'"
            )
        spec = self.event_spec(name)
        if arg and from_payload and spec.name != self.event_spec(from_payload).name:
            raise PayloadError(
                f"event {arg!r} on the command line differs from the payload's hook_event_name {from_payload!r}"
            )
        return spec

    def event_spec(self, name: str) -> EventSpec:
        """The spec of an event named in this agent's words (or canonically).

        Raises:
            PayloadError: the agent has no such event; the message lists its events.
        """
        filed = self.shape.event(name)
        if filed is None and name in EVENTS:
            filed = name  # the canonical name of one of its events
        if filed is None:
            whose = "" if self.name == "claude" else f" ({self.title})"
            raise PayloadError(f"unknown event {name!r}{whose}; valid events: {self.shape.event_list()}")
        return self.shape.spec(filed)

    def native_event(self, spec: EventSpec) -> str:
        """The agent's own name for an event."""
        for native, canonical in self.shape.event_names.items():
            if canonical == spec.name:
                return native
        return spec.name

    def canonical_payload(self, spec: EventSpec, payload: Mapping[str, Any]) -> dict[str, Any]:
        """The agent's payload in the canonical (Claude Code) keys: what gates, matchers and
        hookcage's own hooks see. Claude-Code-like agents send it already."""
        data = dict(payload)
        data["hook_event_name"] = spec.name
        return data

    def hook_input(self, spec: EventSpec, payload: Mapping[str, Any]) -> HookInput:
        """What one of this agent's hooks reads for ``payload`` (the agent's own, as it sent it)."""
        return HookInput(build_stdin(spec, dict(payload), name=self.native_event(spec)))

    def input_form(self, hook: HookSpec) -> str:
        """Which form of this agent's payload ``hook`` reads: ``""`` for :meth:`hook_input`'s.

        An agent whose hooks read different payloads by how they are filed (Copilot
        CLI: a PascalCase event key gets the VS Code-compatible snake_case payload)
        names the other forms here and builds them in :meth:`form_input`.
        """
        return ""

    def form_input(self, spec: EventSpec, payload: Mapping[str, Any], form: str) -> HookInput:
        """What this agent's hooks of another :meth:`input_form` read for ``payload``."""
        return self.hook_input(spec, payload)

    # -- answers -------------------------------------------------------------------------

    def answer_to_claude(self, spec: EventSpec, data: dict[str, Any]) -> dict[str, Any]:
        """One of this agent's hooks' JSON answers, in Claude Code's keys (identity by default)."""
        return data

    def parse_answer(self, spec: EventSpec, run: HookRun) -> HookOutcome:
        """One of this agent's hooks' run (exit code, output, how it ended) -> the canonical outcome.

        By default Claude Code's rules (:func:`executor.core.protocol.parse_outcome`)
        after :meth:`answer_to_claude` renamed the JSON answer's keys.
        """
        return run.outcome(spec, stdout=self._claude_json(spec, run.stdout))

    def read_answer(self, spec: EventSpec, hook: str, exit_code: int | None, stdout: bytes = b"",
                    stderr: bytes = b"", **facts: Any) -> HookOutcome:
        """:meth:`parse_answer` of a :class:`HookRun` made of these values (tests, tools)."""
        return self.parse_answer(spec, HookRun(hook, exit_code, stdout, stderr, **facts))

    def _claude_json(self, spec: EventSpec, stdout: bytes) -> bytes:
        if type(self).answer_to_claude is Dialect.answer_to_claude or not stdout.lstrip().startswith(b"{"):
            return stdout
        try:
            data = json.loads(stdout)
        except (ValueError, RecursionError):
            return stdout  # parse_outcome reports it as it is
        if not isinstance(data, dict):
            return stdout
        return dumps(self.answer_to_claude(spec, data)).encode("utf-8")

    def block_form(self, event: EventSpec) -> BlockForm:
        """How a blocking verdict on ``event`` is answered in this dialect."""
        if not self.json_blocks:
            return "exit2"
        if event.name == "PermissionRequest":
            return "permission_request"
        if event.permission:
            return "permission"
        if event.name in self.decision_events:
            return "decision"
        return "exit2"

    def render(self, event: EventSpec, verdict: Verdict) -> AgentAnswer:
        """hookcage's answer to the agent for a verdict (Claude Code's by default).

        A verdict that blocks is answered in the JSON the agent reads for that
        event, so its system message and context travel with it: PreToolUse
        ``permissionDecision: "deny"``, PermissionRequest ``decision.behavior:
        "deny"``, or top-level ``decision: "block"`` (:data:`CLAUDE_DECISION_EVENTS`).
        Elsewhere, and in a dialect without JSON blocks, it is exit 2 with the
        reason on stderr. ``continue: false`` wins over a block, as before.
        """
        if event.name == "WorktreeCreate":
            return worktree_answer(verdict)  # the hook replaces worktree creation: a path, not JSON
        blocks = verdict.blocks
        form = self.block_form(event) if blocks else None
        if form == "exit2":
            return AgentAnswer(2, "", block_reason(event, verdict) + "\n")
        reason = block_reason(event, verdict) if blocks else None
        out: dict[str, Any] = {}
        if form == "decision":
            out["decision"] = "block"
            out["reason"] = reason
        out.update(stop_fields(verdict))
        specific: dict[str, Any] = {}
        if event.name == "PermissionRequest":
            if form == "permission_request":
                specific["decision"] = {"behavior": "deny", "message": reason}
            elif verdict.decision in ("allow", "deny"):  # a deny here: continue: false won over it
                inner: dict[str, Any] = {"behavior": verdict.decision}
                if verdict.decision == "allow" and verdict.updated_input is not None:
                    inner["updatedInput"] = verdict.updated_input
                if verdict.decision == "deny" and verdict.decision_reason:
                    inner["message"] = sanitize(verdict.decision_reason)
                specific["decision"] = inner
        elif event.permission:
            if form == "permission":
                specific["permissionDecision"] = "deny"
                specific["permissionDecisionReason"] = reason
            else:
                if verdict.decision:
                    specific["permissionDecision"] = verdict.decision
                    if verdict.decision_reason:
                        specific["permissionDecisionReason"] = sanitize(verdict.decision_reason)
                if verdict.updated_input is not None:
                    specific[self.input_key] = verdict.updated_input
        if verdict.additional_context:
            specific["additionalContext"] = sanitize(verdict.additional_context)
        if verdict.updated_output is not UNSET:
            specific["updatedToolOutput"] = verdict.updated_output
        if specific:
            out["hookSpecificOutput"] = {"hookEventName": self.native_event(event), **specific}
        return AgentAnswer(0, dumps(out) + "\n", "")

    # -- hookcage install -----------------------------------------------------------------

    def install(self, mode: InstallMode, where: Where, read: Read, hookcage: str) -> Plan:
        """What ``hookcage install`` writes for this agent (pure: current files come from ``read``).

        Args:
            mode: ``user`` (no admin rights) or ``managed`` (the machine's policy files).
            where: HOME, the environment (no project: install is per user or machine).
            read: the current content of a file the plan would change.
            hookcage: the absolute command that runs hookcage (routes call ``<it> dispatch --agent NAME``).

        Raises:
            NotInstallable: this agent (or this mode) cannot be taken over; says what still runs.
        """
        raise NotInstallable(self.takeover or f"hookcage cannot take {self.title} over yet",
                             self.offer(where, read, hookcage))

    def offer(self, where: Where, read: Read, hookcage: str) -> Plan | None:
        """The routing that can still be added to an agent :meth:`install` refuses (None: none)."""
        return None

    # -- description ---------------------------------------------------------------------

    def describe_sources(self) -> list[str]:
        """The files, as ``--agent help`` shows them (``~`` for HOME, ``.`` for the project)."""
        lines = []
        for source in self.sources(Where("<project>", "~", {})):
            where = source.path.replace("<project>/", "")
            when = f" ({source.condition})" if source.condition else ""
            lines.append(f"{source.scope.value}: {where}{when}")
        return lines


def json_object(value: Any) -> dict[str, Any]:
    """An object given as one, or as a JSON string holding one (Copilot's ``toolArgs``, Cursor's
    MCP ``tool_input``); ``{}`` for nothing, anything else kept as ``{"raw": value}``."""
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except (ValueError, RecursionError):
            parsed = None
        if isinstance(parsed, dict):
            return parsed
    return {} if value is None else {"raw": value}


def stop_fields(verdict: Verdict) -> dict[str, Any]:
    """The top-level keys Claude-Code-like answers share: ``continue``/``stopReason``,
    ``suppressOutput``, ``systemMessage`` (sanitised)."""
    out: dict[str, Any] = {}
    if not verdict.continue_:
        out["continue"] = False
        if verdict.stop_reason:
            out["stopReason"] = sanitize(verdict.stop_reason)
    if verdict.suppress_output:
        out["suppressOutput"] = True
    if verdict.system_message:
        out["systemMessage"] = sanitize(verdict.system_message)
    return out


def block_reason(event: EventSpec, verdict: Verdict) -> str:
    """Why a blocking verdict blocks, for the agent (sanitised)."""
    reason = verdict.reason if verdict.blocked else verdict.decision_reason
    if verdict.blocked and verdict.decision == "deny" and verdict.decision_reason:
        reason = join([verdict.reason, verdict.decision_reason])
    return sanitize(reason) if reason else f"blocked by hookcage ({event.name})"


FlatHandler = Callable[[Any, str, str, str, Collector], HookSpec | None]
"""Validates one handler: (raw, JSON path, the agent's event name, the event it is filed under, problems)."""


def parse_flat_file(
    dialect: Dialect, data: Any, *, scope: Scope, source: str, handler: FlatHandler, versioned: bool = True,
) -> HookFile:
    """A file of the shape ``{"version": 1, "hooks": {event: [handler, ...]}}`` (Cursor, Copilot CLI).

    The walk every such agent shares: the top level, ``version`` (an error
    other than 1: the file runs nothing; missing: a warning), unknown keys,
    event names through the dialect's :class:`FileShape`, arrays of handlers;
    ``handler`` validates each one. Problems name the agent, the file and the key.
    """
    out = Collector(source, dialect.name)

    def done(specs: Sequence[HookSpec] = ()) -> HookFile:
        return HookFile(source, scope, tuple(specs), tuple(out.problems), agent=dialect.name,
                        routes=tuple(out.routes))

    if not isinstance(data, dict):
        out.error("$", "the top level must be a JSON object")
        return done()
    if versioned:
        version = data.get("version")
        if version is None:
            out.warn("$.version", f"missing: {dialect.title} expects \"version\": 1")
        elif version != 1 or isinstance(version, bool):
            out.error("$.version", f"must be 1 ({dialect.title}'s only hook file version), not {version!r}")
            return done()
    for key in sorted(data.keys() - {"version", "hooks", "$schema"}):
        out.warn(f"$.{key}", "unknown key, ignored")
    hooks = data.get("hooks", {})
    if not isinstance(hooks, dict):
        out.error("$.hooks", "must be an object mapping event names to arrays of hooks")
        hooks = {}
    specs: list[HookSpec] = []
    for native, event, epath, handlers in event_lists(hooks, dialect.shape, out, "hooks"):
        for i, raw in enumerate(handlers):
            spec = handler(raw, f"{epath}[{i}]", native, event, out)
            if spec is not None:
                specs.append(spec)
    return done(specs)


def home_path(where: Where, *parts: str, env: str | None = None) -> str:
    """A path under the agent's directory: ``$env`` when set (e.g. ``CLAUDE_CONFIG_DIR``), else ``HOME``."""
    base = where.environ.get(env, "") if env else ""
    return "/".join([base.rstrip("/") or where.home.rstrip("/"), *parts])


def project_path(where: Where, *parts: str) -> str | None:
    """A path under the project root, or ``None`` with no root."""
    return "/".join([where.root.rstrip("/"), *parts]) if where.root else None


def project_sources(where: Where, *entries: tuple[Scope, Sequence[str]], **kw: Any) -> list[HookSource]:
    """:class:`HookSource` of project files (none without a root)."""
    out = []
    for scope, parts in entries:
        path = project_path(where, *parts)
        if path is not None:
            out.append(HookSource(scope, path, **kw))
    return out
