"""infer (github.com/inference-gateway/cli, Go): one YAML file, eight hook points, observe only.

Read from HEAD 3244c2f: ``config/hooks.go`` (``HooksConfig``,
``HookCommandConfig``, ``effective``, ``CommandsDue``),
``cmd/runtime/config.go`` (``getEffectiveHooksConfigPath``,
``applyHooksEnvOverrides``), ``internal/agent/hook_commands.go``
(``RunCommandHooks``, ``runHookCommand``, ``hookCommandStdin``) and
``internal/agent/domain/hooks.go`` (``HookPoints``).

* **One file**: ``./.infer/hooks.yaml`` when it exists, else
  ``~/.infer/hooks.yaml``; never both (no merge), no trust check. hookcage
  models it with :attr:`HookSource.unless_exists`: the user file is not read
  when the project has one (infer's ``./`` is its working directory;
  hookcage reads the project root's).
* **Shape**: ``enabled`` (default **false**) and ``hooks: [{name, hook,
  command, timeout}]``; ``name``, ``hook`` and ``command`` are required,
  ``timeout`` is in seconds (0 or absent = 30, negative invalid). No
  matcher: every entry of a hook point runs, in file order.
* **Master switch**: ``enabled``, overridden by ``INFER_HOOKS_ENABLED``
  when Go's ``strconv.ParseBool`` accepts it (1, t, T, TRUE, true, True, 0,
  f, F, FALSE, false, False; anything else is ignored). Off: no hook of the
  file runs (``HookFile.disable_all``).
* **Hook points**: ``pre_session`` -> SessionStart and ``post_session`` ->
  SessionEnd (once per run: at its start, when it completes; the research
  notes suggested Stop for ``post_session``, but a run's end pairs with its
  start). The other six carry their own names (only infer's hooks match
  them): ``pre_stream``/``post_stream`` (around each model call),
  ``pre_tool``/``post_tool`` (around a *batch* of tool calls: no tool name
  or input is sent, so Claude Code's PreToolUse/PostToolUse, which need
  both, are no twins), ``pre_queue_drain``/``post_queue_drain``.
* **Payload** (``hookCommandStdin``): exactly ``{"hook", "session_id",
  "turn"}`` (AGENTS.md had these keys as UNCONFIRMED; the source confirms
  them), compact and key-sorted as Go marshals a map; no cwd, no
  environment variables.
* **Answers**: none. infer runs the command, records its exit code,
  duration and output in a ``hook_command`` stream event, and never feeds
  anything back: an infer hook cannot block, deny, rewrite or add context.
  hookcage parses every answer as "no opinion" (a failure is a note in the
  run log) and answers infer with exit 0 and nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from executor.core.events import EventSpec
from executor.core.hooks import Collector, FileShape, HookFile, HookSpec, Scope, parse_handler
from executor.core.matchers import Matcher
from executor.core.protocol import AgentAnswer, HookOutcome, HookRun, Verdict
from executor.dialects.base import Dialect, HookInput, HookSource, Where, home_path, project_path

POINTS = ("pre_session", "pre_stream", "post_stream", "pre_tool", "post_tool", "pre_queue_drain",
          "post_queue_drain", "post_session")
"""``domain.HookPoints``, in the order a run reaches them."""
TWINS: Mapping[str, str] = {"pre_session": "SessionStart", "post_session": "SessionEnd"}
OWN_EVENTS: Mapping[str, EventSpec] = {
    point: EventSpec(point, None, "ignored", fields=("hook", "turn")) for point in POINTS if point not in TWINS
}
DEFAULT_TIMEOUT = 30.0
"""``defaultHookTimeoutSeconds``."""
_PAYLOAD_KEYS = frozenset({"hook", "session_id", "turn"})
_HOOKCAGE_KEYS = frozenset({"sandbox", "env"})
_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


def parse_bool(text: str) -> bool | None:
    """Go's ``strconv.ParseBool`` (after ``strings.TrimSpace``); ``None`` when it refuses."""
    text = text.strip()
    return True if text in _TRUE else False if text in _FALSE else None


