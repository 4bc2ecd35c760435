"""What runs is exactly what was reviewed (issue 11, section 2): the pure parts.

The env rule of repository hooks, the words a command references (``cd``,
``python -m``, bare script names), what reviewed scripts load (shell, Python,
Node, the folder rule), the staging tree and the overlay mount built from it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from executor.core.hookparse import parse_hook_file
from executor.core.hooks import Scope
from executor.core.options import SandboxOptions
from executor.core.protected_env import protected_env_name
from executor.gates.allowlist import literal_words
from executor.gates.trust import (
    UnsafeReference,
    collect_loaded,
    collect_references,
    command_words,
    loaded_words,
)
from executor.sandbox.base import RunRequest
from executor.sandbox.docker import run_mounts, staged_tree

H0 = "$.hooks.PreToolUse[0].hooks[0]"


def handler(env: dict[str, str], scope: Scope, where: str = "env") -> Any:
    hook: dict[str, Any] = {"type": "command", "command": "./check.sh"}
    if where == "env":
        hook["env"] = env
    else:
        hook["sandbox"] = {"env": env}
    data = {"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [hook]}]}}
    return parse_hook_file(data, scope=scope, source="/repo/.hookcage/hooks.json", project_root="/repo")


# -- a repository's hook env ---------------------------------------------------------

PROTECTED = [
    "PATH", "HOME", "CLAUDE_PROJECT_DIR", "HOOKCAGE_PROJECT_DIR", "CODEBUDDY_PROJECT_DIR", "CLAUDE_ENV_FILE",
    "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME",
    "PYTHONUSERBASE", "NODE_OPTIONS", "NODE_PATH", "BASH_ENV", "ENV", "PERL5LIB", "PERL5OPT", "RUBYLIB",
    "RUBYOPT", "GIT_CONFIG_GLOBAL", "GIT_EXEC_PATH", "GIT_SSH_COMMAND", "GIT_CONFIG_COUNT", "UV_CACHE_DIR",
    "UV_PYTHON", "npm_config_prefix", "NPM_CONFIG_USERCONFIG", "GCONV_PATH", "PAGER", "EDITOR",
    "XDG_CONFIG_HOME", "SHELLOPTS", "PS4", "BASH_FUNC_x", "LUA_INIT", "OPENSSL_CONF", "JAVA_TOOL_OPTIONS",
    "path", "Home", "CDPATH", "IFS", "LESSOPEN", "MAKEFILES", "HOOKCAGE_ANYTHING",
]


@pytest.mark.parametrize("name", PROTECTED)
@pytest.mark.parametrize("scope", [Scope.PROJECT, Scope.LOCAL])
@pytest.mark.parametrize("where", ["env", "sandbox"])
def test_a_repository_hook_may_not_set_what_decides_which_bytes_run(name: str, scope: Scope, where: str) -> None:
    f = handler({name: "x"}, scope, where)
    key = f"{H0}.env.{name}" if where == "env" else f"{H0}.sandbox.env.{name}"
    problems = {p.path: p.message for p in f.errors}
    assert key in problems, problems
    assert problems[key].startswith(f"not allowed in {scope.value} scope: ")
    assert f.hooks[0].invalid is not None  # the hook never runs
    assert f"/repo/.hookcage/hooks.json: {key}: not allowed" in str(f.errors[0])


@pytest.mark.parametrize("name", ["PATH", "HOME", "PYTHONPATH", "LD_PRELOAD", "GIT_DIR", "CLAUDE_PROJECT_DIR"])
@pytest.mark.parametrize("scope", [Scope.USER, Scope.MANAGED])
def test_the_users_own_hooks_may_set_them(name: str, scope: Scope) -> None:
    f = handler({name: "x"}, scope)
    assert f.errors == ()
    assert f.hooks[0].env == ((name, "x"),)


@pytest.mark.parametrize("name", ["DEBUG", "LANG", "LC_ALL", "TZ", "GUARD_LEVEL", "MY_PATHS", "NO_COLOR", "TERM"])
def test_harmless_names_stay_allowed(name: str) -> None:
    assert protected_env_name(name) is None
    assert handler({name: "1"}, Scope.PROJECT).errors == ()


# -- the words a command references ---------------------------------------------------


def test_python_dash_m_names_the_module_at_the_root() -> None:
    words = command_words(["python3", "-m", "tool.cli", "x"])
    assert {"./tool.py", "./tool"} <= set(words) and {"python3", "tool.cli", "x"} <= set(words)


@pytest.mark.parametrize("command", [
    "cd src && sh .hookcage/check.sh", "cd src; ./check.sh", "pushd lib && python3 x.py", "cd src && sh check.sh",
])
def test_a_relative_path_after_a_directory_change_is_refused(command: str) -> None:
    with pytest.raises(UnsafeReference, match=r"comes after `(cd|pushd)`"):
        command_words(literal_words(command, "/repo"))


@pytest.mark.parametrize("command", [
    "cd src && npm test", 'cd "$CLAUDE_PROJECT_DIR" && sh $CLAUDE_PROJECT_DIR/.hookcage/x.sh',
    "sh .hookcage/x.sh && cd /tmp",
])
def test_a_directory_change_without_relative_paths_after_it_is_fine(command: str) -> None:
    command_words(literal_words(command, "/repo"))


def test_a_bare_script_name_is_a_reference_even_before_it_exists(tmp_path: Path) -> None:
    found = collect_references(["sh", "check.sh", "notes"], str(tmp_path))
    assert [(f.path, f.kind) for f in found] == [("check.sh", "missing")]


# -- what a reviewed script loads -----------------------------------------------------


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    return root


def write(root: Path, files: dict[str, str]) -> None:
    for path, text in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)


def loaded(root: Path, *words: str) -> list[str]:
    files = collect_references(list(words), str(root))
    found = collect_loaded(files, str(root), shell_words=lambda text: literal_words(text, str(root)))
    return [f.path for f in found]


def test_a_script_in_a_folder_covers_every_file_under_that_folder(project: Path) -> None:
    write(project, {".hookcage/check.sh": '. "$(dirname "$0")/lib.sh"\n', ".hookcage/lib.sh": "x\n",
                    ".hookcage/inc/deep.sh": "y\n", "README.md": "r\n", "src/app.py": "a\n"})
    assert loaded(project, "./.hookcage/check.sh") == [".hookcage/check.sh", ".hookcage/inc/deep.sh", ".hookcage/lib.sh"]


def test_a_script_at_the_root_covers_the_code_files_beside_it(project: Path) -> None:
    write(project, {"hook.sh": ". ./lib.sh\n", "lib.sh": "x\n", "other.py": "p\n", "README.md": "r\n",
                    "src/app.py": "a\n"})
    assert loaded(project, "./hook.sh") == ["hook.sh", "lib.sh", "other.py"]


def test_shell_sources_and_interpreters_are_followed(project: Path) -> None:
    write(project, {"hook.sh": "source scripts/common.sh\nbash tools/run\npython3 -u py/x.py\n",
                    "scripts/common.sh": ". lib/deeper.sh\n", "lib/deeper.sh": "z\n", "tools/run": "r\n",
                    "py/x.py": "import helper\n", "py/helper.py": "h\n"})
    assert loaded(project, "./hook.sh") == [
        "hook.sh", "lib/deeper.sh", "py/helper.py", "py/x.py", "scripts/common.sh", "tools/run",
    ]


def test_python_imports_resolve_beside_the_script(project: Path) -> None:
    write(project, {"g/guard.py": "import os, shell_text\nfrom pkg.mod import f\nimport missing_one\n",
                    "g/shell_text.py": "s\n", "g/pkg/__init__.py": "", "g/pkg/mod.py": "m\n",
                    "shell_text.py": "not this one\n"})
    found = [f for f in loaded(project, "./g/guard.py")]
    assert found == ["g/guard.py", "g/pkg/__init__.py", "g/pkg/mod.py", "g/shell_text.py"]


def test_python_imports_of_a_root_script(project: Path) -> None:
    write(project, {"guard.py": "import helpers\n", "helpers/__init__.py": "from .x import y\n",
                    "helpers/x.py": "y = 1\n", "README.md": "r\n"})
    assert loaded(project, "./guard.py") == ["guard.py", "helpers/__init__.py", "helpers/x.py"]


def test_node_relative_requires_and_imports(project: Path) -> None:
    write(project, {"hook.js": "require('./lib/a'); import b from \"../outside.js\"; import('./c.mjs');"
                               " require('left-pad')\n",
                    "lib/a.js": "require('./b')\n", "lib/b/index.js": "i\n", "c.mjs": "c\n"})
    assert loaded(project, "./hook.js") == ["c.mjs", "hook.js", "lib/a.js", "lib/b/index.js"]


def test_a_load_through_a_symlink_out_of_the_project_is_refused(project: Path, tmp_path: Path) -> None:
    (tmp_path / "secret.sh").write_text("s\n")
    write(project, {"x/hook.sh": ". lib/evil.sh\n"})
    (project / "lib").mkdir()
    os.symlink(tmp_path / "secret.sh", project / "lib" / "evil.sh")
    with pytest.raises(UnsafeReference, match="outside the project"):
        loaded(project, "./x/hook.sh")


def test_too_many_loaded_files_is_a_clear_refusal(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from executor.gates.trust import references

    # One limit: the reference walk and collect_loaded (scripts) both read it from references.
    monkeypatch.setattr(references, "MAX_REFERENCED_FILES", 5)
    write(project, {"hook.sh": "x\n", **{f"f{i}.sh": "x\n" for i in range(10)}})
    with pytest.raises(UnsafeReference, match="more than 5 files"):
        loaded(project, "./hook.sh")


def test_data_files_are_not_scanned_as_scripts(project: Path) -> None:
    write(project, {"conf/rules.json": '{"a": "./x.sh"}', "conf/x.sh": "x\n"})
    states = collect_references(["./conf/rules.json"], str(project))
    assert loaded_words(states, str(project), shell_words=lambda t: []) == []


# -- the staging tree and the overlay mount -------------------------------------------


def request(project: str, overlays: dict[str, str], workspace: str = "ro") -> RunRequest:
    return RunRequest(command="true", cwd=project, project_dir=project, overlays=overlays,
                      options=SandboxOptions(workspace=workspace))  # type: ignore[arg-type]


def test_a_tree_of_staged_files_is_laid_over_the_workspace_as_an_overlay(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    tree = "/home/u/.hookcage/staging/run-1-x/tree"
    req = request(str(project), {f"{project}/.hookcage/a.sh": f"{tree}/.hookcage/a.sh",
                                 f"{project}/b.py": f"{tree}/b.py"})
    assert staged_tree(req) == tree
    mounts, _ = run_mounts(req)
    assert mounts == [{
        "Type": "volume", "Target": str(project),
        "VolumeOptions": {"NoCopy": True, "DriverConfig": {"Name": "local", "Options": {
            "type": "overlay", "device": "overlay", "o": f"lowerdir={tree}:{project}"}}},
    }]


def test_staged_files_that_are_no_tree_are_bound_one_by_one(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    req = request(str(project), {f"{project}/a.sh": "/pool/c-1/0", f"{project}/b.sh": "/pool/c-1/1"})
    assert staged_tree(req) is None
    assert [m["Type"] for m in run_mounts(req)[0]] == ["bind", "bind", "bind"]


def test_a_writable_workspace_keeps_its_binds(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    req = request(str(project), {f"{project}/a.sh": "/s/run-1/tree/a.sh"}, workspace="rw")
    assert [(m["Type"], m["Target"]) for m in run_mounts(req)[0]] == [("bind", str(project)), ("bind", f"{project}/a.sh")]


def test_a_project_path_the_overlay_options_cannot_carry_goes_through_a_symlink(tmp_path: Path) -> None:
    project = tmp_path / "a,b:c"
    project.mkdir()
    run = tmp_path / "run-1"
    (run / "tree").mkdir(parents=True)
    req = request(str(project), {f"{project}/x.sh": f"{run}/tree/x.sh"})
    mounts, _ = run_mounts(req)
    options = mounts[0]["VolumeOptions"]["DriverConfig"]["Options"]
    assert options["o"] == f"lowerdir={run}/tree:{run}/project"
    assert os.readlink(run / "project") == str(project)
