"""jcode (github.com/cnjack/jcode, Go): Claude Code's shape, its own matchers and ``modifiedResult``.

Not the Rust agent of the same name (1jehuang/jcode), whose ``[hooks]`` live
in ``~/.jcode/config.toml``. Everything here is read from cnjack/jcode's
``internal/hooks/{config,types,match,exec,dispatcher}.go`` (indexed commits
5a3b4a9, 1421488, a2a3b66):

* **Files** (``config.go``): ``~/.jcode/hooks.json`` (user, always loaded);
  ``.jcode/hooks.json`` (project) and ``.jcode/hooks.local.json`` (local),
  which jcode loads only when ``JCODE_HOOKS_TRUST_PROJECT`` is exactly ``1``.
  Groups are appended user -> project -> local. hookcage reads all three
  whatever that variable says: repository hooks pass trust and the allow-list.
* **Shape** (``types.go``): Claude Code's; a handler has ``type`` (only
  ``command``), ``command``, ``timeout`` (seconds; 0 or absent = 60) and
  ``async`` (honoured only on events that cannot block, capped at 30 s).
* **Matchers** (``match.go`` ``matchesTool``): ``""``/``"*"`` match all;
  otherwise split on ``|``, each part trimmed; a part without any of
  ``.^$*+?()[]{}\\|`` is an *exact* name, any other part an unanchored
  regular expression (an invalid one never matches). They are tested against
  the real tool name and jcode's aliases (``execute`` -> ``Bash``,
  ``run_shell``; ``write`` -> ``Write``; ``edit`` -> ``Edit``; ``read`` ->
  ``Read``; ``glob`` -> ``Glob``; ``grep`` -> ``Grep``), and on every event:
  events without a tool test the empty name, so there only ``""``, ``"*"``
  or a regular expression matching ``""`` select a group (AGENTS.md says
  "exact-by-default, CC tool-name aliases"; the source adds the ``|`` split,
  no ``,`` split, and the empty name on non-tool events).
* **Events** (``types.go``): SessionStart, UserPromptSubmit, PreToolUse,
  PostToolUse, PostToolUseFailure, PreCompact, PostCompact, Stop, all with a
  Claude Code twin. Only UserPromptSubmit, PreToolUse and Stop can block
  (``Event.Blockable``): exit 2, ``decision: "block"`` or ``continue: false``
  elsewhere do nothing. PreCompact/PostCompact are declared but no firing
  site was found.
* **Payload** (``types.go`` ``Payload``): Claude Code's keys; jcode's own
  tool names (``execute``, ``write``, ``edit``, ``read``, ``glob``, ``grep``)
  become Claude Code's in the canonical payload; ``tool_response`` is a string.
* **Answers** (``exec.go`` ``parseOutcome``): exit 2 = block on a blockable
  event (reason = stderr); stdout is read only when it starts with ``{``
  (no plain-text context). On Stop and UserPromptSubmit, ``continue: false``
  is a *block* (on Stop: "keep going"), not Claude Code's "stop everything".
  ``hookSpecificOutput.modifiedResult`` (a string) rewrites the tool result
  of PostToolUse: hookcage's ``updated_output``, gated by ``rewrite_output``.
  Hooks run one after another and stop at the first deny or block
  (``dispatcher.go`` ``Fire``): ``serial``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from executor.core import linre
from executor.core.events import EventSpec
from executor.core.hookparse import parse_hook_file
from executor.core.hooks import FileShape, HookFile, Problem, Scope
from executor.core.install import (
    InstallMode,
    NotInstallable,
    Plan,
    Read,
    claude_shaped,
    dispatch_command,
    routes,
)
from executor.core.matchers import Aliases, Matcher, no_aliases
from executor.core.protocol import (
    UNSET,
    AgentAnswer,
    HookOutcome,
    HookRun,
    Verdict,
    dumps,
    join,
)
from executor.dialects.base import (
    Dialect,
    HookInput,
    HookSource,
    Where,
    block_reason,
    home_path,
    project_sources,
)

EVENTS = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "PostToolUseFailure",
          "PreCompact", "PostCompact", "Stop")
BLOCKABLE = frozenset({"UserPromptSubmit", "PreToolUse", "Stop"})
"""jcode's ``Event.Blockable``: the only events whose hooks can block or deny."""

