"""Gemini CLI: its settings files, its event names, its payload and its answers.

Sources: google-gemini/gemini-cli at 5411f113 (2026-08-21); paths below are in
that repository.

Files (packages/cli/src/config/settings.ts, packages/core/src/utils/paths.ts,
storage.ts): hooks live under ``"hooks"`` in ``settings.json``; system
``/etc/gemini-cli/settings.json`` (and ``system-defaults.json`` beside it),
read as managed; user ``~/.gemini/settings.json`` where ``GEMINI_CLI_HOME``
replaces the *home directory* (the file is
``$GEMINI_CLI_HOME/.gemini/settings.json``, not ``$GEMINI_CLI_HOME/settings.json``
as AGENTS.md reads); project ``.gemini/settings.json``. Gemini loads the
project file only in a trusted folder, and in an untrusted folder it loads no
settings hooks at all, user and system ones included
(hooks/hookRegistry.ts ``processHooksFromConfig``): hookcage reads them all
regardless, and they pass its gates. ``hooksConfig.enabled: false`` turns a
file's hooks off, ``hooksConfig.disabled`` names hooks (by ``name``, else
``command``) to skip; hookcage applies both to the file that says so (Gemini
merges them across scopes). Gemini strips ``//`` and ``/* */`` comments from
settings files (``strip-json-comments``); hookcage does the same
(:attr:`GeminiDialect.json_comments`), and nothing else: a trailing comma is
an error there and here.

Shape (hooks/types.ts ``HookDefinition``, ``CommandHookConfig``): Claude
Code's, ``timeout`` in milliseconds (default 60000, hooks/hookRunner.ts), plus
``name``, ``description``, ``env`` and the group key ``sequential``. Matchers
(hooks/hookPlanner.ts): on tool events an unanchored JavaScript regular
expression tested against the tool name (an invalid one compares the name
exactly); on SessionStart, SessionEnd and PreCompress an exact string compared
with ``source``/``reason``/``trigger``; every other event ignores it.
``sequential: true`` makes Gemini run the matching hooks in order, each one's
``tool_input`` fed to the next; hookcage runs them in parallel and folds the
answers as Gemini's aggregator does (any deny wins), without that chaining.

Events (hooks/types.ts ``HookEventName``; twins per
packages/cli/src/commands/hooks/migrate.ts): BeforeTool = PreToolUse,
AfterTool = PostToolUse, BeforeAgent = UserPromptSubmit, AfterAgent = Stop,
PreCompress = PreCompact, SessionStart, SessionEnd, Notification; BeforeModel,
AfterModel and BeforeToolSelection have no twin and are carried under their
own names. Gemini's files may not use the canonical names it never fires.

Payload (hooks/hookEventHandler.ts): Claude Code's keys plus ``timestamp``;
tools ``run_shell_command``, ``write_file``, ``replace``, ``read_file``, ...
(tools/definitions/base-declarations.ts). The canonical payload names the
built-in tools canonically (``Bash``, ``Write``, ``Edit``) and adds Stop's
``last_assistant_message`` from ``prompt_response``; Gemini's own hooks read
the payload as Gemini sent it, with ``GEMINI_SESSION_ID`` and ``GEMINI_CWD``
set as Gemini sets them.

Answers (hooks/hookRunner.ts ``convertPlainTextToHookOutput``, hooks/types.ts,
scheduler/hook-utils.ts): stdout, or stderr when stdout is empty, is read as
JSON whatever the exit code (JSON wins); plain text with exit 0 is a system
message, exit 1 a warning, and **every other non-zero exit with text a deny**
(AGENTS.md says "other = warning"; the source denies from exit 2 up). hookcage
keeps its own findings for exits 126/127 (the command could not run: the
hook failed). ``decision`` ``deny``/``block`` blocks, ``ask`` asks (BeforeTool),
``allow``/``approve`` are no approval in Gemini (its aggregator answers
``allow`` whenever nobody objects; the tool's confirmation still happens), so
they are read as no decision. The input rewrite is
``hookSpecificOutput.tool_input`` (-> ``updated_input``, behind the
``rewrite_input`` capability). hookcage answers Gemini with exit 0 and JSON:
``decision: "deny"`` + ``reason`` for a block, ``ask`` on BeforeTool,
``continue``/``stopReason``, ``systemMessage``, ``suppressOutput``,
``hookSpecificOutput.additionalContext`` and ``.tool_input`` (the whole input).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from executor.core import linre
from executor.core.events import EventSpec
from executor.core.hookparse import parse_hook_file
from executor.core.hooks import FileShape, HookFile, Problem, Scope
from executor.core.install import (
    Plan,
    Read,
    claude_shaped,
    dispatch_command,
    routes,
)
from executor.core.matchers import Matcher
from executor.core.protocol import (
    AgentAnswer,
    HookOutcome,
    HookRun,
    Verdict,
    dumps,
)
from executor.core.text import decode, sanitize
from executor.dialects.base import (
    Dialect,
    HookInput,
    HookSource,
    Where,
    block_reason,
    home_path,
    project_sources,
    stop_fields,
)

SYSTEM_DIR = "/etc/gemini-cli"

EVENT_NAMES: Mapping[str, str] = {
    "BeforeTool": "PreToolUse",
    "AfterTool": "PostToolUse",
    "BeforeAgent": "UserPromptSubmit",
    "AfterAgent": "Stop",
    "PreCompress": "PreCompact",
    "SessionStart": "SessionStart",
    "SessionEnd": "SessionEnd",
    "Notification": "Notification",
}
"""Gemini's events with a canonical twin (packages/cli/src/commands/hooks/migrate.ts ``EVENT_MAPPING``)."""

