"""Trust in CI: where a reviewed export may come from (no Docker: a FakeSandbox).

In CI the export is written on the base branch and read on the pull request
(``HOOKCAGE_TRUST_FILE``). A trust source inside the checkout could be written
by the pull request itself, so it is never read; an empty variable means no
trust file (CI systems set variables empty), not the current directory.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from executor import places
from executor.errors import OwnDirInProject, TrustStoreError
from executor.executor import HookExecutor
from executor.sandbox import FakeSandbox
from executor.settings import load_settings

pytestmark = pytest.mark.spawns

HOOK = "sh $CLAUDE_PROJECT_DIR/.hookcage/check.sh"


class Checkout:
    """A project with one repository hook, and the base-branch review of it exported."""

    def __init__(self, tmp: Path) -> None:
        self.tmp, self.root = tmp, tmp / "checkout"
        (self.root / ".hookcage").mkdir(parents=True)
        (self.root / ".hookcage" / "check.sh").write_text("echo checked\n")
        (self.root / ".hookcage" / "hooks.json").write_text(json.dumps(
            {"hooks": {"PreToolUse": [{"hooks": [{"type": "command", "command": HOOK}]}]}}))
        self.managed = tmp / "managed"
        self.managed.mkdir()
        self.fake = FakeSandbox()
        review = self.executor(tmp / "review-home")
        pending, refused = review.pending_reviews(self.root)
        assert len(pending) == 1 and not refused
        review.grant([subject for _, subject in pending])
        self.export = review.trust_store().export()

    def executor(self, home: Path, **settings: Any) -> HookExecutor:
        home.mkdir(parents=True, exist_ok=True)
        (home / "config.toml").write_text("[allowlist]\nallow = " + json.dumps([HOOK]) + "\n")
        return HookExecutor(load_settings(home=home, managed_dir=self.managed, **settings),
                            sandboxes={"docker": self.fake, "host": self.fake}, environ={})

    def dispatch(self, home: Path, **settings: Any) -> Any:
        payload = {"session_id": "s", "cwd": str(self.root), "tool_name": "Bash", "tool_input": {"command": "ls"}}
        return self.executor(home, **settings).dispatch("PreToolUse", payload)

    def write_export(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.export)
        return path


@pytest.fixture
def checkout(tmp_path: Path) -> Checkout:
    return Checkout(tmp_path)


def test_an_export_outside_the_checkout_is_trusted_by_a_fresh_home(checkout: Checkout) -> None:
    exported = checkout.write_export(checkout.tmp / "runner-temp" / "trust.json")
    checkout.dispatch(checkout.tmp / "pr-home", trust_file=exported)
    assert [r.command for r in checkout.fake.requests] == [HOOK]


@pytest.mark.parametrize("where", ["trust.json", ".hookcage/trust.json", "ci/deep/trust.json"])
def test_an_export_inside_the_checkout_is_never_read(checkout: Checkout, where: str) -> None:
    """A pull request can add or rewrite any file of the checkout: pointed at one, trust would be its own."""
    exported = checkout.write_export(checkout.root / where)
    answer = checkout.dispatch(checkout.tmp / "pr-home", trust_file=exported)
    assert checkout.fake.requests == []
    assert f"trust file {exported} is inside the project {checkout.root}" in (answer.system_message or "")
    assert "write the export outside the checkout" in (answer.system_message or "")


def test_a_symlink_outside_that_leads_into_the_checkout_is_never_read(checkout: Checkout) -> None:
    inside = checkout.write_export(checkout.root / "trust.json")
    link = checkout.tmp / "runner-temp" / "trust.json"
    link.parent.mkdir()
    link.symlink_to(inside)
    answer = checkout.dispatch(checkout.tmp / "pr-home", trust_file=link)
    assert checkout.fake.requests == [] and "is inside the project" in (answer.system_message or "")


def test_review_refuses_a_trust_file_inside_the_checkout(checkout: Checkout) -> None:
    exported = checkout.write_export(checkout.root / "trust.json")
    with pytest.raises(TrustStoreError, match="is inside the project"):
        checkout.executor(checkout.tmp / "pr-home", trust_file=exported).pending_reviews(checkout.root)


def test_a_trust_store_inside_the_checkout_is_never_read(checkout: Checkout) -> None:
    """HOOKCAGE_HOME in the checkout (e.g. $CI_PROJECT_DIR/.hookcage-home): the pull request plants trust.json
    (and config.toml, the allow-list): nothing runs, the event is refused (issue 21)."""
    home = checkout.root / ".hookcage-home"
    checkout.write_export(home / "trust.json")
    with pytest.raises(OwnDirInProject, match=r"HOOKCAGE_HOME \(.*\.hookcage-home\) is inside the project"):
        checkout.dispatch(home)
    assert checkout.fake.requests == []


def test_a_project_that_holds_the_home_folder_keeps_its_default_store(
    checkout: Checkout, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent started in ~: the store under ~ is the user's own, not a file of a checkout."""
    monkeypatch.setenv("HOME", str(checkout.root))
    monkeypatch.setattr(places, "_real_home", lambda: str(checkout.root))  # the home the system records
    home = checkout.root / ".config" / "hookcage"
    checkout.write_export(home / "trust.json")
    checkout.dispatch(home)
    assert [r.command for r in checkout.fake.requests] == [HOOK]


@pytest.mark.parametrize("value", ["", "  "])
def test_an_empty_trust_file_variable_means_none(
    checkout: Checkout, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("HOOKCAGE_TRUST_FILE", value)
    settings = load_settings(home=checkout.tmp / "h", managed_dir=checkout.managed)
    assert settings.trust_file is None
    checkout.dispatch(checkout.tmp / "h")  # no "trust file . cannot be read": the hook is just untrusted
    assert checkout.fake.requests == []


def test_a_missing_trust_file_stops_repository_hooks_and_says_so(checkout: Checkout) -> None:
    answer = checkout.dispatch(checkout.tmp / "pr-home", trust_file=checkout.tmp / "never-written.json")
    assert checkout.fake.requests == []
    assert "never-written.json (HOOKCAGE_TRUST_FILE) cannot be read" in (answer.system_message or "")


def hookcage_cli(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    script = shutil.which("hookcage")
    assert script is not None, "the hookcage console script is not installed"
    project = tmp / "project"
    project.mkdir(exist_ok=True)
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp), "HOOKCAGE_HOME": str(tmp / "home"),
           "HOOKCAGE_MANAGED_DIR": str(tmp / "managed")}
    return subprocess.run([script, *args], capture_output=True, text=True, env=env, cwd=project, timeout=60)


@pytest.mark.parametrize("extra", [["--all"], ["--yes"], ["--hook", "h0123456789a"], ["--full"]])
def test_fetch_only_refuses_review_options(tmp_path: Path, extra: list[str]) -> None:
    proc = hookcage_cli(tmp_path, "trust", "--fetch-only", *extra)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr == "hookcage: error: --fetch-only reviews nothing: it takes no --all, --hook, --yes or --full\n"


def test_fetch_only_with_nothing_trusted_fetches_nothing(tmp_path: Path) -> None:
    proc = hookcage_cli(tmp_path, "trust", "--fetch-only")
    assert proc.returncode == 0 and proc.stdout.startswith("nothing to fetch: every trusted hook in ")