NATIVE_TOOLS: Mapping[str, str] = {
    "execute": "Bash", "write": "Write", "edit": "Edit", "read": "Read", "glob": "Glob", "grep": "Grep",
}
"""jcode's tool names -> Claude Code's (the canonical payload carries these)."""
_NATIVE_OF = {canonical: native for native, canonical in NATIVE_TOOLS.items()}
_JCODE_ALIASES: Mapping[str, tuple[str, ...]] = {
    "execute": ("Bash", "run_shell"), "write": ("Write",), "edit": ("Edit",), "read": ("Read",),
    "glob": ("Glob",), "grep": ("Grep",),
}
"""``match.go`` ``toolAliases``: the names a jcode matcher is also tested against."""
_REGEX_META = set(".^$*+?()[]{}\\|")
_HOOK_ENV = (("JCODE_SESSION_ID", "session_id"), ("JCODE_TOOL_NAME", "tool_name"), ("JCODE_CWD", "cwd"),
             ("JCODE_TRANSCRIPT_PATH", "transcript_path"))
"""``exec.go`` ``hookEnv``: what jcode sets for each hook, from its payload."""
ASYNC_CAP = 30.0
"""``asyncHardCap``: seconds an async hook may run."""


def jcode_tool_names(canonical: str | None) -> tuple[str, ...]:
    """The names jcode tests a matcher against, for a tool named canonically (``""``: no tool)."""
    if not canonical:
        return ("",)
    native = _NATIVE_OF.get(canonical, canonical)
    return (native, *_JCODE_ALIASES.get(native, ()))


@dataclass(frozen=True)
class JcodeMatcher(Matcher):
    """A jcode matcher: ``|``-separated parts, each an exact name or an unanchored regex.

    ``names`` holds the exact parts; ``patterns`` the regular-expression parts
    (an invalid one is left out: jcode never matches it); ``bad`` says which
    were invalid. A value that is not a tool name (or no value) is tested as
    jcode tests events without a tool: as the empty name.
    """

    patterns: tuple[linre.LinearPattern, ...] = ()
    bad: tuple[str, ...] = ()

    @property
    def matches_all(self) -> bool:
        return self.names is None and not self.patterns and not self.bad and self.error is None

    def matches(self, value: str | None, *, tool: bool = False, aliases: Aliases = no_aliases) -> bool:
        if self.matches_all:
            return True
        candidates = jcode_tool_names(value if tool else None)
        if self.names and any(c in self.names for c in candidates):
            return True
        return any(p.search(c) for p in self.patterns for c in candidates)


def compile_jcode_matcher(source: str | None) -> Matcher:
    """Compile a matcher by ``match.go`` ``matchesTool``'s rules (see the module docstring)."""
    if source is None or source in ("", "*"):
        return Matcher(source)
    names: set[str] = set()
    patterns: list[linre.LinearPattern] = []
    bad: list[str] = []
    for raw in source.split("|"):
        part = raw.strip()
        if not part:
            continue
        if _REGEX_META.isdisjoint(part):
            names.add(part)
            continue
        try:
            patterns.append(linre.compile(part))
        except linre.PatternError as exc:
            bad.append(f"{part!r}: {exc}")
    return JcodeMatcher(source, names=frozenset(names), patterns=tuple(patterns), bad=tuple(bad))


