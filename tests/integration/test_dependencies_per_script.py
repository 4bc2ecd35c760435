"""One broken dependency never blocks the others (issue 22), through the real CLI and engine.

The layout is disler/claude-code-hooks-mastery's, as users copy it: every hook
in ``.claude/hooks/`` with ``uv run`` command lines in ``.claude/settings.json``,
hooks with PEP 723 dependencies beside plain ``python3`` and ``bash`` hooks
that have none, and helper scripts under ``utils/`` that a hook only spawns on
some events, one of them with a dependency that cannot be had as wheels
(disler's ``utils/tts/openai_tts.py`` names ``openai[voice_helpers]``; here a
package that does not exist, so the test does not depend on PyPI's state) and
one with a dependency hookcage refuses to fetch (a URL).

Each hook's trust subject covers its whole folder, so every hook covers both
helpers. The helpers are named at review, by ``list`` and by ``doctor``, and
fail when a hook runs them, as on a machine without network; no hook is
refused or stopped for them. Each script's dependencies are fetched once, into
a cache of their own: a second review fetches nothing.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support import CliUser

pytestmark = pytest.mark.docker

PRE_TOOL_USE = """#!/usr/bin/env -S uv run --script
# /// script
# requires-python = ">=3.11"
# dependencies = ["python-dotenv==1.2.1"]
# ///
import json, re, sys
import dotenv  # from the cache, offline
data = json.load(sys.stdin)
command = data.get("tool_input", {}).get("command", "")
if re.search(r"\\brm\\s+-[a-z]*r[a-z]*f", command):
    print("BLOCKED: Dangerous rm command detected and prevented", file=sys.stderr)
    sys.exit(2)
sys.exit(0)
"""

STOP = """#!/usr/bin/env -S uv run --script
# /// script
# requires-python = ">=3.11"
# dependencies = ["python-dotenv==1.2.1"]
# ///
import json, subprocess, sys
from pathlib import Path
json.load(sys.stdin)
# disler's stop.py announces completion through a TTS helper, and carries on when it fails
tts = Path(__file__).parent / "utils" / "tts" / "openai_tts.py"
done = subprocess.run(["uv", "run", str(tts), "done"], capture_output=True, timeout=60)
print(json.dumps({"systemMessage": f"tts helper exit {done.returncode}"}))
sys.exit(0)
"""

OPENAI_TTS = """#!/usr/bin/env -S uv run --script
# /// script
# requires-python = ">=3.11"
# dependencies = ["hookcage-no-such-package[voice_helpers]==9.9", "python-dotenv==1.2.1"]
# ///
import sys
print("spoken", sys.argv[1:])
"""

REFUSED_HELPER = """#!/usr/bin/env -S uv run --script
# /// script
# dependencies = ["evil @ https://example.invalid/evil-1.0.tar.gz"]
# ///
print("never")
"""

BASH_VALIDATOR = """#!/usr/bin/env python3
import json, sys
data = json.load(sys.stdin)
command = data.get("tool_input", {}).get("command", "")
if command.startswith("grep "):
    print("Use 'rg' (ripgrep) instead of 'grep' for better performance", file=sys.stderr)
    sys.exit(2)
"""

VALIDATE_WRITE = """#!/bin/bash
input=$(cat)
path=$(echo "$input" | jq -r '.tool_input.file_path // empty')
case "$path" in
  *.env|*/.env) echo "refusing to write $path" >&2; exit 2 ;;
