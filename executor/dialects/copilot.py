"""GitHub Copilot CLI: ``.github/hooks/*.json``, its two payload forms and its answers.

Source: R = Copilot's hooks reference, docs.github.com/en/copilot/reference/hooks-reference
(github/docs ``content/copilot/reference/hooks-reference.md``, the stored version at commit
05da5bc3, read 2026-11-27). It superseded ``copilot-cli-reference/cli-hooks-reference.md``
and ``hooks-configuration.md`` (both redirect to it), which this module followed before.
Also github/copilot-cli issue #2643 (the VS Code-compatible ``hookSpecificOutput`` answer,
CLI 1.0.24). The wire forms (tool names, payloads, matchers, stdout) live in
:mod:`executor.dialects.copilot_wire`.

Files (R "Hooks locations"): every ``.github/hooks/*.json`` of the repository (project
scope, a glob) and ``~/.copilot/hooks/*.json`` (user; ``$COPILOT_HOME/hooks/``). Copilot also
runs the policy files ``/etc/github-copilot/policy.d/*.json``, the inline ``hooks`` of
``.github/copilot/settings.json``, ``settings.local.json``, ``~/.copilot/settings.json``,
Claude Code's ``.claude/settings.json`` and plugins' ``hooks.json``: hookcage reads none of
them for Copilot (the repository's settings files are named in the review as not read).

Shape (R "Command hooks"): ``{"version": 1, "hooks": {event: [{type, bash, powershell,
command, exec, args, cwd, env, timeoutSec, timeout, matcher}]}}``, a flat list per event;
``type`` defaults to ``"command"``. The command hookcage runs (on Linux) is ``bash``, else
the cross-platform ``command`` ("copied to both bash and powershell when those fields are
absent"), else ``exec`` + ``args`` run without a shell (hookcage quotes each word, so no
shell feature applies); ``exec`` combined with another is invalid, and so is a hook with only
``powershell``. ``timeoutSec`` is in seconds, default 30; ``timeout`` is its alias, read only
when ``timeoutSec`` is absent. ``env`` is literal (hookcage does not expand variables in it);
``cwd`` may be left out or ``"."`` (hookcage runs repository hooks at the project root, what
was reviewed). ``type: "prompt"`` and ``"http"`` hooks are not run. A file whose event list is
not an array runs nothing (R: "Structural errors ... reject the entire file");
``disableAllHooks: true`` at its top level switches off that file's hooks only.

Matchers (R "Matcher filtering"): on preToolUse, postToolUse and permissionRequest the
runtime tool name (``bash``), on notification ``notification_type``, on preCompact
``trigger``, on subagentStart ``agentName``; compiled ``^(?:PATTERN)$``; an invalid one never
fires. A PascalCase ``PreToolUse``/``PermissionRequest`` key reads Claude's rule instead (R
"Claude-format matchers"). On other events a matcher is reported and ignored. Hooks of one
event run in order (R), so this dialect is ``serial``: the first deny stops the rest.

Events: camelCase keys (``preToolUse``) read Copilot's camelCase payload; PascalCase keys
(``PreToolUse``) the VS Code-compatible snake_case payload (R), whose PreToolUse
``tool_name`` is the Claude tool name. Both map to the canonical catalog; errorOccurred
(``ErrorOccurred``) and userPromptTransformed have no twin and are carried under their own
names.

Answers (R): preToolUse ``permissionDecision`` allow/deny/ask, ``permissionDecisionReason``,
``modifiedArgs`` (the rewrite: passes the ``rewrite_input`` gate), ``additionalContext``;
agentStop/subagentStop ``decision`` block/allow + ``reason``; permissionRequest ``behavior``
allow/deny + ``message`` (+ ``interrupt``: the agent stops); postToolUse ``modifiedResult``
(the output rewrite: passes ``rewrite_output``) and ``additionalContext``; sessionStart,
subagentStart, notification and postToolUseFailure ``additionalContext``. The VS Code form
(``hookSpecificOutput``) is read too. stdout is read as Copilot reads it: progress lines
removed, the rest one JSON object or no output at all (plain text is never context).
userPromptSubmitted, sessionEnd, errorOccurred and preCompact output is not read.

Exit codes (R "Exit codes for command hooks"): a **preToolUse command hook fails closed**:
exit 2, any other non-zero exit or a crash denies the call ("Denied by preToolUse hook (hook
errored)"), even when its stdout says allow, and so does a hook hookcage could not run at all
(its ``on_error`` is ``deny``). **Timeouts fail open**, on every event, preToolUse included:
the call goes on, with a warning. Exit 2 denies on permissionRequest (stdout merged with
the deny), is context on postToolUseFailure (stdout appended to the failure) and a warning
elsewhere (stderr shown to the user); other non-zero exits are logged and skipped.

hookcage's answer: the JSON Copilot reads for the event, exit 0; on postToolUseFailure
context is exit 2 with the text on stdout (R).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from executor.core.events import EventSpec
from executor.core.hooks import (
    Collector,
    FileShape,
    HookFile,
    HookSpec,
    Problem,
    Scope,
    parse_handler,
)
from executor.core.install import (
    Plan,
    Read,
    dispatch_command,
    json_edit,
    merge_flat,
)
from executor.core.matchers import Matcher
from executor.core.protocol import UNSET, AgentAnswer, HookOutcome, HookRun, Verdict, dumps, join
from executor.core.text import first_line, sanitize
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
from executor.dialects.copilot_wire import (
    PASCAL_OWN,
    canonical,
    claude_format,
    compile_anchored,
    is_snake,
    read_stdout,
    to_camel,
    to_snake,
    without_progress,
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
    "errorOccurred": EventSpec("errorOccurred", None, "ignored", fields=("error", "errorContext", "recoverable")),
    "userPromptTransformed": EventSpec("userPromptTransformed", None, "ignored",
                                       fields=("prompt", "transformedPrompt")),
}
"""Copilot's events with no canonical twin (R "Hook events")."""

