#!/bin/sh
# PreToolUse(Bash): refuse recursive deletes. Exit 2 = block, stderr = the reason.
command=$(jq -r '.tool_input.command // ""')
case "$command" in
  *"rm -rf"*|*"rm -fr"*|*"rm -r "*)
    echo "rm-guard: recursive delete refused: $command" >&2
    exit 2 ;;
esac
exit 0