esac
exit 0
"""


class Repo(CliUser):
    def __init__(self, tmp: Path, root: Path) -> None:
        super().__init__(tmp, root, "per-script")
        hooks = root / ".claude" / "hooks"
        for path, text in {
            "pre_tool_use.py": PRE_TOOL_USE, "stop.py": STOP, "bash_command_validator_example.py": BASH_VALIDATOR,
            "validate-write.sh": VALIDATE_WRITE, "utils/tts/openai_tts.py": OPENAI_TTS,
            "utils/llm/remote.py": REFUSED_HELPER,
        }.items():
            file = hooks / path
            file.parent.mkdir(parents=True, exist_ok=True)
            file.write_text(text)
            file.chmod(0o755)
        for folder in [root / ".claude", *hooks.rglob("*")]:
            if folder.is_dir():
                folder.chmod(0o755)
        project = "$CLAUDE_PROJECT_DIR"
        settings = {"hooks": {
            "PreToolUse": [
                {"matcher": "", "hooks": [{"type": "command", "command": f"uv run {project}/.claude/hooks/pre_tool_use.py"}]},
                {"matcher": "Bash", "hooks": [{"type": "command",
                                               "command": f"python3 {project}/.claude/hooks/bash_command_validator_example.py"}]},
                {"matcher": "Write|Edit", "hooks": [{"type": "command",
                                                     "command": f"{project}/.claude/hooks/validate-write.sh"}]},
            ],
            "Stop": [{"hooks": [{"type": "command", "command": f"uv run {project}/.claude/hooks/stop.py"}]}],
        }}
        (root / ".claude" / "settings.json").write_text(json.dumps(settings, indent=2))
        (root / ".claude" / "settings.json").chmod(0o644)

    def dispatch(self, event: str, **fields: Any) -> dict[str, Any]:
        payload = {"session_id": self.session, "cwd": str(self.root), "hook_event_name": event, **fields}
        proc = self.run("dispatch", event, stdin=json.dumps(payload))
        assert proc.returncode == 0, proc.stderr
        out: dict[str, Any] = json.loads(proc.stdout or "{}")
        return out


def _pypi_reachable() -> None:
    probe = subprocess.run(["python", "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                            "-d", "/tmp/hookcage-pypi-probe", "python-dotenv==1.2.1"],
                           capture_output=True, text=True, timeout=120)
    if probe.returncode != 0:
        pytest.skip(f"PyPI cannot be reached from here: {probe.stderr.strip().splitlines()[-1:]}")


@pytest.fixture(scope="module")
def trusted(tmp_path_factory: pytest.TempPathFactory, runner_image: str) -> tuple[Repo, Any, Any]:
    """The repository, reviewed twice as a user would: (repo, first review, second review)."""
    _pypi_reachable()
    tmp = tmp_path_factory.mktemp("per-script")
    root = tmp / "repo"
    root.mkdir()
    repo = Repo(tmp, root)
    repo.allow(*(f"uv run {root}/.claude/hooks/{name}" for name in ("pre_tool_use.py", "stop.py")),
               f"python3 {root}/.claude/hooks/bash_command_validator_example.py",
               f"{root}/.claude/hooks/validate-write.sh")
    first = repo.run("trust", "--all", "--yes", timeout=900)
    second = repo.run("trust", "--all", "--yes", timeout=900)
    return repo, first, second


def test_every_hook_is_trusted_and_the_broken_helpers_are_named(trusted: tuple[Repo, Any, Any]) -> None:
    _, first, _ = trusted
    assert first.returncode == 0, first.stdout + first.stderr
    assert "trusted 4 of 4 hook(s)" in first.stdout
    assert "cannot review" not in first.stderr
    # the review shows the helpers for what they are
    assert "dependencies of a helper script (the hook's command does not name it): uv script " \
           ".claude/hooks/utils/tts/openai_tts.py" in first.stdout
    assert ".claude/hooks/utils/llm/remote.py: dependency 'evil @ https://example.invalid/evil-1.0.tar.gz'" \
           in first.stdout
    # and names each broken one once, not once per hook
    warnings = [line for line in first.stderr.splitlines() if line.startswith("warning: helper script")]
    assert len(warnings) == 2, first.stderr
    assert any(".claude/hooks/utils/tts/openai_tts.py" in w and "hookcage-no-such-package" in w for w in warnings)
    assert any(".claude/hooks/utils/llm/remote.py" in w for w in warnings)
    # each script's wheels were fetched once, however many hooks cover it
    assert first.stdout.count("fetching wheels for uv script .claude/hooks/pre_tool_use.py") == 1
    assert first.stdout.count("fetching wheels for uv script .claude/hooks/stop.py") == 1
    assert first.stdout.count("fetching wheels for uv script .claude/hooks/utils/tts/openai_tts.py") == 1


def test_a_second_review_fetches_nothing(trusted: tuple[Repo, Any, Any]) -> None:
    _, _, second = trusted
    assert second.returncode == 0, second.stdout + second.stderr
    assert "nothing to review" in second.stdout
    assert "fetching wheels" not in second.stdout and "installing" not in second.stdout
    assert "warning: helper script .claude/hooks/utils/tts/openai_tts.py" in second.stderr  # still named


def test_guards_with_and_without_dependencies_answer(trusted: tuple[Repo, Any, Any]) -> None:
    repo = trusted[0]
    rm = repo.dispatch("PreToolUse", tool_name="Bash", tool_input={"command": "rm -rf /"})
    assert rm["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert "Dangerous rm command" in rm["hookSpecificOutput"]["permissionDecisionReason"]
    grep = repo.dispatch("PreToolUse", tool_name="Bash", tool_input={"command": "grep -r x ."})
    assert grep["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert "ripgrep" in grep["hookSpecificOutput"]["permissionDecisionReason"]
    env = repo.dispatch("PreToolUse", tool_name="Write", tool_input={"file_path": f"{repo.root}/.env", "content": "x"})
    assert env["hookSpecificOutput"]["permissionDecision"] == "deny"
    ok = repo.dispatch("PreToolUse", tool_name="Bash", tool_input={"command": "ls"})
    assert "permissionDecision" not in ok.get("hookSpecificOutput", {}), ok
    assert "not run" not in json.dumps(ok)


def test_the_hook_that_spawns_the_broken_helper_runs_and_the_helper_fails_as_offline(
    trusted: tuple[Repo, Any, Any]
) -> None:
    repo = trusted[0]
    out = repo.dispatch("Stop", stop_hook_active=False)
    assert out.get("decision") != "block" and out.get("continue") is not False, out
    message = out.get("systemMessage", "")
    assert "tts helper exit" in message and "tts helper exit 0" not in message, out


def test_list_and_doctor_name_the_helper(trusted: tuple[Repo, Any, Any]) -> None:
    repo = trusted[0]
    listed = repo.run("list", "--agent", "claude")
    assert listed.returncode == 0, listed.stderr
    assert "dependencies: helper .claude/hooks/utils/tts/openai_tts.py: could not be fetched" in listed.stdout
    assert "dependencies: helper .claude/hooks/utils/llm/remote.py: refused" in listed.stdout
    assert "dependencies: uv script .claude/hooks/pre_tool_use.py: python-dotenv==1.2.1 (requires-python >=3.11): " \
           "ready" in listed.stdout
    assert "dependencies: helper uv script .claude/hooks/stop.py" not in listed.stdout  # ready helpers: --json
    as_json = json.loads(repo.run("list", "--json", "--agent", "claude").stdout)
    tts = [d for view in as_json for d in view["dependencies"] if d["path"].endswith("openai_tts.py")]
    assert tts and not any(d["own"] or d["ready"] for d in tts)
    assert all(view["would_run"] for view in as_json), as_json
    doctor = repo.run("doctor", timeout=300)
    assert "dependencies: helper .claude/hooks/utils/tts/openai_tts.py: could not be fetched" in doctor.stdout
    assert "a helper script: the hooks run, it fails if one runs it" in doctor.stdout


def test_a_hook_whose_own_script_cannot_be_had_is_still_refused_or_reported(tmp_path: Path, runner_image: str) -> None:
    """The hook's own script (its command names it) with a refused dependency stays untrusted."""
    root = tmp_path / "repo"
    root.mkdir()
    repo = Repo(tmp_path, root)
    settings = {"hooks": {"PreToolUse": [{"hooks": [{"type": "command",
                                                     "command": "uv run $CLAUDE_PROJECT_DIR/.claude/hooks/utils/llm/remote.py"}]}]}}
    (root / ".claude" / "settings.json").write_text(json.dumps(settings))
    review = repo.run("trust", "--all", "--yes")
    assert review.returncode == 1
    assert "cannot review" in review.stderr and "dependencies refused: .claude/hooks/utils/llm/remote.py" in review.stderr
