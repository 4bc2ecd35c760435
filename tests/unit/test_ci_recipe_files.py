"""The CI recipe files of docs/ci/ (no Docker): they parse, use only what exists, and say what
docs/ci.md says. tests/integration/test_ci_recipes.py runs them."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
RECIPES = ROOT / "docs" / "ci"
ACTION_YML = ROOT / "tests" / "data" / "claude-code-action" / "action.yml"


def load(name: str) -> dict[str, Any]:
    data = yaml.safe_load((RECIPES / name).read_text())
    assert isinstance(data, dict)
    return data


def github_job() -> dict[str, Any]:
    workflow = load("github-actions.yml")
    job = workflow["jobs"]["review"]
    assert isinstance(job, dict)
    return job


def test_every_recipe_parses_and_is_named_in_ci_md() -> None:
    files = sorted(p.name for p in RECIPES.iterdir())
    assert {"github-actions.yml", "gitlab-ci.yml", "compose-pipeline.sh"} <= set(files)
    doc = (ROOT / "docs" / "ci.md").read_text()
    for name in files:
        if name.endswith(".yml"):
            load(name)
        assert f"ci/{name}" in doc, f"docs/ci.md does not point at docs/ci/{name}"


def test_the_workflow_gives_claude_code_action_only_inputs_it_declares() -> None:
    declared = set(yaml.safe_load(ACTION_YML.read_text())["inputs"])
    steps = [s for s in github_job()["steps"] if str(s.get("uses", "")).startswith("anthropics/claude-code-action@")]
    assert len(steps) == 1 and steps[0]["uses"] == "anthropics/claude-code-action@v1"
    given = set(steps[0]["with"])
    assert given <= declared, f"not inputs of the action: {sorted(given - declared)}"
    assert {"claude_args", "settings"} <= given


def test_the_workflow_keeps_claude_code_to_user_settings_and_hookcages_routes() -> None:
    action = next(s for s in github_job()["steps"] if "claude-code-action" in str(s.get("uses")))
    assert re.fullmatch(r"--setting-sources user(\s.*)?", action["with"]["claude_args"].strip())
    assert action["with"]["settings"] == "${{ runner.temp }}/hookcage/agents/claude-settings.json"


def test_the_workflow_reviews_the_base_branch_before_checking_out_the_pull_request() -> None:
    steps = github_job()["steps"]
    refs = [s["with"]["ref"] for s in steps if str(s.get("uses", "")).startswith("actions/checkout@")]
    assert refs == ["${{ github.event.pull_request.base.sha }}", "${{ github.event.pull_request.head.sha }}"]
    runs = [str(s.get("run", "")) for s in steps]
    review = next(i for i, r in enumerate(runs) if "hookcage trust --all --yes" in r)
    head_checkout = next(i for i, s in enumerate(steps) if s.get("with", {}).get("ref", "").endswith("head.sha }}"))
    assert review < head_checkout
    assert '> "$RUNNER_TEMP/hookcage-trust.json"' in runs[review]  # outside the checkout
    report = [i for i, r in enumerate(runs) if "hookcage report" in r]
    assert steps[report[0]].get("if") == "always()" and "GITHUB_STEP_SUMMARY" in runs[report[0]]
    assert "--fail-on untrusted" in runs[report[-1]]


def test_the_gitlab_job_talks_to_dind_over_tls_as_gitlab_documents_it() -> None:
    job = load("gitlab-ci.yml")["hookcage-review"]
    variables = job["variables"]
    assert variables["DOCKER_HOST"] == "tcp://docker:2376"
    assert (variables["DOCKER_TLS_CERTDIR"], variables["DOCKER_TLS_VERIFY"]) == ("/certs", "1")
    assert variables["DOCKER_CERT_PATH"] == "$DOCKER_TLS_CERTDIR/client"
    service = job["services"][0]
    assert re.fullmatch(r"docker:\d+\.\d+\.\d+-dind", service["name"]) and service["alias"] == "docker"
    assert job["artifacts"]["reports"]["junit"] == "hookcage-junit.xml"
    for name in ("HOOKCAGE_HOME", "HOOKCAGE_REVIEW_HOME", "HOOKCAGE_EXPORT"):
        assert variables[name].startswith("$CI_PROJECT_DIR.hookcage/")  # beside the checkout, not in it


def test_both_recipes_allow_the_same_commands() -> None:
    github = github_job()["env"]["HOOKCAGE_ALLOW_APPEND"].split("\n")
    raw = load("gitlab-ci.yml")["hookcage-review"]["variables"]["HOOKCAGE_ALLOW_APPEND"]
    assert raw["expand"] is False  # else GitLab replaces $CLAUDE_PROJECT_DIR by nothing
    gitlab = raw["value"].split("\n")
    assert [e for e in github if e] == [e for e in gitlab if e]
