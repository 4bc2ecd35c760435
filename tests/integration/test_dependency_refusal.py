"""Issue 21, class 1: the review runs no repository code on the host (docs/dependencies.md).

Through the real CLI, against the real engine, with no network: a repository whose
uv scripts name their dependencies by ``file://`` URL and by ``./path`` (pip would
build either on the reviewing user's machine, running the archive's build backend,
``--only-binary`` notwithstanding), whose Node package names a GitHub shorthand
(``evil/repo``, a git checkout to npm), and one honest neighbour hook. The archive's
backend writes a marker on the host when it runs: it must never exist.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from pkgfixtures import sdist, wheel
from support import CliUser

pytestmark = pytest.mark.docker

UV_HOOK = """#!/usr/bin/env -S uv run --script
# /// script
# dependencies = [%s]
# ///
import json, sys
sys.stdin.read()
%s
print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse", "additionalContext": CONTEXT}}))
"""
NEIGHBOUR = ("#!/bin/sh\ncat >/dev/null\n"
             "echo '{\"hookSpecificOutput\": {\"hookEventName\": \"PreToolUse\", \"additionalContext\": \"neighbour ran\"}}'\n")
NODE_GUARD = "require('evil');\n"


class Repo(CliUser):
    def __init__(self, tmp: Path, root: Path) -> None:
        super().__init__(tmp, root, "deps")
        self.marker = tmp / "MARKER"  # outside the project: only code on the host can write it
        # No index but a local folder, and none of the user's pip configuration: nothing leaves the machine.
        self.index = tmp / "index"
        self.index.mkdir()
        self.env.update(PIP_CONFIG_FILE="/dev/null", PIP_NO_INDEX="1", PIP_FIND_LINKS=str(self.index))
        (root / "vendor").mkdir()
        self.archive = sdist(root / "vendor", self.marker)

    def script(self, name: str, text: str) -> str:
        """A script in a folder of its own: a hook's subject covers its script's folder."""
        path = self.hookdir / name
        path.parent.mkdir(exist_ok=True)
        path.parent.chmod(0o755)
        path.write_text(text)
        path.chmod(0o755)
        return f"./.hookcage/{name}"

    def hooks(self, *commands: str) -> None:
        handlers = [{"type": "command", "command": c} for c in commands]
        (self.hookdir / "hooks.json").write_text(json.dumps({"hooks": {"PreToolUse": [{"hooks": handlers}]}}))
        self.allow(*commands)

    def dispatch(self) -> subprocess.CompletedProcess[str]:
        payload = {"session_id": self.session, "cwd": str(self.root), "hook_event_name": "PreToolUse",
                   "tool_name": "Bash", "tool_input": {"command": "ls"}}
        return self.run("dispatch", "PreToolUse", stdin=json.dumps(payload))


def uv_hook(*deps: str, body: str = "CONTEXT = 'ran'") -> str:
    return UV_HOOK % (", ".join(json.dumps(d) for d in deps), body)


def context(proc: subprocess.CompletedProcess[str]) -> tuple[str, str]:
    assert proc.returncode == 0, proc.stderr
    out: dict[str, Any] = json.loads(proc.stdout)
    return out.get("hookSpecificOutput", {}).get("additionalContext", ""), out.get("systemMessage", "")


@pytest.fixture
def repo(tmp_path: Path, workspace: Path, runner_image: str) -> Repo:
    return Repo(tmp_path, workspace)


def test_url_path_and_git_dependencies_are_refused_at_review_and_nothing_runs_on_the_host(repo: Repo) -> None:
    by_url = repo.script("url/by_url.py", uv_hook(f"evil @ {repo.archive.as_uri()}"))
    by_path = repo.script("path/by_path.py", uv_hook("./vendor/evil-1.0.tar.gz"))
    by_name = repo.script("name/by_name.py", uv_hook("evil-1.0.tar.gz"))  # a valid PEP 508 name pip takes for a file
    node = repo.hookdir / "node"
    node.mkdir()
    (node / "package.json").write_text(json.dumps({"dependencies": {"evil": "evil/repo"}}))
    (node / "guard.js").write_text(NODE_GUARD)
    by_git = 'node "$CLAUDE_PROJECT_DIR"/.hookcage/node/guard.js'
    neighbour = repo.script("ok/neighbour.sh", NEIGHBOUR)
    repo.hooks(by_url, by_path, by_name, by_git, neighbour)

    review = repo.run("trust", "--all", "--yes")
    assert review.returncode == 1
    assert not repo.marker.exists()
    refusals = [line for line in review.stderr.splitlines() if line.startswith("cannot review")]
    assert len(refusals) == 4, review.stderr
    for needle in (f"by_url.py: dependency 'evil @ {repo.archive.as_uri()}' names a URL (file)",
                   "by_path.py: dependency './vendor/evil-1.0.tar.gz' is not a requirement by name",
                   "by_name.py: dependency 'evil-1.0.tar.gz' names an archive file",
                   ".hookcage/node/package.json: evil@evil/repo: a git dependency (GitHub shorthand owner/repo)"):
        assert sum(needle in line for line in refusals) == 1, (needle, refusals)
    assert "trusted 1 of 1 hook(s)" in review.stdout  # the neighbour, unaffected

    ran, said = context(repo.dispatch())
    assert ran == "neighbour ran"
    assert "4 project hooks not run: not trusted yet" in said
    # and why, so `hookcage trust` is not suggested in vain
    assert "dependencies refused: .hookcage/url/by_url.py: dependency 'evil @ file:" in said
    assert "dependencies refused: .hookcage/node/package.json: evil@evil/repo" in said
    assert not repo.marker.exists()


def test_a_wheel_that_depends_on_a_source_archive_by_url_builds_nothing_on_the_host(repo: Repo) -> None:
    """The index's own wheel names the archive (Requires-Dist: evil @ file://...): the review lets the
    name through, pip resolves it by building the archive, and the guard stops pip before its code runs."""
    wheel(repo.index, "top", [f"evil @ {repo.archive.as_uri()}"])
    hook = repo.script("uses/guard.py", uv_hook("top"))
    repo.hooks(hook)
    review = repo.run("trust", "--all", "--yes")
    assert review.returncode == 1
    assert not repo.marker.exists()
    assert "NOT fetched" in review.stderr and "a dependency is not a wheel from the index" in review.stderr
    _, said = context(repo.dispatch())
    assert "could not be fetched at review" in said and "not run" in said
    assert not repo.marker.exists()


def test_wheels_from_the_index_are_still_fetched_and_used(repo: Repo) -> None:
    wheel(repo.index, "leaf", [], {"__init__.py": "VALUE = 42\n"})
    wheel(repo.index, "top", ["leaf>=1"], {"__init__.py": "from leaf import VALUE\n"})
    hook = repo.script("uses/guard.py", uv_hook("top", body="import top\nCONTEXT = f'top says {top.VALUE}'"))
    repo.hooks(hook)
    review = repo.run("trust", "--all", "--yes")
    assert review.returncode == 0, review.stdout + review.stderr
    assert "pip may start no process here, so nothing is built" in review.stdout
    ran = repo.dispatch()
    assert context(ran)[0] == "top says 42", ran.stdout


def test_a_hook_trusted_elsewhere_still_fetches_nothing_of_a_url(repo: Repo) -> None:
    """CI's `trust --fetch-only` on a trust record made by hand (or by an older hookcage): the
    refused dependency is not handed to pip, the hook reports it instead of running."""
    from executor.executor import HookExecutor
    from executor.settings import load_settings

    hook = repo.script("url/by_url.py", uv_hook(f"evil @ {repo.archive.as_uri()}"))
    repo.hooks(hook)
    with pytest.MonkeyPatch.context() as env:
        for name in ("HOOKCAGE_HOME", "HOOKCAGE_MANAGED_DIR", "HOME"):
            env.setenv(name, repo.env[name])
        with HookExecutor(load_settings()) as executor:
            (spec,) = [h for h in executor.load(repo.root).hooks if h.command == hook]
            executor.grant([executor.trust_subject(spec, repo.root)])
    fetched = repo.run("trust", "--fetch-only")
    assert fetched.returncode == 1
    assert "NOT fetched" in fetched.stderr and f"evil @ {repo.archive.as_uri()}" in fetched.stderr
    assert not repo.marker.exists()
    _, said = context(repo.dispatch())
    assert "names a URL (file)" in said and "not run" in said
    assert not repo.marker.exists()


@pytest.mark.parametrize("manifest, lock, needle", [
    ({"bitbucket-dep": "bitbucket:evil/repo"}, None, "bitbucket-dep@bitbucket:evil/repo: a git dependency"),
    ({"gist-dep": "gist:0123abcd"}, None, "gist-dep@gist:0123abcd: a git dependency"),
    ({"semver-dep": "evil/repo#semver:^1.0"}, None, "semver-dep@evil/repo#semver:^1.0: a git dependency"),
    ({"alias": "npm:y@github:evil/repo"}, None, "alias@npm:y@github:evil/repo: the alias is not to a registry version"),
    ({"a": "^1.0.0"}, {"lockfileVersion": 3, "packages": {"": {"dependencies": {"a": "^1.0.0"}}, "node_modules/a": {
        "version": "1.0.0", "resolved": "git+ssh://git@github.com/evil/repo.git#0123abcd"}}},
     "package-lock.json: node_modules/a resolved 'git+ssh://git@github.com/evil/repo.git#0123abcd'"),
])
def test_node_git_specs_and_lock_entries_are_refused_at_review(
    repo: Repo, manifest: dict[str, str], lock: dict[str, Any] | None, needle: str
) -> None:
    node = repo.hookdir / "node"
    node.mkdir()
    node.chmod(0o755)
    (node / "package.json").write_text(json.dumps({"dependencies": manifest}))
    if lock is not None:
        (node / "package-lock.json").write_text(json.dumps(lock))
    (node / "guard.js").write_text(NODE_GUARD)
    command = 'node "$CLAUDE_PROJECT_DIR"/.hookcage/node/guard.js'
    repo.hooks(command)
    review = repo.run("trust", "--all", "--yes")
    assert review.returncode == 1
    (line,) = [ln for ln in review.stderr.splitlines() if ln.startswith("cannot review")]
    assert needle in line and "dependencies refused: .hookcage/node/package.json: " in line
    assert "1 hook(s) could not be reviewed (above) and stay untrusted" in review.stdout
    assert not (repo.home / "deps").exists()  # nothing fetched, no npm container made
