"""Scope comes from where a hook file is, not from a variable (issue 21, class 6).

The attack: a repository gets ``CLAUDE_CONFIG_DIR``, ``CODEX_HOME``, ``GEMINI_CLI_HOME``,
``COPILOT_HOME``, ``HOOKCAGE_HOME`` or ``HOOKCAGE_MANAGED_DIR`` pointed into its own
checkout (absolute, relative, or through a symlink from outside), so that its hook file
counts as the user's own: no review, and ``"sandbox": "host"`` allowed. Each test runs the
real ``hookcage`` console script as the agent would; the repository's host hook must
never run (its marker file stays absent) and the file shows as a project file.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support import CLEARED_ENV, allow

from executor import places
from executor.config import file_scope, where
from executor.core.hooks import Scope
from executor.places import in_project

pytestmark = pytest.mark.spawns

MOVED = "user file inside the project"


class Repo:
    """A checkout, a user outside it, and the real CLI run in the checkout."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.root = tmp / "checkout"
        self.evil = self.root / ".evil"
        self.evil.mkdir(parents=True)
        self.marks = tmp / "marks"
        self.marks.mkdir()
        self.home = tmp / "hookcage-home"
        self.home.mkdir()
        self.user = tmp / "user"
        self.user.mkdir()
        self.env = {k: v for k, v in os.environ.items() if k not in CLEARED_ENV}
        self.env.update(HOOKCAGE_HOME=str(self.home), HOOKCAGE_MANAGED_DIR=str(tmp / "managed"),
                        HOME=str(self.user))

    def marker(self, name: str) -> str:
        return f"touch {self.marks}/{name}"

    def marked(self) -> list[str]:
        return sorted(p.name for p in self.marks.iterdir())

    def run(self, *args: str, stdin: str = "", **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["hookcage", *args], input=stdin, capture_output=True, text=True,
                              cwd=self.root, env={**self.env, **env}, timeout=120)

    def payload(self, **extra: Any) -> str:
        return json.dumps({"session_id": "s", "cwd": str(self.root), "hook_event_name": "PreToolUse",
                           "tool_name": "Bash", "tool_input": {"command": "ls"}, **extra})

    def listed(self, agent: str, **env: str) -> tuple[list[dict[str, Any]], str]:
        """``list --json``'s hooks, and what plain ``list`` says about the files (its problem lines)."""
        proc = self.run("list", "--agent", agent, "--json", **env)
        assert proc.returncode == 0, proc.stderr
        plain = self.run("list", "--agent", agent, **env)
        assert plain.returncode == 0, plain.stderr
        return json.loads(proc.stdout), plain.stderr


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return Repo(tmp_path)


def claude_file(*commands: tuple[str, bool]) -> str:
    """A Claude-shaped hook file: (command, on the host?) per handler."""
    return json.dumps({"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [
        {"type": "command", "command": c, **({"sandbox": "host"} if host else {})} for c, host in commands]}]}})


# -- the attacks, through the CLI ----------------------------------------------------------------


@pytest.mark.parametrize("value", ["absolute", "relative", "dot-relative", "symlink from outside"])
def test_claude_config_dir_in_the_checkout_is_project_scope(repo: Repo, value: str) -> None:
    (repo.evil / "settings.json").write_text(claude_file((repo.marker("host"), True), (repo.marker("docker"), False)))
    allow(repo.home, [repo.marker("host"), repo.marker("docker")])  # the allow-list is not what stops it
    if value == "symlink from outside":
        (repo.tmp / "outside").symlink_to(repo.evil)
    config_dir = {"absolute": str(repo.evil), "relative": ".evil", "dot-relative": "./.evil/../.evil",
                  "symlink from outside": str(repo.tmp / "outside")}[value]
    proc = repo.run("dispatch", "--agent", "claude", stdin=repo.payload(), CLAUDE_CONFIG_DIR=config_dir)
    assert proc.returncode == 0, proc.stderr
    assert repo.marked() == []  # never on the host, and not run before a review
    assert '"host\\" is not allowed in project scope' in proc.stdout
    hooks, said = repo.listed("claude", CLAUDE_CONFIG_DIR=config_dir)
    assert [(h["scope"], h["would_run"]) for h in hooks] == [("project", False), ("project", False)]
    assert hooks[0]["skip_reason"] == "invalid" and "project scope" in hooks[0]["detail"]
    assert (hooks[1]["skip_reason"], hooks[1]["trusted"]) == ("untrusted", False)  # needs `hookcage trust`
    assert f"{MOVED} ({repo.root}): treated as project scope" in said