class InferDialect(Dialect):
    """infer (inference-gateway/cli): observe-only command hooks at eight hook points."""

    name = "infer"
    title = "infer"
    shape = FileShape(agent="infer", event_names=TWINS, own_events=OWN_EVENTS, canonical_names=False,
                      default_timeout=DEFAULT_TIMEOUT)
    unsupported = (
        "answers: infer reads none (observe only), so an infer hook never blocks, denies, rewrites or adds "
        "context, and hookcage answers infer with exit 0 and nothing",
        "plugin hooks (<plugin>/hooks.yaml of enabled plugins): not read",
        "infer's own bash allow-list for hook commands (tools.bash.mode.*.allow): hookcage's allow-list "
        "applies instead",
    )

    takeover = (
        "infer cannot be taken over: its only switch is the master switch (enabled in the hooks "
        "file, overridden by INFER_HOOKS_ENABLED), which turns every hook on or off at once, and "
        "it reads ./.infer/hooks.yaml instead of ~/.infer/hooks.yaml whenever the repository has "
        "one. So with hooks enabled, the repository's hooks still run outside hookcage, on the "
        "host; with INFER_HOOKS_ENABLED=false none runs. No routing can be added: a repository's "
        "file replaces the user's, and infer's hooks only observe (no answer is read)."
    )


    # -- files ---------------------------------------------------------------------------

    def sources(self, where: Where) -> list[HookSource]:
        project = project_path(where, ".infer", "hooks.yaml")
        files = [HookSource(Scope.USER, home_path(where, ".infer", "hooks.yaml"), format="yaml",
                            condition="only when the project has no .infer/hooks.yaml", unless_exists=project)]
        if project is not None:
            files.append(HookSource(Scope.PROJECT, project, format="yaml",
                                    condition="when it exists, instead of the user file; no trust asked"))
        return files

    def parse(self, data: Any, *, scope: Scope, source: str, project_root: str | None,
              environ: Mapping[str, str] | None = None) -> HookFile:
        out = Collector(source, self.name)
        if data is None:
            data = {}
        if not isinstance(data, dict):
            out.error("$", "the top level must be a mapping (enabled, hooks)")
            return HookFile(source, scope, problems=tuple(out.problems), agent=self.name)
        enabled = data.get("enabled", False)
        if not isinstance(enabled, bool):
            out.error("$.enabled", "must be true or false")
            enabled = False
        switch = (environ or {}).get("INFER_HOOKS_ENABLED")
        forced = parse_bool(switch) if switch is not None else None
        if forced is False:
            reason = f"INFER_HOOKS_ENABLED={switch.strip()}" if switch is not None else ""
        elif forced is None and not enabled:
            reason = '"enabled: false"' if "enabled" in data else '"enabled" not set (infer\'s default: false)'
        else:
            reason = ""
        for key in sorted(set(data) - {"enabled", "hooks"}):
            out.warn(f"$.{key}", "unknown key, ignored")
        raw_hooks = data.get("hooks")
        if raw_hooks is None:
            raw_hooks = []
        if not isinstance(raw_hooks, list):
            out.error("$.hooks", "must be a list of hooks (name, hook, command, timeout)")
            raw_hooks = []
        specs = [spec for i, raw in enumerate(raw_hooks)
                 if (spec := self._entry(raw, f"$.hooks[{i}]", scope, project_root, out)) is not None]
        return HookFile(source, scope, tuple(specs), tuple(out.problems), disable_all=bool(reason),
                        agent=self.name, routes=tuple(out.routes), disable_reason=reason)

    def _entry(self, raw: Any, path: str, scope: Scope, root: str | None, out: Collector) -> HookSpec | None:
        if not isinstance(raw, dict):
            out.error(path, "a hook must be a mapping with name, hook and command")
            return None
        point = raw.get("hook")
        event = self.shape.event(point) if isinstance(point, str) else None
        if event is None:
            out.error(f"{path}.hook", f"required: one of {', '.join(POINTS)}")
            return None
        handler: dict[str, Any] = {"type": "command", "command": raw.get("command"), "name": raw.get("name")}
        timeout = raw.get("timeout")
        if timeout is not None and not (timeout == 0 and isinstance(timeout, int) and not isinstance(timeout, bool)):
            handler["timeout"] = timeout  # 0 or absent: infer's default (30 s)
        for key, value in raw.items():
            if key in _HOOKCAGE_KEYS:
                handler[key] = value
            elif key not in ("name", "hook", "command", "timeout"):
                out.warn(f"{path}.{key}", "unknown key, ignored", event)
        spec = parse_handler(handler, path, event, Matcher(None), scope, root, out, shape=self.shape)
        if spec is None:
            return None
        name = raw.get("name")
        if (not isinstance(name, str) or not name.strip()) and isinstance(name, str | None):
            message = out.error(f"{path}.name", "required: a non-empty string", event)
            spec = replace(spec, invalid=spec.invalid or message)
        return spec

    # -- payload in ----------------------------------------------------------------------

    recognition = "the payload is {hook, session_id, turn} with one of its hook points"

    def recognises(self, payload: Mapping[str, Any]) -> bool:
        return payload.get("hook") in POINTS and set(payload) <= _PAYLOAD_KEYS

    def event_name(self, payload: Mapping[str, Any]) -> Any:
        return payload.get("hook", payload.get("hook_event_name"))

    def canonical_payload(self, spec: EventSpec, payload: Mapping[str, Any]) -> dict[str, Any]:
        data: dict[str, Any] = {"hook_event_name": spec.name}
        session = payload.get("session_id")
        if isinstance(session, str):
            data["session_id"] = session
        if "turn" in payload:
            data["turn"] = payload["turn"]
        return data

    def hook_input(self, spec: EventSpec, payload: Mapping[str, Any]) -> HookInput:
        """``hookCommandStdin``: ``{"hook","session_id","turn"}``, as Go marshals a map."""
        session = payload.get("session_id")
        turn = payload.get("turn")
        data = {"hook": self.native_event(spec), "session_id": session if isinstance(session, str) else "",
                "turn": turn if isinstance(turn, int) and not isinstance(turn, bool) else 0}
        return HookInput(json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode())

    # -- answers -------------------------------------------------------------------------

    def parse_answer(self, spec: EventSpec, run: HookRun) -> HookOutcome:
        """Observe only: infer records the exit code and output and acts on neither."""
        if run.timed_out:
            what = "timed out" + (f" after {run.timeout:g} s" if run.timeout is not None else "")
        elif run.oom_killed:
            what = "was killed: out of memory"
        elif run.exit_code is None:
            what = "was killed before it finished"
        elif run.exit_code != 0:
            what = f"exited {run.exit_code}"
        else:
            return HookOutcome(hook=run.hook, exit_code=0, hook_id=run.hook_id)
        return HookOutcome(hook=run.hook, exit_code=run.exit_code, hook_id=run.hook_id,
                           notes=(f"{what}; infer only records it (observe-only hooks)",))

    def render(self, event: EventSpec, verdict: Verdict) -> AgentAnswer:
        """infer reads nothing back: exit 0, no output, whatever the verdict."""
        return AgentAnswer(0, "", "")


DIALECT = InferDialect()
