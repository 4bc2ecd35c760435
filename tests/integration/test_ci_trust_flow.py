"""Trust in CI, end to end through the CLI and the real engine (docs/ci.md, "Trust in CI").

On the base branch: ``hookcage trust --all --yes`` and ``hookcage trust export`` (what was merged
was reviewed). On the pull request, at the same checkout path, with a FRESH ``HOOKCAGE_HOME`` and
only ``HOOKCAGE_TRUST_FILE``: the hooks the pull request left alone run, in containers (their
markers say ``hookcage``, the engine's event log counts their containers, the Node hook's npm
dependency is fetched by ``--fetch-only``); the hook whose script it changed and the hook it added
with a command the allow-list has are skipped as untrusted, the hooks it added with other commands
as off-list: none of them ever runs (no marker, none of their output anywhere, no container), and
``hookcage report --fail-on untrusted`` fails the job naming them.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ci_support import (
    ADDED,
    ALLOWED,
    CLAUDE_ADDED,
    CONTEXT,
    GUARD,
    LINT,
    NEVER_SEEN,
    NOTES,
    Origin,
    clean_env,
    git,
    make_origin,
    markers,
    open_for_hooks,
)
from support import agent_session, containers_created

pytestmark = pytest.mark.docker


class Job:
    """One CI job: a checkout at a fixed path, and hookcage run in it with the job's variables."""

    def __init__(self, tmp: Path, origin: Origin) -> None:
        self.tmp, self.origin = tmp, origin
        self.checkout = tmp / "builds" / "project"
        git("clone", "-q", str(origin.path), str(self.checkout), cwd=tmp)
        self.env = {**clean_env(), "HOME": str(tmp / "runner-home"),
                    "HOOKCAGE_MANAGED_DIR": str(tmp / "no-managed-config"),
                    "HOOKCAGE_ALLOW_APPEND": "\n".join(ALLOWED)}

    def at(self, sha: str) -> None:
        git("checkout", "-q", "--force", "--detach", sha, cwd=self.checkout)
        git("clean", "-q", "-ffdx", cwd=self.checkout)
        open_for_hooks(self.checkout)

    def hookcage(self, *args: str, stdin: str = "", **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["hookcage", *args], input=stdin, capture_output=True, text=True, timeout=600,
                              cwd=self.checkout, env={**self.env, **env})

    def event(self, event: str, session: str, **fields: Any) -> subprocess.CompletedProcess[str]:
        payload = {"session_id": session, "cwd": str(self.checkout), "hook_event_name": event,
                   "transcript_path": "", **fields}
        return self.hookcage("dispatch", "--agent", "claude", stdin=json.dumps(payload))


@pytest.fixture
def job(tmp_path: Path, runner_image: str) -> Iterator[Job]:
    yield Job(tmp_path, make_origin(tmp_path))


def base_review(job: Job) -> Path:
    """The base branch's review, exported outside the checkout (as $RUNNER_TEMP would be)."""
    job.at(job.origin.base)
    review = {"HOOKCAGE_HOME": str(job.tmp / "review-home")}
    trusted = job.hookcage("trust", "--all", "--yes", **review)
    assert trusted.returncode == 0, trusted.stderr
    assert "trusted 4 of 4 hook(s)" in trusted.stdout
    exported = job.hookcage("trust", "export", **review)
    assert exported.returncode == 0, exported.stderr
    path = job.tmp / "runner-temp" / "trust.json"
    path.parent.mkdir()
    path.write_text(exported.stdout)
    return path