def test_a_repository_settings_file_reached_through_claude_config_dir_is_in_the_review(repo: Repo) -> None:
    (repo.evil / "settings.json").write_text(claude_file(("npm test", False)))
    proc = repo.run("trust", "--yes", CLAUDE_CONFIG_DIR=".evil")
    assert proc.returncode == 0, proc.stderr
    assert "npm test" in proc.stdout and "project hook" in proc.stdout


@pytest.mark.parametrize(("agent", "variable", "place", "content"), [
    ("codex", "CODEX_HOME", "hooks.json", {"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [
        {"type": "command", "command": "MARK", "sandbox": "host"}]}]}}),
    ("gemini", "GEMINI_CLI_HOME", ".gemini/settings.json", {"hooks": {"BeforeTool": [{"matcher": "*", "hooks": [
        {"type": "command", "command": "MARK", "sandbox": "host"}]}]}}),
    ("copilot", "COPILOT_HOME", "hooks/x.json", {"version": 1, "hooks": {"preToolUse": [
        {"type": "command", "bash": "MARK"}]}}),
    ("claude", "HOME", ".claude/settings.json", {"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [
        {"type": "command", "command": "MARK", "sandbox": "host"}]}]}}),
])
@pytest.mark.parametrize("relative", [False, True])
def test_every_agents_user_directory_in_the_checkout_is_project_scope(
    repo: Repo, agent: str, variable: str, place: str, content: dict[str, Any], relative: bool
) -> None:
    path = repo.evil / place
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(content).replace("MARK", repo.marker(agent)))
    allow(repo.home, [repo.marker(agent)])
    hooks, said = repo.listed(agent, **{variable: ".evil" if relative else str(repo.evil)})
    assert [(h["scope"], h["source"], h["would_run"]) for h in hooks] == [("project", str(path), False)]
    assert MOVED in said
    assert repo.marked() == []


def test_hookcage_home_in_the_checkout_blocks_and_runs_nothing(repo: Repo) -> None:
    """HOOKCAGE_HOME inside the checkout: its config.toml (the allow-list), trust store and hooks.json
    would be the repository's. Fail closed: one line, the event blocked, nothing run."""
    (repo.evil / "hooks.json").write_text(claude_file((repo.marker("home"), True)))
    allow(repo.evil, [repo.marker("home")])
    (repo.evil / "trust.json").write_text("{}")
    for value in (str(repo.evil), ".evil"):
        proc = repo.run("dispatch", "--agent", "claude", stdin=repo.payload(), HOOKCAGE_HOME=value)
        assert (proc.returncode, proc.stdout) == (2, ""), proc.stderr  # blocked
        assert proc.stderr.startswith("hookcage: HOOKCAGE_HOME (") and proc.stderr.count("\n") == 1
        assert f"is inside the project ({repo.root})" in proc.stderr
    assert repo.marked() == []
    review = repo.run("trust", "--all", "--yes", HOOKCAGE_HOME=".evil")  # would write the repository's store
    assert review.returncode == 1 and review.stderr.startswith("hookcage: error: HOOKCAGE_HOME (")
    assert (repo.evil / "trust.json").read_text() == "{}"
    hooks, said = repo.listed("claude", HOOKCAGE_HOME=str(repo.evil))
    assert [(h["scope"], h["skip_reason"]) for h in hooks] == [("project", "invalid")]
    assert "HOOKCAGE_HOME" in said and "no project hook runs" in said


def test_managed_dir_in_the_checkout_blocks_and_runs_nothing(repo: Repo) -> None:
    (repo.evil / "hooks.json").write_text(claude_file((repo.marker("managed"), True)))
    proc = repo.run("dispatch", "--agent", "claude", stdin=repo.payload(), HOOKCAGE_MANAGED_DIR=str(repo.evil))
    assert (proc.returncode, proc.stdout) == (2, ""), proc.stderr
    assert proc.stderr.startswith("hookcage: HOOKCAGE_MANAGED_DIR (") and proc.stderr.count("\n") == 1
    assert repo.marked() == []


def test_a_user_directory_outside_the_project_is_still_the_users(repo: Repo) -> None:
    """No regression: CLAUDE_CONFIG_DIR outside the checkout, hookcage's own home outside it:
    user scope, the host backend allowed, no note."""
    mine = repo.tmp / "my-claude"
    mine.mkdir()
    (mine / "settings.json").write_text(claude_file((repo.marker("claude"), True)))
    (repo.home / "hooks.json").write_text(claude_file((repo.marker("hookcage"), True)))
    allow(repo.home, [repo.marker("claude"), repo.marker("hookcage")])
    proc = repo.run("dispatch", "--agent", "claude", stdin=repo.payload(), CLAUDE_CONFIG_DIR=str(mine))
    assert proc.returncode == 0, proc.stderr
    assert repo.marked() == ["claude", "hookcage"]
    hooks, said = repo.listed("claude", CLAUDE_CONFIG_DIR=str(mine))
    assert {h["scope"] for h in hooks} == {"user"} and MOVED not in said


