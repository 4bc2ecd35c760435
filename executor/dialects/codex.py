"""Codex (openai/codex): its hook files, its payload and the strict answers it reads.

Sources: developers.openai.com/codex/hooks (D) and openai/codex's
``codex-rs`` (S): config/src/hook_config.rs (file shape),
hooks/src/engine/discovery.rs (layers, managed hooks), hooks/src/events/common.rs
(matchers), hooks/src/engine/output_parser.rs and hooks/src/schema.rs (answers).

Files (S discovery.rs; D): ``hooks.json`` and the ``[hooks]`` table of
``config.toml`` beside every config layer: user ``~/.codex`` (``$CODEX_HOME``
replaces it), project ``<repo>/.codex`` (Codex loads it only when the project
layer is trusted), system ``/etc/codex`` (managed). Managed hooks also come
from the ``[hooks]`` table of ``/etc/codex/requirements.toml`` and the legacy
``/etc/codex/managed_config.toml``. Codex also runs a user or project hook only
once its hash is trusted (``/hooks``); hookcage has its own trust and does not
read Codex's (``hooks.state`` in config.toml is skipped).
``allow_managed_hooks_only`` in requirements.toml is Codex's switch for its own
loader: hookcage does not apply it (hooks still pass hookcage's gates);
``[features] hooks = false`` (or ``codex_hooks``) turns the file's scope off.

Shape (S hook_config.rs): Claude Code's, ``timeout`` in seconds (default 600,
at least 1: ``timeout_sec.unwrap_or(600).max(1)``; some versions spell it
``timeoutSec``), plus ``statusMessage``, ``commandWindows``,
``visibilityHint``, ``additionalContextLimit`` (read, not acted on); handler
types ``prompt``/``agent``/``mcp_tool`` are listed and never run. Matchers (S
common.rs ``matches_matcher``): ``""``/``"*"``/absent match all; only
``[A-Za-z0-9_|]`` is an exact list split on ``|`` (``Bash`` does not match
``BashOutput``); anything else an unanchored Rust regular expression (RE2's
syntax). ``apply_patch`` is matched as ``Edit`` and ``Write`` too.

Events (S hook_config.rs ``HookEventsToml``; D for the newer ones): Claude
Code's names, PreToolUse, PermissionRequest, PostToolUse, PreCompact,
PostCompact, SessionStart, UserPromptSubmit, Stop, SubagentStart,
SubagentStop, SessionEnd, StopFailure; ``Interrupt`` has no twin. AGENTS.md's
"CC names (10)" depends on the version: hookcage accepts all of these.

Payload (S schema.rs ``PreToolUseCommandInput``): Claude Code's keys plus
``model`` and, on turn events, ``turn_id`` (how it is recognised without
``--agent``); ``transcript_path`` may be null; tools ``Bash``, ``apply_patch``
(``tool_input.command`` holds the patch), ``mcp__server__tool``.

Answers (S output_parser.rs, schema.rs): every output struct is
``deny_unknown_fields`` and an unsupported field makes Codex count the hook as
failed and go on (fail open), so hookcage answers with exactly the keys Codex
reads for each event. PreToolUse: ``permissionDecision: "deny"`` with a
non-empty reason, or ``"allow"`` only together with ``updatedInput`` (the
rewrite; AGENTS.md's bare ``allow`` is refused by Codex); ``ask``,
``continue: false``, ``stopReason`` and ``suppressOutput`` are unsupported there:
hookcage answers an ask verdict and a stop with a deny (the safe reading: a
hook wanted a human, or the agent stopped, and Codex can do neither here).
A bare approval is not passed on. Stop has no ``hookSpecificOutput``, so
context is not passed on there. Exit 2 blocks only with a reason on stderr
(with none, Codex counts the hook as failed); the same rules are applied to
Codex's own hooks' answers.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import tomlkit
from tomlkit.exceptions import TOMLKitError
from tomlkit.items import AoT, Array, Table

from executor.core import linre
from executor.core.events import EventSpec
from executor.core.hookparse import event_lists
from executor.core.hooks import Collector, FileShape, HookFile, HookSpec, Scope, parse_handler
from executor.core.install import (
    FileEdit,
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
    AgentAnswer,
    HookOutcome,
    HookRun,
    Verdict,
    dumps,
)
from executor.core.text import sanitize
from executor.dialects.base import (
    Dialect,
    HookSource,
    Where,
    block_reason,
    home_path,
    project_sources,
)

SYSTEM_DIR = "/etc/codex"
DEFAULT_TIMEOUT = 600.0

CODEX_EVENTS = (
    "PreToolUse", "PermissionRequest", "PostToolUse", "PreCompact", "PostCompact", "SessionStart",
    "UserPromptSubmit", "Stop", "SubagentStart", "SubagentStop", "SessionEnd", "StopFailure",
)
"""Codex's events that are Claude Code's (same names, same meaning)."""

OWN_EVENTS: Mapping[str, EventSpec] = {
    "Interrupt": EventSpec("Interrupt", None, "user_only"),
}

_EXACT = re.compile(r"[A-Za-z0-9_|]*")
_MATCHER_ALIASES: Mapping[str, tuple[str, ...]] = {"apply_patch": ("Edit", "Write")}
"""Names Codex also tests a tool's matcher against (S pre_tool_use.rs ``matcher_aliases``)."""