_CAMEL_OF = {canonical: camel for camel, canonical in CAMEL_EVENTS.items()}

MATCHER_FIELDS: Mapping[str, str] = {
    "PreToolUse": "agent_tool", "PostToolUse": "agent_tool", "PermissionRequest": "agent_tool",
    "Notification": "notification_type", "PreCompact": "trigger", "SubagentStart": "agent_name",
}
"""Events with a matcher (R "Matcher filtering"), and the canonical payload field it is tested
against (``agent_tool``: Copilot's runtime tool name, ``bash``, before it became ``Bash``)."""

CLAUDE_MATCHERS = frozenset({"PreToolUse", "PermissionRequest"})
"""Events whose PascalCase key reads Claude's matcher rule (R "Claude-format matchers")."""

CONTEXT_EVENTS = frozenset({"PreToolUse", "PostToolUse", "PostToolUseFailure", "SessionStart", "SubagentStart",
                            "Notification"})
"""Events whose ``additionalContext`` Copilot reads (R "Hook events", "Output processed")."""

UNREAD_OUTPUT: Mapping[str, str] = {
    "UserPromptSubmit": "Copilot CLI drops a command hook's output on userPromptSubmitted "
                        "(modifiedPrompt is for SDK hooks only)",
    "SessionEnd": "Copilot CLI does not read a hook's output on sessionEnd",
    "errorOccurred": "Copilot CLI does not read a hook's output on errorOccurred",
    "PreCompact": "Copilot CLI does not read a hook's output on preCompact (notification only)",
    "userPromptTransformed": "hookcage does not pass modifiedTransformedPrompt on (a rewrite of what the "
                             "model reads, which no capability covers)",
}
"""Events whose hooks' output is not acted on, and why (R "Hook events")."""