class JcodeDialect(Dialect):
    """jcode (cnjack/jcode): Claude Code's dialect with jcode's matchers, blockable events and
    ``modifiedResult``."""

    name = "jcode"
    title = "jcode"
    shape = FileShape(agent="jcode", event_names={e: e for e in EVENTS}, canonical_names=False,
                      compile=compile_jcode_matcher, default_timeout=60.0)
    serial = True
    unsupported = (
        "jcode's own fail-open rules: a hook that times out or cannot start is a hookcage failure "
        "(its on_error decides, allow by default), as for every agent",
        "a non-zero exit other than 2 is a hook failure in hookcage (jcode shows its stderr and goes on: "
        "the same effect with on_error allow)",
    )

    # -- files ---------------------------------------------------------------------------

    def sources(self, where: Where) -> list[HookSource]:
        trust = "jcode loads it only with JCODE_HOOKS_TRUST_PROJECT=1"
        return [HookSource(Scope.USER, home_path(where, ".jcode", "hooks.json")),
                *project_sources(where, (Scope.PROJECT, (".jcode", "hooks.json")),
                                 (Scope.LOCAL, (".jcode", "hooks.local.json")), condition=trust)]

    def parse(self, data: Any, *, scope: Scope, source: str, project_root: str | None,
              environ: Mapping[str, str] | None = None) -> HookFile:
        parsed = parse_hook_file(_zero_timeouts(data), scope=scope, source=source, project_root=project_root,
                                 shape=self.shape)
        hooks = []
        problems = list(parsed.problems)
        warned: set[str] = set()
        for hook in parsed.hooks:
            group = hook.json_path.rsplit(".hooks[", 1)[0]
            matcher = hook.matcher
            if isinstance(matcher, JcodeMatcher) and matcher.bad and group not in warned:
                warned.add(group)
                problems.append(_warning(parsed, f"{group}.matcher", hook.event, "invalid regular expression "
                                         + "; ".join(matcher.bad) + " (jcode never matches that part)"))
            spec = self.shape.spec(hook.event)
            if spec.matcher_field != "tool_name" and not matcher.matches_all:
                # jcode tests the empty tool name on events without a tool, whatever the event's
                # canonical matcher field (source, trigger) or none: a selector says so.
                hook = replace(hook, selectors=(*hook.selectors, ("tool_name", matcher)))
            if hook.is_async and hook.event in BLOCKABLE:
                problems.append(_warning(parsed, f"{hook.json_path}.async", hook.event,
                                         f"jcode ignores async on {hook.event} (it can block): runs in order"))
                hook = replace(hook, is_async=False)
            elif hook.is_async and hook.timeout > ASYNC_CAP:
                hook = replace(hook, timeout=ASYNC_CAP)
            hooks.append(hook)
        return replace(parsed, hooks=tuple(hooks), problems=tuple(problems))

    # -- payload in ----------------------------------------------------------------------

    def canonical_payload(self, spec: EventSpec, payload: Mapping[str, Any]) -> dict[str, Any]:
        data = super().canonical_payload(spec, payload)
        tool = data.get("tool_name")
        if isinstance(tool, str) and tool in NATIVE_TOOLS:
            data["tool_name"] = NATIVE_TOOLS[tool]
        if spec.matcher_field == "tool_name" and "tool_input" not in data:
            data["tool_input"] = {}  # omitempty in jcode's Payload
        return data

    def hook_input(self, spec: EventSpec, payload: Mapping[str, Any]) -> HookInput:
        """jcode's payload as it sent it, and the variables jcode sets (``exec.go`` ``hookEnv``)."""
        stdin = super().hook_input(spec, payload).stdin
        env = {var: value for var, key in _HOOK_ENV if isinstance(value := payload.get(key, ""), str)}
        env["JCODE_HOOK_EVENT"] = self.native_event(spec)
        return HookInput(stdin, env)

    # -- answers -------------------------------------------------------------------------

    def answer_to_claude(self, spec: EventSpec, data: dict[str, Any]) -> dict[str, Any]:
        out = dict(data)
        blockable = spec.name in BLOCKABLE and spec.name != "PreToolUse"
        cont = out.pop("continue", None)
        out.pop("stopReason", None)
        if out.get("decision") != "block" or not blockable:
            out.pop("decision", None)  # "approve" is parsed by jcode and never acted on
        if blockable and cont is False:
            out["decision"] = "block"  # jcode: continue false blocks (Stop: keeps the agent going)
        if not blockable:
            out.pop("reason", None)
        specific = out.get("hookSpecificOutput")
        if isinstance(specific, dict) and "modifiedResult" in specific:
            specific = dict(specific)
            result = specific.pop("modifiedResult")
            if isinstance(result, str):
                specific["updatedToolOutput"] = result
            out["hookSpecificOutput"] = specific
        return out

    def parse_answer(self, spec: EventSpec, run: HookRun) -> HookOutcome:
        if run.exit_code == 2 and spec.name not in BLOCKABLE and run.finished:
            return HookOutcome(hook=run.hook, exit_code=2, hook_id=run.hook_id, notes=(
                f"exit 2 has no effect on {spec.name} (jcode ignores it there)",))
        if not run.stdout.strip().startswith(b"{"):
            run = replace(run, stdout=b"")  # jcode reads stdout only as a JSON object (no plain-text context)
        outcome = super().parse_answer(spec, run)
        if spec.name not in BLOCKABLE and outcome.status == "block":
            return replace(outcome, status="ok", reason=None, notes=(
                *outcome.notes, f"jcode cannot block {spec.name}; the block is ignored"))
        return outcome

    def install(self, mode: InstallMode, where: Where, read: Read, hookcage: str) -> Plan:
        """The user file's routes (:func:`install_plan`); ``managed`` is refused."""
        return install_plan(self, mode, where, read, hookcage)

    def render(self, event: EventSpec, verdict: Verdict) -> AgentAnswer:
        """Claude Code's answer, in what jcode reads.

        jcode has no "stop everything": ``continue: false`` becomes a block on
        PreToolUse and UserPromptSubmit and is dropped on Stop (whose
        ``continue: false`` would keep jcode going). A block on an event jcode
        cannot block reaches the model as ``additionalContext`` (tool events)
        or the user as ``systemMessage``. A result rewrite is ``modifiedResult``.
        """
        v = verdict
        if not v.continue_:
            why = v.stop_reason or v.reason or f"stopped by hookcage ({event.name})"
            v = replace(v, continue_=True, stop_reason=None)
            if event.name in ("PreToolUse", "UserPromptSubmit"):
                v = replace(v, blocked=True, reason=why)
            elif event.name == "Stop":
                v = replace(v, blocked=False, decision=None)
            else:
                v = replace(v, system_message=join([v.system_message, why]))
        if v.blocks and event.name not in BLOCKABLE:
            why = block_reason(event, v)
            if event.matcher_field == "tool_name":
                v = replace(v, additional_context=join([v.additional_context, why]))
            v = replace(v, blocked=False, reason=None, system_message=join([v.system_message, why]),
                        decision=None if v.decision == "deny" else v.decision)
        output = v.updated_output
        v = replace(v, suppress_output=False, updated_output=UNSET)
        answer = super().render(event, v)
        if output is UNSET or event.name not in ("PostToolUse", "PostToolUseFailure"):
            return answer
        data = json.loads(answer.stdout) if answer.stdout.strip() else {}
        specific = data.setdefault("hookSpecificOutput", {"hookEventName": self.native_event(event)})
        specific["modifiedResult"] = output if isinstance(output, str) else dumps(output)
        return AgentAnswer(answer.exit_code, dumps(data) + "\n", answer.stderr)


