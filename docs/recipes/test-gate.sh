#!/bin/sh
# Stop: do not let the agent stop while the test suite fails.
# Runs the project's unittest suite (tests/) offline, writing nothing to the workspace.
if [ "$(jq -r '.stop_hook_active // false')" = true ]; then
  exit 0  # the agent is already continuing because of us: let it stop this time
fi
cd "$CLAUDE_PROJECT_DIR" || exit 1
if out=$(PYTHONDONTWRITEBYTECODE=1 python3 -m unittest discover -s tests -q 2>&1); then
  exit 0
fi
summary=$(printf '%s\n' "$out" | grep -E '^(FAIL|ERROR):|^FAILED' | head -n 5 | tr '\n' ' ')
jq -n --arg why "The tests fail, fix them before stopping: $summary" '{decision: "block", reason: $why}'