SNAKE_FORM = "snake_case"
"""The input form of hooks filed under a PascalCase key (:meth:`Dialect.input_form`)."""

_KEYS = {"type", "bash", "powershell", "command", "exec", "args", "cwd", "env", "timeoutSec", "timeout", "comment",
         "matcher", "prompt", "url", "headers", "allowedEnvVars"}


SHAPE = FileShape(agent="copilot", event_names={**CAMEL_EVENTS, **PASCAL_EVENTS,
                                                **{p: c for c, p in PASCAL_OWN.items()}},
                  own_events=OWN_EVENTS, default_timeout=30.0, compile=compile_anchored, canonical_names=False)


def _command(raw: dict[str, Any], path: str, event: str, out: Collector,
             errors: list[str]) -> tuple[str | None, str]:
    """The command hookcage runs for a command hook, and the key it came from (R "Command hooks")."""
    if "exec" in raw:
        if any(k in raw for k in ("bash", "powershell", "command")):
            errors.append(out.error(f"{path}.exec", "do not combine 'exec' with 'bash', 'powershell' or "
                                                    "'command'", event))
        program, args = raw["exec"], raw.get("args", [])
        if not isinstance(program, str) or not program.strip():
            errors.append(out.error(f"{path}.exec", "must be a non-empty string", event))
            return "true", "exec"
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            errors.append(out.error(f"{path}.args", "must be an array of strings", event))
            return "true", "exec"
        return shlex.join([program, *args]), "exec"  # each word quoted: no shell feature applies
    for key in ("bash", "command"):
        if key in raw:
            return raw[key], key
    if "powershell" in raw:
        errors.append(out.error(f"{path}.powershell", "a powershell-only hook: hookcage runs hooks on Linux "
                                                      "with bash, so it never runs (add 'bash' or 'command')",
                                event))
        return "true", "bash"  # invalid anyway; keeps parse_handler from a second error
    return None, "bash"


def _structure_error(data: Any) -> tuple[str, str] | None:
    """An event list that is not an array (R: the whole file is rejected), as (path, message)."""
    hooks = data.get("hooks") if isinstance(data, dict) else None
    if not isinstance(hooks, dict):
        return None
    for name, items in hooks.items():
        if not isinstance(items, list):
            return f"$.hooks.{name}", "must be an array of hooks; Copilot CLI rejects the whole file, so none of its hooks run"
    return None


