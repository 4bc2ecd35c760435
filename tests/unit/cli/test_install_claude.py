"""``hookcage install claude`` / ``codebuddy``: the plans (pure), and the wrapper run by a real sh."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from executor.core.install import NEVER_ROUTED, NotInstallable, dispatch_command
from executor.dialects.base import Where
from executor.dialects.claude import DIALECT as CLAUDE
from executor.dialects.claude import is_wrapper
from executor.dialects.codebuddy import DIALECT as CODEBUDDY

pytestmark = pytest.mark.spawns

HOOKCAGE = "/opt/hc/bin/hookcage"


def where(path: str = "/home/u/.local/bin:/usr/bin") -> Where:
    return Where(None, "/home/u", {"PATH": path, "HOOKCAGE_HOME": "/home/u/.config/hookcage"})


def reader(files: dict[str, bytes]):  # type: ignore[no-untyped-def]
    return lambda path: files.get(path)


def test_user_plan_routes_every_event_but_the_traps_and_wraps_claude() -> None:
    plan = CLAUDE.install("user", where(), reader({"/usr/bin/claude": b"\x7fELF..."}), HOOKCAGE)
    settings, wrapper = plan.edits
    assert settings.path == "/home/u/.config/hookcage/agents/claude-settings.json"
    data = json.loads(settings.content or b"")
    assert set(data["hooks"]) == set(CLAUDE.routed_events) and len(data["hooks"]) == 28
    assert not set(data["hooks"]) & NEVER_ROUTED
    command = dispatch_command(HOOKCAGE, "claude")
    assert data["hooks"]["PreToolUse"] == [{"matcher": "*", "hooks": [{"type": "command", "command": command}]}]
    assert data["hooks"]["Stop"] == [{"hooks": [{"type": "command", "command": command}]}]
    assert (wrapper.path, wrapper.mode) == ("/home/u/.local/bin/claude", 0o755)
    script = (wrapper.content or b"").decode()
    assert is_wrapper(wrapper.content) and "fallback=/usr/bin/claude" in script
    assert script.endswith(f'exec "$real" --setting-sources user --settings {settings.path} "$@"\n')
    assert not any("ahead" in n for n in plan.notes)


def test_a_path_without_local_bin_first_is_one_note() -> None:
    plan = CLAUDE.install("user", where("/usr/bin:/home/u/.local/bin"), reader({"/usr/bin/claude": b"x"}), HOOKCAGE)
    (note,) = [n for n in plan.notes if "ahead" in n]
    assert note.startswith("put /home/u/.local/bin ahead of /usr/bin on PATH")


def test_the_native_installer_s_claude_is_never_replaced() -> None:
    files = {"/home/u/.local/bin/claude": b"\x7fELF native build"}
    plan = CLAUDE.install("user", where(), reader(files), HOOKCAGE)
    assert plan.edits[1].path == "/home/u/.config/hookcage/bin/claude"
    assert "fallback=/home/u/.local/bin/claude" in (plan.edits[1].content or b"").decode()
    assert any(n.startswith("put /home/u/.config/hookcage/bin ahead of /home/u/.local/bin") for n in plan.notes)


def test_install_keeps_what_the_user_added_and_is_stable() -> None:
    first = CLAUDE.install("user", where(), reader({}), HOOKCAGE)
    settings = first.edits[0]
    mine = json.loads(settings.content or b"")
    mine["model"] = "opus"
    files = {settings.path: json.dumps(mine).encode(), first.edits[1].path: first.edits[1].content or b""}
    again = CLAUDE.install("user", where(), reader(files), HOOKCAGE)
    assert again.edits[0].content == files[settings.path], "nothing to add: the file's own bytes are kept"
    assert again.edits[1].content == files[first.edits[1].path]


def test_managed_drop_in_sets_allow_managed_hooks_only_and_the_routes() -> None:
    plan = CLAUDE.install("managed", where(), reader({}), HOOKCAGE)
    (edit,) = plan.edits
    assert edit.path == "/etc/claude-code/managed-settings.d/50-hookcage.json"
    data = json.loads(edit.content or b"")
    assert data["allowManagedHooksOnly"] is True and len(data["hooks"]) == 28
    assert (edit.content or b"").endswith(b"}\n") and b'\n  "allowManagedHooksOnly": true,\n' in (edit.content or b"")


def test_codebuddy_routes_its_events_and_sets_its_models_switch() -> None:
    plan = CODEBUDDY.install("user", where("/home/u/.local/bin:/opt/cb"), reader({"/opt/cb/codebuddy": b"x"}),
                             HOOKCAGE)
    settings, wrapper = plan.edits
    assert settings.path.endswith("/agents/codebuddy-settings.json")
    assert list(json.loads(settings.content or b"")["hooks"]) == list(CODEBUDDY.routed_events)
    script = (wrapper.content or b"").decode()
    assert wrapper.path == "/home/u/.local/bin/codebuddy"
    assert ': "${CODEBUDDY_DISABLE_CUSTOM_MODELS_FILE:=1}"; export CODEBUDDY_DISABLE_CUSTOM_MODELS_FILE' in script
    assert "  config|mcp|" in script and dispatch_command(HOOKCAGE, "codebuddy") in (settings.content or b"").decode()


def test_codebuddy_has_no_managed_file_and_offers_the_user_takeover() -> None:
    with pytest.raises(NotInstallable, match="no managed settings file") as caught:
        CODEBUDDY.install("managed", where(), reader({}), HOOKCAGE)
    assert caught.value.offer is not None and caught.value.offer.mode == "user"


def test_the_wrapper_finds_the_real_agent_later_on_path_skipping_itself(tmp_path: Path) -> None:
    """Run by /bin/sh: the first PATH entry is the wrapper, another hookcage wrapper is skipped,
    the real binary gets the options before the user's arguments; a passthrough subcommand none."""
    wrap, other, real = (tmp_path / d for d in ("wrap", "other", "real"))
    for d in (wrap, other, real):
        d.mkdir()
    plan = CODEBUDDY.install("user", Where(None, str(tmp_path), {"PATH": f"{wrap}:{other}:{real}"}),
                             reader({}), HOOKCAGE)
    script = plan.edits[1].content or b""
    for d in (wrap, other):
        (d / "codebuddy").write_bytes(script)
        (d / "codebuddy").chmod(0o755)
    (real / "codebuddy").write_text('#!/bin/sh\necho "$CODEBUDDY_DISABLE_CUSTOM_MODELS_FILE" "$@"\n')
    (real / "codebuddy").chmod(0o755)
    env = {"PATH": f"{wrap}:{other}:{real}:/usr/bin:/bin"}

    def run(*args: str, **extra: str) -> str:
        return subprocess.run(["codebuddy", *args], env={**env, **extra}, capture_output=True, text=True,
                              check=True, timeout=10).stdout

    settings = plan.edits[0].path
    assert run("-p", "hi there") == f"1 --setting-sources user --settings {settings} -p hi there\n"
    assert run("mcp", "list") == "1 mcp list\n"
    assert run("--version", CODEBUDDY_DISABLE_CUSTOM_MODELS_FILE="0").startswith("0 --setting-sources user")
    os.unlink(real / "codebuddy")
    proc = subprocess.run(["codebuddy"], env=env, capture_output=True, text=True, timeout=10)
    assert proc.returncode == 127 and "no codebuddy found on PATH" in proc.stderr


