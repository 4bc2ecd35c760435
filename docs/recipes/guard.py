#!/usr/bin/env python3
"""PreToolUse (Bash): deny commands that destroy data or run code fetched from the network."""
import json
import re
import sys

RULES = [
    (r"\brm\s+-[a-zA-Z]*[rR][a-zA-Z]*\s+(/|~|\$HOME)(\s|$)", "recursive delete of / or the home directory"),
    (r"\b(curl|wget)\b[^|;]*\|\s*(sudo\s+)?(ba|z|da)?sh\b", "runs a script straight from the network"),
    (r"\bgit\s+push\b.*\s(--force|-f)\b", "force-push"),
    (r"\bmkfs(\.\w+)?\b|\bdd\s+[^|;]*\bof=/dev/", "overwrites a disk"),
]

payload = json.load(sys.stdin)
command = (payload.get("tool_input") or {}).get("command", "")
for pattern, why in RULES:
    if re.search(pattern, command):
        print(json.dumps({"hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": f"guard.py: {why}: {command}",
        }}))
        break
