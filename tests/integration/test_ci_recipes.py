"""The CI recipes of docs/ci/, run on this machine as far as it allows.

- GitHub Actions (docs/ci/github-actions.yml): every step of the job, in order, by
  ``ci_support.GithubRunner``: the ``run:`` steps as written (only ``pip install hookcage`` is
  replaced by this checkout's hookcage), ``actions/checkout`` of the base, then of the pull request,
  and ``anthropics/claude-code-action`` as its code does it, with the REAL Claude Code CLI talking
  to a stand-in model on the loopback (its first turn calls Bash).
- GitLab CI (docs/ci/gitlab-ci.yml): ``before_script`` and ``script`` in one shell, with the job's
  ``variables`` as written: ``DOCKER_TLS_VERIFY=1``, ``DOCKER_CERT_PATH=$DOCKER_TLS_CERTDIR/client``;
  only dind's address (``tcp://docker:2376``) and certificate folder (``/certs``) are this
  machine's: a REAL TLS endpoint of the engine that requires the client certificate
  (``tls_proxy.TlsEngineProxy``). Every hook container goes through it.
- A plain compose.yaml pipeline (docs/ci/compose-pipeline.sh), run as it is with bash: the repository's
  compose.yaml service built by ``hookcage image build --service``, the review in that image, Claude
  Code on this machine sending every hook event over TCP, ``down -v`` at the end.

Both run the repository of ``ci_support.make_origin`` (a base branch and a pull request that changes
one hook and adds three) and assert what a maintainer would look at: what reached the agent, what
ran where (markers, containers), the job summary / JUnit, and which step failed the job.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme
import yaml
from agents import ModelStandIn, ToolCall, claude_cli, leftover_containers
from ci_support import (
    INSTALL_LINES,
    NEVER_SEEN,
    RECIPES,
    REPO_ROOT,
    GithubRunner,
    Origin,
    clean_env,
    git,
    gitlab_environment,
    gitlab_script,
    make_origin,
    markers,
    open_for_hooks,
)
from tls_proxy import TlsEngineProxy, write_client_certs

pytestmark = pytest.mark.docker

FAKE_KEY = "sk-ant-test-not-a-key"
BASH_CALL = ToolCall("Bash", {"command": "git diff --stat", "description": "See what changed"})


@pytest.fixture
def origin(tmp_path: Path, runner_image: str) -> Origin:
    return make_origin(tmp_path)


@pytest.fixture
def model() -> Iterator[ModelStandIn]:
    with ModelStandIn(tool_call=BASH_CALL, reply="stand-in model: reviewed") as stand_in:
        yield stand_in


def run_log(home: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (home / "runs.jsonl").read_text().splitlines()]


def assert_only_base_hooks_ran(checkout: Path, model: ModelStandIn, log: list[dict[str, Any]]) -> None:
    """What a maintainer checks after the job: what reached the model, what ran where."""
    assert model.conversation(), "Claude Code never asked the model"
    assert model.saw("BASE-CONTEXT: reviewed on main") and model.saw("LINT-OK FROM ITS NPM DEPENDENCY")
    assert not [text for text in NEVER_SEEN if model.saw(text)]
    # The one rw hook the pull request left alone wrote its marker from a container, for SessionStart only.
    assert markers(checkout) == {"context": ["hookcage SessionStart"]}
    skipped = {(r["event"], r["command"].rsplit("/", 2)[-2]): r["skip_reason"] for r in log if r["outcome"] == "skipped"}
    assert skipped == {("SessionStart", "notes"): "untrusted", ("UserPromptSubmit", "context"): "untrusted",
                       ("SessionStart", "added"): "not_allowlisted", ("SessionStart", "pr"): "not_allowlisted"}
    ran = {(r["event"], r["command"].rsplit("/", 2)[-2]) for r in log if r["outcome"] == "ran"}
    assert ran == {("SessionStart", "context"), ("SessionStart", "lint"), ("PreToolUse", "hooks")}


# -- GitHub Actions ----------------------------------------------------------------------------


def test_github_actions_recipe(tmp_path: Path, origin: Origin, model: ModelStandIn, docker_api: Any) -> None:
    workflow = yaml.safe_load((RECIPES / "github-actions.yml").read_text())
    binary = claude_cli()

    def claude(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
        env = {**env, "ANTHROPIC_BASE_URL": model.url, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
               "DISABLE_AUTOUPDATER": "1"}  # the stand-in instead of api.anthropic.com
        return subprocess.run([str(binary), *argv], cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=300, stdin=subprocess.DEVNULL)

    runner = GithubRunner(tmp_path, origin, {"ANTHROPIC_API_KEY": FAKE_KEY}, claude)
    try:
        results = runner.run_job(workflow["jobs"]["review"])
    finally:
        left = leftover_containers(docker_api, runner.sessions)
    outcome = {r.name: (r.ran, r.returncode) for r in results}
    failures = [f"{r.name}: {r.output}" for r in results if r.returncode and not r.name.startswith("Fail on")]
    assert not failures, failures
    assert left == []

    # Only the network install was replaced, and it was the pip install of hookcage.
    assert len(runner.replaced) == 1 and '/bin/pip" install --quiet hookcage' in runner.replaced[0]
    # Every step ran; the last one failed the job: the pull request added and changed hooks.
    assert all(ran for ran, _ in outcome.values())
    last = results[-1]
    assert last.name.startswith("Fail on hooks the pull request added or changed") and last.returncode == 1
    assert "notes/run.sh" in last.output

    # Claude Code ran with user settings only (+ the routes), in the pull request's checkout.
    user_settings = json.loads((runner.home / ".claude" / "settings.json").read_text())
    assert user_settings["enableAllProjectMcpServers"] is True and "SessionStart" in user_settings["hooks"]
    assert git("rev-parse", "HEAD", cwd=runner.workspace) == origin.head
    home = runner.temp / "hookcage"
    assert_only_base_hooks_ran(runner.workspace, model, run_log(home))
    assert not (home / "trust.json").exists()  # the job's own store stayed empty

    # The job summary and the uploaded JUnit.
    summary = runner.summary.read_text()
    assert "notes/run.sh" in summary and "untrusted" in summary
    junit = ET.parse(runner.temp / "hookcage-junit.xml").getroot()
    names = [c.get("name", "") for c in junit.iter("testcase") if c.find("skipped") is not None]
    assert len(names) == 4


def test_github_recipe_without_setting_sources_runs_the_repositorys_hooks_on_the_runner(
    tmp_path: Path, origin: Origin, model: ModelStandIn, docker_api: Any
) -> None:
    """The control that makes the test above mean something: the same job with the action's
    default setting sources lets Claude Code run the pull request's hook itself, on the runner."""
    workflow = yaml.safe_load((RECIPES / "github-actions.yml").read_text())
    job = workflow["jobs"]["review"]
    action = next(s for s in job["steps"] if "claude-code-action" in str(s.get("uses")))
    action["with"]["claude_args"] = ""
    job["steps"] = [s for s in job["steps"] if not str(s.get("name", "")).startswith("Fail on")]
    binary = claude_cli()

    def claude(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
        env = {**env, "ANTHROPIC_BASE_URL": model.url, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
               "DISABLE_AUTOUPDATER": "1"}
        return subprocess.run([str(binary), *argv], cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=300, stdin=subprocess.DEVNULL)

    runner = GithubRunner(tmp_path, origin, {"ANTHROPIC_API_KEY": FAKE_KEY}, claude)
    try:
        runner.run_job(job)
    finally:
        leftover_containers(docker_api, runner.sessions)
    found = markers(runner.workspace)
    host = os.uname().nodename
    assert found.get("claude-added") == [f"{host} SessionStart"], found  # ran on the runner, not in a container


# -- GitLab CI with docker:dind over TLS ---------------------------------------------------------


def test_gitlab_dind_tls_recipe(tmp_path: Path, origin: Origin, model: ModelStandIn, docker_api: Any) -> None:
    job = yaml.safe_load((RECIPES / "gitlab-ci.yml").read_text())["hookcage-review"]
    ca = trustme.CA()
    certs_dir = tmp_path / "certs"  # what dind shares with the job as /certs
    write_client_certs(certs_dir / "client", ca)
    project = tmp_path / "builds" / "group" / "project"
    git("clone", "-q", str(origin.path), str(project), cwd=tmp_path)
    git("checkout", "-q", "--detach", origin.head, cwd=project)  # GitLab's checkout of the merge request
    open_for_hooks(project)
    user_home = tmp_path / "root-home"
    (user_home / ".local" / "bin").mkdir(parents=True)
    replaced: list[str] = []

    def replace(line: str) -> str | None:
        if line in INSTALL_LINES:
            replaced.append(line)
            if line.startswith("curl"):  # what Claude Code's installer leaves: ~/.local/bin/claude
                return f'ln -sf {claude_cli()} "$HOME/.local/bin/claude"'
            return "true"
        return None

    with TlsEngineProxy(ca) as engine:
        predefined = {
            "CI": "true", "GITLAB_CI": "true", "CI_PROJECT_DIR": str(project), "CI_JOB_ID": "4242",
            "CI_PIPELINE_SOURCE": "merge_request_event", "CI_COMMIT_SHA": origin.head,
            "CI_MERGE_REQUEST_DIFF_BASE_SHA": origin.base, "CI_MERGE_REQUEST_TARGET_BRANCH_NAME": "main",
            "HOME": str(user_home),
            # The masked CI/CD variable, and this machine's stand-in for api.anthropic.com.
            "ANTHROPIC_API_KEY": FAKE_KEY, "ANTHROPIC_BASE_URL": model.url,
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1",
        }
        overrides = {"DOCKER_HOST": engine.docker_host, "DOCKER_TLS_CERTDIR": str(certs_dir)}
        env = gitlab_environment(job, predefined, overrides)
        assert (env["DOCKER_TLS_VERIFY"], env["DOCKER_CERT_PATH"]) == ("1", str(certs_dir / "client"))
        env["PATH"] = os.pathsep.join([os.path.dirname(os.path.realpath(_hookcage())), env["PATH"]])
        before = engine.handshakes
        proc = subprocess.run(["bash", "-c", gitlab_script(job, replace)], cwd=project, env=env,
                              capture_output=True, text=True, timeout=900)
        through_tls = engine.handshakes - before
    home = Path(env["HOOKCAGE_HOME"])
    log = run_log(home)
    left = leftover_containers(docker_api, sorted({r["session"] for r in log}))
    assert left == []
    assert sorted(replaced) == sorted(INSTALL_LINES)

    # The job failed on its last line, the report: the merge request added and changed hooks.
    assert proc.returncode == 1, proc.stderr
    assert 'gitlab-job: the line that failed: hookcage report --fail-on untrusted,error,timeout' in proc.stderr
    assert "notes/run.sh" in proc.stdout
    assert_only_base_hooks_ran(project, model, log)
    assert through_tls > 0  # every engine call went through the TLS endpoint (there is no other way in)
    junit = ET.parse(project / "hookcage-junit.xml").getroot()
    assert len([c for c in junit.iter("testcase") if c.find("skipped") is not None]) == 4


def _hookcage() -> str:
    found = shutil.which("hookcage")
    assert found is not None
    return found


def test_gitlab_recipe_with_a_wrong_client_certificate_fails_cleanly(
    tmp_path: Path, origin: Origin, docker_api: Any
) -> None:
    """dind's CA did not sign this job's certificate: the first hookcage line fails with one clean
    line, nothing reaches the engine, no hook runs."""
    job = yaml.safe_load((RECIPES / "gitlab-ci.yml").read_text())["hookcage-review"]
    ca = trustme.CA()
    certs_dir = tmp_path / "certs"
    write_client_certs(certs_dir / "client", ca, client_ca=trustme.CA())
    project = tmp_path / "builds" / "group" / "project"
    git("clone", "-q", str(origin.path), str(project), cwd=tmp_path)
    open_for_hooks(project)
    with TlsEngineProxy(ca) as engine:
        env = gitlab_environment(job, {"CI_PROJECT_DIR": str(project), "HOME": str(tmp_path)},
                                 {"DOCKER_HOST": engine.docker_host, "DOCKER_TLS_CERTDIR": str(certs_dir)})
        env["PATH"] = os.pathsep.join([os.path.dirname(os.path.realpath(_hookcage())), clean_env()["PATH"]])
        build = next(line for line in job["before_script"] if line.startswith("hookcage image build"))
        proc = subprocess.run(["bash", "-c", build], cwd=project, env=env, capture_output=True, text=True,
                              timeout=300)
        assert engine.handshakes == 0 and engine.refused
    assert proc.returncode == 1 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hookcage: error: the TLS handshake with the Docker engine at")
    assert "DOCKER_CERT_PATH must hold" in lines[0] and "Traceback" not in proc.stderr


# -- a plain compose.yaml pipeline -------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_compose_pipeline_recipe(tmp_path: Path, origin: Origin, model: ModelStandIn, docker_api: Any) -> None:
    """docs/ci/compose-pipeline.sh as it is: compose.yaml's service (hookcage serve --listen, built by
    `hookcage image build --service`), the review in the service's image, Claude Code on this machine
    sending every event over TCP; then `down -v`: no container, volume or network of it left."""
    if shutil.which("docker-compose") is None:
        pytest.fail("docker-compose is not installed")
    project = tmp_path / "ci" / "project"
    git("clone", "-q", str(origin.path), str(project), cwd=tmp_path)
    git("checkout", "-q", "--detach", origin.head, cwd=project)
    open_for_hooks(project)
    session = os.environ["HOOKCAGE_TEST_SESSION"]
    claude_session = str(uuid.uuid4())
    tools = tmp_path / "tools"  # Claude Code as installed on the CI machine (with a known session id)
    tools.mkdir()
    shim = tools / "claude"
    shim.write_text(f'#!/bin/sh\nexec {claude_cli()} "$@" --session-id {claude_session}\n')
    shim.chmod(0o755)
    name = f"hookcage-ci-{session}"
    env = {**clean_env(), "BASE_SHA": origin.base, "HEAD_SHA": origin.head, "HOOKCAGE_SRC": str(REPO_ROOT),
           "CI_JOB_ID": session, "HOOKCAGE_PORT": str(free_port()), "HOME": str(tmp_path / "ci-home"),
           "HOOKCAGE_JUNIT": str(tmp_path / "junit.xml"),
           "PATH": os.pathsep.join([str(tools), os.path.dirname(os.path.realpath(_hookcage())), clean_env()["PATH"]]),
           "ANTHROPIC_API_KEY": FAKE_KEY, "ANTHROPIC_BASE_URL": model.url,
           "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1"}
    (tmp_path / "ci-home").mkdir()
    try:
        proc = subprocess.run(["bash", str(RECIPES / "compose-pipeline.sh")], cwd=project, env=env,
                              capture_output=True, text=True, timeout=1800)
    finally:
        left = leftover_containers(docker_api, [claude_session])
        leftovers = subprocess.run(
            ["docker", "ps", "-aq", "--filter", f"label=com.docker.compose.project={name}"],
            capture_output=True, text=True).stdout.split()
        volumes = subprocess.run(["docker", "volume", "ls", "-q", "--filter", f"label=com.docker.compose.project={name}"],
                                 capture_output=True, text=True).stdout.split()
        for container in leftovers:
            subprocess.run(["docker", "rm", "-f", container], capture_output=True)
        for volume in volumes:
            subprocess.run(["docker", "volume", "rm", "-f", volume], capture_output=True)
    assert (left, leftovers, volumes) == ([], [], [])
    # The pipeline failed on its last line: the pull request added and changed hooks.
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "--fail-on matched: 2 untrusted" in proc.stderr and "notes/run.sh" in proc.stderr
    assert model.saw("BASE-CONTEXT: reviewed on main") and model.saw("LINT-OK FROM ITS NPM DEPENDENCY")
    assert not [text for text in NEVER_SEEN if model.saw(text)]
    assert markers(project) == {"context": ["hookcage SessionStart"]}
    junit = ET.parse(tmp_path / "junit.xml").getroot()
    outcomes = sorted((c.get("name", ""), "skipped" if c.find("skipped") is not None else "ran")
                      for c in junit.iter("testcase"))
    assert len([o for o in outcomes if o[1] == "skipped"]) == 4 and len(outcomes) == 7
