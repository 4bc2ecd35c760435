"""Play Claude Code hook events the way the agent would, and print each answer.

A stand-in for a headless agent (no model, no API key): for every event file
in ``events/`` (in name order) it builds the agent's JSON payload, finds the
hook commands the agent's own settings route that event to
(``claude-settings.json``: ``hookcage dispatch --agent claude``, which sends it
to the service named by ``HOOKCAGE_URL``), runs each with ``sh -c`` and the
payload on stdin, as Claude Code does, and prints what came back: exit code,
stdout, stderr.

In the event files, ``${WORKSPACE}`` stands for the project directory
(``$CLAUDE_PROJECT_DIR``, else the working directory) and ``${SESSION_ID}``
for the session id (``$AGENT_SESSION_ID``, else a fresh one).

Usage: python3 play.py [--json] [--events DIR] [--settings FILE]

``--json`` prints one JSON object per hook command run instead of text.
Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TIMEOUT = 700.0
"""Seconds one hook command may take (hookcage's client gives up at 600 s)."""
_TOOL_EVENTS = {"PreToolUse", "PostToolUse", "PostToolUseFailure", "PermissionRequest"}


def load_events(folder: Path, workspace: str, session: str) -> list[tuple[str, dict[str, Any]]]:
    """The payloads of ``folder/*.json`` in name order, placeholders filled in."""
    events = []
    for path in sorted(folder.glob("*.json")):
        text = path.read_text(encoding="utf-8")
        text = text.replace("${WORKSPACE}", workspace).replace("${SESSION_ID}", session)
        payload = json.loads(text)
        if not isinstance(payload, dict) or not isinstance(payload.get("hook_event_name"), str):
            raise ValueError(f"{path}: not a hook payload (an object with hook_event_name)")
        events.append((path.stem, payload))
    return events


def _matches(matcher: object, payload: dict[str, Any]) -> bool:
    """Claude Code's matcher rule, for the tool events (other events ignore the matcher)."""
    if payload["hook_event_name"] not in _TOOL_EVENTS or matcher in (None, "", "*"):
        return True
    tool = str(payload.get("tool_name", ""))
    text = str(matcher)
    if re.fullmatch(r"[A-Za-z0-9_|]+", text):
        return tool in text.split("|")
    return re.search(text, tool) is not None


def routed_commands(settings: dict[str, Any], payload: dict[str, Any]) -> list[str]:
    """The command hooks the agent's settings run for this payload."""
    commands = []
    for group in settings.get("hooks", {}).get(payload["hook_event_name"], []):
        if _matches(group.get("matcher"), payload):
            commands += [h["command"] for h in group.get("hooks", []) if h.get("type") == "command"]
    return commands


def run_hook(command: str, payload: dict[str, Any], cwd: str) -> dict[str, Any]:
    """Run one hook command as the agent would: ``sh -c``, the payload on stdin."""
    try:
        done = subprocess.run(
            ["sh", "-c", command],
            input=json.dumps(payload).encode(),
            capture_output=True,
            cwd=cwd,
            timeout=TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"exit_code": None, "stdout": "", "stderr": f"timed out after {TIMEOUT:g} s"}
    return {
        "exit_code": done.returncode,
        "stdout": done.stdout.decode(errors="replace"),
        "stderr": done.stderr.decode(errors="replace"),
    }


def describe(payload: dict[str, Any]) -> str:
    """One line saying what the agent is doing."""
    event = payload["hook_event_name"]
    tool_input = payload.get("tool_input") or {}
    what = (
        payload.get("prompt")
        or payload.get("source")
        or tool_input.get("command")
        or tool_input.get("file_path")
        or ""
    )
    tool = payload.get("tool_name")
    return " ".join(str(part) for part in (event, tool, what) if part)


def verdict(result: dict[str, Any]) -> str:
    """What the agent makes of an answer."""
    if result["exit_code"] == 2:
        return "blocked"
    if result["exit_code"] != 0:
        return f"hook error (exit {result['exit_code']})"
    try:
        answer = json.loads(result["stdout"] or "{}")
    except ValueError:
        return "context" if result["stdout"].strip() else "go on"
    decision = (answer.get("hookSpecificOutput") or {}).get("permissionDecision")
    if decision:
        return f"permission: {decision}"
    if answer.get("decision") == "block":
        return "blocked"
    return "go on"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--json", action="store_true", help="one JSON object per hook run")
    parser.add_argument("--events", type=Path, default=HERE / "events")
    parser.add_argument("--settings", type=Path, default=HERE / "claude-settings.json")
    args = parser.parse_args(argv)
    workspace = os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd()
    session = os.environ.get("AGENT_SESSION_ID") or uuid.uuid4().hex
    try:
        settings = json.loads(args.settings.read_text(encoding="utf-8"))
        events = load_events(args.events, workspace, session)
    except (OSError, ValueError) as exc:
        print(f"play: error: {exc}", file=sys.stderr)
        return 1
    if not args.json:
        print(f"agent session {session} in {workspace}, hooks to {os.environ.get('HOOKCAGE_URL')}")
    for name, payload in events:
        for command in routed_commands(settings, payload):
            result = run_hook(command, payload, workspace)
            if args.json:
                print(json.dumps({"event": name, "command": command, **result}), flush=True)
                continue
            print(f"\n== {name}: {describe(payload)}")
            print(f"   $ {command}  -> exit {result['exit_code']}: {verdict(result)}")
            for stream in ("stdout", "stderr"):
                for line in result[stream].splitlines():
                    print(f"   {stream}: {line}")
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