def test_pull_request_runs_only_what_the_base_branch_trusted(job: Job, docker_api: Any) -> None:
    trust_file = base_review(job)
    assert {r["command"] for r in json.loads(trust_file.read_text())["records"].values()} == set(ALLOWED)

    job.at(job.origin.head)
    pr_home = job.tmp / "pr-home"  # fresh: the store stays empty, trust comes only from the export
    job.env.update(HOOKCAGE_HOME=str(pr_home), HOOKCAGE_TRUST_FILE=str(trust_file))
    fetched = job.hookcage("trust", "--fetch-only")
    assert fetched.returncode == 0, fetched.stdout + fetched.stderr
    assert "fetching the dependencies of 1 trusted hook(s)" in fetched.stdout

    session, since = agent_session("ci-flow"), time.time()
    start = job.event("SessionStart", session, source="startup")
    prompt = job.event("UserPromptSubmit", session, prompt="review this")
    allowed_tool = job.event("PreToolUse", session, tool_name="Bash", tool_input={"command": "git diff --stat"})
    refused_tool = job.event("PreToolUse", session, tool_name="Bash", tool_input={"command": "rm -rf build"})

    # What the unchanged hooks said reached the agent; nothing of the others did.
    assert start.returncode == 0, start.stderr
    context = json.loads(start.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "BASE-CONTEXT: reviewed on main" in context and "LINT-OK FROM ITS NPM DEPENDENCY" in context
    answers = start.stdout + start.stderr + prompt.stdout + prompt.stderr
    assert not [text for text in NEVER_SEEN if text in answers]
    assert "1 project hook not run: not trusted yet" in json.loads(start.stdout)["systemMessage"]
    assert "1 project hook not run: not trusted yet" in json.loads(prompt.stdout)["systemMessage"]
    assert allowed_tool.returncode == 0 and "hookSpecificOutput" not in json.loads(allowed_tool.stdout)
    denied = json.loads(refused_tool.stdout)["hookSpecificOutput"]
    assert (denied["permissionDecision"], denied["permissionDecisionReason"]) == (
        "deny", "guard: no rm -rf in review jobs")

    # Where each ran: the unchanged rw hook in a container, once, for SessionStart; no other marker.
    assert markers(job.checkout) == {"context": ["hookcage SessionStart"]}
    # The engine made one container per hook that ran (context, lint, guard twice), none for the rest.
    assert containers_created(docker_api, session, since) == 4

    runs = [json.loads(line) for line in (pr_home / "runs.jsonl").read_text().splitlines()]
    outcome = {(r["event"], r["command"]): (r["outcome"], r["skip_reason"]) for r in runs}
    assert outcome == {
        ("SessionStart", CONTEXT): ("ran", None),
        ("SessionStart", LINT): ("ran", None),
        ("SessionStart", NOTES): ("skipped", "untrusted"),
        ("SessionStart", ADDED): ("skipped", "not_allowlisted"),
        ("SessionStart", CLAUDE_ADDED): ("skipped", "not_allowlisted"),
        ("UserPromptSubmit", CONTEXT): ("skipped", "untrusted"),
        ("PreToolUse", GUARD): ("ran", None),
    }
    assert not (pr_home / "trust.json").exists()  # the job trusted nothing itself

    # The report fails the job and names the two untrusted hooks; its JUnit parses.
    failed = job.hookcage("report", "--fail-on", "untrusted")
    assert failed.returncode == 1, failed.stderr
    for name in ("notes/run.sh", ".hookcage/context/run.sh"):
        assert name in failed.stdout
    junit = job.hookcage("report", "--format", "junit")
    assert junit.returncode == 0
    cases = ET.fromstring(junit.stdout).iter("testcase")
    skipped = sorted(c.get("name", "") for c in cases if c.find("skipped") is not None)
    assert len(skipped) == 4 and any("notes/run.sh" in n for n in skipped)
    clean = job.hookcage("report", "--fail-on", "blocked,error,timeout")  # the guard's block is a "blocked"
    assert clean.returncode == 1 and "guard.sh" in clean.stdout


def test_without_the_export_nothing_of_the_repository_runs(job: Job, docker_api: Any) -> None:
    """The control: the same pull request, a fresh home and no trust file."""
    base_review(job)
    job.at(job.origin.head)
    job.env["HOOKCAGE_HOME"] = str(job.tmp / "pr-home")
    session, since = agent_session("ci-flow-none"), time.time()
    start = job.event("SessionStart", session, source="startup")
    assert start.returncode == 0
    assert "3 project hooks not run: not trusted yet" in json.loads(start.stdout)["systemMessage"]
    assert markers(job.checkout) == {} and containers_created(docker_api, session, since) == 0


def test_the_export_is_bound_to_the_checkout_path(job: Job, tmp_path: Path, docker_api: Any) -> None:
    """The project root is part of every trust hash: a job that checks the pull request out elsewhere
    gets no trust from the export (docs/ci.md: export and run at the same path)."""
    trust_file = base_review(job)
    moved = tmp_path / "elsewhere" / "project"
    moved.parent.mkdir()
    os.rename(job.checkout, moved)
    job.checkout = moved
    job.at(job.origin.head)
    job.env.update(HOOKCAGE_HOME=str(tmp_path / "pr-home"), HOOKCAGE_TRUST_FILE=str(trust_file))
    session, since = agent_session("ci-flow-moved"), time.time()
    start = job.event("SessionStart", session, source="startup")
    assert "3 project hooks not run: not trusted yet" in json.loads(start.stdout)["systemMessage"]
    assert markers(moved) == {} and containers_created(docker_api, session, since) == 0
