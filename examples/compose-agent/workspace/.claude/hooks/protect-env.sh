#!/bin/sh
# PreToolUse(Write|Edit): never write a .env file; answer with a JSON permission decision.
path=$(jq -r '.tool_input.file_path // ""')
case "$path" in
  *.env|*/.env.*)
    jq -n --arg p "$path" '{hookSpecificOutput: {hookEventName: "PreToolUse",
      permissionDecision: "deny", permissionDecisionReason: ("protect-env: secrets stay out of " + $p)}}' ;;
esac
exit 0
