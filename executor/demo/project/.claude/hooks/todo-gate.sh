#!/bin/sh
# Stop: do not let the agent stop while TODO markers remain, unless this Stop
# is already the result of a Stop hook (stop_hook_active), to avoid loops.
active=$(jq -r '.stop_hook_active // false')
[ "$active" = "true" ] && exit 0
if grep -rn "TODO" "$CLAUDE_PROJECT_DIR/src" >/tmp/todos 2>/dev/null; then
  echo "todo-gate: TODO markers left: $(wc -l </tmp/todos) (first: $(head -n1 /tmp/todos))" >&2
  exit 2
fi
exit 0