ROUTE_TIMEOUT = 600
"""Seconds jcode waits for hookcage's route (its default is 60, and a hook that times out is an
allow in jcode, ``exec.go``: hookcage may start containers)."""


def install_plan(dialect: JcodeDialect, mode: InstallMode, where: Where, read: Read, hookcage: str) -> Plan:
    """``~/.jcode/hooks.json`` with every jcode event routed to hookcage (``--user`` only).

    jcode has no managed file (``config.go`` ``Load`` reads the user file and, with
    ``JCODE_HOOKS_TRUST_PROJECT=1``, the project's two): its switch is that variable, left unset.
    """
    if mode == "managed":
        raise NotInstallable(
            "jcode has no machine-wide (managed) hook file: it reads ~/.jcode/hooks.json, and a "
            "repository's .jcode/hooks.json and .jcode/hooks.local.json only when "
            "JCODE_HOOKS_TRUST_PROJECT=1 is set, so with the variable unset jcode already runs no "
            "repository hook itself; use `hookcage install jcode --user` for the routing.",
            install_plan(dialect, "user", where, read, hookcage))
    command = dispatch_command(hookcage, dialect.name)
    matcher_events = [e for e in EVENTS if dialect.shape.spec(e).matcher_field]
    new = routes(EVENTS, command, matcher_events=matcher_events)
    for groups in new["hooks"].values():
        for group in groups:
            group["hooks"] = [{**h, "timeout": ROUTE_TIMEOUT} for h in group["hooks"]]
    path = home_path(where, ".jcode", "hooks.json")
    edit = claude_shaped(read, path, new, "jcode's user hooks: every jcode event routed to hookcage")
    return Plan(dialect.name, mode, (edit,), (
        "leave JCODE_HOOKS_TRUST_PROJECT unset: with it set to 1 jcode also runs a repository's "
        ".jcode/hooks.json and .jcode/hooks.local.json itself, outside hookcage",
    ))


def _zero_timeouts(data: Any) -> Any:
    """jcode reads ``timeout: 0`` as its default (60 s): drop such keys before the shared parser."""
    if not isinstance(data, dict) or not isinstance(data.get("hooks"), dict):
        return data
    hooks: dict[str, Any] = {}
    for event, groups in data["hooks"].items():
        if isinstance(groups, list):
            groups = [
                {**g, "hooks": [{k: v for k, v in h.items() if not (k == "timeout" and _is_zero(v))}
                                if isinstance(h, dict) else h for h in g["hooks"]]}
                if isinstance(g, dict) and isinstance(g.get("hooks"), list) else g
                for g in groups
            ]
        hooks[event] = groups
    return {**data, "hooks": hooks}


def _is_zero(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float) and value == 0


def _warning(parsed: HookFile, path: str, event: str, message: str) -> Problem:
    return Problem(parsed.source, path, message, "warning", event, parsed.agent)


DIALECT = JcodeDialect()