class CopilotDialect(Dialect):
    """GitHub Copilot CLI."""

    name = "copilot"
    title = "GitHub Copilot CLI"
    shape = SHAPE
    serial = True
    unsupported = (
        "powershell commands are never run (hookcage runs hooks on Linux: bash, else command, else exec + args)",
        "a cwd other than the project root (hookcage runs repository hooks there, what was reviewed)",
        "type: \"prompt\" and type: \"http\" hooks are not run (hookcage runs command hooks only)",
        "hooks in Copilot's settings files, in /etc/github-copilot/policy.d and in plugins are not read",
        "subagentStop's modifiedResponse and userPromptTransformed's modifiedTransformedPrompt are not passed on",
        "permissionRequest: where Copilot lets a later hook's answer override an earlier deny, the first deny "
        "wins in hookcage",
    )

    takeover = (
        "Copilot CLI cannot be taken over: it runs every .github/hooks/*.json of the repository "
        "itself (and, in a repository, the inline hooks of .github/copilot/settings.json, "
        "settings.local.json and Claude Code's .claude/settings.json), combined with the user's, "
        "the plugins' and the policy hooks, and GitHub documents no setting that stops it loading "
        "them: the policy directory of the hooks reference only adds machine-wide hooks, and "
        "disableAllHooks would turn hookcage's routes off too. So a repository's hooks still run "
        "outside hookcage, on the host, in a folder Copilot trusts (in prompt mode -p they load "
        "when the folder is trusted, GITHUB_COPILOT_PROMPT_MODE_REPO_HOOKS=true or "
        "COPILOT_ALLOW_ALL is set). What can still be added is hookcage's routing in "
        "~/.copilot/hooks/hookcage.json ($COPILOT_HOME/hooks), so hookcage's own hooks and gates "
        "run beside Copilot's."
    )

    also_runs = (".claude/settings.json", ".claude/settings.local.json")  # R "Hooks locations"

    def offer(self, where: Where, read: Read, hookcage: str) -> Plan | None:
        """``install`` is refused (``takeover``); this routing can still be added."""
        return offer_plan(self, where, read, hookcage)

    # -- files ---------------------------------------------------------------------------

    def unread_sources(self, where: Where) -> list[tuple[HookSource, str]]:
        why = ("Copilot CLI runs the inline hooks of this file itself; hookcage does not read them, so they "
               "are not reviewed: read them yourself")
        return [(source, why) for source in project_sources(
            where, (Scope.PROJECT, (".github", "copilot", "settings.json")),
            (Scope.LOCAL, (".github", "copilot", "settings.local.json")))]

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
        broken = _structure_error(data)
        if broken is not None:
            problem = Problem(source, broken[0], broken[1], "error", None, self.name)
            return HookFile(source, scope, (), (problem,), agent=self.name)
        switch = data.get("disableAllHooks") if isinstance(data, dict) else None
        body = {k: v for k, v in data.items() if k != "disableAllHooks"} if isinstance(data, dict) else data
        parsed = parse_flat_file(
            self, body, scope=scope, source=source,
            handler=lambda raw, path, native, event, out: self._handler(raw, path, native, event, scope,
                                                                        project_root, out),
        )
        if switch is None:
            return parsed
        if not isinstance(switch, bool):
            extra = Problem(source, "$.disableAllHooks", "must be true or false", "error", None, self.name)
            return replace(parsed, problems=(*parsed.problems, extra))
        if not switch:
            return parsed
        note = Problem(source, "$.disableAllHooks", "true: Copilot CLI skips every hook of this file, and so does "
                                                    "hookcage", "warning", None, self.name)
        return replace(parsed, hooks=tuple(replace(h, enabled=False) for h in parsed.hooks),
                       problems=(*parsed.problems, note))

    def _handler(self, raw: Any, path: str, native: str, event: str, scope: Scope, root: str | None,
                 out: Collector) -> HookSpec | None:
        everything = Matcher(None)
        if not isinstance(raw, dict):
            return parse_handler(raw, path, event, everything, scope, root, out, shape=self.shape)
        errors: list[str] = []
        kind = raw.get("type", "command")
        handler: dict[str, Any] = {"type": kind}
        keys = {"command": "bash", "timeout": "timeoutSec" if "timeoutSec" in raw else "timeout"}
        if kind == "command":
            command, keys["command"] = _command(raw, path, event, out, errors)
            if command is not None:
                handler["command"] = command
            if event == "PreToolUse":
                handler["on_error"] = "deny"  # R: a preToolUse command hook fails closed (but on a timeout)
        if "timeoutSec" in raw:
            handler["timeout"] = raw["timeoutSec"]
        elif "timeout" in raw:
            handler["timeout"] = raw["timeout"]  # R: the alias, read only when timeoutSec is absent
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
                "write the path into the command instead", event))
        for key in sorted(raw.keys() - _KEYS):
            out.warn(f"{path}.{key}", "unknown key, ignored", event)
        field, matcher = MATCHER_FIELDS.get(event, ""), everything
        source = raw.get("matcher")
        if source is not None and not isinstance(source, str):
            errors.append(out.error(f"{path}.matcher", "must be a string", event))
        elif source is not None and not field:
            if not compile_anchored(source).matches_all:
                out.warn(f"{path}.matcher", f"Copilot CLI documents no matcher on {native}; ignored "
                                            "(the hook runs for every event)", event)
        elif source is not None:
            if native[:1].isupper() and event in CLAUDE_MATCHERS:
                field, matcher = claude_format(source)
            else:
                matcher = compile_anchored(source)
            if matcher.error:
                out.warn(f"{path}.matcher", f"{matcher.error} (this hook never fires)", event)
        spec = parse_handler(handler, path, event, everything, scope, root, out, shape=self.shape, keys=keys)
        if spec is None:
            return None
        selectors = ((field, matcher),) if not matcher.matches_all else ()
        return replace(spec, selectors=selectors, invalid=spec.invalid or (errors[0] if errors else None))

    # -- payload in ----------------------------------------------------------------------

    recognition = "toolArgs is a string, or the payload carries toolName and timestamp"

    def recognises(self, payload: Mapping[str, Any]) -> bool:
        if isinstance(payload.get("toolArgs"), str):
            return True
        return "toolName" in payload and "timestamp" in payload

    def resolve_event(self, arg: str | None, payload: Mapping[str, Any]) -> EventSpec:
        spec = super().resolve_event(arg, payload)
        if is_snake(payload):
            return as_native(spec, PASCAL_OWN.get(spec.name, spec.name))
        return as_native(spec, _CAMEL_OF.get(spec.name, spec.name))

    def native_event(self, spec: EventSpec) -> str:
        if isinstance(spec, NativeEvent) and spec.native:
            return spec.native
        return _CAMEL_OF.get(spec.name, spec.name)

    def canonical_payload(self, spec: EventSpec, payload: Mapping[str, Any]) -> dict[str, Any]:
        return canonical(payload, spec.name)

    def hook_input(self, spec: EventSpec, payload: Mapping[str, Any]) -> HookInput:
        return HookInput(dumps(to_camel(payload)).encode("utf-8"))

    def input_form(self, hook: HookSpec) -> str:
        key = hook.json_path.removeprefix("$.hooks.").split("[", 1)[0]
        return SNAKE_FORM if key[:1].isupper() else ""

    def form_input(self, spec: EventSpec, payload: Mapping[str, Any], form: str) -> HookInput:
        if form == SNAKE_FORM:
            return HookInput(dumps(to_snake(payload, PASCAL_OWN.get(spec.name, spec.name))).encode("utf-8"))
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
                                 ("modifiedArgs", "updatedInput")):
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
                if data["behavior"] == "deny" and data.get("interrupt") is True:
                    out["continue"] = False  # R: interrupt + deny "stops the agent entirely"
                    if isinstance(data.get("message"), str):
                        out["stopReason"] = data["message"]
        elif spec.name in ("Stop", "SubagentStop") and data.get("decision") == "block":
            out["decision"] = "block"
            if "reason" in data:
                out["reason"] = data["reason"]
        elif spec.name == "PostToolUse" and "modifiedResult" in data:
            specific["updatedToolOutput"] = data["modifiedResult"]
        if spec.name in CONTEXT_EVENTS and data.get("additionalContext") is not None:
            specific["additionalContext"] = data["additionalContext"]  # R: a null one is absent
        if specific:
            specific.setdefault("hookEventName", spec.name)
            out["hookSpecificOutput"] = specific
        return out

    def parse_answer(self, spec: EventSpec, run: HookRun) -> HookOutcome:
        """One hook's run as Copilot CLI reads it (R "Exit codes for command hooks")."""
        stdout, note = read_stdout(run.stdout)
        notes: tuple[str, ...] = (note,) if note else ()
        native = self.native_event(spec)
        if run.timed_out:
            timed_out = run.outcome(spec, stdout=b"")
            if spec.name != "PreToolUse":
                return timed_out
            # R: "Timeouts are always fail-open, including for preToolUse": not an error on_error denies.
            return HookOutcome(hook=run.hook, exit_code=None, hook_id=run.hook_id, notes=(
                f"{timed_out.error}; Copilot CLI lets the tool call go on when a hook times out (fail-open), "
                "and so does hookcage",))
        if spec.name == "PreToolUse" and (not run.finished or run.exit_code != 0):
            return self._denied(spec, run, stdout, notes)
        if run.finished and run.exit_code == 2:
            return self._exit2(spec, run, stdout, notes, native)
        if run.exit_code == 0 and spec.name in UNREAD_OUTPUT:
            unread = (UNREAD_OUTPUT[spec.name],) if without_progress(run.stdout) else ()
            return replace(run.outcome(spec, stdout=b""), notes=unread)
        outcome = super().parse_answer(spec, replace(run, stdout=stdout))
        if outcome.status == "block" and spec.name not in ("Stop", "SubagentStop", "PreToolUse"):
            outcome = replace(outcome, status="ok", reason=None,
                              notes=(*outcome.notes, f"Copilot CLI reads no block on {native}; ignored"))
        if spec.name == "SubagentStop" and b'"modifiedResponse"' in stdout:
            notes += ("modifiedResponse is not passed on by hookcage",)
        return replace(outcome, notes=(*notes, *outcome.notes)) if notes else outcome

    def _denied(self, spec: EventSpec, run: HookRun, stdout: bytes, notes: tuple[str, ...]) -> HookOutcome:
        """A preToolUse command hook that exited non-zero or crashed: a deny (R: "fail-closed")."""
        failed = run.outcome(spec, stdout=b"")
        if not (run.finished and run.exit_code == 2):
            why = f"Denied by preToolUse hook (hook errored): {failed.error}"
            return HookOutcome(hook=run.hook, exit_code=run.exit_code, decision="deny", reason=why,
                               error=failed.error, hook_id=run.hook_id, notes=notes)
        # R: exit 2 "is treated as a deny: any stdout JSON is merged with the deny decision".
        read = super().parse_answer(spec, replace(run, exit_code=0, stdout=stdout))
        said = read.reason if read.decision == "deny" or read.status == "block" else None
        shell = failed.error if failed.status == "error" else None  # the shell's own exit 2 (a failed redirection)
        reason = said or shell or first_line(sanitize(run.stderr).strip()) or "Denied by preToolUse hook (exit 2)"
        return replace(read, status="ok", exit_code=2, decision="deny", reason=reason, updated_input=None,
                       notes=(*notes, *read.notes))

    def _exit2(self, spec: EventSpec, run: HookRun, stdout: bytes, notes: tuple[str, ...],
               native: str) -> HookOutcome:
        if spec.name == "PermissionRequest":
            # R: exit 2 denies; stdout JSON is merged with {"behavior": "deny"}, stderr ignored.
            base = super().parse_answer(spec, replace(run, exit_code=0, stdout=stdout))
            reason = (base.reason if base.decision == "deny" else None) or f"denied by hook {run.hook} (exit 2)"
            return replace(base, decision="deny", reason=reason, exit_code=2)
        if spec.name == "PostToolUseFailure":
            # R: exit 2 "is treated as additionalContext and stdout is appended to the failure".
            text = sanitize(without_progress(run.stdout)).strip()
            return HookOutcome(hook=run.hook, exit_code=2, hook_id=run.hook_id, additional_context=text or None,
                               notes=notes)
        finding = run.outcome(spec, stdout=b"")
        if finding.status == "error":
            return finding  # the shell's own exit 2: a failure (logged and skipped, as Copilot does)
        # R: elsewhere exit 2 is "a warning": stderr to the user, the run goes on.
        message = sanitize(run.stderr).strip() or None
        return HookOutcome(hook=run.hook, exit_code=2, hook_id=run.hook_id, system_message=message, notes=(
            *notes, f"exit 2 is a warning on {native} in Copilot CLI (stderr to the user), not a block"))

    def render(self, event: EventSpec, verdict: Verdict) -> AgentAnswer:
        if isinstance(event, NativeEvent) and (event.native in PASCAL_EVENTS or event.native in PASCAL_OWN.values()):
            return super().render(event, verdict)  # the VS Code-compatible form (CLI 1.0.24+)
        blocks = verdict.blocks or not verdict.continue_
        reason = _why(event, verdict) if blocks else None
        context = sanitize(verdict.additional_context) if verdict.additional_context else None
        # Copilot reads no message for the user: hookcage's own lines go to stderr, which it logs.
        message = sanitize(verdict.system_message) if verdict.system_message else ""
        stderr = f"{message}\n" if message else ""
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
        elif event.name == "PermissionRequest":
            decision = "deny" if blocks else verdict.decision
            if decision == "deny":
                out = {"behavior": "deny", "message": reason or _why(event, verdict)}
                if not verdict.continue_:
                    out["interrupt"] = True
            elif decision == "allow":
                out = {"behavior": "allow"}
        elif event.name in ("Stop", "SubagentStop"):
            if verdict.blocks and verdict.continue_:
                out = {"decision": "block", "reason": reason}
        elif event.name == "PostToolUseFailure":
            text = join([context, reason])
            if text:
                return AgentAnswer(2, f"{text}\n", stderr)  # R: exit 2, stdout appended to the failure
        elif event.name == "PostToolUse" and verdict.updated_output is not UNSET:
            out["modifiedResult"] = _result(verdict.updated_output)
        if context and event.name in CONTEXT_EVENTS and event.name != "PostToolUseFailure":
            out["additionalContext"] = context
        return AgentAnswer(0, dumps(out) + "\n", stderr)


