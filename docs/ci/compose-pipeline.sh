#!/usr/bin/env bash
# A pipeline on any CI with Docker and docker-compose (Jenkins, Buildkite, a shell runner...):
# hookcage runs as the compose.yaml service (hookcage serve --listen, hooks as sibling
# containers), the agent on the CI machine sends it every hook event (HOOKCAGE_URL), and the
# repository's hooks run only if the base branch had them.
#
# Run it in the checkout of the pull request's repository:
#   BASE_SHA=<base commit> HEAD_SHA=<pull request commit> HOOKCAGE_SRC=<a hookcage checkout> \
#     bash compose-pipeline.sh
# with docker-compose (v1 >= 1.28, or `docker compose` v2 via HOOKCAGE_COMPOSE), hookcage and
# Claude Code on PATH and ANTHROPIC_API_KEY set. docs/ci.md explains each step;
# tests/integration/test_ci_recipes.py runs this script as it is.
set -euo pipefail

: "${BASE_SHA:?the base branch commit (what was reviewed and merged)}"
: "${HEAD_SHA:?the pull request commit}"
: "${HOOKCAGE_SRC:?a checkout of hookcage (its compose.yaml and the source of its images)}"
REVIEW_PROMPT=${REVIEW_PROMPT:-"Review this change: summarise it and point out anything risky."}

# What the repository's hooks may run: kept here, never read from the repository.
export HOOKCAGE_ALLOW_APPEND='sh $CLAUDE_PROJECT_DIR/.claude/hooks/guard.sh
sh $CLAUDE_PROJECT_DIR/.hookcage/context/run.sh
sh $CLAUDE_PROJECT_DIR/.hookcage/notes/run.sh
node $CLAUDE_PROJECT_DIR/.hookcage/lint/hook.js'

# The service's settings (compose.yaml reads them from the environment).
export HOOKCAGE_WORKSPACE="$PWD"          # mounted at this same path in the service and the hooks
export HOOKCAGE_TOKEN="$(python3 -c 'import secrets; print(secrets.token_urlsafe(32))')"
export HOOKCAGE_PORT="${HOOKCAGE_PORT:-8787}"
export COMPOSE_PROJECT_NAME="hookcage-ci-${CI_JOB_ID:-$$}"
state="$(mktemp -d)"                       # outside the checkout
export HOOKCAGE_CONFIG="$state/config"     # the service's /etc/hookcage: the trust export goes there
mkdir -p "$HOOKCAGE_CONFIG"
compose="${HOOKCAGE_COMPOSE:-docker-compose} -f $HOOKCAGE_SRC/compose.yaml"
trap '$compose down -v --remove-orphans >/dev/null 2>&1 || true; rm -rf "$state"' EXIT

(cd "$HOOKCAGE_SRC" && hookcage image build --service)

# 1. The base branch: review its hooks in the service's own image, settings and paths; export.
git checkout --quiet --force --detach "$BASE_SHA"
$compose run --rm --no-deps -T -w "$HOOKCAGE_WORKSPACE" -e HOOKCAGE_HOME=/var/lib/hookcage/review \
  --entrypoint sh hookcage -c 'hookcage trust --all --yes >&2 && hookcage trust export' \
  > "$HOOKCAGE_CONFIG/trust.json"

# 2. The pull request, at the same path: the service trusts only that export.
git checkout --quiet --force --detach "$HEAD_SHA"
HOOKCAGE_TRUST_FILE=/etc/hookcage/trust.json $compose up -d hookcage
python3 - "$HOOKCAGE_PORT" <<'WAIT'   # until it answers (2 minutes at most)
import sys, time, urllib.request
for _ in range(120):
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/health", timeout=2)
        break
    except OSError:
        time.sleep(1)
else:
    sys.exit(f"the hookcage service did not answer on port {sys.argv[1]}")
WAIT
$compose exec -T hookcage hookcage trust --fetch-only --project "$HOOKCAGE_WORKSPACE"

# 3. The agent, here on the CI machine: every hook event goes to the service.
HOME="$state" HOOKCAGE_HOME="$state/agent" hookcage install claude >/dev/null
PATH="$state/.local/bin:$PATH" HOOKCAGE_URL="http://127.0.0.1:$HOOKCAGE_PORT" \
  claude -p "$REVIEW_PROMPT" --allowedTools "Bash(git diff:*)"

# 4. What ran and what did not (the service's run log).
$compose exec -T hookcage hookcage report --format junit > "${HOOKCAGE_JUNIT:-hookcage-junit.xml}"
$compose exec -T hookcage hookcage report --fail-on untrusted,error,timeout
