"""GitHub Copilot CLI's wire forms (pure): tool names, the two payload forms, matchers, stdout.

What :mod:`executor.dialects.copilot` reads and writes, kept apart so that
module stays about files and answers. Source: R = Copilot's hooks reference,
docs.github.com/en/copilot/reference/hooks-reference (github/docs
``content/copilot/reference/hooks-reference.md``, the stored version at
commit 05da5bc3, read 2026-11-27; it superseded ``cli-hooks-reference.md``
and ``hooks-configuration.md``, which now redirect to it).

- **Tool names** (R "Claude-format matchers"): Copilot's runtime names
  (``bash``, ``view``, ...) and the Claude tool name of each.
- **Payload forms** (R "Hook event input payloads"): a camelCase key
  (``preToolUse``) reads Copilot's camelCase payload; a PascalCase key
  (``PreToolUse``) the VS Code-compatible snake_case one, whose PreToolUse
  ``tool_name`` is the Claude tool name.
- **Matchers** (R "Matcher filtering", "Claude-format matchers"): an
  anchored regular expression on the runtime name; a PascalCase
  ``PreToolUse``/``PermissionRequest`` key reads Claude's rule instead.
- **stdout** (R "How stdout is parsed when progress messages are mixed in"):
  progress lines removed, the rest parsed as one JSON document; anything
  else is no output.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from executor.core import linre
from executor.core.matchers import Matcher
from executor.core.protocol import dumps
from executor.core.text import decode
from executor.dialects.base import json_object

CLAUDE_TOOLS: Mapping[str, str] = {
    "bash": "Bash", "powershell": "Bash", "view": "Read", "create": "Write", "edit": "Edit",
    "str_replace_editor": "Edit", "apply_patch": "Edit", "grep": "Grep", "rg": "Grep", "glob": "Glob",
    "web_fetch": "WebFetch", "web_search": "WebSearch", "ask_user": "AskUserQuestion",
    "update_todo": "TodoWrite", "task": "Agent",
}
"""R's table "Runtime tool -> Claude tool name" (tools not in it keep their runtime names)."""

TOOLS: Mapping[str, str] = {**CLAUDE_TOOLS, "task": "Task"}
"""Copilot's runtime names -> hookcage's canonical ones (Claude Code's; the subagent tool is
``Task`` there, ``Agent`` its alias)."""

RUNTIME_OF: Mapping[str, str] = {
    "Bash": "bash", "Read": "view", "Write": "create", "Edit": "edit", "Grep": "grep", "Glob": "glob",
    "WebFetch": "web_fetch", "WebSearch": "web_search", "AskUserQuestion": "ask_user",
    "TodoWrite": "update_todo", "Agent": "task", "Task": "task",
}
"""A Claude tool name in a VS Code-form payload -> the runtime name it most likely stands for."""

PASCAL_OWN: Mapping[str, str] = {"errorOccurred": "ErrorOccurred"}
"""Copilot's own events' PascalCase names (R: ``errorOccurred`` / ``ErrorOccurred``)."""

_AS_IS = frozenset({"stop_hook_active", "notification_type", "hook_event_name"})
"""Keys Copilot's camelCase payloads spell in snake_case (agentStop, notification)."""
_CAMEL_WORD = re.compile(r"(?<=[a-z0-9])([A-Z])")


def snake(key: str) -> str:
    """``toolName`` -> ``tool_name``."""
    return _CAMEL_WORD.sub(lambda m: "_" + m.group(1).lower(), key)


def camel(key: str) -> str:
    """``tool_name`` -> ``toolName``."""
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


def _keys(value: Any, how: Any) -> Any:
    return {how(k): v for k, v in value.items()} if isinstance(value, dict) else value


def is_snake(payload: Mapping[str, Any]) -> bool:
    """The payload is the VS Code-compatible form: it names its event and carries no camelCase
    key (Copilot's camelCase notification payload names its event too, beside ``sessionId``)."""
    return "hook_event_name" in payload and not any(k in payload for k in ("sessionId", "toolName", "toolArgs"))


def runtime_tool(payload: Mapping[str, Any]) -> str | None:
    """The runtime name of the payload's tool (``bash``), in either form."""
    if is_snake(payload):
        tool = payload.get("tool_name")
        return RUNTIME_OF.get(tool, tool) if isinstance(tool, str) else None
    tool = payload.get("toolName")
    return tool if isinstance(tool, str) else None


def to_snake(payload: Mapping[str, Any], pascal: str) -> dict[str, Any]:
    """The VS Code-compatible payload a hook filed under the PascalCase key ``pascal`` reads (R):
    snake_case keys, an ISO timestamp, ``tool_input`` an object, ``tool_result`` with snake_case
    keys, SubagentStop's ``response`` as ``last_assistant_message``, and PreToolUse's ``tool_name``
    the Claude tool name."""
    if is_snake(payload):
        out = {**payload, "hook_event_name": pascal}
    else:
        out = {"hook_event_name": pascal}
        for key, value in payload.items():
            if key == "hook_event_name":
                continue
            if key == "toolArgs":
                out["tool_input"] = json_object(value)
            elif key == "toolResult":
                out["tool_result"] = _keys(value, snake)
            elif key == "timestamp":
                out["timestamp"] = _iso(value)
            elif key == "response" and pascal == "SubagentStop":
                out["last_assistant_message"] = value
            else:
                out[snake(key)] = value
    tool = runtime_tool(payload)
    if pascal == "PreToolUse" and tool is not None:
        out["tool_name"] = CLAUDE_TOOLS.get(tool, tool)  # R: "report tool_name as the Claude tool name"
    return out


