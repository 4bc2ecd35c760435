#!/bin/sh
# PostToolUse (Edit|Write): format the Python file the agent just wrote with ruff.
# Needs "workspace": "rw" (it rewrites the file) and nothing else.
file=$(jq -r '.tool_input.file_path // empty')
case "$file" in
  *.py) ;;
  *) exit 0 ;;
esac
if ! ruff format --quiet --no-cache "$file" 2>/tmp/ruff.err; then
  echo "ruff format failed on $file: $(head -n 1 /tmp/ruff.err)" >&2
  exit 1
fi