OWN_EVENTS: Mapping[str, EventSpec] = {
    # docs/hooks/reference.md: a deny on BeforeModel/AfterModel aborts the turn; BeforeToolSelection cannot block.
    "BeforeModel": EventSpec("BeforeModel", None, "blocks", fields=("llm_request",)),
    "AfterModel": EventSpec("AfterModel", None, "blocks", fields=("llm_request", "llm_response")),
    "BeforeToolSelection": EventSpec("BeforeToolSelection", None, "user_only", fields=("llm_request",)),
}
"""Gemini's events with no canonical twin: only Gemini's hooks match them."""

HOOKS_CONFIG_FIELDS = frozenset({"enabled", "disabled", "notifications"})
"""Keys of ``"hooks"`` that are not events (hooks/types.ts ``HOOKS_CONFIG_FIELDS``)."""

TRIGGER_EVENTS = frozenset({"SessionStart", "SessionEnd", "PreCompact"})
"""Canonical events whose Gemini matcher is an exact string (hooks/hookEventHandler.ts ``trigger``)."""

TOOL_EVENTS = frozenset({"PreToolUse", "PostToolUse"})

BUILTIN_TOOLS = frozenset({
    "run_shell_command", "write_file", "replace", "read_file", "glob", "grep_search", "list_directory",
    "web_fetch", "google_web_search", "write_todos",
})
"""Gemini's built-in tools that have a canonical twin in the tool aliases
(tools/definitions/base-declarations.ts); others keep their names."""

SPECIFIC_KEYS = frozenset({"hookEventName", "additionalContext", "tool_input"})
"""``hookSpecificOutput`` keys hookcage carries; the rest (``llm_request``,
``llm_response``, ``toolConfig``, ``tailToolCallRequest``, ``clearContext``)
have no place in hookcage's verdict."""

_ENV_CAP = 4096