def to_camel(payload: Mapping[str, Any]) -> dict[str, Any]:
    """Copilot's camelCase payload, from either form (the inverse of :func:`to_snake`)."""
    if not is_snake(payload):
        return dict(payload)
    event = payload.get("hook_event_name")
    out: dict[str, Any] = {}
    for key, value in payload.items():
        if key == "hook_event_name":
            if event == "Notification":
                out[key] = value  # R: the camelCase notification payload names it too
        elif key == "tool_input":
            out["toolArgs"] = value if isinstance(value, str) else dumps(value)
        elif key == "tool_name":
            out["toolName"] = runtime_tool(payload)
        elif key == "tool_result":
            out["toolResult"] = _keys(value, camel)
        elif key == "timestamp":
            out["timestamp"] = _millis(value)
        elif key == "last_assistant_message" and event == "SubagentStop":
            out["response"] = value
        else:
            out[key if key in _AS_IS else camel(key)] = value
    return out


def canonical(payload: Mapping[str, Any], name: str) -> dict[str, Any]:
    """Either form in the canonical keys: snake_case, ``tool_response`` (plus ``output``, the text
    the model read), ``tool_name`` in hookcage's canonical names, and what Copilot's own matchers
    test: ``agent_tool`` (the runtime name) and ``agent_claude_tool`` (its Claude tool name)."""
    tool = runtime_tool(payload)
    data = to_snake(payload, name)
    data["hook_event_name"] = name
    if tool is not None:
        data["agent_tool"] = tool
        data["agent_claude_tool"] = CLAUDE_TOOLS.get(tool, tool)
        data["tool_name"] = TOOLS.get(tool, tool)
    if "tool_result" in data:
        result = data.pop("tool_result")
        if isinstance(result, dict):
            text = result.get("text_result_for_llm")
            result = {**_keys(result, camel), **({"output": text} if isinstance(text, str) else {})}
        data["tool_response"] = result
    if "tool_input" in data or "tool_name" in data:
        data["tool_input"] = json_object(data.get("tool_input"))
    if name == "SubagentStop" and "last_assistant_message" not in data and isinstance(data.get("response"), str):
        data["last_assistant_message"] = data["response"]
    if name in ("SubagentStart", "SubagentStop") and "agent_type" not in data \
            and isinstance(data.get("agent_name"), str):
        data["agent_type"] = data["agent_name"]
    for key in ("session_id", "transcript_path", "cwd"):
        if key in data and not isinstance(data[key], str):
            data.pop(key)
    data.pop("timestamp", None)  # a number in one form, a string in the other: the agent's own
    return data


# -- matchers ---------------------------------------------------------------------------------

_NAMES = re.compile(r"[A-Za-z0-9_-]+(?:\|[A-Za-z0-9_-]+)*")


def compile_anchored(source: str | None) -> Matcher:
    """Copilot's own matcher (R "Matcher filtering"): a regular expression compiled as
    ``^(?:PATTERN)$``; an invalid one never fires (R: "the hook entry is skipped")."""
    if source is None or source.strip() in ("", "*"):
        return Matcher(source)
    try:
        return Matcher(source, pattern=linre.compile(f"^(?:{source})$"))
    except linre.PatternError as exc:
        return Matcher(source, error=f"invalid regular expression {source!r}: {exc}")


def claude_format(source: str | None) -> tuple[str, Matcher]:
    """R "Claude-format matchers (PascalCase PreToolUse)", also PascalCase PermissionRequest:
    ``*``, ``**`` or empty fire for every tool; a name or ``|``-list fires when a token equals the
    runtime name or its Claude tool name (``Task`` too for ``task``); anything else is a
    case-sensitive regex anchored ``^(?:PATTERN)$`` on the Claude tool name (the runtime name for
    tools with none). Returns the canonical payload field to test and the matcher for it."""
    if source is None or source.strip() in ("", "*", "**"):
        return "agent_tool", Matcher(source)
    if _NAMES.fullmatch(source):
        tokens = set(source.split("|"))
        runtime = {r for r, c in CLAUDE_TOOLS.items() if c in tokens} | ({"task"} if "Task" in tokens else set())
        return "agent_tool", Matcher(source, names=frozenset(tokens | runtime))
    return "agent_claude_tool", compile_anchored(source)


# -- stdout -----------------------------------------------------------------------------------

NOT_JSON = "stdout is not one JSON object, which Copilot CLI reads as no output"


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _is_progress(line: str) -> bool:
    text = line.strip()
    if not (text.startswith("{") and text.endswith("}")):
        return False
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        return False
    return isinstance(value, dict) and value.get("type") == "progress"


def without_progress(stdout: bytes) -> str:
    """stdout with its progress lines removed (R: each a one-line ``{"type": "progress", ...}``)."""
    return "\n".join(line for line in decode(stdout).splitlines() if not _is_progress(line)).strip()


def read_stdout(stdout: bytes) -> tuple[bytes, str | None]:
    """What Copilot reads of a command hook's stdout: the one JSON object left after the progress
    lines are removed, as bytes; ``b""`` and a note when what is left is not one (R: "treated as
    having produced no output and falls through to default behavior")."""
    rest = without_progress(stdout)
    if not rest:
        return b"", None
    try:
        value = json.loads(rest, parse_constant=_reject_constant)
    except RecursionError:
        return rest.encode("utf-8"), None  # JSON nested past Python's parser: reported as a failure
    except ValueError:
        return b"", NOT_JSON
    if not isinstance(value, dict):
        return b"", NOT_JSON
    return rest.encode("utf-8"), None
