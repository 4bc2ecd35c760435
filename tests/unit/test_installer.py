"""The install edge: dry-run writes nothing, apply backs up and is idempotent, uninstall restores byte for byte."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from executor import installer
from executor.core.install import FileEdit, Plan


def tree(root: Path) -> dict[str, tuple[bytes | str, int]]:
    """Every file and link under ``root``: content (or link target) and mode."""
    out: dict[str, tuple[bytes | str, int]] = {}
    for path in sorted(root.rglob("*")):
        if path.is_symlink():
            out[str(path.relative_to(root))] = (os.readlink(path), 0)
        elif path.is_file():
            out[str(path.relative_to(root))] = (path.read_bytes(), path.stat().st_mode & 0o7777)
        else:
            out[str(path.relative_to(root)) + "/"] = (b"", 0)
    return out


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "hookcage-home"


@pytest.fixture
def user(tmp_path: Path) -> Path:
    """A user's files: one settings file that exists, a link, and nothing where the wrapper goes."""
    root = tmp_path / "user"
    (root / ".agent").mkdir(parents=True)
    (root / ".agent" / "settings.json").write_bytes(b'{"model": "x"}')  # no newline: kept exactly
    (root / ".agent" / "settings.json").chmod(0o600)
    (root / "real.json").write_bytes(b"{}\n")
    (root / ".agent" / "linked.json").symlink_to(root / "real.json")
    return root


def plan_for(user: Path, *, settings: bytes = b'{\n  "model": "x",\n  "hooks": {}\n}\n') -> Plan:
    return Plan("claude", "user", (
        FileEdit(str(user / ".agent" / "settings.json"), settings, why="the routes"),
        FileEdit(str(user / "bin" / "deep" / "agent"), b"#!/bin/sh\nexec real \"$@\"\n", 0o755, "the wrapper"),
        FileEdit(str(user / ".agent" / "linked.json"), b'{"a": 1}\n'),
    ))


def test_dry_run_shows_a_diff_per_file_and_writes_nothing(user: Path) -> None:
    before = tree(user)
    text = installer.diff(plan_for(user))
    assert tree(user) == before
    assert f"--- a{user}/.agent/settings.json\n+++ b{user}/.agent/settings.json\n" in text
    assert '-{"model": "x"}\n\\ No newline at end of file\n' in text
    assert f"--- /dev/null\n+++ b{user}/bin/deep/agent\n" in text and '+exec real "$@"\n' in text
    assert "# " + str(user / "bin" / "deep" / "agent") + ": the wrapper\n" in text


def test_install_backs_up_writes_and_a_second_install_changes_nothing(user: Path, home: Path) -> None:
    plan = plan_for(user)
    first = installer.apply(plan, home=home)
    assert first.changed == 3
    assert (user / ".agent" / "settings.json").read_bytes() == plan.edits[0].content
    assert (user / "bin" / "deep" / "agent").stat().st_mode & 0o777 == 0o755
    assert not (user / ".agent" / "linked.json").is_symlink(), "the link itself is replaced, not its target"
    assert (user / "real.json").read_bytes() == b"{}\n"
    manifest = installer.load_manifest(installer.state_dir(home, "claude", "user"))
    assert manifest is not None
    files = {Path(f["path"]).name: f for f in manifest["files"]}
    assert files["settings.json"]["existed"] and files["settings.json"]["mode_before"] == 0o600
    assert not files["agent"]["existed"] and files["agent"]["backup"] is None
    assert files["linked.json"]["link"] == str(user / "real.json")
    after = tree(user), tree(home)
    second = installer.apply(plan, home=home)
    assert second.changed == 0 and "already installed: nothing to change" in second.lines[-1]
    assert (tree(user), tree(home)) == after
    assert not [p for p in user.rglob("*.hookcage")], "a temporary file was left"


def test_uninstall_restores_byte_for_byte_including_files_that_did_not_exist(user: Path, home: Path) -> None:
    before = tree(user)
    installer.apply(plan_for(user), home=home)
    # A later install with a different plan keeps the first backup: uninstall goes back to before hookcage.
    installer.apply(plan_for(user, settings=b'{"model": "x", "hooks": {"Stop": []}}\n'), home=home)
    out = installer.uninstall("claude", "user", home=home)
    assert out.refused == ()
    assert tree(user) == before
    assert not (home / "installs").exists()


