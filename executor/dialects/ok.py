"""ok (github.com/NB-Agent/ok, Go): flat hook lists, anchored ``match``, exit codes only.

Read from ok v1.0.0 (HEAD 3ac64e3): ``internal/hook/hook.go`` (``Settings``,
``HookConfig``, ``Events``, ``compileMatch``, ``MatchesTool``,
``defaultTimeout``, ``timeout``, ``Payload``, ``decideOutcome``, ``Run``),
``internal/hook/trust.go`` and ``internal/boot/boot.go``.

* **Files**: ``~/.ok/settings.json`` (user, always loaded) and
  ``.ok/settings.json`` (project), which ok loads only when
  ``~/.ok/trust.json`` (``{"projects": {"/abs/root": true}}``) lists the
  root. hookcage reads both; repository hooks pass trust and the allow-list.
  Order: ok runs project hooks before the user's; hookcage keeps its own
  scope order (user first).
* **Shape**: ``{"hooks": {Event: [{"match", "command", "description",
  "timeout", "cwd"}]}}``, flat (no nested ``hooks``, no ``type``); an entry
  with a blank ``command`` is skipped. ``timeout`` is in **milliseconds**: 0
  or absent = 5000 on PreToolUse/UserPromptSubmit, 30000 elsewhere; capped
  at 60 s on those two, 300 s elsewhere. ``description`` is the hook's
  label (hookcage's ``name``). ``cwd`` is not honoured (hookcage runs a
  repository hook at the project root, a user hook in the agent's cwd).
  AGENTS.md's ``env`` key is the Reasonix family's, not ok's.
* **match**: a regular expression compiled as ``^(?:match)$`` (anchored) and
  tested against ok's own tool name (``bash``, ``read_file``, ``edit_file``,
  ...), on PreToolUse and PostToolUse only; ``""``/``"*"`` match every
  tool; an invalid one never fires.
* **Events**: ok v1.0.0 has four, all with a Claude Code twin: PreToolUse,
  PostToolUse, UserPromptSubmit, Stop. Another event in the file is ignored
  by ok (a warning here). AGENTS.md's eleven (PermissionRequest, PostLLMCall,
  SessionStart, ...) are the DeepSeek-Reasonix family's, whose files live
  elsewhere (``.reasonix``): not this dialect.
* **Payload**: one JSON line, camelCase: ``event``, ``cwd``, ``toolName``,
  ``toolArgs`` (object), ``toolResult`` (string), ``prompt``,
  ``lastAssistantText``, ``turn``; no ``sessionId`` in ok (Reasonix adds
  it; read when present). Recognised by ``event`` (one of the four) with one
  of these camelCase keys and no ``hook_event_name``.
* **Answers**: the exit code only; stdout is never parsed. 0 passes; 2
  blocks PreToolUse and UserPromptSubmit (reason: stderr, else stdout), and
  so does a timeout there; any other exit, or exit 2 elsewhere, is a
  warning. Hooks run in order and stop at the first block (``serial``).
  hookcage answers ok the same way: exit 2 + the reason on stderr for a
  block, exit 0 and nothing otherwise.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from executor.core import linre
from executor.core.events import EventSpec
from executor.core.hooks import Collector, FileShape, HookFile, HookSpec, Scope, parse_handler
from executor.core.install import (
    InstallMode,
    NotInstallable,
    Plan,
    Read,
    dispatch_command,
    json_edit,
    merge_flat,
)
from executor.core.matchers import Aliases, Matcher, no_aliases
from executor.core.protocol import (
    AgentAnswer,
    HookOutcome,
    HookRun,
    Verdict,
    dumps,
)
from executor.core.text import sanitize
from executor.dialects.base import (
    Dialect,
    HookInput,
    HookSource,
    Where,
    block_reason,
    home_path,
    project_sources,
)

EVENTS = ("PreToolUse", "PostToolUse", "UserPromptSubmit", "Stop")
GATING = frozenset({"PreToolUse", "UserPromptSubmit"})
"""``IsBlocking``: the events whose exit 2 (or timeout) blocks."""
DEFAULT_MS = {"PreToolUse": 5000, "UserPromptSubmit": 5000}
"""``defaultTimeout`` (milliseconds; 30000 for the other events)."""
CAP_SECONDS = {"PreToolUse": 60.0, "UserPromptSubmit": 60.0}
"""``maxBlockingTimeout`` (300 s, ``maxAsyncTimeout``, for the other events)."""

NATIVE_TOOLS: Mapping[str, str] = {
    "bash": "Bash", "read_file": "Read", "write_file": "Write", "edit_file": "Edit",
    "multi_edit": "MultiEdit", "glob": "Glob", "grep": "Grep", "ls": "LS", "todo_write": "TodoWrite",
    "web_fetch": "WebFetch",
}
"""ok's built-in tools (``internal/tool/builtin``, ``Name()``) -> Claude Code's names."""
_NATIVE_OF = {canonical: native for native, canonical in NATIVE_TOOLS.items()}
_PAYLOAD_KEYS = ("toolName", "toolArgs", "toolResult", "lastAssistantText", "turn", "sessionId")
# hookcage's own handler keys an ok entry may carry (the sandbox profile, capabilities, ...).
_HOOKCAGE_KEYS = frozenset({"sandbox", "env", "capabilities", "on_error", "async", "once", "enabled", "name"})


class OkMatcher(Matcher):
    """ok's ``match``: ``pattern`` is ``^(?:match)$``, tested against ok's own name of the tool."""

    def matches(self, value: str | None, *, tool: bool = False, aliases: Aliases = no_aliases) -> bool:
        if self.error is not None:
            return False
        if self.matches_all or not tool:
            return True  # ok: events without a tool always match
        assert self.pattern is not None
        return self.pattern.search(_NATIVE_OF.get(value or "", value or ""))


def compile_ok_match(source: str | None) -> Matcher:
    """``compileMatch``: ``""``/``"*"`` match all, else the anchored regular expression."""
    if source is None or source in ("", "*"):
        return Matcher(source)
    try:
        return OkMatcher(source, pattern=linre.compile(f"^(?:{source})$"))
    except linre.PatternError as exc:
        return OkMatcher(source, error=f"invalid regular expression {source!r}: {exc}")


class OkDialect(Dialect):
    """ok (NB-Agent/ok v1.0.0): camelCase payload, exit-code answers, serial hooks."""

    name = "ok"
    title = "ok"
    shape = FileShape(agent="ok", event_names={e: e for e in EVENTS}, canonical_names=False,
                      timeout_scale=0.001, default_timeout=30.0, compile=compile_ok_match)
    serial = True
    json_blocks = False
    unsupported = (
        "the DeepSeek-Reasonix family (.reasonix, 13 events, env, contextFile, JSON additionalContext): "
        "a different agent; ok v1.0.0 has 4 events and reads no JSON",
        "cwd: hookcage runs a repository hook at the project root and a user hook in the agent's cwd",
        "messages and context: ok reads only the exit code, so hookcage's notes for a hook that did not "
        "block (hooks not run, not trusted) are in `hookcage list` and the run log, not in ok",
    )

    # -- files ---------------------------------------------------------------------------

    def sources(self, where: Where) -> list[HookSource]:
        return [HookSource(Scope.USER, home_path(where, ".ok", "settings.json")),
                *project_sources(where, (Scope.PROJECT, (".ok", "settings.json")),
                                 condition="ok loads it only when ~/.ok/trust.json lists the project root")]

    def parse(self, data: Any, *, scope: Scope, source: str, project_root: str | None,
              environ: Mapping[str, str] | None = None) -> HookFile:
        out = Collector(source, self.name)

        def done(specs: list[HookSpec]) -> HookFile:
            return HookFile(source, scope, tuple(specs), tuple(out.problems), agent=self.name,
                            routes=tuple(out.routes))

        if not isinstance(data, dict):
            out.error("$", "the top level must be a JSON object")
            return done([])
        hooks = data.get("hooks")
        if hooks is None:
            return done([])
        if not isinstance(hooks, dict):
            out.error("$.hooks", "must be an object mapping event names to arrays of hooks")
            return done([])
        specs: list[HookSpec] = []
        for event, entries in hooks.items():
            epath = f"$.hooks.{event}"
            if event not in EVENTS:
                out.warn(epath, f"ok has no event {event!r} (it runs {', '.join(EVENTS)}); ignored")
                continue
            if not isinstance(entries, list):
                out.error(epath, "must be an array of hooks", event)
                continue
            for i, raw in enumerate(entries):
                spec = self._entry(raw, f"{epath}[{i}]", event, scope, project_root, out)
                if spec is not None:
                    specs.append(spec)
        return done(specs)

    def _entry(self, raw: Any, path: str, event: str, scope: Scope, root: str | None,
               out: Collector) -> HookSpec | None:
        if not isinstance(raw, dict):
            out.error(path, "a hook must be an object with 'command' (and 'match', 'timeout', ...)", event)
            return None
        command = raw.get("command")
        if command is None or (isinstance(command, str) and not command.strip()):
            out.warn(f"{path}.command", "blank: ok skips this entry", event)
            return None
        match = raw.get("match")
        if match is not None and not isinstance(match, str):
            out.error(f"{path}.match", "must be a string (an anchored regular expression)", event)
            return None
        matcher = compile_ok_match(match)
        if matcher.error:
            out.warn(f"{path}.match", f"{matcher.error} (ok never fires this hook)", event)
        elif not matcher.matches_all and event not in ("PreToolUse", "PostToolUse"):
            out.warn(f"{path}.match", f"ok ignores match on {event} (the hook always runs)", event)
        handler: dict[str, Any] = {"type": "command", "command": command}
        timeout = raw.get("timeout")
        if timeout is None or (isinstance(timeout, int) and not isinstance(timeout, bool) and timeout <= 0):
            timeout = DEFAULT_MS.get(event, 30000)  # ok: 0, negative or absent is the event's default
        handler["timeout"] = timeout
        if "description" in raw:
            handler["name"] = raw["description"]
        for key, value in raw.items():
            if key in _HOOKCAGE_KEYS and not (key == "name" and "description" in raw):
                handler[key] = value
            elif key == "cwd":
                out.warn(f"{path}.cwd", "not honoured: hookcage runs a repository hook at the project root", event)
            elif key not in ("command", "match", "timeout", "description", *_HOOKCAGE_KEYS):
                out.warn(f"{path}.{key}", "unknown key, ignored", event)
        spec = parse_handler(handler, path, event, matcher, scope, root, out, shape=self.shape,
                             keys={"name": "description"})
        if spec is None:
            return None
        cap = CAP_SECONDS.get(event, 300.0)
        if spec.timeout > cap:
            out.warn(f"{path}.timeout", f"ok caps {event} hooks at {cap:g} s; capped", event)
            spec = replace(spec, timeout=cap)
        return spec

    # -- payload in ----------------------------------------------------------------------

    recognition = "the payload has ok's event (no hook_event_name) and its camelCase keys"

    def recognises(self, payload: Mapping[str, Any]) -> bool:
        return (payload.get("event") in EVENTS and "hook_event_name" not in payload
                and any(k in payload for k in _PAYLOAD_KEYS))

    def event_name(self, payload: Mapping[str, Any]) -> Any:
        return payload.get("event", payload.get("hook_event_name"))

    def canonical_payload(self, spec: EventSpec, payload: Mapping[str, Any]) -> dict[str, Any]:
        def get(camel: str, snake: str) -> Any:
            return payload.get(camel, payload.get(snake))

        data: dict[str, Any] = {"hook_event_name": spec.name}
        for key, value in (("session_id", get("sessionId", "session_id")), ("cwd", payload.get("cwd"))):
            if value is not None:
                data[key] = value
        if spec.matcher_field == "tool_name":
            tool = get("toolName", "tool_name")
            data["tool_name"] = NATIVE_TOOLS.get(tool, tool) if isinstance(tool, str) else ""
            data["tool_input"] = _tool_args(get("toolArgs", "tool_input"))
            if spec.name == "PostToolUse":
                data["tool_response"] = get("toolResult", "tool_response") or ""
        elif spec.name == "UserPromptSubmit":
            data["prompt"] = payload.get("prompt") or ""
        elif spec.name == "Stop":
            data["stop_hook_active"] = False
            data["last_assistant_message"] = get("lastAssistantText", "last_assistant_message") or ""
        return data

    def hook_input(self, spec: EventSpec, payload: Mapping[str, Any]) -> HookInput:
        """ok's payload as it sent it: one JSON line (``Payload``), ``event`` in ok's name."""
        data = {"event": self.native_event(spec), **{k: v for k, v in payload.items() if k != "event"}}
        return HookInput((dumps(data) + "\n").encode("utf-8"))

    # -- answers -------------------------------------------------------------------------

    def parse_answer(self, spec: EventSpec, run: HookRun) -> HookOutcome:
        """``decideOutcome``: the exit code only (stdout is the message when stderr is empty)."""
        gating = spec.name in GATING
        if run.timed_out and gating:
            after = f" after {run.timeout:g} s" if run.timeout is not None else ""
            return HookOutcome(hook=run.hook, status="block", exit_code=run.exit_code, hook_id=run.hook_id,
                               reason=f"hook timed out{after}")
        message = run.stderr if run.stderr.strip() else run.stdout
        if run.exit_code == 2 and not gating and run.finished:
            return HookOutcome(hook=run.hook, exit_code=2, hook_id=run.hook_id,
                               system_message=sanitize(message).strip() or None,
                               notes=(f"exit 2 does not block {spec.name} in ok (a warning there)",))
        return run.outcome(spec, stdout=b"", stderr=message)

    def install(self, mode: InstallMode, where: Where, read: Read, hookcage: str) -> Plan:
        """The user file's routes (:func:`install_plan`); ``managed`` is refused."""
        return install_plan(self, mode, where, read, hookcage)

    def render(self, event: EventSpec, verdict: Verdict) -> AgentAnswer:
        """Exit 2 + the reason on stderr for a block (or a stop), else exit 0 and nothing."""
        if verdict.blocks:
            return AgentAnswer(2, "", block_reason(event, verdict) + "\n")
        if not verdict.continue_:
            why = verdict.stop_reason or verdict.reason or f"stopped by hookcage ({event.name})"
            return AgentAnswer(2, "", sanitize(why) + "\n")
        return AgentAnswer(0, "", "")