def compile_matcher(source: str | None) -> Matcher:
    """A Gemini matcher as its tool events read it: an unanchored regular expression.

    An expression JavaScript could not compile is compared with the tool name
    exactly, as Gemini does (hookPlanner.ts ``matchesToolName``); one that is
    valid but that RE2 refuses (lookaround, backreferences) never fires and is
    reported, as everywhere in hookcage.
    """
    if source is None:
        return Matcher(None)
    text = source.strip()
    if text in ("", "*"):
        return Matcher(source)
    try:
        return Matcher(source, pattern=linre.compile(text))
    except linre.PatternError as exc:
        try:
            re.compile(text)
        except Exception:
            return Matcher(source, names=frozenset({text}))
        return Matcher(source, error=f"invalid regular expression {source!r}: {exc}")


def _event_matcher(event: str, matcher: Matcher) -> Matcher:
    """The matcher as Gemini reads it on ``event`` (hookPlanner.ts ``matchesContext``)."""
    if event in TOOL_EVENTS or matcher.matches_all:
        return matcher
    text = (matcher.source or "").strip()
    if event in TRIGGER_EVENTS:
        return Matcher(matcher.source, names=frozenset({text}))
    return Matcher(matcher.source)  # Gemini passes no context here: every hook of the event runs


_NOT_JSON = object()


def _json_answer(text: str) -> Any:
    """What Gemini makes of a hook's text: an object, some other JSON value, or ``_NOT_JSON``."""
    if not text:
        return None

    def refuse(name: str) -> Any:
        raise ValueError(name)

    try:
        parsed = json.loads(text, parse_constant=refuse)
        if isinstance(parsed, str):  # double-encoded (hookRunner.ts)
            parsed = json.loads(parsed, parse_constant=refuse)
    except (ValueError, RecursionError):
        return _NOT_JSON
    return parsed