def test_the_wrapper_never_takes_the_agent_from_a_relative_path_entry(tmp_path: Path) -> None:
    """A repository carrying its own `claude` cannot slip it in through "." or an empty PATH entry."""
    wrap, real, repo = (tmp_path / d for d in ("wrap", "real", "repo"))
    for d in (wrap, real, repo):
        d.mkdir()
    plan = CLAUDE.install("user", Where(None, str(tmp_path), {"PATH": f"{wrap}:{real}"}), reader({}), HOOKCAGE)
    wrapper = next(e for e in plan.edits if e.mode == 0o755)
    (wrap / "claude").write_bytes(wrapper.content or b"")
    (wrap / "claude").chmod(0o755)
    for d, said in ((repo, "repository"), (real, "real")):
        (d / "claude").write_text(f'#!/bin/sh\necho {said} "$@"\n')
        (d / "claude").chmod(0o755)
    for path in (f"{wrap}::{real}:/usr/bin:/bin", f"{wrap}:.:{real}:/usr/bin:/bin", f"{wrap}:*:{real}:/bin"):
        out = subprocess.run([str(wrap / "claude"), "-p", "x"], cwd=repo, env={"PATH": path},
                             capture_output=True, text=True, timeout=10)
        assert out.stdout.startswith("real --setting-sources user"), (path, out.stdout, out.stderr)


# -- a repository's own `claude` is never the real one (issue 21, class 6) --------------------------


def _script(path: Path, said: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'#!/bin/sh\necho {said} "$@"\n')
    path.chmod(0o755)