ROUTE_TIMEOUT_MS = {"PreToolUse": 60000, "UserPromptSubmit": 60000, "PostToolUse": 300000, "Stop": 300000}
"""What ok waits for hookcage's route: its caps (``maxBlockingTimeout`` 60 s on the gating
events, 300 s elsewhere) rather than its defaults (5 s there, a timeout blocks)."""


def route_entries(command: str) -> dict[str, dict[str, Any]]:
    """ok's flat entries (``HookConfig``): ``match: "*"`` (every tool, ``compileMatch``) where ok
    reads ``match`` (PreToolUse, PostToolUse), the command, the timeout in milliseconds."""
    entries: dict[str, dict[str, Any]] = {}
    for event in EVENTS:
        entry: dict[str, Any] = {"match": "*"} if event in ("PreToolUse", "PostToolUse") else {}
        entry.update(command=command, description="hookcage", timeout=ROUTE_TIMEOUT_MS[event])
        entries[event] = entry
    return entries


def install_plan(dialect: OkDialect, mode: InstallMode, where: Where, read: Read, hookcage: str) -> Plan:
    """``~/.ok/settings.json`` with ok's four events routed to hookcage (``--user`` only).

    ok has no machine-wide file (``hook.go`` ``GlobalSettingsPath``); its switch is its own
    project trust (``~/.ok/trust.json``), which install never writes.
    """
    if mode == "managed":
        raise NotInstallable(
            "ok has no machine-wide (managed) hook file: it reads ~/.ok/settings.json, and a "
            "repository's .ok/settings.json only when ~/.ok/trust.json lists the project, so ok runs "
            "no repository hook itself until you trust a project there; use `hookcage install ok "
            "--user` for the routing.", install_plan(dialect, "user", where, read, hookcage))
    command = dispatch_command(hookcage, dialect.name)
    path = home_path(where, ".ok", "settings.json")
    edit = json_edit(read, path, lambda current: merge_flat(current, route_entries(command), "command"),
                     "ok's user settings: its four hook events routed to hookcage")
    return Plan(dialect.name, mode, (edit,), (
        "install never adds a project to ~/.ok/trust.json: do not trust one there (`/hooks trust`), or "
        "ok runs that repository's .ok/settings.json hooks itself, outside hookcage",
    ))


def _tool_args(value: Any) -> dict[str, Any]:
    """``toolArgs`` as an object (ok sends the tool's raw JSON arguments)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            return {}
    return value if isinstance(value, dict) else {}


DIALECT = OkDialect()
