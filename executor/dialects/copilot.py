"""GitHub Copilot CLI: ``.github/hooks/*.json``, its two payload forms and its answers.

Sources: R = github/docs ``content/copilot/reference/copilot-cli-reference/cli-hooks-reference.md``
(docs.github.com/en/copilot/reference/copilot-cli-reference/cli-hooks-reference);
H = github/docs ``content/copilot/reference/hooks-configuration.md`` (the older
page shared with the cloud agent); github/copilot-cli issue #2643 (the
VS Code-compatible ``hookSpecificOutput`` answer, CLI 1.0.24).

Files: every ``.github/hooks/*.json`` of the repository (R: loaded
automatically; project scope, a glob) and ``~/.copilot/hooks/*.json`` (user;
the directory moves with ``COPILOT_HOME``). The user directory, the inline
``hooks`` of Copilot's settings files and ``/etc/github-copilot/policy.d`` come
from third-party notes only (unconfirmed): hookcage reads the user directory
and none of the others.

Shape (R): ``{"version": 1, "hooks": {event: [{type, bash, powershell, cwd,
env, timeoutSec, comment, matcher}]}}``, a flat list per event. ``bash`` is the
command (hookcage runs on Linux: ``powershell`` is never run, and a hook with
only ``powershell`` is invalid); ``timeoutSec`` is in seconds, default 30;
``env`` is literal (hookcage does not expand variables in it); ``cwd`` may be
left out or ``"."``: hookcage runs repository hooks at the project root, what
was reviewed, so any other ``cwd`` makes the hook invalid (put the path in the
command instead). ``type: "prompt"`` hooks are not run. ``matcher`` (R:
permissionRequest, notification, preCompact, subagentStart) is an anchored
regular expression (``^(?:p)$``); on other events it is reported and ignored.
Hooks of one event run in order (R, H), so this dialect is ``serial``: the
first deny stops the rest, and a deny wins as in Copilot ("any deny wins").

Events: camelCase keys (``preToolUse``) read Copilot's camelCase payload;
PascalCase keys (``PreToolUse``) read the VS Code-compatible snake_case
payload with ``hook_event_name`` (R). Both map to the canonical catalog:
sessionStart, sessionEnd, userPromptSubmitted (UserPromptSubmit), preToolUse,
postToolUse, postToolUseFailure, agentStop (Stop), subagentStart,
subagentStop, preCompact, permissionRequest, notification; errorOccurred has
no twin and is carried under its own name.

Payload in: ``sessionId`` -> ``session_id``, ``transcriptPath`` ->
``transcript_path``, ``toolName`` -> ``tool_name`` in Claude Code's names
(``bash`` -> Bash, ``view`` -> Read, ``create`` -> Write, ``edit`` -> Edit,
...), ``toolArgs`` (a JSON **string**, H) parsed into ``tool_input``; a
``toolArgs`` that holds no JSON object becomes ``{"raw": <value>}`` (a payload
error would not block on Copilot, where failures never block, and the hooks
would not run at all), ``toolResult`` -> ``tool_response``.

Answers (R): preToolUse ``permissionDecision`` allow/deny/ask,
``permissionDecisionReason``, ``modifiedArgs`` (the rewrite, which passes the
``rewrite_input`` gate), ``additionalContext`` (unconfirmed for command
hooks); agentStop/subagentStop ``decision`` block/allow + ``reason``;
permissionRequest ``behavior`` allow/deny + ``message``. The VS Code form
(``hookSpecificOutput``) is read too. Exit codes: "Hook failures (non-zero exit
codes or timeouts) are logged and skipped — they never block" (R): exit 2
denies only on permissionRequest; elsewhere it is a failed hook (unless its
``on_error`` were deny, which Copilot's files cannot say). AGENTS.md says
nothing of this; the research notes and R are followed.

hookcage's answer: the JSON Copilot reads for the event, exit 0 (a blocking
exit code would be ignored); on postToolUseFailure a block is exit 2 with the
guidance on stderr (R).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from executor.core import linre
from executor.core.events import EventSpec
from executor.core.hooks import Collector, FileShape, HookFile, HookSpec, Scope, parse_handler
from executor.core.install import (
    Plan,
    Read,
    dispatch_command,
    json_edit,
    merge_flat,
)
from executor.core.matchers import Matcher
from executor.core.protocol import AgentAnswer, HookOutcome, HookRun, Verdict, _dumps
from executor.core.text import sanitize
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
from executor.dialects.cursor import NativeEvent, as_native

CAMEL_EVENTS: Mapping[str, str] = {
    "sessionStart": "SessionStart",
    "sessionEnd": "SessionEnd",
    "userPromptSubmitted": "UserPromptSubmit",
    "preToolUse": "PreToolUse",
    "postToolUse": "PostToolUse",
    "postToolUseFailure": "PostToolUseFailure",
    "agentStop": "Stop",
    "subagentStart": "SubagentStart",
    "subagentStop": "SubagentStop",
    "preCompact": "PreCompact",
    "permissionRequest": "PermissionRequest",
    "notification": "Notification",
}
"""Copilot CLI's camelCase events (its own payload) -> canonical."""

