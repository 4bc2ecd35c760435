#!/usr/bin/env node
// PreToolUse (Bash): the same guard as guard.py, for projects that prefer Node.
import { readFileSync } from "node:fs";

const rules = [
  [/\brm\s+-[a-zA-Z]*[rR][a-zA-Z]*\s+(\/|~|\$HOME)(\s|$)/, "recursive delete of / or the home directory"],
  [/\b(curl|wget)\b[^|;]*\|\s*(sudo\s+)?(ba|z|da)?sh\b/, "runs a script straight from the network"],
  [/\bgit\s+push\b.*\s(--force|-f)\b/, "force-push"],
  [/\bmkfs(\.\w+)?\b|\bdd\s+[^|;]*\bof=\/dev\//, "overwrites a disk"],
];

const payload = JSON.parse(readFileSync(0, "utf8"));
const command = payload.tool_input?.command ?? "";
for (const [pattern, why] of rules) {
  if (pattern.test(command)) {
    console.log(JSON.stringify({ hookSpecificOutput: {
      hookEventName: "PreToolUse",
      permissionDecision: "deny",
      permissionDecisionReason: `guard.mjs: ${why}: ${command}`,
    } }));
    break;
  }
}
