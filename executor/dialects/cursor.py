"""Cursor: its ``hooks.json`` files, its camelCase events, its payload and its answers.

Sources (Cursor is closed source: no code could be read):

- C1, Cursor's hooks page (cursor.com/docs/agent/hooks, also served as
  cursor.com/docs/hooks): a copy of an earlier version is kept in
  github.com/pcomans/caruso ``reference/cursor_hooks.md``; the current page is
  quoted at length in an ADR of the CursorFleet project (fetched 2026-10-04,
  "A. VERIFIED-FROM-DOCS"), which this module follows where the two differ.
- C2, cursor.com/docs/reference/third-party-hooks (priority order of sources).
- T, third-party integrations that speak the dialect: cupcake
  (cupcake.eqtylab.io/reference/harnesses/cursor), rskim
  (docs.rs/crate/rskim, ``src/cmd/hooks/cursor.rs``), rtk, code-intel-hook.

Files (C1 "Configuration"): managed ``/etc/cursor/hooks.json`` on Linux (C1
names it; the research notes had it as unconfirmed), user
``~/.cursor/hooks.json``, project ``<root>/.cursor/hooks.json`` (Cursor loads
it in a trusted workspace only). All of them run, they do not replace each
other. Cursor can also run Claude Code's settings files (C2); those are the
``claude`` dialect's business.

Shape: ``{"version": 1, "hooks": {event: [{command, type, timeout, matcher,
failClosed, loop_limit}]}}``, a flat list per event (not Claude Code's matcher
groups). ``timeout`` is in seconds (C1; its default is not documented: hookcage
uses its own 60 s); ``failClosed: true`` (a hook that crashes or times out
blocks) is hookcage's ``on_error: "deny"``; ``type: "prompt"`` hooks are never
run (hookcage runs commands only); ``loop_limit`` is Cursor's cap on stop
follow-ups and is left to Cursor (it applies the one of hookcage's route).
Project hooks run at the project root (C1, current page; the earlier page and
the ``cursor-hooks`` npm package said "relative to hooks.json"), which is where
hookcage runs repository hooks anyway.

Matchers (C1): a regular expression (JavaScript's; RE2 here), searched, ``""``
and ``"*"`` match everything. preToolUse/postToolUse/postToolUseFailure test
Cursor's tool type (``Shell``, ``Read``, ``Write``, ``Grep``, ``Delete``,
``Task``, ``MCP:<tool>``), subagentStart/subagentStop the subagent type,
beforeShellExecution/afterShellExecution the command text, afterFileEdit the
value ``Write`` and stop ``Stop``. On other events Cursor documents no matcher
value: a matcher there is reported and ignored (the hook always runs).

Events map to the canonical catalog (hookcage's own hooks and gates see the
canonical payload):

========================  =====================================================
beforeShellExecution      PreToolUse, ``tool_name`` Bash, ``tool_input`` {command}
afterShellExecution       PostToolUse, Bash, ``tool_response`` {stdout}
beforeMCPExecution        PreToolUse, ``MCP:<tool>`` (Cursor's own spelling)
afterMCPExecution         PostToolUse, ``MCP:<tool>``
beforeReadFile            PreToolUse, Read, ``tool_input`` {file_path}
afterFileEdit             PostToolUse, Edit, ``tool_input`` {file_path, edits}
preToolUse / postToolUse  PreToolUse / PostToolUse (``Shell`` -> Bash ...)
postToolUseFailure        PostToolUseFailure
beforeSubmitPrompt        UserPromptSubmit
stop / subagentStop       Stop / SubagentStop
subagentStart             SubagentStart
sessionStart / End        SessionStart / SessionEnd
preCompact                PreCompact
========================  =====================================================

afterAgentResponse, afterAgentThought, beforeTabFileRead, afterTabFileEdit and
workspaceOpen have no twin and are carried under their own names. Several of
Cursor's events share one twin (a shell command fires both preToolUse and
beforeShellExecution): a Cursor hook runs only for the event it was filed
under (the canonical payload carries Cursor's event in ``agent_event``, and the
value its matcher tests in ``agent_match``), while a hook in hookcage's own
files runs for each of them.

Payload in: ``conversation_id`` -> ``session_id``; ``workspace_roots[0]``
(else ``cwd``) -> ``cwd``; ``tool_input`` given as a JSON string (MCP events)
is parsed. Cursor's hooks read Cursor's payload as it came.

Answers (C1): ``permission`` allow/deny/ask, ``user_message`` (to the user),
``agent_message`` (to the agent), ``updated_input`` (preToolUse only: the
rewrite, which passes the ``rewrite_input`` gate), ``continue`` and
``user_message`` on beforeSubmitPrompt, ``followup_message`` on stop and
subagentStop (read as Claude Code's Stop block: the agent goes on with it),
``additional_context`` on sessionStart and postToolUse,
``updated_mcp_tool_output`` on postToolUse. Exit 2 denies, as
``permission: "deny"``; any other failure lets the action through unless
``failClosed``; on a permission event (the ``before*`` tool events,
preToolUse, subagentStart) an answer that is not a JSON object blocks, as
Cursor blocks then.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from executor.core import linre
from executor.core.events import EVENTS, EventSpec
from executor.core.hooks import Collector, FileShape, HookFile, HookSpec, Scope, parse_handler
from executor.core.install import (
    Plan,
    Read,
    dispatch_command,
    json_edit,
    merge_flat,
)
from executor.core.matchers import Matcher
from executor.core.protocol import UNSET, AgentAnswer, HookOutcome, HookRun, Verdict, dumps
from executor.core.text import one_line, sanitize
from executor.dialects.base import (
    Dialect,
    HookInput,
    HookSource,
    Where,
    block_reason,
    home_path,
    json_object,
    parse_flat_file,
    project_sources,
)
from executor.errors import PayloadError

MANAGED_FILE = "/etc/cursor/hooks.json"


@dataclass(frozen=True)
class NativeEvent(EventSpec):
    """A canonical event as one of an agent's own events (several may share one twin).

    ``name`` stays canonical (hookcage's own hooks, gates and matchers see it);
    ``native`` is what the agent called it, for its payload and its answer.
    """

    native: str = ""


def as_native(spec: EventSpec, native: str, **changes: Any) -> NativeEvent:
    """``spec`` carrying the agent's own name for it (and what differs on that agent)."""
    if isinstance(spec, NativeEvent) and spec.native == native and not changes:
        return spec
    values = {f.name: getattr(spec, f.name) for f in fields(EventSpec)}
    return NativeEvent(**{**values, **changes}, native=native)


# -- events ----------------------------------------------------------------------------

EVENT_NAMES: Mapping[str, str] = {
    "preToolUse": "PreToolUse",
    "postToolUse": "PostToolUse",
    "postToolUseFailure": "PostToolUseFailure",
    "beforeShellExecution": "PreToolUse",
    "beforeMCPExecution": "PreToolUse",
    "beforeReadFile": "PreToolUse",
    "afterShellExecution": "PostToolUse",
    "afterMCPExecution": "PostToolUse",
    "afterFileEdit": "PostToolUse",
    "beforeSubmitPrompt": "UserPromptSubmit",
    "stop": "Stop",
    "subagentStart": "SubagentStart",
    "subagentStop": "SubagentStop",
    "sessionStart": "SessionStart",
    "sessionEnd": "SessionEnd",
    "preCompact": "PreCompact",
}
"""Cursor's events with a canonical twin (the first of a twin is its default native name)."""

OWN_EVENTS: Mapping[str, EventSpec] = {
    spec.name: spec
    for spec in (
        EventSpec("afterAgentResponse", None, "ignored", fields=("text",)),
        EventSpec("afterAgentThought", None, "ignored", fields=("text", "duration_ms")),
        EventSpec("beforeTabFileRead", None, "blocks", fields=("file_path", "content")),
        EventSpec("afterTabFileEdit", None, "ignored", fields=("file_path", "edits")),
        EventSpec("workspaceOpen", None, "ignored"),
    )
}
"""Cursor's events with no canonical twin: only Cursor's hooks see them."""

PERMISSION_EVENTS = frozenset({
    "preToolUse", "beforeShellExecution", "beforeMCPExecution", "beforeReadFile", "beforeTabFileRead",
    "subagentStart",
})
"""Where Cursor reads ``permission`` (and blocks on an answer that is not JSON)."""

PERMISSION_ONLY = frozenset({"beforeReadFile", "beforeTabFileRead"})
"""Permission events whose answer is ``permission`` allow/deny and nothing else."""

REWRITE_EVENTS = frozenset({"preToolUse"})
"""Where Cursor reads ``updated_input``."""

CONTEXT_EVENTS = frozenset({"sessionStart", "postToolUse"})
"""Where Cursor reads ``additional_context``."""

FOLLOWUP_EVENTS = frozenset({"stop", "subagentStop"})

# Cursor's tool types (C1's matcher list) and its agent's tool names -> Claude Code's.
TOOL_NAMES: Mapping[str, str] = {
    "Shell": "Bash", "run_terminal_cmd": "Bash", "read_file": "Read", "edit_file": "Edit",
    "search_replace": "Edit", "file_search": "Glob", "grep_search": "Grep", "list_dir": "LS",
    "web_search": "WebSearch", "todo_write": "TodoWrite", "edit_notebook": "NotebookEdit",
}


def canonical_tool(name: str) -> str:
    """Cursor's tool type in Claude Code's name (``Shell`` -> ``Bash``; ``MCP:x`` and ``Delete`` kept)."""
    return TOOL_NAMES.get(name, name)


def _match_value(native: str, payload: Mapping[str, Any]) -> str | None:
    """What Cursor tests a matcher of ``native`` against (None: it documents no matcher there)."""
    if native in ("preToolUse", "postToolUse", "postToolUseFailure"):
        value = payload.get("tool_name")
    elif native in ("subagentStart", "subagentStop"):
        value = payload.get("subagent_type")
    elif native in ("beforeShellExecution", "afterShellExecution"):
        value = payload.get("command")
    elif native == "afterFileEdit":
        value = "Write"
    elif native == "stop":
        value = "Stop"
    else:
        return None
    return value if isinstance(value, str) else ""


MATCHED_EVENTS = frozenset({
    "preToolUse", "postToolUse", "postToolUseFailure", "subagentStart", "subagentStop",
    "beforeShellExecution", "afterShellExecution", "afterFileEdit", "stop",
})


def compile_cursor_matcher(source: str | None) -> Matcher:
    """Cursor's matcher: a regular expression searched in the value; ``""``/``"*"`` match all."""
    if source is None or source.strip() in ("", "*"):
        return Matcher(source)
    try:
        return Matcher(source, pattern=linre.compile(source))
    except linre.PatternError as exc:
        return Matcher(source, error=f"invalid regular expression {source!r}: {exc}")


def _exact(value: str) -> Matcher:
    return Matcher(value, names=frozenset({value}))


SHAPE = FileShape(agent="cursor", event_names=EVENT_NAMES, own_events=OWN_EVENTS,
                  compile=compile_cursor_matcher, canonical_names=False)

_HANDLER_KEYS = {"command", "type", "timeout", "matcher", "failClosed", "loop_limit", "prompt"}


def _parsed(value: Any) -> Any:
    """A JSON string parsed when it holds JSON, else the value as it is."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except (ValueError, RecursionError):
            return value
    return value


class CursorDialect(Dialect):
    """Cursor (IDE and CLI agent)."""

    name = "cursor"
    tool_names = TOOL_NAMES
    title = "Cursor"
    shape = SHAPE
    project_dir_var = "CURSOR_PROJECT_DIR"
    unsupported = (
        "type: \"prompt\" hooks are not run (hookcage runs command hooks only)",
        "loop_limit is left to Cursor (it applies the one on hookcage's route entry)",
        "sessionStart's env answer is not passed on (hookcage never sets the agent's environment)",
        "a matcher on an event Cursor documents no matcher value for is ignored (the hook always runs)",
        "Cursor sends a shell command as both preToolUse and beforeShellExecution: hookcage's own "
        "PreToolUse hooks run for each",
    )

    takeover = (
        "Cursor cannot be taken over: nothing in Cursor stops it running a repository's "
        ".cursor/hooks.json itself (once the workspace is trusted, every source's hooks run: "
        "enterprise, team, project and user, combined), and it can run the repository's Claude "
        "Code settings hooks too. So the repository's hooks still run outside hookcage, on the host. "
        "What can still be added is hookcage's routing in ~/.cursor/hooks.json, so hookcage's own "
        "hooks and gates run beside Cursor's."
    )

    also_runs = (".claude/settings.json", ".claude/settings.local.json")  # C2: third-party hooks

    def offer(self, where: Where, read: Read, hookcage: str) -> Plan | None:
        """``install`` is refused (``takeover``); this routing can still be added."""
        return offer_plan(self, where, read, hookcage)

    # -- files ---------------------------------------------------------------------------

    def sources(self, where: Where) -> list[HookSource]:
        return [
            HookSource(Scope.MANAGED, MANAGED_FILE),
            HookSource(Scope.USER, home_path(where, ".cursor", "hooks.json")),
            *project_sources(where, (Scope.PROJECT, (".cursor", "hooks.json")),
                             condition="Cursor loads it in a trusted workspace"),
        ]

    def parse(self, data: Any, *, scope: Scope, source: str, project_root: str | None,
              environ: Mapping[str, str] | None = None) -> HookFile:
        return parse_flat_file(
            self, data, scope=scope, source=source,
            handler=lambda raw, path, native, event, out: self._handler(raw, path, native, event, scope, project_root, out),
        )

    def _handler(self, raw: Any, path: str, native: str, event: str, scope: Scope, root: str | None,
                 out: Collector) -> HookSpec | None:
        everything = Matcher(None)
        if not isinstance(raw, dict):
            return parse_handler(raw, path, event, everything, scope, root, out, shape=self.shape)
        errors: list[str] = []
        handler: dict[str, Any] = {"type": raw.get("type", "command")}
        for key in ("command", "timeout"):
            if key in raw:
                handler[key] = raw[key]
        fail_closed = raw.get("failClosed", False)
        if not isinstance(fail_closed, bool):
            errors.append(out.error(f"{path}.failClosed", "must be true or false", event))
        elif fail_closed:
            handler["on_error"] = "deny"
        loop_limit = raw.get("loop_limit")
        if loop_limit is not None and (isinstance(loop_limit, bool) or not isinstance(loop_limit, int)
                                       or loop_limit < 0):
            errors.append(out.error(f"{path}.loop_limit", "must be a whole number or null", event))
        elif "loop_limit" in raw and native not in FOLLOWUP_EVENTS:
            out.warn(f"{path}.loop_limit", f"only stop and subagentStop read it; ignored on {native}", event)
        for key in sorted(raw.keys() - _HANDLER_KEYS):
            out.warn(f"{path}.{key}", "unknown key, ignored", event)
        selectors: list[tuple[str, Matcher]] = [("agent_event", _exact(native))]
        source = raw.get("matcher")
        if source is not None and not isinstance(source, str):
            errors.append(out.error(f"{path}.matcher", "must be a string", event))
        elif source is not None:
            matcher = compile_cursor_matcher(source)
            if matcher.error:
                out.warn(f"{path}.matcher", f"{matcher.error} (this hook never fires)", event)
                selectors.append(("agent_match", matcher))
            elif native not in MATCHED_EVENTS:
                if not matcher.matches_all:
                    out.warn(f"{path}.matcher", f"Cursor documents no matcher on {native}; ignored "
                                                "(the hook runs for every event)", event)
            elif not matcher.matches_all:
                selectors.append(("agent_match", matcher))
        spec = parse_handler(handler, path, event, everything, scope, root, out, shape=self.shape,
                             keys={"on_error": "failClosed"})
        if spec is None:
            return None
        invalid = spec.invalid or (errors[0] if errors else None)
        return replace(spec, selectors=tuple(selectors), invalid=invalid)

    # -- payload in ----------------------------------------------------------------------

    recognition = "the payload carries conversation_id and workspace_roots"

    def recognises(self, payload: Mapping[str, Any]) -> bool:
        return isinstance(payload.get("conversation_id"), str) and isinstance(payload.get("workspace_roots"), list)

    def resolve_event(self, arg: str | None, payload: Mapping[str, Any]) -> EventSpec:
        spec = super().resolve_event(arg, payload)
        named = payload.get("hook_event_name") if isinstance(payload.get("hook_event_name"), str) else None
        native = next((n for n in (arg, named) if n and (n in EVENT_NAMES or n in OWN_EVENTS)),
                      self.native_event(spec))
        if native == "subagentStart":
            # Cursor's subagentStart is a permission hook: a deny (or exit 2) stops the subagent.
            return as_native(spec, native, exit2="blocks")
        return as_native(spec, native)

    def native_event(self, spec: EventSpec) -> str:
        if isinstance(spec, NativeEvent) and spec.native:
            return spec.native
        return super().native_event(spec)

    def canonical_payload(self, spec: EventSpec, payload: Mapping[str, Any]) -> dict[str, Any]:
        native = self.native_event(spec)
        data = {k: v for k, v in payload.items() if k not in ("tool_name", "tool_input", "command")}
        data["hook_event_name"] = spec.name
        data["agent_event"] = native
        match = _match_value(native, payload)
        if match is not None:
            data["agent_match"] = match
        conversation = payload.get("conversation_id")
        if isinstance(conversation, str) and not isinstance(payload.get("session_id"), str):
            data["session_id"] = conversation
        roots = payload.get("workspace_roots")
        if isinstance(roots, list) and roots and isinstance(roots[0], str) and roots[0]:
            data["cwd"] = roots[0]
        if "transcript_path" in payload and not isinstance(payload["transcript_path"], str):
            data.pop("transcript_path")
        command = payload.get("command")
        tool = payload.get("tool_name")
        if native in ("beforeShellExecution", "afterShellExecution"):
            data["tool_name"] = "Bash"
            data["tool_input"] = {"command": command} if isinstance(command, str) else {}
            if native == "afterShellExecution":
                data["tool_response"] = {"stdout": payload.get("output")}
        elif native in ("beforeMCPExecution", "afterMCPExecution"):
            data["tool_name"] = f"MCP:{tool}" if isinstance(tool, str) else "MCP"
            data["tool_input"] = json_object(payload.get("tool_input"))
            if native == "afterMCPExecution":
                data["tool_response"] = _parsed(payload.get("result_json"))
        elif native == "beforeReadFile":
            data["tool_name"] = "Read"
            data["tool_input"] = {"file_path": payload.get("file_path")}
        elif native == "afterFileEdit":
            data["tool_name"] = "Edit"
            data["tool_input"] = {"file_path": payload.get("file_path"), "edits": payload.get("edits")}
            data["tool_response"] = {"filePath": payload.get("file_path")}
        elif native in ("preToolUse", "postToolUse", "postToolUseFailure"):
            if not isinstance(tool, str):
                raise PayloadError(f"Cursor {native} payload field 'tool_name' must be a string")
            data["tool_name"] = canonical_tool(tool)
            data["tool_input"] = json_object(payload.get("tool_input"))
            if native == "postToolUse":
                data["tool_response"] = _parsed(payload.get("tool_output"))
            if native == "postToolUseFailure" and "error_message" in payload:
                data["error"] = payload["error_message"]
        elif native in ("subagentStart", "subagentStop"):
            if isinstance(payload.get("subagent_type"), str):
                data["agent_type"] = payload["subagent_type"]
            if "subagent_id" in payload:
                data["agent_id"] = payload["subagent_id"]
        elif native == "stop":
            count = payload.get("loop_count")
            data["stop_hook_active"] = isinstance(count, int) and not isinstance(count, bool) and count > 0
        if command is not None and "tool_input" not in data:
            data["command"] = command  # an event with no tool keeps its field as it came
        return data

    def hook_input(self, spec: EventSpec, payload: Mapping[str, Any]) -> HookInput:
        data = dict(payload)
        data["hook_event_name"] = self.native_event(spec)
        return HookInput(dumps(data).encode("utf-8"))

    # -- answers -------------------------------------------------------------------------

    def answer_to_claude(self, spec: EventSpec, data: dict[str, Any]) -> dict[str, Any]:
        native = self.native_event(spec)
        out: dict[str, Any] = {}
        specific: dict[str, Any] = {}
        user = data.get("user_message")
        agent = data.get("agent_message")
        if native in PERMISSION_EVENTS:
            permission = data.get("permission")
            if permission is not None:
                if spec.permission:
                    specific["permissionDecision"] = permission
                    if agent is not None:
                        specific["permissionDecisionReason"] = agent
                elif permission == "deny" or (permission == "ask" and native == "subagentStart"):
                    out["decision"] = "block"  # subagentStart: ask is treated as deny (C1)
                    out["reason"] = agent if agent is not None else user
            if "updated_input" in data and native in REWRITE_EVENTS:
                specific["updatedInput"] = data["updated_input"]
        elif native == "beforeSubmitPrompt":
            if data.get("continue") is False:
                out["decision"] = "block"
                out["reason"] = user if user is not None else agent
        elif native in FOLLOWUP_EVENTS:
            followup = data.get("followup_message")
            if followup is not None and followup != "":
                out["decision"] = "block"  # Claude Code's Stop block: go on, with this as the reason
                out["reason"] = followup
        if user is not None and "reason" not in out:
            out["systemMessage"] = user
        if native in CONTEXT_EVENTS and "additional_context" in data:
            specific["additionalContext"] = data["additional_context"]
        if native == "postToolUse" and "updated_mcp_tool_output" in data:
            specific["updatedMCPToolOutput"] = data["updated_mcp_tool_output"]
        if specific:
            out["hookSpecificOutput"] = {"hookEventName": spec.name, **specific}
        return out

    def parse_answer(self, spec: EventSpec, run: HookRun) -> HookOutcome:
        native = self.native_event(spec)
        outcome = super().parse_answer(spec, run)
        answered = run.exit_code == 0 and run.finished
        data = _answer_object(run.stdout) if answered else None
        if native in PERMISSION_EVENTS and answered and run.stdout.strip() and data is None:
            why = f"hook {one_line(run.hook, 200)} answered something that is not a JSON object; Cursor blocks then"
            if spec.permission:
                return HookOutcome(hook=run.hook, exit_code=0, decision="deny", reason=why, hook_id=run.hook_id)
            return HookOutcome(hook=run.hook, status="block", exit_code=0, reason=why, hook_id=run.hook_id)
        if data is not None and "updated_input" in data and native not in REWRITE_EVENTS:
            note = f"'updated_input' has no effect on {native} (Cursor reads it on preToolUse); ignored"
            outcome = replace(outcome, notes=(*outcome.notes, note))
        return outcome

    def render(self, event: EventSpec, verdict: Verdict) -> AgentAnswer:
        native = self.native_event(event)
        blocks = verdict.blocks or not verdict.continue_
        reason = _why(event, verdict) if blocks else None
        message = sanitize(verdict.system_message) if verdict.system_message else None
        context = sanitize(verdict.additional_context) if verdict.additional_context else None
        out: dict[str, Any] = {}
        if native in PERMISSION_EVENTS:
            decision = "deny" if blocks else verdict.decision
            rewrite = verdict.updated_input if decision in (None, "allow", "ask") else None
            if rewrite is not None and native not in REWRITE_EVENTS:
                # Cursor reads no rewrite here: letting the original through would be a silent change.
                decision = "deny" if native in PERMISSION_ONLY else "ask"
                reason = f"hookcage cannot apply a rewritten input on Cursor's {native}"
                rewrite = None
            if decision == "ask" and native in PERMISSION_ONLY:
                decision = "deny"  # no "ask" on file reads: Cursor's schema is allow | deny
                reason = reason or _why(event, verdict)
            if decision in ("allow", "deny", "ask"):
                out["permission"] = decision
            if native not in PERMISSION_ONLY:
                if decision == "deny":
                    reason = reason or _why(event, verdict)
                    out["user_message"] = _join(reason, message)
                    out["agent_message"] = reason
                else:
                    if decision == "ask" and (reason or verdict.decision_reason):
                        reason = reason or sanitize(verdict.decision_reason or "")
                        out["agent_message"] = reason
                    shown = _join(reason if decision == "ask" else None, message)
                    if shown:
                        out["user_message"] = shown
                if rewrite is not None:
                    out["updated_input"] = rewrite
            if native == "preToolUse" and context:
                out["agent_message"] = _join(out.get("agent_message"), context)
        elif native == "beforeSubmitPrompt":
            out["continue"] = not blocks
            shown = _join(reason, message)
            if shown:
                out["user_message"] = shown
        elif native in FOLLOWUP_EVENTS:
            if verdict.blocks and verdict.continue_:
                out["followup_message"] = reason
        else:
            if native in CONTEXT_EVENTS and context:
                out["additional_context"] = context
            if native == "postToolUse" and verdict.updated_output is not UNSET:
                out["updated_mcp_tool_output"] = verdict.updated_output
        return AgentAnswer(0, dumps(out) + "\n", "")


def _answer_object(stdout: bytes) -> dict[str, Any] | None:
    try:
        data = json.loads(stdout)
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def _why(event: EventSpec, verdict: Verdict) -> str:
    if not verdict.continue_:
        return sanitize(verdict.stop_reason) if verdict.stop_reason else f"stopped by hookcage ({event.name})"
    return block_reason(event, verdict)


def _join(*parts: str | None) -> str | None:
    kept = [p for p in parts if p]
    return "\n".join(kept) if kept else None



def offer_plan(dialect: CursorDialect, where: Where, read: Read, hookcage: str) -> Plan:
    """hookcage's routes in ``~/.cursor/hooks.json`` (C1: ``{"version": 1, "hooks": {event:
    [{command}]}}``): one Cursor event per canonical twin (``preToolUse`` covers shell, MCP and
    file tools; routing ``beforeShellExecution`` too would run hookcage twice per command), no
    matcher (absent matches everything)."""
    command = dispatch_command(hookcage, dialect.name)
    events = list(dict.fromkeys(dialect.native_event(EVENTS[c]) for c in EVENT_NAMES.values()))
    entries = {event: {"command": command} for event in events}

    def update(current: dict[str, Any]) -> dict[str, Any]:
        return merge_flat({"version": 1, **current}, entries, "command")

    edit = json_edit(read, home_path(where, ".cursor", "hooks.json"), update,
                     "Cursor's user hooks: its events routed to hookcage (beside Cursor's own)")
    return Plan(dialect.name, "user", (edit,), (
        "Cursor still runs a repository's .cursor/hooks.json itself: hookcage's routes run beside them",
    ))


DIALECT = CursorDialect()

__all__ = ["DIALECT", "CursorDialect", "NativeEvent", "as_native"]
