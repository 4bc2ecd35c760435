#!/bin/sh
# PreToolUse (Read|Edit|Write|Bash): keep .env files, private keys and credentials out of the model.
input=$(cat)
target=$(printf '%s' "$input" | jq -r '.tool_input.file_path // .tool_input.command // empty')
case "$target" in
  *.env.example|*.env.sample|*.env.template) exit 0 ;;
  *.env|*.env.*|*/.env\ *|*\ .env|*\ .env\ *|*id_rsa*|*id_ed25519*|*.pem|*/.aws/credentials*|*.netrc*)
    echo "secrets-guard: $target touches a secrets file; ask the user for the variable names instead" >&2
    exit 2 ;;
esac
exit 0