# Keys of the [hooks] table that are not events (S hook_config.rs HooksToml.state,
# ManagedHooksRequirementsToml.managed_dir / windows_managed_dir).
_NOT_EVENTS = frozenset({"state", "managed_dir", "windows_managed_dir"})

# What Codex reads in an answer, per event (S schema.rs: every struct is deny_unknown_fields).
_SPECIFIC_KEYS: Mapping[str, frozenset[str]] = {
    "PreToolUse": frozenset({"permissionDecision", "permissionDecisionReason", "updatedInput", "additionalContext"}),
    "PermissionRequest": frozenset({"decision"}),
    "PostToolUse": frozenset({"additionalContext"}),
    "SessionStart": frozenset({"additionalContext"}),
    "UserPromptSubmit": frozenset({"additionalContext"}),
    "SubagentStart": frozenset({"additionalContext"}),
}
_DECISION_EVENTS = frozenset({"PostToolUse", "UserPromptSubmit", "Stop", "SubagentStop"})
"""Events whose block Codex reads from top-level ``decision: "block"`` + ``reason``."""
_NO_STOP = frozenset({"PreToolUse", "PermissionRequest"})
"""Events where ``continue: false`` and ``stopReason`` are unsupported (output_parser.rs)."""
_NO_SUPPRESS = frozenset({"PreToolUse", "PermissionRequest", "PostToolUse"})
"""Events where ``suppressOutput`` is unsupported (output_parser.rs)."""


class CodexMatcher(Matcher):
    """A Codex matcher: also tested against Codex's own aliases of a tool (``apply_patch``: Edit, Write)."""

    def matches(self, value: str | None, *, tool: bool = False, aliases: Aliases = no_aliases) -> bool:
        if super().matches(value, tool=tool, aliases=aliases):
            return True
        if not tool or value is None or self.error is not None:
            return False
        return any(super(CodexMatcher, self).matches(alias) for alias in _MATCHER_ALIASES.get(value, ()))


def compile_matcher(source: str | None) -> Matcher:
    """Compile a matcher by Codex's rules (S common.rs ``matches_matcher``)."""
    if source is None or source in ("", "*"):
        return CodexMatcher(source)
    if _EXACT.fullmatch(source):
        return CodexMatcher(source, names=frozenset(source.split("|")) - {""})
    try:
        return CodexMatcher(source, pattern=linre.compile(source))
    except linre.PatternError as exc:
        return CodexMatcher(source, error=f"invalid regular expression {source!r}: {exc}")


