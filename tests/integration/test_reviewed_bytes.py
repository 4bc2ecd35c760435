"""What runs is exactly what was reviewed (issue 11, section 2), as an attacker would try it.

Each test plays a hostile repository: hooks in ``.hookcage/hooks.json``, the
user's ``hookcage allow`` entries and ``hookcage trust --all --yes``, then
``hookcage dispatch`` through the real CLI against the real engine. The
attack must fail: the unreviewed bytes never run (``EVIL`` never appears).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from support import CliUser, allow

pytestmark = pytest.mark.docker
HOOKCAGE = shutil.which("hookcage")


class Repo(CliUser):
    """A hostile repository and a user (an isolated HOOKCAGE_HOME) running hookcage in it."""

    def __init__(self, tmp: Path, root: Path) -> None:
        super().__init__(tmp, root, "reviewed")
        # What the agent gives hookcage: the project dir, whatever folder it is in.
        self.env["CLAUDE_PROJECT_DIR"] = str(root)

    def file(self, relative: str, text: str, mode: int = 0o644) -> Path:
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        for parent in (path.parent, *path.parent.parents):
            if parent == self.root.parent:
                break
            parent.chmod(0o755)
        path.write_text(text)
        path.chmod(mode)
        return path

    def hooks(self, *handlers: dict[str, Any], event: str = "UserPromptSubmit") -> None:
        group = {"hooks": [{"type": "command", **h} for h in handlers]}
        self.file(".hookcage/hooks.json", json.dumps({"hooks": {event: [group]}}))

    def trust(self) -> subprocess.CompletedProcess[str]:
        proc = self.run("trust", "--all", "--yes")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc

    def payload(self, cwd: Path | None = None) -> str:
        return json.dumps({"session_id": self.session, "cwd": str(cwd or self.root),
                           "hook_event_name": "UserPromptSubmit", "prompt": "hi"})

    def dispatch(self, cwd: Path | None = None) -> dict[str, Any]:
        proc = self.run("dispatch", "UserPromptSubmit", stdin=self.payload(cwd), cwd=cwd)
        assert proc.returncode == 0, proc.stderr
        out: dict[str, Any] = json.loads(proc.stdout)
        return out


def context(out: dict[str, Any]) -> str:
    return str(out.get("hookSpecificOutput", {}).get("additionalContext", ""))


@pytest.fixture
def repo(tmp_path: Path, workspace: Path, runner_image: str) -> Repo:
    if HOOKCAGE is None:
        pytest.fail("the hookcage console script is not installed")
    return Repo(tmp_path, workspace)


# --------------------------------------------------------------------------
# References resolve against the project root, never the payload's cwd
# --------------------------------------------------------------------------

@pytest.mark.parametrize(("command", "script", "text"), [
    # the example of the issue
    ("sh .hookcage/check.sh", ".hookcage/check.sh", "echo {}\n"),
    ("./.hookcage/check.sh", ".hookcage/check.sh", "#!/bin/sh\necho {}\n"),
    ("bash .hookcage/check.sh", ".hookcage/check.sh", "echo {}\n"),
    ("python3 .hookcage/check.py", ".hookcage/check.py", "print('{}')\n"),
    ("sh check.sh", "check.sh", "echo {}\n"),
])
def test_a_relative_reference_runs_the_reviewed_file_whatever_the_payload_cwd(
    repo: Repo, command: str, script: str, text: str
) -> None:
    repo.file(script, text.format("reviewed"), 0o755)
    repo.file(f"src/{script}", text.format("EVIL"), 0o755)  # what the payload's cwd would resolve to
    repo.hooks({"command": command})
    allow(repo.home, [command])
    repo.trust()
    out = repo.dispatch(cwd=repo.root / "src")
    assert context(out) == "reviewed", out
    assert "EVIL" not in json.dumps(out)


def test_a_bare_script_added_after_the_review_is_a_change(repo: Repo) -> None:
    repo.hooks({"command": "sh check.sh || echo none"})
    allow(repo.home, ["sh check.sh || echo none"])
    repo.trust()  # check.sh did not exist: reviewed as missing
    repo.file("check.sh", "echo EVIL\n")
    out = repo.dispatch()
    assert "EVIL" not in json.dumps(out)
    assert "not trusted" in out["systemMessage"]


def test_a_relative_path_after_cd_cannot_be_trusted(repo: Repo) -> None:
    repo.file(".hookcage/check.sh", "echo reviewed\n")
    repo.file("src/.hookcage/check.sh", "echo EVIL\n")
    repo.hooks({"command": "cd src && sh .hookcage/check.sh"})
    allow(repo.home, ["cd src && sh .hookcage/check.sh"])
    review = repo.run("trust", "--all", "--yes")
    assert "comes after `cd`" in review.stdout + review.stderr
    out = repo.dispatch()
    assert "EVIL" not in json.dumps(out)
    assert "not trusted" in out["systemMessage"]


# --------------------------------------------------------------------------
# A repository's hook env cannot change which bytes run
# --------------------------------------------------------------------------

def test_a_project_hook_cannot_put_the_repository_on_path(repo: Repo) -> None:
    repo.file("tools/jq", "#!/bin/sh\necho EVIL\n", 0o755)
    repo.hooks({"command": "jq -rn '\"clean\"'", "env": {"PATH": "tools:/usr/bin:/bin"}})
    allow(repo.home, ["jq *"])
    repo.run("trust", "--all", "--yes")
    out = repo.dispatch()
    assert "EVIL" not in json.dumps(out)
    assert ".env.PATH: not allowed in project scope" in out["systemMessage"]
    assert "hooks.json" in out["systemMessage"]


def test_a_project_hook_cannot_redefine_the_project_dir(repo: Repo) -> None:
    guard = "sh $CLAUDE_PROJECT_DIR/.hookcage/guard.sh"
    repo.file(".hookcage/guard.sh", "echo reviewed\n")
    repo.file("${CLAUDE_PROJECT_DIR}/.hookcage/guard.sh", "echo EVIL\n")
    repo.hooks({"command": guard, "env": {"CLAUDE_PROJECT_DIR": "${CLAUDE_PROJECT_DIR}"}})
    allow(repo.home, [guard])
    repo.run("trust", "--all", "--yes")
    out = repo.dispatch()
    assert "EVIL" not in json.dumps(out)
    assert ".env.CLAUDE_PROJECT_DIR: not allowed in project scope" in out["systemMessage"]


@pytest.mark.parametrize(("name", "value", "command"), [
    ("PYTHONPATH", "tools", "python3 -c 'import json; print(json.dumps(\"clean\"))'"),
    ("BASH_ENV", "tools/env.sh", "bash -c 'echo clean'"),
    ("LD_PRELOAD", "tools/evil.so", "echo clean"),
    ("NODE_OPTIONS", "--require ./tools/evil.js", "echo clean"),
    ("HOME", ".", "git config --get alias.x || echo clean"),
])
def test_a_project_hook_cannot_set_loader_variables(repo: Repo, name: str, value: str, command: str) -> None:
    repo.file("tools/json.py", "print('EVIL')\n")
    repo.file("tools/env.sh", "echo EVIL\n")
    repo.hooks({"command": command, "env": {name: value}})
    allow(repo.home, [command])
    repo.run("trust", "--all", "--yes")
    out = repo.dispatch()
    assert "EVIL" not in json.dumps(out)
    assert f".env.{name}: not allowed in project scope" in out["systemMessage"]


def test_hookcages_own_values_win_over_a_user_hooks_env(repo: Repo) -> None:
    (repo.home / "hooks.json").write_text(json.dumps({"hooks": {"UserPromptSubmit": [{"hooks": [{
        "type": "command", "command": "echo \"$CLAUDE_PROJECT_DIR\"",
        "env": {"CLAUDE_PROJECT_DIR": "/elsewhere"}}]}]}}))
    allow(repo.home, ['echo "$CLAUDE_PROJECT_DIR"'])
    assert context(repo.dispatch()) == str(repo.root)


# --------------------------------------------------------------------------
# The hashed bytes for the whole run: a checkout during the run changes nothing
# --------------------------------------------------------------------------

def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                   check=True, capture_output=True)


def swap_by_checkout(repo: Repo) -> None:
    git(repo.root, "checkout", "-q", "evil")


def swap_by_rename(repo: Repo) -> None:
    new = repo.root / ".hookcage" / "new"
    new.write_text("echo EVIL-rename\n")
    new.chmod(0o644)
    os.replace(new, repo.root / ".hookcage" / "check.sh")


def swap_the_folder(repo: Repo) -> None:
    folder = repo.root / ".hookcage"
    folder.rename(repo.root / ".hookcage-old")
    folder.mkdir(mode=0o755)
    shutil.copy(repo.root / ".hookcage-old" / "hooks.json", folder / "hooks.json")
    (folder / "check.sh").write_text("echo EVIL-folder\n")


def swap_in_place(repo: Repo) -> None:
    (repo.root / ".hookcage" / "check.sh").write_text("echo EVIL-in-place\n")


@pytest.mark.parametrize("swap", [swap_by_checkout, swap_by_rename, swap_the_folder, swap_in_place])
@pytest.mark.parametrize("delay", [0.0, 1.5])
def test_swapping_the_script_during_the_run_changes_nothing(
    repo: Repo, docker_api: Any, swap: Any, delay: float
) -> None:
    command = "sleep 3; sh $CLAUDE_PROJECT_DIR/.hookcage/check.sh"
    repo.hooks({"command": command})
    repo.file(".hookcage/check.sh", "echo EVIL-checkout\n")
    git(repo.root, "init", "-q")
    git(repo.root, "add", "-A")
    git(repo.root, "commit", "-qm", "evil")
    git(repo.root, "branch", "evil")
    repo.file(".hookcage/check.sh", "echo reviewed\n")
    git(repo.root, "commit", "-qam", "reviewed")
    allow(repo.home, [command])
    repo.trust()
    assert HOOKCAGE is not None
    payload = repo.home / "payload.json"
    payload.write_text(repo.payload())
    with payload.open() as stdin:
        proc = subprocess.Popen([HOOKCAGE, "dispatch", "UserPromptSubmit"], stdin=stdin,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                cwd=repo.root, env=repo.env)
    # Swap once the hook's container runs (delay 0: at once; 1.5: while the hook sleeps).
    deadline = time.monotonic() + 60
    while not docker_api.containers(filters={"label": f"hookcage.session={repo.session}"}):
        assert time.monotonic() < deadline and proc.poll() is None, "the hook's container never started"
        time.sleep(0.05)
    time.sleep(delay)
    swap(repo)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    out = json.loads(stdout)
    assert context(out) == "reviewed", out


# --------------------------------------------------------------------------
# Code a reviewed script loads is reviewed too
# --------------------------------------------------------------------------

SOURCING = '. "$(dirname "$0")/lib.sh"\necho "$MESSAGE"\n'


@pytest.mark.parametrize(("files", "command", "change"), [
    # the example of the issue: a script that sources lib.sh beside it
    ({".hookcage/check.sh": SOURCING, ".hookcage/lib.sh": "MESSAGE=reviewed\n"},
     "sh $CLAUDE_PROJECT_DIR/.hookcage/check.sh", (".hookcage/lib.sh", "MESSAGE=EVIL\n")),
    # a Python guard importing a module from its own folder (as our suite's guard does)
    ({".hookcage/guard.py": "import shell_text\nprint(shell_text.WORD)\n",
      ".hookcage/shell_text.py": "WORD = 'reviewed'\n"},
     "python3 $CLAUDE_PROJECT_DIR/.hookcage/guard.py", (".hookcage/shell_text.py", "WORD = 'EVIL'\n")),
    # a Node hook requiring a relative file
    ({".hookcage/hook.js": "console.log(require('./lib/word').word)\n",
      ".hookcage/lib/word.js": "exports.word = 'reviewed'\n"},
     "node $CLAUDE_PROJECT_DIR/.hookcage/hook.js", (".hookcage/lib/word.js", "exports.word = 'EVIL'\n")),
    # a script at the root sourcing a file by a literal path elsewhere in the project
    ({"hook.sh": ". scripts/common.sh\necho \"$MESSAGE\"\n", "scripts/common.sh": "MESSAGE=reviewed\n"},
     "sh hook.sh", ("scripts/common.sh", "MESSAGE=EVIL\n")),
    # a file added beside the script after the review (dynamic loads: the folder rule)
    ({".hookcage/check.sh": 'for f in "$(dirname "$0")"/*.inc; do [ -e "$f" ] && . "$f"; done\necho "${MESSAGE:-reviewed}"\n'},
     "sh $CLAUDE_PROJECT_DIR/.hookcage/check.sh", (".hookcage/late.inc", "MESSAGE=EVIL\n")),
])
def test_a_changed_file_a_script_loads_needs_review_again(
    repo: Repo, files: dict[str, str], command: str, change: tuple[str, str]
) -> None:
    for path, text in files.items():
        repo.file(path, text)
    repo.hooks({"command": command})
    allow(repo.home, [command])
    review = repo.trust()
    for path in files:
        assert path in review.stdout  # shown at review
    assert context(repo.dispatch()) == "reviewed"
    repo.file(*change)
    out = repo.dispatch()
    assert "EVIL" not in json.dumps(out)
    assert "not trusted" in out["systemMessage"]
    assert change[0] in repo.trust().stdout
    assert "EVIL" in context(repo.dispatch())  # reviewed now: it runs as reviewed


def test_swapping_the_script_during_a_warm_run_changes_nothing(
    repo: Repo, docker_api: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The daemon's path: a pooled container lays its reviewed files as an overlay too."""
    import threading

    from executor.executor import HookExecutor
    from executor.sandbox.pool import PooledDockerSandbox
    from executor.settings import load_settings

    command = "sleep 3; sh $CLAUDE_PROJECT_DIR/.hookcage/check.sh"
    repo.hooks({"command": command})
    repo.file(".hookcage/check.sh", "echo reviewed\n")
    allow(repo.home, [command])
    repo.trust()
    monkeypatch.setenv("HOOKCAGE_HOME", str(repo.home))
    monkeypatch.setenv("HOOKCAGE_MANAGED_DIR", repo.env["HOOKCAGE_MANAGED_DIR"])
    pool = PooledDockerSandbox(client=docker_api, image=load_settings().image or None, idle_timeout=60,
                               labels={"hookcage.test-session": os.environ["HOOKCAGE_TEST_SESSION"]})
    payload = json.loads(repo.payload())
    contexts = []
    try:
        with HookExecutor(load_settings(), sandboxes={"docker": pool},
                          environ={"CLAUDE_PROJECT_DIR": str(repo.root)}) as executor:
            for _ in range(3):
                script = repo.root / ".hookcage" / "check.sh"
                script.write_text("echo reviewed\n")
                swapper = threading.Timer(1.0, swap_by_rename, args=(repo,))
                swapper.start()
                contexts.append(executor.dispatch("UserPromptSubmit", payload).additional_context)
                swapper.join()
                time.sleep(1.0)  # the pool refills between events
            assert pool.stats().warm >= 1
    finally:
        pool.close()
    assert contexts[0] == "reviewed"  # cold
    assert all(c in ("reviewed", None) for c in contexts), contexts  # never EVIL
    assert contexts.count("reviewed") == 3, contexts
