"""The CI recipes of docs/ci/ played on this machine: a repository with a base branch and a pull
request, and stand-ins for what only the CI service has (its runner, its checkout action).

- :func:`make_origin`: a bare "origin" with ``main`` (the base branch: hooks as reviewed and merged)
  and ``pr`` (a pull request that changes one hook's script and adds hooks). Every hook that
  could write leaves a marker in ``ci-markers/`` saying where it ran (``hostname``: ``hookcage``
  in a hook container) and for which event; the pull request's hooks say so in their output too.
- :class:`GithubRunner`: runs a workflow job of docs/ci/github-actions.yml as GitHub's runner
  would: ``run:`` steps with ``bash --noprofile --norc -eo pipefail``, ``$GITHUB_ENV``,
  ``$GITHUB_PATH``, ``$GITHUB_STEP_SUMMARY``, ``if:`` (success/always), the ``${{ }}``
  expressions the recipe uses (any other fails the test), ``actions/checkout`` (a detached
  checkout of the ref, cleaned) and ``anthropics/claude-code-action`` as its code does it
  (see :meth:`GithubRunner.claude_code_action`).
- :func:`run_gitlab_job`: ``before_script`` + ``script`` of docs/ci/gitlab-ci.yml in one shell
  with the job's ``variables`` expanded as GitLab does.

Only installation lines (``pip install``, Claude Code's installer) are replaced, by what they
leave behind here; the tests assert which lines those are, so no other line escapes.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from support import CLEARED_ENV

REPO_ROOT = Path(__file__).resolve().parents[2]
RECIPES = REPO_ROOT / "docs" / "ci"
MARKERS = "ci-markers"

# -- the repository -------------------------------------------------------------------------

GUARD = "sh $CLAUDE_PROJECT_DIR/.claude/hooks/guard.sh"
CONTEXT = "sh $CLAUDE_PROJECT_DIR/.hookcage/context/run.sh"
NOTES = "sh $CLAUDE_PROJECT_DIR/.hookcage/notes/run.sh"
LINT = "node $CLAUDE_PROJECT_DIR/.hookcage/lint/hook.js"
ADDED = "sh $CLAUDE_PROJECT_DIR/.hookcage/added/run.sh"
CLAUDE_ADDED = "sh $CLAUDE_PROJECT_DIR/.claude/pr/added.sh"  # not beside guard.sh: that would change the guard
ALLOWED = (GUARD, CONTEXT, NOTES, LINT)
"""What the recipes' HOOKCAGE_ALLOW_APPEND lists (ADDED and CLAUDE_ADDED are not on it)."""


def marker_script(name: str, context: str) -> str:
    """A hook script: a marker naming where it ran and for which event, then context for the agent."""
    return (f'event=$(jq -r .hook_event_name)\n'
            f'echo "$(hostname) $event" >> "$CLAUDE_PROJECT_DIR/{MARKERS}/{name}"\n'
            f'echo "{context}"\n')


GUARD_SCRIPT = """input=$(cat)
case "$(printf '%s' "$input" | jq -r '.tool_input.command // ""')" in
  *"rm -rf"*) echo "guard: no rm -rf in review jobs" >&2; exit 2 ;;
esac
exit 0
"""