def _reason(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def invalid_answer(event: str, data: Mapping[str, Any]) -> str | None:
    """Why Codex counts a hook with this JSON answer as failed (S output_parser.rs), or None."""
    specific = data.get("hookSpecificOutput")
    specific = specific if isinstance(specific, dict) else {}
    if event in _NO_STOP:
        if data.get("continue") is False:
            return f"{event} hook returned unsupported continue:false"
        if data.get("stopReason") is not None:
            return f"{event} hook returned unsupported stopReason"
    if event in _NO_SUPPRESS and data.get("suppressOutput") is True:
        return f"{event} hook returned unsupported suppressOutput"
    if event == "PreToolUse":
        decision = specific.get("permissionDecision")
        if any(k in specific for k in ("permissionDecision", "permissionDecisionReason", "updatedInput")):
            if "updatedInput" in specific and decision != "allow":
                return "PreToolUse hook returned updatedInput without permissionDecision:allow"
            if decision == "allow" and "updatedInput" not in specific:
                return "PreToolUse hook returned unsupported permissionDecision:allow"
            if decision == "ask":
                return "PreToolUse hook returned unsupported permissionDecision:ask"
            if decision == "deny" and not _reason(specific.get("permissionDecisionReason")):
                return "PreToolUse hook returned permissionDecision:deny without a non-empty permissionDecisionReason"
            if decision is None:
                return "PreToolUse hook returned permissionDecisionReason without permissionDecision"
        elif data.get("decision") == "approve":
            return "PreToolUse hook returned unsupported decision:approve"
        elif data.get("decision") == "block" and not _reason(data.get("reason")):
            return "PreToolUse hook returned decision:block without a non-empty reason"
        elif data.get("decision") is None and data.get("reason") is not None:
            return "PreToolUse hook returned reason without decision"
    if event == "PermissionRequest":
        decision = specific.get("decision")
        if isinstance(decision, dict):
            for key in ("updatedInput", "updatedPermissions"):
                if decision.get(key) is not None:
                    return f"PermissionRequest hook returned unsupported {key}"
            if decision.get("interrupt") is True:
                return "PermissionRequest hook returned unsupported interrupt:true"
    return None


class CodexDialect(Dialect):
    """Codex (openai/codex)."""

    name = "codex"
    tool_names: Mapping[str, str] = {"shell": "Bash", "exec_command": "Bash", "apply_patch": "Edit"}  # older and newer shell tools
    title = "Codex"
    shape = FileShape(
        agent="codex", event_names={e: e for e in CODEX_EVENTS}, own_events=OWN_EVENTS,
        default_timeout=DEFAULT_TIMEOUT, compile=compile_matcher, canonical_names=False,
        ignored_keys=frozenset({"statusMessage", "commandWindows", "visibilityHint", "additionalContextLimit",
                                "timeoutSec"}),
    )
    recognised_by = ("turn_id", "model")
    unsupported = (
        "Codex's per-hook hash trust and hooks.state (hookcage's own trust applies instead)",
        "allow_managed_hooks_only (Codex's switch for its own loader; hookcage's gates apply to every hook)",
        "an ask verdict on PreToolUse is answered as a deny (Codex cannot ask there)",
        "a pre-approval without an input rewrite, a tool output rewrite, and context on Stop "
        "(Codex's answers have no place for them)",
        "project .codex folders between the project root and the working directory (only the root's is read)",
    )

    # -- files ---------------------------------------------------------------------------

    def sources(self, where: Where) -> list[HookSource]:
        user_dir = (home_path(where, env="CODEX_HOME") if where.environ.get("CODEX_HOME")
                    else home_path(where, ".codex"))
        hashed = "Codex runs it once its hash is trusted (/hooks)"
        return [
            HookSource(Scope.MANAGED, f"{SYSTEM_DIR}/requirements.toml", format="toml",
                       condition="managed requirements: its [hooks] always load"),
            HookSource(Scope.MANAGED, f"{SYSTEM_DIR}/managed_config.toml", format="toml"),
            HookSource(Scope.MANAGED, f"{SYSTEM_DIR}/config.toml", format="toml"),
            HookSource(Scope.MANAGED, f"{SYSTEM_DIR}/hooks.json"),
            HookSource(Scope.USER, f"{user_dir}/hooks.json", condition=hashed),
            HookSource(Scope.USER, f"{user_dir}/config.toml", format="toml", condition=hashed),
            *project_sources(where, (Scope.PROJECT, (".codex", "hooks.json")),
                             condition=f"only in a trusted project; {hashed}"),
            *project_sources(where, (Scope.PROJECT, (".codex", "config.toml")), format="toml",
                             condition=f"only in a trusted project; {hashed}"),
        ]

    def parse(self, data: Any, *, scope: Scope, source: str, project_root: str | None,
              environ: Mapping[str, str] | None = None) -> HookFile:
        out = Collector(source, self.name)
        if not isinstance(data, dict):
            out.error("$", "the top level must be an object")
            return HookFile(source, scope, problems=tuple(out.problems), agent=self.name)
        toml = source.endswith(".toml")
        disable = self._features_off(data, out) if toml else ""
        hooks = data.get("hooks", {})
        specs: list[HookSpec] = []
        if not isinstance(hooks, dict):
            out.error("$.hooks", "must be an object mapping event names to matcher groups")
            hooks = {}
        events = {name: groups for name, groups in hooks.items() if not (toml and name in _NOT_EVENTS)}
        for _, event, epath, groups in event_lists(events, self.shape, out, "matcher groups"):
            for gi, group in enumerate(groups):
                specs.extend(self._group(group, f"{epath}[{gi}]", event, scope, project_root, out))
        return HookFile(source, scope, tuple(specs), tuple(out.problems), disable_all=bool(disable),
                        agent=self.name, routes=tuple(out.routes), disable_reason=disable)

    @staticmethod
    def _features_off(data: Mapping[str, Any], out: Collector) -> str:
        """``[features] hooks = false`` (alias ``codex_hooks``): Codex runs no hooks from this layer on."""
        features = data.get("features")
        if not isinstance(features, dict):
            return ""
        for key in ("hooks", "codex_hooks"):
            value = features.get(key)
            if value is False:
                return f"[features] {key} = false"
            if value is not None and not isinstance(value, bool):
                out.error(f"$.features.{key}", "must be true or false")
        return ""

    def _group(self, group: Any, path: str, event: str, scope: Scope, root: str | None,
               out: Collector) -> list[HookSpec]:
        if not isinstance(group, dict):
            out.error(path, "a matcher group must be an object with 'matcher' and 'hooks'", event)
            return []
        raw_matcher = group.get("matcher")
        if raw_matcher is not None and not isinstance(raw_matcher, str):
            out.error(f"{path}.matcher", "must be a string", event)
            return []
        matcher = compile_matcher(raw_matcher)
        if matcher.error:
            effect = "this group never fires" if self.shape.spec(event).matcher_field else f"{event} ignores matchers"
            out.warn(f"{path}.matcher", f"{matcher.error} ({effect}; Codex skips the group)", event)
        for key in sorted(group.keys() - {"matcher", "hooks"}):
            out.warn(f"{path}.{key}", "unknown key, ignored", event)
        handlers = group.get("hooks", [])
        if not isinstance(handlers, list):
            out.error(f"{path}.hooks", "must be an array of hook handlers", event)
            return []
        specs = []
        for hi, raw in enumerate(handlers):
            hpath = f"{path}.hooks[{hi}]"
            keys: dict[str, str] = {}
            if isinstance(raw, dict):
                if "timeoutSec" in raw and "timeout" not in raw:
                    raw = {**raw, "timeout": raw["timeoutSec"]}
                    keys["timeout"] = "timeoutSec"
                timeout = raw.get("timeout")
                if isinstance(timeout, int) and not isinstance(timeout, bool) and timeout == 0:
                    out.warn(f"{hpath}.{keys.get('timeout', 'timeout')}", "0 runs as 1 second (Codex's minimum)",
                             event)
                    raw = {**raw, "timeout": 1}
            spec = parse_handler(raw, hpath, event, matcher, scope, root, out, shape=self.shape, keys=keys)
            if spec is not None:
                specs.append(spec)
        return specs

    # -- answers -------------------------------------------------------------------------

    def parse_answer(self, spec: EventSpec, run: HookRun) -> HookOutcome:
        """Claude Code's rules, narrowed to what Codex accepts (S output_parser.rs, pre_tool_use.rs)."""
        if not run.finished:
            return run.outcome(spec)
        failed = HookOutcome(hook=run.hook, status="error", exit_code=run.exit_code, hook_id=run.hook_id)
        if run.exit_code == 2 and not run.stderr.strip():
            return replace(failed, error="exited 2 with nothing on stderr: Codex does not block then "
                                         "(the hook counts as failed)")
        if run.exit_code != 0:
            return run.outcome(spec)
        if run.stdout.lstrip().startswith(b"["):
            return replace(failed, error="stdout JSON is not an object")
        if not run.stdout.lstrip().startswith(b"{"):
            return run.outcome(spec)
        try:
            data = json.loads(run.stdout)
        except (ValueError, RecursionError):
            return run.outcome(spec)  # reported as it is
        if not isinstance(data, dict):
            return run.outcome(spec)
        problem = invalid_answer(spec.name, data)
        if problem is not None:
            return replace(failed, error=f"{sanitize(problem)}: Codex counts the hook as failed and goes on")
        notes: tuple[str, ...] = ()
        if data.get("decision") == "block" and not _reason(data.get("reason")):
            data = {k: v for k, v in data.items() if k != "decision"}
            notes = (f"decision:block without a non-empty reason does not block in Codex ({spec.name}); ignored",)
        outcome = run.outcome(spec, exit_code=0, stdout=dumps(data).encode("utf-8"))
        return replace(outcome, notes=outcome.notes + notes)

    def render(self, event: EventSpec, verdict: Verdict) -> AgentAnswer:
        """hookcage's verdict with only the keys Codex reads for ``event`` (exit 0, JSON).

        Codex refuses an answer with a key it does not read and then goes on as if
        no hook had answered, so nothing else is ever written.
        """
        name = event.name
        out: dict[str, Any] = {}
        specific: dict[str, Any] = {}
        stop = not verdict.continue_
        stop_reason = sanitize(verdict.stop_reason) if verdict.stop_reason else None
        if name == "PreToolUse":
            deny = None
            if verdict.blocks:
                deny = block_reason(event, verdict)
            elif stop:
                deny = stop_reason or "a hook stopped the agent (continue: false), which Codex cannot do here"
            elif verdict.decision == "ask":
                why = f": {sanitize(verdict.decision_reason)}" if verdict.decision_reason else ""
                deny = f"a hook asked for confirmation, which Codex cannot ask for here; denied{why}"
            if deny is not None:
                specific.update(permissionDecision="deny", permissionDecisionReason=deny)
            elif verdict.updated_input is not None:
                specific.update(permissionDecision="allow", updatedInput=verdict.updated_input)
        elif name == "PermissionRequest":
            if verdict.blocks or stop:
                message = block_reason(event, verdict) if verdict.blocks else (stop_reason or "stopped by a hook")
                specific["decision"] = {"behavior": "deny", "message": message}
            elif verdict.decision == "allow":
                specific["decision"] = {"behavior": "allow"}
        elif name in _DECISION_EVENTS and verdict.blocks:
            out["decision"] = "block"
            out["reason"] = block_reason(event, verdict)
        elif name == "PreCompact" and verdict.blocks:
            stop, stop_reason = True, block_reason(event, verdict)  # Codex reads only continue: false there
        if stop and name not in _NO_STOP:
            out["continue"] = False
            if stop_reason:
                out["stopReason"] = stop_reason
        if verdict.suppress_output and name not in _NO_SUPPRESS:
            out["suppressOutput"] = True
        if verdict.system_message:
            out["systemMessage"] = sanitize(verdict.system_message)
        allowed = _SPECIFIC_KEYS.get(name, frozenset())
        if verdict.additional_context and "additionalContext" in allowed:
            specific["additionalContext"] = sanitize(verdict.additional_context)
        specific = {k: v for k, v in specific.items() if k in allowed}
        if specific:
            out["hookSpecificOutput"] = {"hookEventName": name, **specific}
        return AgentAnswer(0, dumps(out) + "\n", "")


    # -- hookcage install -----------------------------------------------------------------

    def user_dir(self, where: Where) -> str:
        """``$CODEX_HOME``, else ``~/.codex``."""
        return (home_path(where, env="CODEX_HOME") if where.environ.get("CODEX_HOME")
                else home_path(where, ".codex"))

    def install(self, mode: InstallMode, where: Where, read: Read, hookcage: str) -> Plan:
        """Codex's routes, and for ``managed`` its switch (see :func:`install_plan`)."""
        return install_plan(self, mode, where, read, hookcage)


ROUTED_EVENTS = (*CODEX_EVENTS, "Interrupt")
"""Every event Codex fires (versions without some of them ignore the key: ``HookEventsToml``
has named fields and no ``deny_unknown_fields``, S config/src/hook_config.rs)."""

MATCHER_EVENTS = frozenset({"PreToolUse", "PermissionRequest", "PostToolUse", "SessionStart", "PreCompact",
                            "PostCompact", "SubagentStart", "SubagentStop"})
"""Where Codex reads a matcher (D "Matchers"; S events/common.rs ``matcher_pattern_for_event``);
``"*"`` matches everything (S common.rs ``matches_matcher``)."""

REQUIREMENTS = f"{SYSTEM_DIR}/requirements.toml"


def _route_tables(command: str) -> dict[str, list[dict[str, Any]]]:
    hooks: dict[str, list[dict[str, Any]]] = routes(ROUTED_EVENTS, command, matcher_events=MATCHER_EVENTS)["hooks"]
    return hooks


def _has_route(groups: Any, command: str) -> bool:
    for group in groups:
        handlers = group.get("hooks") if isinstance(group, dict | Table) else None
        if isinstance(handlers, list | AoT | Array) and any(
                isinstance(h, dict | Table) and h.get("command") == command for h in handlers):
            return True
    return False


def _toml_group(group: Mapping[str, Any]) -> Table:
    table = tomlkit.table()
    if "matcher" in group:
        table["matcher"] = group["matcher"]
    handlers = tomlkit.aot()
    for handler in group["hooks"]:
        item = tomlkit.table()
        for key, value in handler.items():
            item[key] = value
        handlers.append(item)
    table["hooks"] = handlers
    return table


def requirements_toml(raw: bytes | None, command: str, managed_dir: str) -> tuple[bytes, list[str]]:
    """``/etc/codex/requirements.toml`` with hookcage's switch and routes (comments and other tables kept).

    The shape is Codex's managed-hooks example (D "Managed hooks"): top-level
    ``allow_managed_hooks_only = true`` (read only from requirements.toml, docs/config.md), and
    under ``[hooks]`` a ``managed_dir`` plus ``[[hooks.<Event>]]`` groups of
    ``[[hooks.<Event>.hooks]]`` handlers. Codex skips every ``[hooks]`` group of requirements.toml
    unless ``managed_dir`` names an existing absolute directory (S hooks/src/engine/discovery.rs
    ``managed_hooks_source_path``): an existing one is kept, else hookcage's own directory.

    Returns:
        The new content and what the user should know (one line each).

    Raises:
        NotInstallable: the file is not TOML, or its ``hooks`` is not a table hookcage can add to.
    """
    notes: list[str] = []
    try:
        doc = tomlkit.parse((raw or b"").decode("utf-8"))
    except (TOMLKitError, UnicodeDecodeError, ValueError) as exc:
        raise NotInstallable(f"{REQUIREMENTS} is not valid TOML ({exc}); fix it first: install never "
                             "overwrites a file it cannot merge") from None
    if doc.get("allow_managed_hooks_only") is not True:
        if "allow_managed_hooks_only" in doc:
            notes.append(f"{REQUIREMENTS}: allow_managed_hooks_only was {doc['allow_managed_hooks_only']!r}; "
                         "now true")
        doc["allow_managed_hooks_only"] = True
    if "hooks" not in doc:
        doc["hooks"] = tomlkit.table()
    hooks = doc["hooks"]
    if not isinstance(hooks, Table):
        raise NotInstallable(f"{REQUIREMENTS}: [hooks] is not a table hookcage can add to (an inline table?); "
                             "write it as [hooks] and [[hooks.<Event>]] tables first")
    if "managed_dir" not in hooks:
        hooks["managed_dir"] = managed_dir
    elif hooks["managed_dir"] != managed_dir:
        notes.append(f"{REQUIREMENTS}: [hooks] managed_dir stays {hooks['managed_dir']!r} (it must exist, "
                     "or Codex skips these hooks)")
    for event, groups in _route_tables(command).items():
        current = hooks.get(event)
        if current is None:
            aot = tomlkit.aot()
            for group in groups:
                aot.append(_toml_group(group))
            hooks[event] = aot
        elif isinstance(current, AoT | Array):
            if not _has_route(current, command):
                for group in groups:
                    current.append(_toml_group(group) if isinstance(current, AoT) else group)
        else:
            raise NotInstallable(f"{REQUIREMENTS}: hooks.{event} is not an array of tables; fix it first: "
                                 "install never overwrites what it cannot merge")
    features = doc.get("features")
    if isinstance(features, Table | dict) and (features.get("hooks") is False or features.get("codex_hooks") is False):
        notes.append(f"{REQUIREMENTS} turns Codex's hooks off ([features] hooks = false): no hook runs, "
                     "hookcage's routes included")
    return tomlkit.dumps(doc).encode("utf-8"), notes


def install_plan(dialect: CodexDialect, mode: InstallMode, where: Where, read: Read, hookcage: str) -> Plan:
    """What ``hookcage install codex`` writes.

    ``managed``: :func:`requirements_toml` (needs root): Codex then runs only managed hooks,
    hookcage's routes among them, and no user, project, session or plugin hook.
    ``user``: the routes in ``$CODEX_HOME/hooks.json`` (``~/.codex/hooks.json``), the shape of
    ``HooksFile`` (S config/src/hook_config.rs; D "Where Codex looks for hooks"). Codex keeps
    its own gates there: a project's hooks load only in a trusted project, and every
    non-managed hook, hookcage's routes included, runs only once its hash is trusted in /hooks.
    """
    command = dispatch_command(hookcage, dialect.name)
    if mode == "managed":
        managed_dir = posixpath.dirname(hookcage) if posixpath.isabs(hookcage) else SYSTEM_DIR
        content, notes = requirements_toml(read(REQUIREMENTS), command, managed_dir or SYSTEM_DIR)
        edit = FileEdit(REQUIREMENTS, content, why="Codex's managed requirements: only managed hooks run "
                        "(allow_managed_hooks_only), every event routed to hookcage")
        return Plan(dialect.name, mode, (edit,), (
            *notes,
            "Codex reads requirements.toml when it starts: restart running Codex sessions",
            "still outside hookcage: other managed hooks (MDM, cloud requirements, /etc/codex/config.toml "
            "and hooks.json); a repository's own hooks no longer run in Codex",
        ))
    path = f"{dialect.user_dir(where)}/hooks.json"
    edit = claude_shaped(read, path, {"hooks": _route_tables(command)},
                         "Codex's user hooks: every event routed to hookcage")
    return Plan(dialect.name, mode, (edit,), (
        "Codex runs a user hook only once its hash is trusted: start codex, open /hooks and trust "
        "hookcage's entries (until then Codex skips them)",
        "still outside hookcage: a repository's .codex hooks that you trust in /hooks inside a project "
        "you trust in Codex (Codex runs them itself); `hookcage install codex --managed` stops that",
    ))


DIALECT = CodexDialect()