def _why(event: EventSpec, verdict: Verdict) -> str:
    if not verdict.continue_:
        return sanitize(verdict.stop_reason) if verdict.stop_reason else f"stopped by hookcage ({event.name})"
    return block_reason(event, verdict)


def _result(value: Any) -> Any:
    """A tool output rewrite as postToolUse's ``modifiedResult`` (R: ``resultType`` + ``textResultForLlm``)."""
    if isinstance(value, dict) and "textResultForLlm" in value:
        return value
    text = value if isinstance(value, str) else dumps(value)
    return {"resultType": "success", "textResultForLlm": text}


ROUTE_TIMEOUT_SEC = 600
"""``timeoutSec`` of hookcage's routes: Copilot's default is 30 s, and a hook that times out
fails open, on preToolUse too (R "Exit codes for command hooks": "Timeouts are fail-open for
every event")."""


def offer_plan(dialect: CopilotDialect, where: Where, read: Read, hookcage: str) -> Plan:
    """Routing Copilot CLI's camelCase events to hookcage from a user hook file of its own
    (R: ``~/.copilot/hooks/*.json``, ``$COPILOT_HOME/hooks/``; ``{"version": 1, "hooks":
    {event: [{type, bash, timeoutSec}]}}``)."""
    command = dispatch_command(hookcage, dialect.name)
    base = (home_path(where, "hooks", env="COPILOT_HOME") if where.environ.get("COPILOT_HOME")
            else home_path(where, ".copilot", "hooks"))
    # Not userPromptTransformed: fired per message of a turn, and nothing hookcage answers there is passed on.
    entries = {event: {"type": "command", "bash": command, "timeoutSec": ROUTE_TIMEOUT_SEC}
               for event in (*CAMEL_EVENTS, *OWN_EVENTS) if event != "userPromptTransformed"}

    def update(current: dict[str, Any]) -> dict[str, Any]:
        return merge_flat({"version": 1, **current}, entries, "bash")

    edit = json_edit(read, f"{base}/hookcage.json", update,
                     "Copilot CLI's user hooks: every event routed to hookcage (beside Copilot's own)")
    return Plan(dialect.name, "user", (edit,), (
        "Copilot CLI still runs a repository's .github/hooks itself: hookcage's routes run beside them",
    ))


DIALECT = CopilotDialect()
