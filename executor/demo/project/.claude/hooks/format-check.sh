#!/bin/sh
# PostToolUse(Write|Edit): complain (decision "block" goes to the model) when
# the written Python file has trailing whitespace.
file=$(jq -r '.tool_input.file_path // ""')
case "$file" in *.py) ;; *) exit 0 ;; esac
if [ -f "$file" ] && grep -nE ' +$' "$file" >/tmp/ws; then
  jq -n --arg r "format-check: trailing whitespace in $file at line(s) $(cut -d: -f1 /tmp/ws | tr '\n' ' ')" \
     '{decision: "block", reason: $r}'
fi
exit 0