PASCAL_EVENTS: Mapping[str, str] = {name: name for name in CAMEL_EVENTS.values()}
"""The PascalCase keys (VS Code-compatible payload): the canonical names."""

OWN_EVENTS: Mapping[str, EventSpec] = {
    "errorOccurred": EventSpec("errorOccurred", None, "ignored", fields=("error",)),
}
"""Copilot's events with no canonical twin."""

_CAMEL_OF = {canonical: camel for camel, canonical in CAMEL_EVENTS.items()}

MATCHER_FIELDS: Mapping[str, str] = {
    "PermissionRequest": "agent_tool", "Notification": "notification_type", "PreCompact": "trigger",
    "SubagentStart": "agent_type",
}
"""Events with a matcher (R), and the canonical payload field it is tested against
(``agent_tool``: Copilot's own tool name, ``bash``, before it became ``Bash``)."""

# Copilot CLI's tool names (R) -> Claude Code's.
TOOLS: Mapping[str, str] = {
    "bash": "Bash", "create": "Write", "edit": "Edit", "view": "Read", "glob": "Glob", "grep": "Grep",
    "web_fetch": "WebFetch", "task": "Task", "ask_user": "AskUserQuestion",
}

SNAKE_FORM = "snake_case"
"""The input form of hooks filed under a PascalCase key (:meth:`Dialect.input_form`)."""

_KEYS = {"type", "bash", "powershell", "cwd", "env", "timeoutSec", "comment", "matcher", "prompt"}
_CAMEL_WORD = re.compile(r"(?<=[a-z0-9])([A-Z])")


def compile_anchored(source: str | None) -> Matcher:
    """Copilot's matcher: a regular expression that must match the whole value."""
    if source is None or source.strip() in ("", "*"):
        return Matcher(source)
    try:
        return Matcher(source, pattern=linre.compile(f"^(?:{source})$"))
    except linre.PatternError as exc:
        return Matcher(source, error=f"invalid regular expression {source!r}: {exc}")


SHAPE = FileShape(agent="copilot", event_names={**CAMEL_EVENTS, **PASCAL_EVENTS}, own_events=OWN_EVENTS,
                  default_timeout=30.0, compile=compile_anchored, canonical_names=False)


def _snake(key: str) -> str:
    return _CAMEL_WORD.sub(lambda m: "_" + m.group(1).lower(), key)


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _iso(value: Any) -> Any:
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            return datetime.fromtimestamp(value / 1000, UTC).isoformat().replace("+00:00", "Z")
        except (OverflowError, OSError, ValueError):
            return value
    return value


def _millis(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000)
        except ValueError:
            return value
    return value


def is_snake(payload: Mapping[str, Any]) -> bool:
    """The payload is the VS Code-compatible form (it names its event)."""
    return "hook_event_name" in payload