class GeminiDialect(Dialect):
    """Gemini CLI (google-gemini/gemini-cli)."""

    name = "gemini"
    tool_names: Mapping[str, str] = {
        "run_shell_command": "Bash", "read_file": "Read", "write_file": "Write", "replace": "Edit",
        "glob": "Glob", "grep_search": "Grep", "search_file_content": "Grep", "list_directory": "LS",
        "web_fetch": "WebFetch", "google_web_search": "WebSearch", "write_todos": "TodoWrite",
    }  # tools/definitions/base-declarations.ts (search_file_content: its older name)
    title = "Gemini CLI"
    json_comments = True  # settings.ts: JSON.parse(stripJsonComments(content))
    shape = FileShape(
        agent="gemini", event_names=EVENT_NAMES, own_events=OWN_EVENTS, timeout_scale=0.001,
        default_timeout=60.0, compile=compile_matcher, ignored_keys=frozenset({"sequential", "description"}),
        canonical_names=False,
    )
    project_dir_var = "GEMINI_PROJECT_DIR"
    recognised_by = ("timestamp", "hook_event_name")
    input_key = "tool_input"
    unsupported = (
        "sequential: true (hooks run in parallel and are folded; one hook's tool_input is not fed to the next)",
        "hookSpecificOutput llm_request, llm_response, toolConfig, tailToolCallRequest, clearContext "
        "(hookcage's verdict has no place for them; reported and ignored)",
        "a pre-approval or a tool output rewrite from hookcage's own hooks (Gemini reads neither)",
        "extension hooks (hooks/hooks.json inside an extension) are not read",
    )

    takeover = (
        "Gemini CLI cannot be taken over: it has no setting that stops it running a repository's "
        ".gemini/settings.json hooks itself; its only gate is folder trust (a trusted folder runs "
        "them; an untrusted one runs no settings hook at all, the user's included), and "
        "hooksConfig.enabled: false in the system settings turns every hook off, hookcage's routes "
        "with them. So in a folder you trust, the repository's hooks still run outside hookcage, "
        "on the host. What can still be added is hookcage's routing in ~/.gemini/settings.json "
        "($GEMINI_CLI_HOME/.gemini/settings.json), so hookcage's own hooks and gates run beside "
        "Gemini's in trusted folders."
    )

    def offer(self, where: Where, read: Read, hookcage: str) -> Plan | None:
        """``install`` is refused (``takeover``); this routing can still be added."""
        return offer_plan(self, where, read, hookcage)

    # -- files ---------------------------------------------------------------------------

    def sources(self, where: Where) -> list[HookSource]:
        untrusted = "Gemini loads no settings hooks in an untrusted folder"
        user_dir = home_path(where, ".gemini", env="GEMINI_CLI_HOME")
        return [
            HookSource(Scope.MANAGED, f"{SYSTEM_DIR}/system-defaults.json", condition=untrusted),
            HookSource(Scope.MANAGED, f"{SYSTEM_DIR}/settings.json", condition=untrusted),
            HookSource(Scope.USER, f"{user_dir}/settings.json", condition=untrusted),
            *project_sources(where, (Scope.PROJECT, (".gemini", "settings.json")),
                             condition="only in a trusted folder (Gemini's folder trust)"),
        ]

    def parse(self, data: Any, *, scope: Scope, source: str, project_root: str | None,
              environ: Mapping[str, str] | None = None) -> HookFile:
        if not isinstance(data, dict):
            return parse_hook_file(data, scope=scope, source=source, project_root=project_root, shape=self.shape)
        hooks = data.get("hooks", {})
        if isinstance(hooks, dict):
            hooks = {k: v for k, v in hooks.items() if k not in HOOKS_CONFIG_FIELDS}
        parsed = parse_hook_file({"hooks": hooks}, scope=scope, source=source, project_root=project_root,
                                 shape=self.shape)
        problems = list(parsed.problems)

        def warn(path: str, message: str, event: str | None = None) -> None:
            problems.append(Problem(source, path, message, "warning", event, self.name))

        disabled, enabled = self._hooks_config(data.get("hooksConfig"), problems, source)
        if isinstance(hooks, dict):
            for name, groups in hooks.items():
                for gi, group in enumerate(groups if isinstance(groups, list) else []):
                    if isinstance(group, dict) and "sequential" in group and not isinstance(group["sequential"], bool):
                        warn(f"$.hooks.{name}[{gi}].sequential", "must be true or false; ignored",
                             self.shape.event(name))
        specs = []
        for hook in parsed.hooks:
            hook = replace(hook, matcher=_event_matcher(hook.event, hook.matcher))
            if not hook.enabled and scope.from_repository:
                # hookcage's own key, which Gemini does not read: Gemini runs the hook, so the review shows it
                warn(f"{hook.json_path}.enabled", "Gemini CLI does not read \"enabled\" and runs this hook: "
                     "hookcage reviews and gates it like any other (Gemini's switch is hooksConfig.disabled)",
                     hook.event)
                hook = replace(hook, enabled=True)
            if hook.enabled and ((hook.name or hook.command) in disabled):
                hook = replace(hook, enabled=False)
            specs.append(hook)
        return replace(parsed, hooks=tuple(specs), problems=tuple(problems),
                       disable_all=not enabled, disable_reason="hooksConfig.enabled: false" if not enabled else "")

    def _hooks_config(self, raw: Any, problems: list[Problem], source: str) -> tuple[frozenset[str], bool]:
        """``hooksConfig``: the names/commands it disables, and whether hooks are on."""
        def error(path: str, message: str) -> None:
            problems.append(Problem(source, path, message, "error", None, self.name))

        if raw is None:
            return frozenset(), True
        if not isinstance(raw, dict):
            error("$.hooksConfig", "must be an object")
            return frozenset(), True
        enabled = raw.get("enabled", True)
        if not isinstance(enabled, bool):
            error("$.hooksConfig.enabled", "must be true or false")
            enabled = True
        disabled = raw.get("disabled", [])
        if not isinstance(disabled, list) or not all(isinstance(d, str) for d in disabled):
            error("$.hooksConfig.disabled", "must be an array of hook names or commands")
            disabled = []
        return frozenset(disabled), enabled

    # -- payload in ----------------------------------------------------------------------

    recognition = "hook_event_name is one of Gemini's own events, or a shared one with timestamp"

    def recognises(self, payload: Mapping[str, Any]) -> bool:
        """A Gemini event name with no Claude Code twin, or a shared one with Gemini's ``timestamp``."""
        event = payload.get("hook_event_name")
        if not isinstance(event, str):
            return False
        if event in OWN_EVENTS or (event in EVENT_NAMES and EVENT_NAMES[event] != event):
            return True
        return event in EVENT_NAMES and isinstance(payload.get("timestamp"), str)

    def canonical_payload(self, spec: EventSpec, payload: Mapping[str, Any]) -> dict[str, Any]:
        data = super().canonical_payload(spec, payload)
        tool = data.get("tool_name")
        if isinstance(tool, str) and tool in BUILTIN_TOOLS:
            data["tool_name"] = self.tool_names.get(tool, tool)
        if spec.name == "Stop" and "last_assistant_message" not in data and isinstance(
                data.get("prompt_response"), str):
            data["last_assistant_message"] = data["prompt_response"]
        return data

    def hook_input(self, spec: EventSpec, payload: Mapping[str, Any]) -> HookInput:
        base = super().hook_input(spec, payload)
        env = {}
        # hookRunner.ts: GEMINI_SESSION_ID and GEMINI_CWD (the project-dir variables are hookcage's).
        for var, key in (("GEMINI_SESSION_ID", "session_id"), ("GEMINI_CWD", "cwd")):
            value = payload.get(key)
            if isinstance(value, str) and value and "\x00" not in value and len(value) <= _ENV_CAP:
                env[var] = value
        return HookInput(base.stdin, env)

    # -- answers -------------------------------------------------------------------------

    def answer_to_claude(self, spec: EventSpec, data: dict[str, Any]) -> dict[str, Any]:
        """A Gemini JSON answer in Claude Code's keys (``decision`` deny -> a block, ``tool_input`` -> ``updatedInput``)."""
        out: dict[str, Any] = {k: data[k] for k in ("continue", "stopReason", "suppressOutput", "systemMessage")
                               if k in data}
        specific: dict[str, Any] = {}
        given = data.get("hookSpecificOutput")
        if isinstance(given, dict):
            if "additionalContext" in given:
                specific["additionalContext"] = given["additionalContext"]
            if "tool_input" in given and spec.permission:
                specific["updatedInput"] = given["tool_input"]
        elif given is not None:
            out["hookSpecificOutput"] = given  # reported as not an object
        decision, reason = data.get("decision"), data.get("reason")
        if decision in ("deny", "block", "ask") and spec.permission:
            specific["permissionDecision"] = "deny" if decision != "ask" else "ask"
            if reason is not None:
                specific["permissionDecisionReason"] = reason
        elif decision in ("deny", "block"):
            out["decision"] = "block"
            if reason is not None:
                out["reason"] = reason
        elif decision not in (None, "allow", "approve"):
            out["decision"] = decision  # reported as unknown
        if specific:
            out["hookSpecificOutput"] = {"hookEventName": spec.name, **specific}
        return out

    def parse_answer(self, spec: EventSpec, run: HookRun) -> HookOutcome:
        """Gemini's rules (hookRunner.ts): JSON from stdout (else stderr) wins over the exit code;
        plain text is a message at exit 0, a warning at 1 and a deny at any other code."""
        if not run.finished:
            return run.outcome(spec, stdout=b"")
        text = decode(run.stdout).strip() or decode(run.stderr).strip()
        data = _json_answer(text)
        if isinstance(data, dict):
            answer = dumps(self.answer_to_claude(spec, data)).encode("utf-8")
            outcome = run.outcome(spec, exit_code=0, stdout=answer, stderr=b"")
            return replace(outcome, exit_code=run.exit_code, notes=outcome.notes + self._ignored(spec, data))
        if data is not _NOT_JSON and data is not None:
            return HookOutcome(hook=run.hook, exit_code=run.exit_code, hook_id=run.hook_id,
                               notes=("its answer is JSON but not an object; Gemini CLI ignores it",))
        if run.exit_code == 0:
            return HookOutcome(hook=run.hook, exit_code=0, hook_id=run.hook_id,
                               system_message=sanitize(text) or None)
        said = run.stderr if run.stderr.strip() else text.encode("utf-8")
        if run.exit_code == 1 or run.exit_code in (126, 127) or not text:
            return run.outcome(spec, stdout=b"", stderr=said)  # the hook failed: not a verdict
        outcome = run.outcome(spec, exit_code=2, stdout=b"", stderr=said)  # any other exit with text denies
        return replace(outcome, exit_code=run.exit_code)

    def _ignored(self, spec: EventSpec, data: Mapping[str, Any]) -> tuple[str, ...]:
        given = data.get("hookSpecificOutput")
        if not isinstance(given, dict):
            return ()
        notes = [f"hookSpecificOutput.{k} is not supported by hookcage; ignored"
                 for k in given if k not in SPECIFIC_KEYS]
        if "tool_input" in given and not spec.permission:
            notes.append(f"hookSpecificOutput.tool_input has no effect on {self.native_event(spec)}; ignored")
        return tuple(notes)

    def render(self, event: EventSpec, verdict: Verdict) -> AgentAnswer:
        """hookcage's verdict as Gemini reads it: exit 0 and JSON (Gemini reads JSON whatever the exit code)."""
        out: dict[str, Any] = {}
        if verdict.blocks:
            out["decision"] = "deny"
            out["reason"] = block_reason(event, verdict)
        elif verdict.continue_ and verdict.decision == "ask" and event.permission:
            out["decision"] = "ask"
            if verdict.decision_reason:
                out["reason"] = sanitize(verdict.decision_reason)
        out.update(stop_fields(verdict))
        specific: dict[str, Any] = {}
        if verdict.additional_context:
            specific["additionalContext"] = sanitize(verdict.additional_context)
        if event.permission and verdict.updated_input is not None and not verdict.blocks and verdict.continue_:
            specific["tool_input"] = verdict.updated_input
        if specific:
            out["hookSpecificOutput"] = {"hookEventName": self.native_event(event), **specific}
        return AgentAnswer(0, dumps(out) + "\n", "")