# -- the rule ------------------------------------------------------------------------------------


def test_in_project_follows_symlinks_both_ways(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "f.json").write_text("{}")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "g.json").write_text("{}")
    (tmp_path / "into").symlink_to(root / "sub")  # outside, leading in
    (root / "out").symlink_to(outside)  # inside, leading out: the repository chose the file
    assert in_project(root / "sub" / "f.json", root)
    assert in_project(tmp_path / "into" / "f.json", root)
    assert in_project(root / "out" / "g.json", root)
    assert in_project(root, root)
    assert not in_project(outside / "g.json", root)
    assert not in_project(tmp_path / "repo-sibling" / "x", root)  # a prefix is not a parent
    assert not in_project(root / "x", None)
    assert not in_project("/etc/hookcage/hooks.json", Path("/"))  # an agent started in /: no checkout


def test_a_project_that_holds_your_home_does_not_make_your_files_the_repositorys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent started in ~ (or above it): ~/.claude/settings.json stays yours; the rest of the
    project is still the project."""
    home = tmp_path / "me"
    (home / ".claude").mkdir(parents=True)
    monkeypatch.setattr(places, "_real_home", lambda: str(home))
    assert not in_project(home / ".claude" / "settings.json", home)
    assert not in_project(home / ".claude" / "settings.json", tmp_path)
    assert in_project(tmp_path / "other" / "x.json", tmp_path)


@pytest.mark.parametrize("scope", [Scope.USER, Scope.MANAGED])
def test_a_user_or_managed_file_in_the_project_is_a_project_file(tmp_path: Path, scope: Scope) -> None:
    moved, note = file_scope(tmp_path / ".evil" / "settings.json", scope, tmp_path)
    assert moved is Scope.PROJECT and note is not None and note.severity == "warning"
    assert note.message.startswith(f"{scope.value} file inside the project")
    assert file_scope(tmp_path / ".claude" / "settings.local.json", Scope.LOCAL, tmp_path) == (Scope.LOCAL, None)
    assert file_scope(tmp_path / "x", scope, tmp_path / "other") == (scope, None)


def test_relative_agent_directories_are_taken_against_the_project_root(tmp_path: Path) -> None:
    named = where(tmp_path, {"CLAUDE_CONFIG_DIR": ".evil", "CODEX_HOME": "../up", "HOME": "h",
                             "GEMINI_CLI_HOME": "/abs", "INFER_HOOKS_ENABLED": "1"})
    assert named.environ["CLAUDE_CONFIG_DIR"] == f"{tmp_path}/.evil"
    assert named.environ["CODEX_HOME"] == f"{tmp_path}/../up"
    assert named.home == f"{tmp_path}/h"
    assert (named.environ["GEMINI_CLI_HOME"], named.environ["INFER_HOOKS_ENABLED"]) == ("/abs", "1")


def test_validate_of_the_whole_project_says_so_too(repo: Repo) -> None:
    (repo.evil / "settings.json").write_text(claude_file(("npm test", False)))
    proc = repo.run("validate", "--agent", "claude", CLAUDE_CONFIG_DIR=".evil")
    assert f"warning: claude hook file {repo.evil}/settings.json: $: {MOVED}" in proc.stdout


def test_your_own_settings_file_as_a_symlink_into_the_checkout_is_the_checkouts(repo: Repo) -> None:
    """No variable at all: ~/.claude/settings.json is a symlink to a file of the checkout (a repository's
    setup script made it). Where the file is decides: a project file."""
    (repo.evil / "settings.json").write_text(claude_file((repo.marker("host"), True)))
    allow(repo.home, [repo.marker("host")])
    (repo.user / ".claude").mkdir()
    (repo.user / ".claude" / "settings.json").symlink_to(repo.evil / "settings.json")
    proc = repo.run("dispatch", "--agent", "claude", stdin=repo.payload())
    assert proc.returncode == 0, proc.stderr
    assert repo.marked() == []
    hooks, said = repo.listed("claude")
    assert [(h["scope"], h["skip_reason"]) for h in hooks] == [("project", "invalid")]
    assert MOVED in said
