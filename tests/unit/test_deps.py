"""What hooks' scripts need (executor.core.deps) and the pure parts of the cache (executor.sandbox.depcache)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from executor.core.deps import (
    Need,
    cache_key,
    find_needs,
    node_need,
    script_metadata,
    uv_need,
)
from executor.errors import HookcageError
from executor.gates.trust import FileState
from executor.sandbox.depcache import DEPS_MOUNT, RUN_UV_CACHE, RunSetup, Target, run_setup

UV_SCRIPT = b"""#!/usr/bin/env -S uv run --script
# /// script
# requires-python = ">=3.11"
# dependencies = [
#   "python-dotenv",
#   "pyyaml>=6",
# ]
# ///
import yaml
"""


def state(path: str, data: bytes) -> FileState:
    return FileState(path, "file", hashlib.sha256(data).hexdigest(), None, data)


def test_pep723_metadata_is_read_as_the_spec_says() -> None:
    metadata, problem = script_metadata(UV_SCRIPT.decode())
    assert problem is None
    assert metadata == {"requires-python": ">=3.11", "dependencies": ["python-dotenv", "pyyaml>=6"]}


@pytest.mark.parametrize("text", [
    "import os\n",
    "# /// pyproject\n# x = 1\n# ///\n",          # another block type
    "#/// script\n# dependencies = ['x']\n# ///\n",  # not the marker line
])
def test_no_script_block_means_no_metadata(text: str) -> None:
    assert script_metadata(text) == (None, None)


def test_two_script_blocks_and_bad_toml_are_problems_not_guesses() -> None:
    block = "# /// script\n# dependencies = ['a']\n# ///\n"
    assert script_metadata(block + "\n" + block)[1] == "more than one '# /// script' block (PEP 723 allows one)"
    metadata, problem = script_metadata("# /// script\n# dependencies = [\n# ///\n")
    assert metadata is None and problem is not None and "not valid TOML" in problem


def test_a_uv_need_names_its_dependencies_and_python() -> None:
    need = uv_need(".claude/hooks/guard.py", UV_SCRIPT)
    assert need == Need("uv", ".claude/hooks/guard.py", ("python-dotenv", "pyyaml>=6"), ">=3.11")
    assert need.describe() == "uv script .claude/hooks/guard.py: python-dotenv, pyyaml>=6 (requires-python >=3.11)"


@pytest.mark.parametrize("deps, problem", [
    ("'x'", "'dependencies' must be a list of strings"),
    ("[1]", "'dependencies' must be a list of strings"),
    ("['--index-url=http://evil', 'x']", "not a requirement: '--index-url=http://evil'"),
])
def test_a_dependency_list_that_is_not_requirements_is_refused(deps: str, problem: str) -> None:
    need = uv_need("h.py", f"# /// script\n# dependencies = {deps}\n# ///\n".encode())
    assert need is not None and need.problem == problem


def test_a_script_with_no_dependencies_needs_nothing() -> None:
    assert uv_need("h.py", b"# /// script\n# dependencies = []\n# ///\n") is None
    assert uv_need("h.py", b"print(1)\n") is None


def test_node_dependencies_are_split_into_local_and_registry() -> None:
    manifest = json.dumps({"dependencies": {
        "left": "file:vendor/left-1.0.0.tgz", "util": "file:../lib/util", "chalk": "^5.0.0",
    }}).encode()
    need = node_need("hooks", manifest)
    assert need is not None and need.problem is None
    assert set(need.local) == {"hooks/vendor/left-1.0.0.tgz", "lib/util"}
    assert need.registry == ("chalk@^5.0.0",)
    assert need.dependencies == ("chalk@^5.0.0", "left@file:vendor/left-1.0.0.tgz", "util@file:../lib/util")


@pytest.mark.parametrize("spec, problem", [
    ("file:../../outside", "lies outside the project"),
    ("file:/etc", "lies outside the project"),
    ("git+https://example.invalid/x.git", "git and URL dependencies are not fetched"),
    ("https://example.invalid/x.tgz", "git and URL dependencies are not fetched"),
])
def test_node_dependencies_that_leave_the_project_or_need_git_are_problems(spec: str, problem: str) -> None:
    need = node_need("hooks", json.dumps({"dependencies": {"x": spec}}).encode())
    assert need is not None and need.problem is not None and problem in need.problem


def test_a_package_without_dependencies_or_with_bad_json() -> None:
    assert node_need(".", b'{"name": "x"}') is None
    bad = node_need(".", b"{nope")
    assert bad is not None and bad.problem == "package.json is not valid JSON"


def test_find_needs_reads_python_scripts_and_manifests_only() -> None:
    files = (
        state(".hookcage/guard.py", UV_SCRIPT),
        state(".hookcage/run", UV_SCRIPT),              # a shebang script without .py
        state(".hookcage/notes.txt", UV_SCRIPT.split(b"\n", 1)[1]),  # no shebang, no .py: not a script
        state(".hookcage/package.json", b'{"dependencies": {"a": "file:a"}}'),
    )
    kinds = [(n.kind, n.path) for n in find_needs(files)]
    assert kinds == [("node", ".hookcage"), ("uv", ".hookcage/guard.py"), ("uv", ".hookcage/run")]


def test_the_cache_key_covers_the_naming_bytes_and_the_image() -> None:
    files = (state("g.py", UV_SCRIPT),)
    needs = find_needs(files)
    key = cache_key(needs, files, "sha256:aa")
    assert key == cache_key(needs, files, "sha256:aa")
    assert key != cache_key(needs, files, "sha256:bb")
    changed = (state("g.py", UV_SCRIPT + b"# a comment\n"),)
    assert key != cache_key(find_needs(changed), changed, "sha256:aa")


def test_the_node_cache_key_covers_the_lock_and_local_packages() -> None:
    manifest = state("h/package.json", b'{"dependencies": {"a": "file:../vendor/a.tgz"}}')
    files = (manifest, state("h/package-lock.json", b"{}"), state("vendor/a.tgz", b"v1"))
    key = cache_key(find_needs(files), files, "img")
    for i, changed in enumerate((state("h/package-lock.json", b"{ }"), state("vendor/a.tgz", b"v2"))):
        other = tuple(changed if f.path == changed.path else f for f in files)
        assert cache_key(find_needs(other), other, "img") != key, i


def test_wheels_are_chosen_for_the_image_python_and_glibc() -> None:
    target = Target.from_probe({"python": "3.11", "platform": "linux-x86_64", "libc": "glibc 2.36"})
    assert target.python == "3.11"
    assert target.platforms[0] == "manylinux_2_36_x86_64"
    assert "manylinux_2_17_x86_64" in target.platforms and "manylinux2014_x86_64" in target.platforms
    args = target.pip_args()
    assert args[:6] == ["--python-version", "3.11", "--implementation", "cp", "--abi", "cp311"]


@pytest.mark.parametrize("probe", [
    {"python": "", "platform": "linux-x86_64", "libc": "glibc 2.36"},
    {"python": "3.11", "platform": "linux-x86_64", "libc": ""},           # musl
    {"python": "3.11", "platform": "macosx-14-arm64", "libc": "glibc 2.36"},
])
def test_an_image_wheels_cannot_be_fetched_for_is_a_clear_error(probe: dict[str, str]) -> None:
    with pytest.raises(HookcageError):
        Target.from_probe(probe)


def test_a_run_with_uv_dependencies_links_a_writable_cache_to_the_read_only_one() -> None:
    setup = run_setup(Path("/h/deps/k"), [Need("uv", "g.py", ("x",))])
    (bind,) = setup.binds
    assert (bind.source, bind.target, bind.read_only) == ("/h/deps/k", DEPS_MOUNT, True)
    assert setup.env is not None and setup.env["UV_CACHE_DIR"] == RUN_UV_CACHE and setup.env["UV_OFFLINE"] == "1"
    command = setup.command("./g.py 'a b'")
    assert command.startswith(f"mkdir -p {RUN_UV_CACHE} && ln -sfn ")
    assert command.endswith("&& exec /bin/sh -c './g.py '\"'\"'a b'\"'\"''")


def test_a_run_with_node_dependencies_gets_node_path_and_no_prelude() -> None:
    setup = run_setup(Path("/h/deps/k"), [Need("node", ".claude/hooks", ("a@file:a",))])
    assert setup.env == {"NODE_PATH": f"{DEPS_MOUNT}/node/.claude/hooks/node_modules"}
    assert setup.command("node x.js") == "node x.js"
    assert RunSetup().command("true") == "true"