def test_a_file_changed_after_install_is_named_and_left_alone(user: Path, home: Path) -> None:
    before = tree(user)
    installer.apply(plan_for(user), home=home)
    edited = user / ".agent" / "settings.json"
    edited.write_bytes(b'{"model": "mine now"}\n')
    out = installer.uninstall("claude", "user", home=home)
    assert out.refused == (str(edited),)
    assert any(str(edited) in line and "changed since" in line for line in out.lines)
    assert edited.read_bytes() == b'{"model": "mine now"}\n'
    assert not (user / "bin").exists(), "the other files are restored"
    assert (user / ".agent" / "linked.json").is_symlink()
    # The manifest keeps the refused file: once the user puts it back, uninstall finishes.
    assert [f["path"] for f in json.loads((installer.state_dir(home, "claude", "user") / "manifest.json")
                                          .read_text())["files"]] == [str(edited)]
    edited.write_bytes(plan_for(user).edits[0].content or b"")
    assert installer.uninstall("claude", "user", home=home).refused == ()
    assert tree(user) == before


def test_a_root_prefix_keeps_managed_paths_under_the_test_s_directory(tmp_path: Path, home: Path) -> None:
    root = tmp_path / "root"
    plan = Plan("claude", "managed", (FileEdit("/etc/claude-code/managed-settings.d/50-hookcage.json", b"{}\n"),))
    assert "+++ b/etc/claude-code/managed-settings.d/50-hookcage.json" in installer.diff(plan, str(root))
    installer.apply(plan, home=home, root=str(root))
    assert (root / "etc/claude-code/managed-settings.d/50-hookcage.json").read_bytes() == b"{}\n"
    installer.uninstall("claude", "managed", home=home)
    assert not root.exists(), "the directories install created are removed"


def test_uninstall_without_an_install_is_one_clear_error(home: Path) -> None:
    with pytest.raises(installer.InstallError, match="not installed"):
        installer.uninstall("claude", "user", home=home)


def test_a_big_file_reads_as_its_head(tmp_path: Path) -> None:
    big = tmp_path / "claude"
    big.write_bytes(b"\x7fELF" + b"\0" * (installer.READ_CAP + 1))
    head = installer.read_current(str(big))
    assert head is not None and len(head) == installer.PREFIX and head.startswith(b"\x7fELF")
    assert installer.read_current(str(tmp_path / "absent")) is None


def test_doctor_names_the_file_the_agent_would_still_run_and_the_path_order(tmp_path: Path, home: Path) -> None:
    from executor.dialects.base import Where
    from executor.dialects.claude import DIALECT as CLAUDE

    repo, user_home, real = tmp_path / "repo", tmp_path / "u", tmp_path / "real"
    (repo / ".claude").mkdir(parents=True)
    (repo / ".claude" / "settings.json").write_text('{"hooks": {}}')
    real.mkdir()
    (real / "claude").write_text("#!/bin/sh\n")
    (real / "claude").chmod(0o755)
    local_bin = user_home / ".local" / "bin"
    env = {"PATH": f"{real}:{local_bin}", "HOOKCAGE_HOME": str(home)}

    def checks() -> list[installer.Check]:
        return [c for c in installer.agent_checks(home=home, user_home=str(user_home), environ=env, root=repo)
                if c.what.startswith("claude:")]

    (before,) = checks()
    assert not before.ok and "would run this repository's hooks itself (.claude/settings.json)" in before.what
    assert before.fix == "hookcage install claude"
    plan = CLAUDE.install("user", Where(None, str(user_home), env), installer.read_current, "/x/hookcage")
    installer.apply(plan, home=home)
    installed, order = checks()
    assert installed.ok and "routing installed (user)" in installed.what
    assert not order.ok and f"`claude` on PATH is {real}/claude, not hookcage's wrapper" in order.what
    assert order.fix.startswith(f"put {local_bin} ahead of {real} on PATH")
    env["PATH"] = f"{local_bin}:{real}"
    assert [c.ok for c in checks()] == [True, True]
