"""The TypeScript agent phuetz/grok-cli (published as code-buddy): its lifecycle hooks in ``.codebuddy/hooks.json``.

Read from github.com/phuetz/grok-cli at ccfe7b3 (``src/hooks/lifecycle-hooks.ts``,
``hook-system.ts``, ``hook-manager.ts``, ``advanced-hooks.ts``,
``src/agent/tool-handler.ts``, the repository's own ``.codebuddy/hooks.json``).
Not CodeBuddy Code (``--agent codebuddy``), which reads ``.codebuddy/settings.json``.

* **Three loaders read one file.** ``HooksManager`` (``lifecycle-hooks.ts``)
  is the only one wired to tools (``tool-handler.ts`` fires ``pre-edit`` /
  ``post-edit`` around file-modifying tools and ``pre-bash`` / ``post-bash``
  around ``bash``); it reads ``<cwd>/.codebuddy/hooks.json`` only, the
  ``hooks`` array only. ``HookSystem`` (``hook-system.ts``: ``{file}``
  placeholders shell-escaped, ``GROK_*`` variables, ``continueOnError``) and
  ``HookManager`` (``hook-manager.ts``: ``{event, pattern}``, exit 77 blocks)
  read ``~/.codebuddy/hooks.json`` too, but nothing runs them on tools.
  hookcage reads the lifecycle shape from both files: the project file as the
  agent does, and the user file (which only the unwired loaders read) so a
  user has a place for their own hooks and recipes without review.
  AGENTS.md gives the agent ``GROK_HOOK_TYPE``/``GROK_FILE``/``GROK_COMMAND``:
  those belong to ``HookSystem``; the wired loader sets no variable and sends
  no stdin.
* **Shape**: ``{"hooks": [{name, type, command | script, enabled, timeout,
  failOnError, filePatterns, commandPatterns}]}``. ``script`` runs
  ``node "<cwd>/<script>"``. ``timeout`` is in milliseconds; absent or 0 is
  30000 (``hook.timeout || config.timeout``). ``enabled`` must be true: the
  agent runs ``hooks.filter(h => h.enabled)``, so an entry without it never
  runs. The file's top-level ``enabled``/``timeout`` are not read by the
  wired loader (hookcage warns and ignores them too).
* **Selection** (``matchesContext``): ``filePatterns`` test
  ``path.basename(file)``: a pattern starting with ``*`` is a suffix
  (``"*.ts"``: the basename ends with ``.ts``; ``"*"``: anything), any other
  pattern the exact basename; not globs. ``commandPatterns`` are plain
  substrings of the command. Either test is skipped when the event has no
  file (no command); an empty list selects nothing. hookcage builds both as
  :attr:`HookSpec.selectors <executor.core.hooks.HookSpec.selectors>` on
  ``tool_input.file_path`` and ``tool_input.command`` (RE2, literals escaped).
* **Events** (hookcage's map; the agent fires only the four tool types):
  ``pre-bash`` -> PreToolUse on Bash, ``post-bash`` -> PostToolUse on Bash,
  ``pre-edit`` / ``post-edit`` -> PreToolUse / PostToolUse on
  Edit|Write|MultiEdit, ``pre-commit`` / ``post-commit`` -> PreToolUse /
  PostToolUse on Bash whose ``tool_input.command`` runs ``git commit`` (a
  commit happens through the shell: a selector, not an event of its own),
  ``pre-prompt`` -> UserPromptSubmit, ``post-response`` -> Stop, ``on-error``
  -> PostToolUseFailure, ``on-tool-call`` -> PreToolUse on every tool. The
  advanced hooks' names (``PreBash``, ``PostEdit``, Claude Code's names) are
  registered in code only (``advanced-hooks.ts``); no file defines them.
* **Placeholders**: the agent pastes ``${file}`` and ``${command}`` raw into
  a ``shell: true`` string, so a file name or command chosen by the model
  becomes shell code. hookcage never pastes payload text into a command: at
  parse time ``${file}`` becomes ``"$GROK_FILE"`` and ``${command}``
  ``"$GROK_COMMAND"`` (quoted for where they stand: bare, in double quotes,
  in single quotes), and the values travel as environment variables (the
  names ``HookSystem`` uses). The rewritten command is what the review shows,
  the allow-list judges and the container runs. ``GROK_HOOK_TYPE`` is set per
  hook. The hooks read no stdin.
* **Answers**: the agent reads only the exit code (0 = success) and ignores
  every result (``tool-handler.ts``); ``failOnError`` only stops later hooks
  of the same type. hookcage is stricter: a ``pre-*`` hook (PreToolUse,
  UserPromptSubmit) with ``failOnError: true`` that fails (non-zero exit,
  timeout) denies (``on_error: deny``); any other failure is reported and
  lets the event through; exit 2 is no block here. A hook that exits 0 may
  answer in the advanced hooks' JSON (``{"action": "allow"|"deny"|"ask",
  "updatedInput", "additionalContext", "continue"}``): ``deny`` blocks,
  ``allow`` is an approval (capability ``approve``), ``updatedInput`` a
  rewrite (capability ``rewrite_input``); anything else on stdout is ignored
  (a bad ``action`` is the agent's ``allow``: no opinion). Hooks run one
  after another (``serial``).
* **hookcage's answer** is the advanced hooks' JSON, exit 0 (a non-zero exit
  would read as ``allow`` there): ``{"action": ..., "updatedInput",
  "additionalContext", "continue"}``; a block's reason rides in
  ``additionalContext``; hookcage's notes in ``systemMessage`` (not read by
  the agent).
* **Payload in**: a Claude Code payload, or the agent's ``HookContext``
  (``{type, workingDirectory, file, content, command, output, error,
  toolName, toolArgs, prompt, response, sessionId, model}``), recognised by
  its lifecycle ``type`` and ``workingDirectory``. The agent itself sends its
  hooks no payload, so it cannot route an event to ``hookcage dispatch``.
* **Built-in recipes** (``BUILTIN_HOOKS``, all disabled in the agent, which
  enables them with ``/hooks enable <name>`` for the session only): an entry
  ``{"name": "lint-on-edit", "enabled": true}`` without ``command`` or
  ``script`` takes the built-in's type, command, timeout, failOnError and
  filePatterns (its own keys win). In the agent itself such an entry shadows
  the built-in and runs nothing (file entries load first and have no
  command): the recipe is hookcage's. A project file's recipe is a project
  hook (trust, allow-list) like any other.

The file's forms (lifecycle types, built-in recipes, selectors,
placeholders) are in :mod:`executor.dialects.grok_wire`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from executor.core import linre
from executor.core.events import EventSpec
from executor.core.hooks import (
    Collector,
    FileShape,
    HookFile,
    HookSpec,
    Scope,
    is_self_route,
    parse_handler,
)
from executor.core.matchers import Matcher, compile_matcher
from executor.core.protocol import (
    AgentAnswer,
    HookOutcome,
    HookRun,
    Verdict,
    dumps,
    join,
)
from executor.core.text import first_line, sanitize
from executor.dialects.base import (
    Dialect,
    HookInput,
    HookSource,
    Where,
    block_reason,
    home_path,
    project_sources,
)
from executor.dialects.grok_wire import (
    ADVANCED_EVENTS,
    BLOCKING_EVENTS,
    BUILTIN_HOOKS,
    COMMIT_SELECTOR,
    DEFAULT_TIMEOUT_MS,
    HOOK_SYSTEM_TYPES,
    LIFECYCLE,
    TYPE_VAR,
    command_selector,
    file_selector,
    rewrite_placeholders,
    script_command,
)

_ENTRY_KEYS = {"name", "type", "command", "script", "enabled", "timeout", "failOnError", "filePatterns",
               "commandPatterns", "description", "capabilities"}
_TOP_KEYS = {"hooks", "enabled", "timeout", "globalTimeout"}


# -- the dialect ------------------------------------------------------------------------------


class GrokDialect(Dialect):
    """phuetz/grok-cli (code-buddy): lifecycle hooks, hookcage's event map, the advanced hooks' answer."""

    name = "grok"
    title = "grok-cli / code-buddy (TypeScript agent, phuetz)"
    shape = FileShape(agent="grok", event_names={k: v.event for k, v in LIFECYCLE.items()},
                      timeout_scale=0.001, default_timeout=DEFAULT_TIMEOUT_MS / 1000)
    project_dir_var = "HOOKCAGE_PROJECT_DIR"  # the agent sets none: its hooks run in the project root
    serial = True  # executeHooks runs them in order; failOnError stops the rest
    unsupported = (
        "routing: the agent sends its hooks no payload and reads no answer, so it cannot hand an event to "
        "hookcage; `hookcage dispatch --agent grok` reads its HookContext JSON or a Claude Code payload "
        "from a wrapper",
        "taking over: no switch; the agent runs .codebuddy/hooks.json itself, on the host",
        "advanced hooks (PreBash, PostEdit, Claude Code's names): registered in the agent's code only, "
        "no file defines them",
        "the HookSystem and HookManager loaders' own shapes (on-file-change, {file}, continueOnError, "
        "{event, pattern}): nothing runs them on tools; such entries are reported and skipped",
        ".codebuddy/moltbot-hooks.json: intro text and logging settings, not command hooks",
    )

    takeover = (
        "The TypeScript agent (grok-cli / code-buddy) cannot be taken over: it runs the "
        "repository's .codebuddy/hooks.json lifecycle hooks itself, with no trust check and no "
        "setting that turns them off, so they still run outside hookcage, on the host. No routing "
        "can be added either: its hooks receive no payload (no stdin, no variables), so "
        "hookcage dispatch would have nothing to decide on."
    )


    # -- files ---------------------------------------------------------------------------

    def sources(self, where: Where) -> list[HookSource]:
        return [
            HookSource(Scope.USER, home_path(where, ".codebuddy", "hooks.json"),
                       condition="the agent's lifecycle loader does not read it; hookcage does"),
            *project_sources(where, (Scope.PROJECT, (".codebuddy", "hooks.json")),
                             condition="always, from the working directory, no trust asked"),
        ]

    def describe_sources(self) -> list[str]:
        return [*super().describe_sources(),
                "built-in recipes, enabled by {\"name\": NAME, \"enabled\": true} in either file: "
                + ", ".join(BUILTIN_HOOKS)]

    def parse(self, data: Any, *, scope: Scope, source: str, project_root: str | None,
              environ: Mapping[str, str] | None = None) -> HookFile:
        out = Collector(source, self.name)
        specs: list[HookSpec] = []
        if not isinstance(data, dict):
            out.error("$", "the top level must be a JSON object with a \"hooks\" array")
            return HookFile(source, scope, problems=tuple(out.problems), agent=self.name)
        for key in sorted(data.keys() - _TOP_KEYS):
            out.warn(f"$.{key}", "unknown key, ignored")
        for key in ("enabled", "timeout", "globalTimeout"):
            if key in data:
                out.warn(f"$.{key}", "the agent's lifecycle loader does not read it (only \"hooks\"); ignored")
        entries = data.get("hooks", [])
        if not isinstance(entries, list):
            out.error("$.hooks", "must be an array of hooks")
            entries = []
        for i, raw in enumerate(entries):
            spec = self._entry(raw, f"$.hooks[{i}]", scope, project_root, out)
            if spec is not None:
                specs.append(spec)
        return HookFile(source, scope, tuple(specs), tuple(out.problems), agent=self.name,
                        routes=tuple(out.routes))

    def _entry(self, raw: Any, path: str, scope: Scope, root: str | None, out: Collector) -> HookSpec | None:
        if not isinstance(raw, dict):
            out.error(path, "a hook must be an object with \"type\" and \"command\"")
            return None
        name = raw.get("name")
        recipe = (isinstance(name, str) and name in BUILTIN_HOOKS and "command" not in raw
                  and "script" not in raw)
        entry = {**BUILTIN_HOOKS[name], **raw} if recipe and isinstance(name, str) else dict(raw)
        hook_type = entry.get("type")
        if not isinstance(hook_type, str) or hook_type not in LIFECYCLE:
            if isinstance(hook_type, str) and hook_type in HOOK_SYSTEM_TYPES:
                out.warn(f"{path}.type", f"{hook_type!r} is a HookSystem type: the agent's lifecycle loader "
                         "never fires it; skipped")
            elif isinstance(hook_type, str) and hook_type in ADVANCED_EVENTS:
                out.error(f"{path}.type", f"{hook_type!r} is an advanced-hook event, which the agent registers "
                          f"in code only; in this file use: {', '.join(LIFECYCLE)}")
            elif "event" in entry and "type" not in entry:
                out.error(path, "{event, pattern} is the HookManager shape, which nothing runs on tools; "
                          "write {type, command} with a lifecycle type")
            else:
                out.error(f"{path}.type", f"required: one of {', '.join(LIFECYCLE)}")
            return None
        kind = LIFECYCLE[hook_type]
        for key in sorted(entry.keys() - _ENTRY_KEYS):
            out.warn(f"{path}.{key}", "unknown key, ignored" + (
                " (HookSystem's; the lifecycle loader reads failOnError)" if key == "continueOnError" else ""))
        errors: list[str] = []

        def err(key: str, message: str) -> None:
            errors.append(out.error(f"{path}.{key}", message, kind.event))

        # command | script, the agent's order (handler, command, script); placeholders never pasted
        command_key = "command"
        command: Any = entry.get("command")
        if command is None and entry.get("script") is not None:
            command_key = "script"
            command = script_command(entry["script"]) if isinstance(entry["script"], str) and entry["script"] \
                else entry["script"]
        elif command is not None and "script" in entry:
            out.warn(f"{path}.script", "ignored: the agent runs \"command\" when both are given", kind.event)
        if command is None:
            out.warn(path, "no \"command\" or \"script\" (and not a built-in's name): the agent runs nothing; "
                     f"built-ins: {', '.join(BUILTIN_HOOKS)}", kind.event)
            return None
        if isinstance(command, str):
            command = rewrite_placeholders(command)
            if is_self_route(command, absolute=not scope.from_repository):
                out.routes.append(path)  # hookcage's route (the env below is hookcage's, not the file's)
                return None
        # enabled: the agent keeps `hooks.filter(h => h.enabled)`; absent is off
        enabled = entry.get("enabled", False)
        if enabled is None:
            enabled = False
        if not isinstance(enabled, bool):
            err("enabled", "must be true or false")
            enabled = False
        fail = entry.get("failOnError", False)
        if not isinstance(fail, bool):
            err("failOnError", "must be true or false")
            fail = False
        handler: dict[str, Any] = {
            "type": "command", "command": command, "enabled": enabled,
            "on_error": "deny" if fail and kind.event in BLOCKING_EVENTS else "allow",
            "env": {TYPE_VAR: hook_type},
        }
        if entry.get("timeout") not in (None, 0):  # `hook.timeout || 30000`
            handler["timeout"] = entry["timeout"]
        if name is not None:
            handler["name"] = name
        if "capabilities" in entry:  # hookcage's key (the agent ignores it): what the review may grant
            handler["capabilities"] = entry["capabilities"]
        matcher = compile_matcher(kind.tools)
        spec = parse_handler(handler, path, kind.event, matcher, scope, root, out, shape=self.shape,
                             keys={"command": command_key, "on_error": "failOnError"})
        if spec is None:  # `hookcage dispatch`: hookcage's own route
            return None
        selectors: list[tuple[str, Matcher]] = []
        if kind.commit:
            selectors.append(("tool_input.command", COMMIT_SELECTOR))
        for key, field, build in (("filePatterns", "tool_input.file_path", file_selector),
                                  ("commandPatterns", "tool_input.command", command_selector)):
            patterns = entry.get(key)
            if patterns is None:
                continue
            if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
                err(key, "must be an array of strings")
                continue
            if key == "filePatterns" and any("/" in p for p in patterns):
                out.warn(f"{path}.{key}", "a pattern with '/' never matches: the agent compares basenames",
                         kind.event)
            try:
                selectors.append((field, build(patterns)))
            except linre.PatternError as exc:
                err(key, f"cannot be matched: {exc}")
        invalid = spec.invalid or (errors[0] if errors else None)
        return replace(spec, selectors=tuple(selectors), invalid=invalid)

    # -- payload in ----------------------------------------------------------------------

    @staticmethod
    def _native(payload: Mapping[str, Any]) -> str | None:
        """The lifecycle type of a HookContext payload (None for a Claude Code payload)."""
        kind = payload.get("type")
        if "hook_event_name" in payload or not isinstance(kind, str) or kind not in LIFECYCLE:
            return None
        return kind

    recognition = "the payload is its HookContext (a lifecycle type and workingDirectory)"

    def recognises(self, payload: Mapping[str, Any]) -> bool:
        return self._native(payload) is not None and isinstance(payload.get("workingDirectory"), str)

    def event_name(self, payload: Mapping[str, Any]) -> Any:
        native = self._native(payload)
        return native if native is not None else payload.get("hook_event_name")

    def canonical_payload(self, spec: EventSpec, payload: Mapping[str, Any]) -> dict[str, Any]:
        """A HookContext in Claude Code's keys (a Claude Code payload passes as it is)."""
        kind = self._native(payload)
        if kind is None:
            return super().canonical_payload(spec, payload)

        def text(key: str) -> str:
            value = payload.get(key)
            return value if isinstance(value, str) else ""

        data: dict[str, Any] = {"hook_event_name": spec.name}
        for ours, theirs in (("session_id", "sessionId"), ("cwd", "workingDirectory"), ("model", "model")):
            if isinstance(payload.get(theirs), str):
                data[ours] = payload[theirs]
        tool_args = payload.get("toolArgs")
        if kind in ("pre-bash", "post-bash", "pre-commit", "post-commit"):
            # A commit type without a command (no call site in the agent) is still a commit.
            command = text("command") or ("git commit" if kind.endswith("commit") else "")
            data.update(tool_name="Bash", tool_input={"command": command})
            if kind.startswith("post"):
                data["tool_response"] = {"stdout": text("output"), "stderr": text("error")}
        elif kind in ("pre-edit", "post-edit"):
            data.update(tool_name="Write" if payload.get("toolName") == "create_file" else "Edit",
                        tool_input={"file_path": text("file"), "content": text("content")})
            if kind == "post-edit":
                data["tool_response"] = {"output": text("output")}
        elif kind in ("on-tool-call", "on-error"):
            data.update(tool_name=text("toolName"), tool_input=dict(tool_args) if isinstance(tool_args, dict) else {})
            if kind == "on-error":
                data["error"] = text("error")
        elif kind == "pre-prompt":
            data["prompt"] = text("prompt")
        elif kind == "post-response":
            data["last_assistant_message"] = text("response")
        return data

    def hook_input(self, spec: EventSpec, payload: Mapping[str, Any]) -> HookInput:
        """No stdin (the agent sends none); ``GROK_FILE`` and ``GROK_COMMAND`` hold what ``${file}``/``${command}`` named."""
        native = self._native(payload) is not None
        tool_input = payload.get("tool_input")
        tool_input = tool_input if isinstance(tool_input, Mapping) else {}

        def first(*values: Any) -> str:
            return next((v for v in values if isinstance(v, str) and v), "")

        if native:
            file, command = first(payload.get("file")), first(payload.get("command"))
        else:
            file = first(tool_input.get("file_path"), tool_input.get("path"), tool_input.get("notebook_path"))
            command = first(tool_input.get("command"))
        return HookInput(b"", {"GROK_FILE": file, "GROK_COMMAND": command})

    # -- answers -------------------------------------------------------------------------

    def answer_to_claude(self, spec: EventSpec, data: dict[str, Any]) -> dict[str, Any]:
        """The advanced hooks' ``{action, updatedInput, additionalContext, continue}`` in Claude Code's keys.

        Only those keys are read: the agent reads nothing else (Claude Code's
        own keys in a grok hook's output are not a decision here).
        """
        out: dict[str, Any] = {}
        if data.get("continue") is False:
            out["continue"] = False
        specific: dict[str, Any] = {"hookEventName": spec.name}
        action = data.get("action")
        if spec.permission:
            specific["permissionDecision"] = action
            if "updatedInput" in data:
                specific["updatedInput"] = data["updatedInput"]
        elif action == "deny":
            out["decision"] = "block"
        if isinstance(data.get("additionalContext"), str):
            specific["additionalContext"] = data["additionalContext"]
        if len(specific) > 1:
            out["hookSpecificOutput"] = specific
        return out

    def parse_answer(self, spec: EventSpec, run: HookRun) -> HookOutcome:
        """Exit 0 = success (its stdout read only as the advanced hooks' JSON); any other exit, a
        timeout or a kill = a failure (``on_error`` decides: deny for a ``pre-*`` hook with failOnError)."""
        if run.exit_code != 0 or not run.finished:
            outcome = run.outcome(spec, stdout=b"")
            if outcome.status != "error":  # exit 2: Claude Code's block, only a failure here
                said = first_line(sanitize(run.stderr))
                outcome = HookOutcome(hook=run.hook, status="error", exit_code=run.exit_code, hook_id=run.hook_id,
                                      error=f"exited {run.exit_code}" + (f": {said}" if said else ""))
            return outcome
        notes: tuple[str, ...] = ()
        answer = b""
        data = _json_object(run.stdout)
        if data is not None and "action" in data:
            if data["action"] in ("allow", "deny", "ask"):
                answer = dumps(self.answer_to_claude(spec, data)).encode("utf-8")
            else:
                notes = ("'action' must be \"allow\", \"deny\" or \"ask\"; ignored (the agent reads it as allow)",)
        outcome = run.outcome(spec, exit_code=0, stdout=answer)
        return replace(outcome, notes=outcome.notes + notes) if notes else outcome

    def render(self, event: EventSpec, verdict: Verdict) -> AgentAnswer:
        """The advanced hooks' answer, exit 0: ``{"action": "allow"|"deny"|"ask", ...}``."""
        if event.answers_path:
            return super().render(event, verdict)
        out: dict[str, Any] = {}
        if verdict.blocks:
            out["action"] = "deny"
        elif verdict.decision == "ask":
            out["action"] = "ask"
        else:
            out["action"] = "allow"
            if verdict.updated_input is not None and event.permission:
                out["updatedInput"] = verdict.updated_input
        context = join([block_reason(event, verdict) if verdict.blocks else None,
                        sanitize(verdict.additional_context) if verdict.additional_context else None])
        if context:
            out["additionalContext"] = context
        if not verdict.continue_:
            out["continue"] = False
        if verdict.system_message:
            out["systemMessage"] = sanitize(verdict.system_message)
        return AgentAnswer(0, dumps(out) + "\n", "")


def _json_object(stdout: bytes) -> dict[str, Any] | None:
    """stdout as the agent reads it (``JSON.parse(stdout.trim())``): an object, or None."""
    text = stdout.strip()
    if not text.startswith(b"{"):
        return None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


DIALECT = GrokDialect()