BASE_FILES: dict[str, str] = {
    ".claude/settings.json": json.dumps({"hooks": {"PreToolUse": [
        {"matcher": "Bash", "hooks": [{"type": "command", "command": GUARD}]}]}}, indent=2) + "\n",
    ".claude/hooks/guard.sh": GUARD_SCRIPT,
    ".hookcage/hooks.json": json.dumps({"hooks": {"SessionStart": [{"hooks": [
        {"type": "command", "command": CONTEXT, "sandbox": {"workspace": "rw"}},
        {"type": "command", "command": NOTES, "sandbox": {"workspace": "rw"}},
        {"type": "command", "command": LINT},
    ]}]}}, indent=2) + "\n",
    ".hookcage/context/run.sh": marker_script("context", "BASE-CONTEXT: reviewed on main"),
    ".hookcage/notes/run.sh": marker_script("notes", "BASE-NOTES"),
    ".hookcage/lint/package.json": json.dumps({"name": "lint-hook", "version": "1.0.0", "private": True,
                                               "dependencies": {"shout": "file:./vendor/shout"}}) + "\n",
    ".hookcage/lint/vendor/shout/package.json": json.dumps(
        {"name": "shout", "version": "1.0.0", "main": "index.js"}) + "\n",
    ".hookcage/lint/vendor/shout/index.js": "module.exports = (s) => s.toUpperCase();\n",
    ".hookcage/lint/hook.js": 'const shout = require("shout");\nconsole.log(shout("lint-ok from its npm dependency"));\n',
    f"{MARKERS}/.gitkeep": "",
    "README.md": "A project whose hooks CI runs through hookcage.\n",
}

PR_FILES: dict[str, str] = {
    # Changed: the same command, another script.
    ".hookcage/notes/run.sh": marker_script("notes", "PR-NOTES: changed by the pull request"),
    # Added: a hook with a command the allow-list has (only trust stops it), one without, and one in
    # Claude Code's own file.
    ".hookcage/hooks.json": json.dumps({"hooks": {
        "SessionStart": [{"hooks": [
            {"type": "command", "command": CONTEXT, "sandbox": {"workspace": "rw"}},
            {"type": "command", "command": NOTES, "sandbox": {"workspace": "rw"}},
            {"type": "command", "command": LINT},
            {"type": "command", "command": ADDED, "sandbox": {"workspace": "rw"}},
        ]}],
        "UserPromptSubmit": [{"hooks": [{"type": "command", "command": CONTEXT, "sandbox": {"workspace": "rw"}}]}],
    }}, indent=2) + "\n",
    ".hookcage/added/run.sh": marker_script("added", "PR-ADDED"),
    ".claude/settings.json": json.dumps({"hooks": {
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": GUARD}]}],
        "SessionStart": [{"hooks": [{"type": "command", "command": CLAUDE_ADDED}]}],
    }}, indent=2) + "\n",
    ".claude/pr/added.sh": marker_script("claude-added", "PR-CLAUDE-ADDED"),
    "src/feature.py": "print('the pull request's change')\n",
}

NEVER_SEEN = ("PR-NOTES", "PR-ADDED", "PR-CLAUDE-ADDED", "BASE-NOTES")
"""Output of hooks that must not run on the pull request (BASE-NOTES: the changed hook's old script
is gone; nothing may run in its place)."""


@dataclass(frozen=True)
class Origin:
    """The bare repository CI clones, and its two commits."""

    path: Path
    base: str
    head: str


def git(*args: str, cwd: Path) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "ci", "GIT_AUTHOR_EMAIL": "ci@example.invalid",
           "GIT_COMMITTER_NAME": "ci", "GIT_COMMITTER_EMAIL": "ci@example.invalid",
           "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(cwd)}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True,
                          text=True).stdout.strip()


def make_origin(tmp: Path) -> Origin:
    """``origin.git`` with ``main`` (the base) and ``pr`` (the pull request on top of it)."""
    author = tmp / "author"
    author.mkdir()
    git("init", "-q", "-b", "main", cwd=author)
    write_files(author, BASE_FILES)
    git("add", "-A", cwd=author)
    git("commit", "-q", "-m", "hooks as reviewed", cwd=author)
    base = git("rev-parse", "HEAD", cwd=author)
    git("checkout", "-q", "-b", "pr", cwd=author)
    write_files(author, PR_FILES)
    git("add", "-A", cwd=author)
    git("commit", "-q", "-m", "a pull request that adds and changes hooks", cwd=author)
    head = git("rev-parse", "HEAD", cwd=author)
    origin = tmp / "origin.git"
    git("clone", "-q", "--bare", str(author), str(origin), cwd=tmp)
    git("config", "uploadpack.allowAnySHA1InWant", "true", cwd=origin)  # as GitHub's and GitLab's servers
    return Origin(origin, base, head)