def test_install_run_in_a_checkout_with_dot_on_path_records_the_real_claude(tmp_path: Path) -> None:
    """The attack: `hookcage install claude` run inside a checkout that carries `./claude` (and
    `node_modules/.bin/claude`), with `.` and that folder on PATH ahead of the real one. The
    wrapper's fallback is the real claude; run later in the checkout, the wrapper never runs the
    repository's, even when the real one is gone."""
    repo, real, user = tmp_path / "checkout", tmp_path / "real", tmp_path / "user"
    _script(repo / "claude", "repository")
    _script(repo / "node_modules" / ".bin" / "claude", "repository-bin")
    _script(real / "claude", "real")
    user.mkdir()
    system = "/usr/bin:/bin"
    path = f".::{repo}/node_modules/.bin:node_modules/.bin:{real}:{system}"
    env = {**{k: v for k, v in os.environ.items() if k in ("PYTHONPATH", "LANG")}, "PATH": f"{path}:{os.environ['PATH']}",
           "HOME": str(user), "HOOKCAGE_HOME": str(tmp_path / "hc")}
    proc = subprocess.run(["hookcage", "install", "claude"], cwd=repo, env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    wrapper = user / ".local" / "bin" / "claude"
    script = wrapper.read_text()
    assert f"fallback={real}/claude\n" in script
    assert str(repo) not in script
    for entries in (f"{wrapper.parent}:.:{repo}/node_modules/.bin:{real}:{system}",
                    f"{wrapper.parent}::node_modules/.bin:{system}"):  # the real one is not on PATH: the fallback
        out = subprocess.run([str(wrapper), "-p", "x"], cwd=repo, env={"PATH": entries, "HOME": str(user)},
                             capture_output=True, text=True, timeout=10)
        assert out.stdout.startswith("real --setting-sources user"), (entries, out.stdout, out.stderr)
    os.unlink(real / "claude")
    out = subprocess.run([str(wrapper), "-p", "x"], cwd=repo, env={"PATH": f"{wrapper.parent}:.:{system}",
                                                                   "HOME": str(user)},
                         capture_output=True, text=True, timeout=10)
    assert (out.returncode, out.stdout) == (127, ""), out.stdout
    assert "no claude found on PATH" in out.stderr


def test_the_wrapper_never_runs_a_claude_inside_the_directory_it_runs_in(tmp_path: Path) -> None:
    """At run time: an absolute PATH entry inside the current directory (as named, or through a
    symlink), or a fallback recorded there, is the repository's, not the agent."""
    repo, real, wrap = tmp_path / "checkout", tmp_path / "real", tmp_path / "wrap"
    _script(repo / "bin" / "claude", "repository")
    _script(real / "claude", "real")
    (tmp_path / "link").symlink_to(repo / "bin")
    plan = CLAUDE.install("user", Where(None, str(tmp_path), {"PATH": f"{repo}/bin"}),
                          reader({f"{repo}/bin/claude": b"#!/bin/sh"}), HOOKCAGE)
    script = next(e for e in plan.edits if e.mode == 0o755).content or b""
    assert f"fallback={repo}/bin/claude".encode() in script  # as an install elsewhere recorded it
    _script(wrap / "claude", "unused")
    (wrap / "claude").write_bytes(script)
    system = "/usr/bin:/bin"

    def run(path: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(wrap / "claude")], cwd=cwd, env={"PATH": path, "HOME": str(tmp_path / "u")},
                              capture_output=True, text=True, timeout=10)

    assert run(f"{wrap}:{repo}/bin:{real}:{system}", repo).stdout.startswith("real ")
    assert run(f"{wrap}:{tmp_path}/link:{real}:{system}", repo).stdout.startswith("real ")
    assert run(f"{wrap}:{system}", repo).returncode == 127  # the fallback is in here: not taken
    assert run(f"{wrap}:{system}", repo / "bin").returncode == 127
    (tmp_path / "elsewhere").mkdir()
    assert run(f"{wrap}:{system}", tmp_path / "elsewhere").stdout.startswith("repository ")  # not this checkout's


def test_hookcage_s_own_command_is_never_taken_from_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from executor.places import outside_cwd

    monkeypatch.chdir(tmp_path)
    assert outside_cwd(f".::bin:{tmp_path}/bin:{tmp_path}:/usr/bin:/bin") == "/usr/bin:/bin"


def test_what_hookcage_runs_or_registers_from_path_is_never_the_checkouts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The siblings of install's fallback: the compiler of the statx shim and mmdebstrap (run at an
    image build), and the runsc `setup runsc` registers with dockerd (run as root by every container)."""
    from executor.cli.setup import shutil_which
    from executor.provision.mmdebstrap import system_mmdebstrap
    from executor.provision.recipe import shim_compiler

    for name in ("cc", "mmdebstrap", "runsc", "mycc"):
        _script(tmp_path / name, "repository")
        _script(tmp_path / "bin" / name, "repository")
    monkeypatch.chdir(tmp_path)
    path = f".::bin:{tmp_path}/bin"
    monkeypatch.setenv("PATH", path)
    assert shim_compiler({"PATH": path}) is None
    assert shim_compiler({"PATH": path, "CC": "./mycc -O2"}) is None
    assert shim_compiler({"PATH": path, "CC": "mycc"}) is None
    assert system_mmdebstrap(path) is None
    assert shutil_which("runsc") is None
    _script(tmp_path.parent / f"{tmp_path.name}-sys" / "cc", "system")
    assert shim_compiler({"PATH": f"{path}:{tmp_path.parent}/{tmp_path.name}-sys"}) == \
        f"{tmp_path.parent}/{tmp_path.name}-sys/cc"