def offer_plan(dialect: GeminiDialect, where: Where, read: Read, hookcage: str) -> Plan:
    """hookcage's routes in Gemini's user settings: Claude Code's shape with Gemini's event names
    (hooks/types.ts ``HookDefinition``), the events with a canonical twin (BeforeTool, AfterTool,
    BeforeAgent, AfterAgent, PreCompress, SessionStart, SessionEnd, Notification); ``"*"`` on the
    events whose matcher Gemini reads (hookPlanner.ts: ``""``/``"*"``/absent match all)."""
    command = dispatch_command(hookcage, dialect.name)
    events = list(EVENT_NAMES)
    new = routes(events, command, matcher_events=[e for e in events if EVENT_NAMES[e] in (*TOOL_EVENTS, *TRIGGER_EVENTS)])
    path = f"{home_path(where, '.gemini', env='GEMINI_CLI_HOME')}/settings.json"
    edit = claude_shaped(read, path, new, "Gemini CLI's user settings: its events routed to hookcage")
    return Plan(dialect.name, "user", (edit,), (
        "Gemini CLI still runs a trusted folder's .gemini/settings.json hooks itself: hookcage's routes "
        "run beside them (and, like every settings hook, only in a trusted folder)",
    ))


DIALECT = GeminiDialect()