def write_files(root: Path, files: Mapping[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def open_for_hooks(root: Path) -> None:
    """The checkout readable by the hooks' user (nobody, when CI runs as root), the marker folder
    writable by it: what a runner's checkout is to a runner that is not root. (Only the checkout:
    in the container the parents of a bind mount are the engine's own folders.)"""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        Path(dirpath).chmod(0o755)
        for name in filenames:
            (Path(dirpath) / name).chmod(0o644)
    (root / MARKERS).chmod(0o777)


def markers(root: Path) -> dict[str, list[str]]:
    """Each marker file's lines (``hostname event``)."""
    folder = root / MARKERS
    return {p.name: p.read_text().splitlines() for p in sorted(folder.iterdir()) if p.name != ".gitkeep"}


def clean_env() -> dict[str, str]:
    """The test runner's environment without anything of its own hookcage, agents or CI."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("HOOKCAGE_", "GITHUB_", "RUNNER_", "CI_", "ANTHROPIC_", "CLAUDE"))
            and k not in CLEARED_ENV and k not in ("CI", "GITLAB_CI", "PYTEST_CURRENT_TEST")}


def hookcage_bin() -> str:
    """The folder of this checkout's hookcage console script (what ``pip install hookcage`` leaves on PATH)."""
    found = shutil.which("hookcage")
    assert found is not None, "the hookcage console script is not installed (pip install -e .)"
    return os.path.dirname(os.path.realpath(found))


# -- GitHub Actions ------------------------------------------------------------------------


@dataclass
class StepResult:
    name: str
    ran: bool
    returncode: int = 0
    output: str = ""


@dataclass
class GithubRunner:
    """One job of a workflow, run here the way GitHub's hosted runner runs it."""

    tmp: Path
    origin: Origin
    secrets: Mapping[str, str]
    claude: Callable[[list[str], dict[str, str], Path], subprocess.CompletedProcess[str]]
    """Runs the Claude Code CLI (argv without the binary, environment, working directory)."""
    replaced: list[str] = field(default_factory=list)
    """The installation steps that were replaced by what they leave behind."""
    sessions: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.root = self.tmp / "runner"
        self.workspace = self.root / "work" / "repo" / "repo"
        self.temp = self.root / "temp"
        self.home = self.root / "home"
        for folder in (self.workspace.parent, self.temp, self.home):
            folder.mkdir(parents=True)
        self.github_env = self.temp / "_github_env"
        self.github_path = self.temp / "_github_path"
        self.summary = self.temp / "_step_summary.md"
        for f in (self.github_env, self.github_path, self.summary):
            f.write_text("")
        git("init", "-q", str(self.workspace), cwd=self.root)
        git("remote", "add", "origin", str(self.origin.path), cwd=self.workspace)

    # -- expressions ---------------------------------------------------------------------------

    def expressions(self) -> dict[str, str]:
        return {
            "github.event.pull_request.base.sha": self.origin.base,
            "github.event.pull_request.head.sha": self.origin.head,
            "runner.temp": str(self.temp),
            **{f"secrets.{k}": v for k, v in self.secrets.items()},
        }

    def expand(self, text: str) -> str:
        known = self.expressions()

        def one(match: re.Match[str]) -> str:
            expr = match.group(1).strip()
            assert expr in known, f"the recipe uses an expression this runner does not know: {expr}"
            return known[expr]

        return re.sub(r"\$\{\{(.*?)\}\}", one, text)

    # -- the environment ---------------------------------------------------------------------

    def github_env_values(self) -> dict[str, str]:
        """``$GITHUB_ENV`` as the runner reads it: ``NAME=value`` and ``NAME<<DELIMITER`` blocks."""
        out: dict[str, str] = {}
        lines = self.github_env.read_text().splitlines()
        i = 0
        while i < len(lines):
            line = lines[i]
            if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
                name, delimiter = line.split("<<", 1)
                j = lines.index(delimiter, i + 1)
                out[name] = "\n".join(lines[i + 1:j])
                i = j + 1
                continue
            name, _, value = line.partition("=")
            if name:
                out[name] = value
            i += 1
        return out

    def environment(self, job_env: Mapping[str, str], step_env: Mapping[str, str]) -> dict[str, str]:
        env = clean_env()
        env.update(HOME=str(self.home), RUNNER_TEMP=str(self.temp), GITHUB_WORKSPACE=str(self.workspace),
                   GITHUB_ENV=str(self.github_env), GITHUB_PATH=str(self.github_path),
                   GITHUB_STEP_SUMMARY=str(self.summary), GITHUB_ACTIONS="true", CI="true")
        env.update({k: self.expand(str(v)) for k, v in job_env.items()})
        env.update(self.github_env_values())
        env.update({k: self.expand(str(v)) for k, v in step_env.items()})
        added = [p for p in self.github_path.read_text().splitlines() if p.strip()]
        env["PATH"] = os.pathsep.join([*reversed(added), env["PATH"]])  # the latest addition comes first
        return env

    # -- steps -----------------------------------------------------------------------------------

    def run_job(self, job: Mapping[str, Any]) -> list[StepResult]:
        results: list[StepResult] = []
        failed = False
        for step in job["steps"]:
            name = step.get("name") or step.get("uses") or "step"
            condition = step.get("if", "success()")
            assert condition in ("success()", "always()"), f"unknown if: {condition}"
            if failed and condition != "always()":
                results.append(StepResult(name, ran=False))
                continue
            result = self.run_step(name, step, job.get("env", {}))
            results.append(result)
            failed = failed or result.returncode != 0
        return results

    def run_step(self, name: str, step: Mapping[str, Any], job_env: Mapping[str, str]) -> StepResult:
        env = self.environment(job_env, step.get("env", {}))
        with_ = {k: self.expand(str(v)) for k, v in (step.get("with") or {}).items()}
        if "run" in step:
            script = self.expand(step["run"])
            if re.search(r'pip"? install\b.*\bhookcage\b', script):  # the network install: this checkout's hookcage
                self.replaced.append(script)
                with self.github_path.open("a") as f:
                    f.write(hookcage_bin() + "\n")
                return StepResult(name, ran=True)
            proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
                                  cwd=self.workspace, env=env, capture_output=True, text=True, timeout=900)
            return StepResult(name, True, proc.returncode, proc.stdout + proc.stderr)
        uses = step["uses"]
        if uses.startswith("actions/checkout@"):
            return self.checkout(name, with_)
        if uses.startswith("anthropics/claude-code-action@"):
            return self.claude_code_action(name, with_, env)
        if uses.startswith("actions/upload-artifact@"):
            path = Path(with_["path"])
            ok = path.is_file() and path.stat().st_size > 0
            return StepResult(name, True, 0 if ok else 1, f"{with_.get('name')}: {path}")
        raise AssertionError(f"the recipe uses an action this runner does not play: {uses}")

    def checkout(self, name: str, with_: Mapping[str, str]) -> StepResult:
        """actions/checkout at ``ref``: fetched, checked out detached, the work tree cleaned."""
        ref = with_["ref"]
        git("fetch", "-q", "--depth=1", "origin", ref, cwd=self.workspace)
        git("checkout", "-q", "--force", "--detach", ref, cwd=self.workspace)
        git("clean", "-q", "-ffdx", cwd=self.workspace)
        open_for_hooks(self.workspace)
        return StepResult(name, True)

    def claude_code_action(self, name: str, with_: Mapping[str, str], env: dict[str, str]) -> StepResult:
        """What anthropics/claude-code-action (v1.0.200) does with these inputs, then Claude Code.

        - ``settings`` (JSON text, else a file's path) is merged over ``~/.claude/settings.json``, with
          ``enableAllProjectMcpServers: true`` (base-action/src/setup-claude-code-settings.ts);
        - ``claude_args`` are handed to the CLI; ``--setting-sources`` becomes the SDK's
          ``settingSources``, ``user,project,local`` when absent (base-action/src/parse-sdk-options.ts);
        - the CLI gets the step's whole environment plus ``CLAUDE_CODE_ENTRYPOINT`` (same file);
        - ``anthropic_api_key`` becomes ``ANTHROPIC_API_KEY`` (action.yml).
        """
        settings_path = self.home / ".claude" / "settings.json"
        settings_path.parent.mkdir(parents=True, exist_ok=True)
        current = json.loads(settings_path.read_text()) if settings_path.is_file() else {}
        given = with_.get("settings", "").strip()
        if given:
            try:
                extra = json.loads(given)
            except ValueError:
                extra = json.loads(Path(given).read_text())
            current = {**current, **extra}
        current["enableAllProjectMcpServers"] = True
        settings_path.write_text(json.dumps(current, indent=2))
        args = shlex.split(with_.get("claude_args", ""))
        if "--setting-sources" not in args:
            args += ["--setting-sources", "user,project,local"]
        session = str(uuid.uuid4())
        self.sessions.append(session)
        argv = ["-p", with_.get("prompt", ""), "--session-id", session, *args]
        env = {**env, "ANTHROPIC_API_KEY": with_.get("anthropic_api_key", ""),
               "CLAUDE_CODE_ENTRYPOINT": "claude-code-github-action"}
        proc = self.claude(argv, env, self.workspace)
        return StepResult(name, True, proc.returncode, proc.stdout + proc.stderr)


# -- GitLab CI -------------------------------------------------------------------------------


def expand_gitlab(value: str, env: Mapping[str, str]) -> str:
    """GitLab's expansion of ``$NAME`` / ``${NAME}`` in a variable's value: an unknown name becomes
    empty (gitlab#16442), ``$$`` is a literal ``$``."""
    return re.sub(r"\$(?:(\$)|\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))",
                  lambda m: "$" if m.group(1) else env.get(m.group(2) or m.group(3), ""), value)


INSTALL_LINES = {
    "pip install hookcage": "the hookcage under test is on PATH already",
    "curl -fsSL https://claude.ai/install.sh | bash": "Claude Code's native installer: ~/.local/bin/claude",
}
"""The only lines of the GitLab recipe not run here (each needs the network), and why."""


def gitlab_script(job: Mapping[str, Any], replace: Callable[[str], str | None]) -> str:
    """``before_script`` then ``script``, one shell, stopping at the first failing line (as GitLab's
    runner does), which it names on stderr."""
    lines: list[str] = []
    for line in [*job.get("before_script", []), *job["script"]]:
        substitute = replace(line)
        lines.append(substitute if substitute is not None else line)
    trap = """trap 'echo "gitlab-job: the line that failed: $BASH_COMMAND" >&2' ERR"""
    return "\n".join(["set -eo pipefail", trap, *lines]) + "\n"


def gitlab_environment(job: Mapping[str, Any], predefined: Mapping[str, str],
                       overrides: Mapping[str, str]) -> dict[str, str]:
    """The job's variables expanded in order over GitLab's predefined ones; ``overrides`` replace a
    variable's value (before expansion) for what only the CI service has (e.g. the dind address)."""
    env = {**clean_env(), **predefined}
    for name, spec in (job.get("variables") or {}).items():
        # VAR: value, or VAR: {value: ..., expand: false} (a raw variable, gitlab#353991).
        value, expand = (spec["value"], spec.get("expand", True)) if isinstance(spec, dict) else (spec, True)
        value = str(overrides.get(name, value))
        env[name] = expand_gitlab(value, env) if expand else value
    return env