def to_snake(payload: Mapping[str, Any], pascal: str) -> dict[str, Any]:
    """A camelCase payload in the VS Code-compatible form (``pascal``: its event key)."""
    if is_snake(payload):
        return {**payload, "hook_event_name": pascal}
    out: dict[str, Any] = {"hook_event_name": pascal}
    for key, value in payload.items():
        if key == "toolArgs":
            out["tool_input"] = json_object(value)
        elif key == "toolResult":
            out["tool_response"] = value
        elif key == "timestamp":
            out["timestamp"] = _iso(value)
        else:
            out[_snake(key)] = value
    return out


def to_camel(payload: Mapping[str, Any]) -> dict[str, Any]:
    """A VS Code-form payload in Copilot's camelCase form."""
    if not is_snake(payload):
        return dict(payload)
    out: dict[str, Any] = {}
    for key, value in payload.items():
        if key == "hook_event_name":
            continue
        if key == "tool_input":
            out["toolArgs"] = value if isinstance(value, str) else _dumps(value)
        elif key == "tool_response":
            out["toolResult"] = value
        elif key == "timestamp":
            out["timestamp"] = _millis(value)
        else:
            out[_camel(key)] = value
    return out


class CopilotDialect(Dialect):
    """GitHub Copilot CLI."""

    name = "copilot"
    title = "GitHub Copilot CLI"
    shape = SHAPE
    serial = True
    unsupported = (
        "powershell commands are never run (hookcage runs hooks on Linux, with bash)",
        "a cwd other than the project root (hookcage runs repository hooks there, what was reviewed)",
        "type: \"prompt\" hooks are not run (hookcage runs command hooks only)",
        "hooks in Copilot's settings files and /etc/github-copilot/policy.d are not read",
        "exit codes never block (as in Copilot): a hook denies with permissionDecision: deny",
        "userPromptSubmitted cannot block in Copilot: a block there is shown and ignored",
    )

    takeover = (
        "Copilot CLI cannot be taken over: it runs every .github/hooks/*.json of the repository "
        "itself (and, in a repository, the inline hooks of .github/copilot/settings.json and "
        "Claude Code's .claude/settings.json), combined with the user's and the policy hooks, and "
        "GitHub documents no setting that stops it loading them: the policy directory of the hooks "
        "reference only adds machine-wide hooks, and disableAllHooks would turn hookcage's routes "
        "off too. So a repository's hooks still run outside hookcage, on the host, in a folder "
        "Copilot trusts (in prompt mode -p they load when the folder is trusted, "
        "GITHUB_COPILOT_PROMPT_MODE_REPO_HOOKS=true or COPILOT_ALLOW_ALL is set). What can still be "
        "added is hookcage's routing in ~/.copilot/hooks/hookcage.json ($COPILOT_HOME/hooks), so "
        "hookcage's own hooks and gates run beside Copilot's."
    )

    also_runs = (".claude/settings.json",)

    def offer(self, where: Where, read: Read, hookcage: str) -> Plan | None:
        """``install`` is refused (``takeover``); this routing can still be added."""
        return offer_plan(self, where, read, hookcage)

    # -- files ---------------------------------------------------------------------------

    def unread_sources(self, where: Where) -> list[tuple[HookSource, str]]:
        return [(source, "Copilot CLI runs the inline hooks of this file itself; hookcage does not read "
                         "them (their shape is not documented), so they are not reviewed: read them yourself")
                for source in project_sources(where, (Scope.PROJECT, (".github", "copilot", "settings.json")))]

    def sources(self, where: Where) -> list[HookSource]:
        return [
            HookSource(Scope.USER, home_path(where, "hooks", "*.json", env="COPILOT_HOME")
                       if where.environ.get("COPILOT_HOME") else home_path(where, ".copilot", "hooks", "*.json"),
                       glob=True),
            *project_sources(where, (Scope.PROJECT, (".github", "hooks", "*.json")), glob=True,
                             condition="Copilot CLI loads every file there"),
        ]

    def parse(self, data: Any, *, scope: Scope, source: str, project_root: str | None,
              environ: Mapping[str, str] | None = None) -> HookFile:
        return parse_flat_file(
            self, data, scope=scope, source=source,
            handler=lambda raw, path, native, event, out: self._handler(raw, path, event, scope, project_root, out),
        )

    def _handler(self, raw: Any, path: str, event: str, scope: Scope, root: str | None,
                 out: Collector) -> HookSpec | None:
        everything = Matcher(None)
        if not isinstance(raw, dict):
            return parse_handler(raw, path, event, everything, scope, root, out, shape=self.shape)
        errors: list[str] = []
        handler: dict[str, Any] = {"type": raw.get("type", "command")}
        if "bash" in raw:
            handler["command"] = raw["bash"]
        elif "powershell" in raw and handler["type"] == "command":
            errors.append(out.error(f"{path}.powershell", "a powershell-only hook: hookcage runs hooks on "
                                                          "Linux with bash, so it never runs (add 'bash')", event))
            handler["command"] = "true"  # invalid anyway; keeps parse_handler from a second error
        if "timeoutSec" in raw:
            handler["timeout"] = raw["timeoutSec"]
        if "env" in raw:
            handler["env"] = raw["env"]
            if isinstance(raw["env"], dict) and any(isinstance(v, str) and "$" in v for v in raw["env"].values()):
                out.warn(f"{path}.env", "hookcage passes env values literally ($VARIABLES are not expanded)",
                         event)
        cwd = raw.get("cwd")
        if cwd is not None and not isinstance(cwd, str):
            errors.append(out.error(f"{path}.cwd", "must be a string", event))
        elif cwd is not None and cwd.strip().rstrip("/") not in ("", ".") and cwd.rstrip("/") != (root or "\0"):
            errors.append(out.error(
                f"{path}.cwd",
                f"{cwd!r} is not supported: hookcage runs hooks at the project root (what was reviewed); "
                "write the path into 'bash' instead", event))
        for key in sorted(raw.keys() - _KEYS):
            out.warn(f"{path}.{key}", "unknown key, ignored", event)
        matcher = everything
        source = raw.get("matcher")
        if source is not None and not isinstance(source, str):
            errors.append(out.error(f"{path}.matcher", "must be a string", event))
        elif source is not None:
            compiled = compile_anchored(source)
            if event not in MATCHER_FIELDS:
                if not compiled.matches_all:
                    out.warn(f"{path}.matcher", f"Copilot CLI documents no matcher on {event}; ignored "
                                                "(the hook runs for every event)", event)
            else:
                if compiled.error:
                    out.warn(f"{path}.matcher", f"{compiled.error} (this hook never fires)", event)
                matcher = compiled
        spec = parse_handler(handler, path, event, everything, scope, root, out, shape=self.shape,
                             keys={"command": "bash", "timeout": "timeoutSec"})
        if spec is None:
            return None
        selectors = ((MATCHER_FIELDS[event], matcher),) if not matcher.matches_all else ()
        return replace(spec, selectors=selectors, invalid=spec.invalid or (errors[0] if errors else None))

    # -- payload in ----------------------------------------------------------------------

    recognition = "toolArgs is a string, or the payload carries toolName and timestamp"

    def recognises(self, payload: Mapping[str, Any]) -> bool:
        if isinstance(payload.get("toolArgs"), str):
            return True
        return "toolName" in payload and "timestamp" in payload

    def resolve_event(self, arg: str | None, payload: Mapping[str, Any]) -> EventSpec:
        spec = super().resolve_event(arg, payload)
        if spec.name in OWN_EVENTS:
            return as_native(spec, spec.name)
        native = spec.name if is_snake(payload) else _CAMEL_OF.get(spec.name, spec.name)
        return as_native(spec, native)

    def native_event(self, spec: EventSpec) -> str:
        if isinstance(spec, NativeEvent) and spec.native:
            return spec.native
        return _CAMEL_OF.get(spec.name, spec.name)

    def canonical_payload(self, spec: EventSpec, payload: Mapping[str, Any]) -> dict[str, Any]:
        data = to_snake(payload, spec.name)
        data["hook_event_name"] = spec.name
        tool = data.get("tool_name")
        if isinstance(tool, str):
            data["agent_tool"] = tool
            data["tool_name"] = TOOLS.get(tool, tool)
        if spec.name in ("SubagentStart", "SubagentStop") and "agent_type" not in data \
                and isinstance(data.get("agent_name"), str):
            data["agent_type"] = data["agent_name"]
        if "tool_input" in data or "tool_name" in data:
            data["tool_input"] = json_object(data.get("tool_input"))
        if "tool_response" in data and isinstance(data["tool_response"], dict):
            text = data["tool_response"].get("textResultForLlm")
            if isinstance(text, str):
                data["tool_response"] = {**data["tool_response"], "output": text}
        for key in ("session_id", "transcript_path", "cwd"):
            if key in data and not isinstance(data[key], str):
                data.pop(key)
        data.pop("timestamp", None)  # a number in one form, a string in the other: the agent's own
        return data

    def hook_input(self, spec: EventSpec, payload: Mapping[str, Any]) -> HookInput:
        return HookInput(_dumps(to_camel(payload)).encode("utf-8"))

    def input_form(self, hook: HookSpec) -> str:
        key = hook.json_path.removeprefix("$.hooks.").split("[", 1)[0]
        return SNAKE_FORM if key[:1].isupper() else ""

    def form_input(self, spec: EventSpec, payload: Mapping[str, Any], form: str) -> HookInput:
        if form == SNAKE_FORM:
            return HookInput(_dumps(to_snake(payload, spec.name)).encode("utf-8"))
        return self.hook_input(spec, payload)

    # -- answers -------------------------------------------------------------------------

    def answer_to_claude(self, spec: EventSpec, data: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {k: v for k, v in data.items()
                               if k in ("hookSpecificOutput", "continue", "stopReason", "systemMessage",
                                        "suppressOutput")}
        specific: dict[str, Any] = dict(out.get("hookSpecificOutput") or {}) \
            if isinstance(out.get("hookSpecificOutput"), dict) else {}
        if spec.name == "PreToolUse":
            for theirs, ours in (("permissionDecision", "permissionDecision"),
                                 ("permissionDecisionReason", "permissionDecisionReason"),
                                 ("modifiedArgs", "updatedInput"), ("additionalContext", "additionalContext")):
                if theirs in data:
                    value = data[theirs]
                    if theirs == "modifiedArgs" and isinstance(value, str):
                        value = json_object(value) if json_object(value).keys() != {"raw"} else value
                    specific[ours] = value
        elif spec.name == "PermissionRequest":
            if "behavior" in data:
                decision = {"behavior": data["behavior"]}
                if "message" in data:
                    decision["message"] = data["message"]
                specific["decision"] = decision
        elif spec.name in ("Stop", "SubagentStop") and data.get("decision") == "block":
            out["decision"] = "block"
            if "reason" in data:
                out["reason"] = data["reason"]
        if specific:
            specific.setdefault("hookEventName", spec.name)
            out["hookSpecificOutput"] = specific
        return out

    def parse_answer(self, spec: EventSpec, run: HookRun) -> HookOutcome:
        if run.exit_code == 2 and run.finished:
            if spec.name == "PermissionRequest":
                # R: exit 2 denies a permission request (stdout merged with {"behavior": "deny"}).
                base = super().parse_answer(spec, HookRun(run.hook, 0, run.stdout, hook_id=run.hook_id))
                reason = base.reason or f"denied by hook {run.hook} (exit 2)"
                return replace(base, decision="deny", reason=reason, exit_code=2)
            if spec.name != "PostToolUseFailure":
                return HookOutcome(
                    hook=run.hook, status="error", exit_code=2, hook_id=run.hook_id,
                    error="exited 2, which Copilot CLI does not read as a block (answer with JSON, e.g. "
                          "permissionDecision: deny)")
        outcome = super().parse_answer(spec, run)
        if spec.name == "UserPromptSubmit" and outcome.status == "block":
            note = "userPromptSubmitted cannot block in Copilot CLI; the block is ignored"
            outcome = replace(outcome, status="ok", system_message=outcome.reason, reason=None,
                              notes=(*outcome.notes, note))
        return outcome

    def render(self, event: EventSpec, verdict: Verdict) -> AgentAnswer:
        if isinstance(event, NativeEvent) and event.native in PASCAL_EVENTS:
            return super().render(event, verdict)  # the VS Code-compatible form (CLI 1.0.24+)
        blocks = verdict.blocks or not verdict.continue_
        reason = _why(event, verdict) if blocks else None
        out: dict[str, Any] = {}
        if event.name == "PreToolUse":
            decision = "deny" if blocks else verdict.decision
            if decision in ("allow", "deny", "ask"):
                out["permissionDecision"] = decision
                why = reason or (sanitize(verdict.decision_reason) if verdict.decision_reason else None)
                if why:
                    out["permissionDecisionReason"] = why
            if not blocks and verdict.updated_input is not None and decision != "deny":
                out["modifiedArgs"] = verdict.updated_input
            if verdict.additional_context:
                out["additionalContext"] = sanitize(verdict.additional_context)
        elif event.name == "PermissionRequest":
            decision = "deny" if blocks else verdict.decision
            if decision == "deny":
                out = {"behavior": "deny", "message": reason or _why(event, verdict)}
            elif decision == "allow":
                out = {"behavior": "allow"}
        elif event.name in ("Stop", "SubagentStop"):
            if verdict.blocks and verdict.continue_:
                out = {"decision": "block", "reason": reason}
        elif event.name == "PostToolUseFailure" and blocks:
            return AgentAnswer(2, "", f"{reason}\n")
        # Copilot reads no message for the user: hookcage's own lines go to stderr, which it logs.
        message = sanitize(verdict.system_message) if verdict.system_message else ""
        return AgentAnswer(0, _dumps(out) + "\n", f"{message}\n" if message else "")


def _why(event: EventSpec, verdict: Verdict) -> str:
    if not verdict.continue_:
        return sanitize(verdict.stop_reason) if verdict.stop_reason else f"stopped by hookcage ({event.name})"
    return block_reason(event, verdict)



ROUTE_TIMEOUT_SEC = 600
"""``timeoutSec`` of hookcage's routes: Copilot's default is 30 s and a hook that times out is
skipped, never a deny (R "Hook failures ... never block")."""


def offer_plan(dialect: CopilotDialect, where: Where, read: Read, hookcage: str) -> Plan:
    """Routing Copilot CLI's camelCase events to hookcage from a user hook file of its own
    (R: ``~/.copilot/hooks/*.json``, ``$COPILOT_HOME/hooks/``; ``{"version": 1, "hooks":
    {event: [{type, bash, timeoutSec}]}}``)."""
    command = dispatch_command(hookcage, dialect.name)
    base = (home_path(where, "hooks", env="COPILOT_HOME") if where.environ.get("COPILOT_HOME")
            else home_path(where, ".copilot", "hooks"))
    entries = {event: {"type": "command", "bash": command, "timeoutSec": ROUTE_TIMEOUT_SEC}
               for event in (*CAMEL_EVENTS, *OWN_EVENTS)}

    def update(current: dict[str, Any]) -> dict[str, Any]:
        return merge_flat({"version": 1, **current}, entries, "bash")

    edit = json_edit(read, f"{base}/hookcage.json", update,
                     "Copilot CLI's user hooks: every event routed to hookcage (beside Copilot's own)")
    return Plan(dialect.name, "user", (edit,), (
        "Copilot CLI still runs a repository's .github/hooks itself: hookcage's routes run beside them",
    ))


DIALECT = CopilotDialect()
