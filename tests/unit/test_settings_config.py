"""Settings precedence and hook-file loading, with real files under tmp_path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from executor.config import guess_scope, load_hook_file, load_hooks, project_root
from executor.core.hooks import Scope
from executor.errors import ConfigError
from executor.settings import load_settings


@pytest.fixture
def dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    home, managed = tmp_path / "home", tmp_path / "managed"
    home.mkdir()
    managed.mkdir()
    monkeypatch.setenv("HOOKCAGE_HOME", str(home))
    monkeypatch.setenv("HOOKCAGE_MANAGED_DIR", str(managed))
    for name in ("HOOKCAGE_FAIL_CLOSED", "HOOKCAGE_MAX_PARALLEL", "HOOKCAGE_MEMORY"):
        monkeypatch.delenv(name, raising=False)
    return home, managed


def test_home_variable_isolates_the_installation(dirs: tuple[Path, Path]) -> None:
    home, managed = dirs
    s = load_settings()
    assert s.user_hooks_file == home / "hooks.json"
    assert s.managed_hooks_file == managed / "hooks.json"
    assert s.run_log == home / "runs.jsonl"


def test_precedence_init_env_user_managed_default(dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    home, managed = dirs
    assert load_settings().max_parallel == 8
    (managed / "config.toml").write_text("max_parallel = 2\nmemory = '1g'\n")
    assert load_settings().max_parallel == 2
    (home / "config.toml").write_text("max_parallel = 3\n")
    s = load_settings()
    assert (s.max_parallel, s.memory) == (3, "1g")  # user wins, managed still fills the rest
    monkeypatch.setenv("HOOKCAGE_MAX_PARALLEL", "4")
    assert load_settings().max_parallel == 4
    assert load_settings(max_parallel=5).max_parallel == 5


def test_broken_toml_names_the_file(dirs: tuple[Path, Path]) -> None:
    home, _ = dirs
    (home / "config.toml").write_text("max_parallel = [\n")
    with pytest.raises(ConfigError, match=r"config.toml: not valid TOML"):
        load_settings()


def test_unknown_setting_names_the_file_and_the_valid_ones(dirs: tuple[Path, Path]) -> None:
    _, managed = dirs
    (managed / "config.toml").write_text("max_paralel = 2\n")
    with pytest.raises(ConfigError, match=r"managed/config.toml: unknown setting 'max_paralel'; valid settings: .*max_parallel"):
        load_settings()


def test_invalid_value_names_its_source(dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    home, _ = dirs
    (home / "config.toml").write_text("max_parallel = 0\n")
    with pytest.raises(ConfigError, match=r"home/config.toml: setting 'max_parallel'"):
        load_settings()
    monkeypatch.setenv("HOOKCAGE_MAX_PARALLEL", "lots")
    with pytest.raises(ConfigError, match=r"environment variable HOOKCAGE_MAX_PARALLEL"):
        load_settings()


def test_settings_file_cannot_move_the_installation(dirs: tuple[Path, Path], tmp_path: Path) -> None:
    home, _ = dirs
    (home / "config.toml").write_text(f"home = '{tmp_path / 'elsewhere'}'\n")
    assert load_settings().home == home


def test_missing_files_are_fine(dirs: tuple[Path, Path], tmp_path: Path) -> None:
    s = load_settings()
    hookset = load_hooks(s, tmp_path / "no-project")
    assert hookset.hooks == () and hookset.problems == ()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"hooks": {', "not valid JSON: Expecting property name enclosed in double quotes (line 1, column 12)"),
        (b"\xff\xfe", "is not UTF-8 text"),
        (b"[]", "the top level must be a JSON object"),
    ],
)
def test_broken_hook_file_yields_one_problem_naming_it(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "hooks.json"
    path.write_bytes(content)
    loaded = load_hook_file(path, Scope.PROJECT, tmp_path)
    assert loaded is not None and loaded.hooks == ()
    assert [str(p) for p in loaded.problems] == [f"{path}: $: {message}"]


def test_empty_hook_file_is_empty_not_an_error(tmp_path: Path) -> None:
    path = tmp_path / "hooks.json"
    path.write_text("  \n")
    loaded = load_hook_file(path, Scope.USER, None)
    assert loaded is not None and loaded.problems == ()


def test_all_scopes_merge_in_order(dirs: tuple[Path, Path], tmp_path: Path) -> None:
    home, managed = dirs
    project = tmp_path / "p"
    (project / ".hookcage").mkdir(parents=True)

    def one(cmd: str) -> str:
        return json.dumps({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": cmd}]}]}})

    (project / ".hookcage" / "hooks.local.json").write_text(one("local"))
    (project / ".hookcage" / "hooks.json").write_text(one("project"))
    (home / "hooks.json").write_text(one("user"))
    (managed / "hooks.json").write_text(one("managed"))
    hookset = load_hooks(load_settings(), project)
    assert [h.command for h in hookset.for_event("Stop")] == ["managed", "user", "project", "local"]
    assert [h.scope for h in hookset.hooks] == [Scope.MANAGED, Scope.USER, Scope.PROJECT, Scope.LOCAL]


def test_project_root_resolution(tmp_path: Path) -> None:
    assert project_root({"cwd": str(tmp_path)}, {}) == tmp_path.resolve()
    assert project_root({"cwd": "/elsewhere"}, {"CLAUDE_PROJECT_DIR": str(tmp_path)}) == tmp_path.resolve()


def test_guess_scope_by_location(dirs: tuple[Path, Path], tmp_path: Path) -> None:
    home, managed = dirs
    s = load_settings()
    assert guess_scope(home / "hooks.json", s)[0] is Scope.USER
    assert guess_scope(managed / "hooks.json", s)[0] is Scope.MANAGED
    assert guess_scope(tmp_path / ".hookcage" / "hooks.local.json", s)[0] is Scope.LOCAL
    assert guess_scope(tmp_path / "anything.json", s)[0] is Scope.PROJECT


@pytest.mark.parametrize("value", ["", "  "])
def test_an_empty_log_file_variable_means_the_default_run_log(
    dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    """CI systems set variables empty: HOOKCAGE_LOG_FILE= is the default log, not the current directory."""
    home, managed = dirs
    monkeypatch.setenv("HOOKCAGE_LOG_FILE", value)
    settings = load_settings(home=home, managed_dir=managed)
    assert settings.log_file is None and settings.run_log == home / "runs.jsonl"


def test_a_structured_setting_that_is_not_json_names_its_variable(
    dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """pydantic-settings' own SettingsError would reach the user as an internal error."""
    monkeypatch.setenv("HOOKCAGE_ALLOWLIST", "{bad")
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert str(caught.value) == (
        "environment variable HOOKCAGE_ALLOWLIST: setting 'allowlist': not valid JSON (it takes a JSON object)"
    )
