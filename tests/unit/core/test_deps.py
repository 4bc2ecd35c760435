"""What hooks' scripts need (executor.core.deps) and the pure parts of the cache (executor.prepare.depcache)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from executor.core.deps import (
    ONLY_INDEX,
    Need,
    find_needs,
    lock_problem,
    need_key,
    node_need,
    npm_spec_problem,
    own_need,
    requirement_problem,
    script_metadata,
    uv_need,
)
from executor.core.files import FileState
from executor.errors import HookcageError
from executor.prepare.depcache import DEPS_MOUNT, RUN_UV_CACHE, RunSetup, Target, run_setup

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
    ("['--index-url=http://evil', 'x']", "dependency '--index-url=http://evil' is not a requirement by name "
     "(a path, an archive, a URL or a pip option?); " + ONLY_INDEX),
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
    ("git+https://example.invalid/x.git", "a git dependency, not fetched"),
    ("https://example.invalid/x.tgz", "a URL dependency, not fetched"),
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


def test_the_cache_key_covers_the_naming_bytes_the_image_and_the_root() -> None:
    files = (state("g.py", UV_SCRIPT),)
    (need,) = find_needs(files)
    key = need_key(need, files, "sha256:aa", "/p")
    assert key == need_key(need, files, "sha256:aa", "/p")
    assert key != need_key(need, files, "sha256:bb", "/p")
    assert key != need_key(need, files, "sha256:aa", "/q")  # uv names a script's environment by its path
    changed = (state("g.py", UV_SCRIPT + b"# a comment\n"),)
    assert key != need_key(find_needs(changed)[0], changed, "sha256:aa", "/p")


def test_one_script_has_one_cache_whichever_hook_covers_it() -> None:
    # Two hooks cover the same helper beside their own scripts: its key does not depend on
    # the other files of either hook, so it is fetched once, and a change to one hook's own
    # script leaves the helper's cache as it is.
    helper = state("h/utils/tts.py", UV_SCRIPT)
    first = (state("h/a.py", UV_SCRIPT.replace(b"requests", b"rich")), helper)
    second = (state("h/b.sh", b"#!/bin/sh\necho\n"), helper, state("h/c.txt", b"x"))
    keys = {need_key(n, files, "img", "/p") for files in (first, second) for n in find_needs(files)
            if n.path == "h/utils/tts.py"}
    assert len(keys) == 1


def test_the_node_cache_key_covers_the_lock_and_local_packages() -> None:
    manifest = state("h/package.json", b'{"dependencies": {"a": "file:../vendor/a.tgz"}}')
    files = (manifest, state("h/package-lock.json", b"{}"), state("vendor/a.tgz", b"v1"))
    (need,) = find_needs(files)
    key = need_key(need, files, "img", "/p")
    for i, changed in enumerate((state("h/package-lock.json", b"{ }"), state("vendor/a.tgz", b"v2"))):
        other = tuple(changed if f.path == changed.path else f for f in files)
        assert need_key(find_needs(other)[0], other, "img", "/p") != key, i


def test_a_hook_owns_the_scripts_its_command_names_and_covers_the_rest() -> None:
    files = (
        state(".claude/hooks/stop.py", UV_SCRIPT),
        state(".claude/hooks/utils/tts/openai_tts.py", UV_SCRIPT.replace(b"requests", b"openai[voice_helpers]")),
        state(".claude/hooks/node/package.json", b'{"dependencies": {"a": "^1"}}'),
    )
    needs = {n.path: n for n in find_needs(files)}
    direct = (".claude/hooks/stop.py",)
    assert own_need(needs[".claude/hooks/stop.py"], direct)
    assert not own_need(needs[".claude/hooks/utils/tts/openai_tts.py"], direct)
    assert not own_need(needs[".claude/hooks/node"], direct)
    assert own_need(needs[".claude/hooks/node"], (".claude/hooks/node/guard.js",))
    assert not own_need(needs[".claude/hooks/node"], (".claude/hooks/node/README.md",))


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


def test_a_run_with_uv_dependencies_links_a_writable_cache_to_the_read_only_ones() -> None:
    setup = run_setup([(Path("/h/deps/k1"), Need("uv", "g.py", ("x",))),
                       (Path("/h/deps/k2"), Need("uv", "utils/t.py", ("y",)))])
    assert [(b.source, b.target, b.read_only) for b in setup.binds] == [
        ("/h/deps/k1", f"{DEPS_MOUNT}/k1", True), ("/h/deps/k2", f"{DEPS_MOUNT}/k2", True)]
    assert setup.env is not None and setup.env["UV_CACHE_DIR"] == RUN_UV_CACHE and setup.env["UV_OFFLINE"] == "1"
    command = setup.command("./g.py 'a b'")
    assert command.startswith(f"mkdir -p {RUN_UV_CACHE}/archive-v0 {RUN_UV_CACHE}/environments-v2 && for e in ")
    assert f"{DEPS_MOUNT}/k1/uv/environments-v2/* {DEPS_MOUNT}/k2/uv/environments-v2/*" in command
    assert command.endswith("&& exec /bin/sh -c './g.py '\"'\"'a b'\"'\"''")


def test_a_run_with_node_dependencies_gets_node_path_and_no_prelude() -> None:
    setup = run_setup([(Path("/h/deps/k"), Need("node", ".claude/hooks", ("a@file:a",)))])
    assert setup.env == {"NODE_PATH": f"{DEPS_MOUNT}/k/node/.claude/hooks/node_modules"}
    assert setup.command("node x.js") == "node x.js"
    assert RunSetup().command("true") == "true"


# --------------------------------------------------------------------------
# Issue 21: nothing but packages from an index or registry is fetched
# --------------------------------------------------------------------------

def uv_script(*deps: str, tool: str = "") -> bytes:
    listed = ", ".join(json.dumps(d) for d in deps)
    return f"# /// script\n# dependencies = [{listed}]\n{tool}# ///\nprint(1)\n".encode()


@pytest.mark.parametrize("dep, why", [
    # pip builds every one of these on the host, running the package's build backend,
    # whatever --only-binary says.
    ("x @ https://h/x.tar.gz", "names a URL (https)"),
    ("x@https://h/x-1.0.tar.gz", "names a URL (https)"),
    ("x @ file:///abs/x-1.0.tar.gz", "names a URL (file)"),
    ("x @ file:./x", "names a URL (file)"),
    ("x @ git+https://h/x.git", "names a URL (git+https)"),
    ("x @ git+ssh://git@h/x.git@main", "names a URL (git+ssh)"),
    ("x @ ./path", "names a URL (a path)"),
    ("./local", "is not a requirement by name"),
    ("../up", "is not a requirement by name"),
    ("/abs/path", "is not a requirement by name"),
    ("file:///abs/x.tar.gz", "is not a requirement by name"),
    ("https://h/x.tar.gz", "is not a requirement by name"),
    ("git+https://h/x.git", "is not a requirement by name"),
    ("x===/../../../../tmp/x-1.0.tar.gz", "names an archive file or a path"),  # arbitrary equality
    ("x===./vendor", "names an archive file or a path"),
    ("x==1.0+local.tar.gz", "names an archive file or a path"),
    ("x.whl", "names an archive file"),
    ("x-1.0.tar.gz", "names an archive file"),
    ("x-1.0.zip", "names an archive file"),
    ("x-1.0.tar.bz2", "names an archive file"),
    ("x-1.0.TGZ", "names an archive file"),
    ("-e .", "is not a requirement by name"),
    ("--index-url=https://evil", "is not a requirement by name"),
    ("--find-links=/tmp", "is not a requirement by name"),
    ("-r requirements.txt", "is not a requirement by name"),
    ("x==1 --hash=sha256:00", "is not a requirement by name"),
    ("", "is not a requirement by name"),
    ("x\n./y", "is not a requirement by name"),
])
def test_a_dependency_that_is_not_a_package_from_an_index_is_refused(dep: str, why: str) -> None:
    problem = requirement_problem(dep)
    assert problem is not None and why in problem and repr(dep) in problem and "\n" not in problem
    need = uv_need("h.py", uv_script("rich", dep))
    assert need is not None and need.problem == problem


@pytest.mark.parametrize("dep", [
    "requests>=2", "rich[jupyter]; python_version>'3.8'", "python-dotenv", "pyyaml==6.0.2",
    "a.b-c_d~=1.0", "x[y,z]>=1,<2; sys_platform == 'linux'", "zope.interface",
])
def test_a_requirement_by_name_stays_allowed(dep: str) -> None:
    assert requirement_problem(dep) is None
    need = uv_need("h.py", uv_script(dep))
    assert need is not None and need.problem is None and need.dependencies == (dep,)


@pytest.mark.parametrize("tool, key", [
    ("# [tool.uv.sources]\n# x = { path = '../x' }\n", "sources"),
    ("# [tool.uv.sources]\n# x = { git = 'https://h/x.git' }\n", "sources"),
    ("# [tool.uv.sources]\n# x = { url = 'https://h/x.tar.gz' }\n", "sources"),
    ("# [tool.uv]\n# find-links = ['./wheels']\n", "find-links"),
    ("# [tool.uv]\n# index-url = 'https://evil/simple'\n", "index-url"),
    ("# [tool.uv]\n# extra-index-url = ['https://evil/simple']\n", "extra-index-url"),
    ("# [[tool.uv.index]]\n# url = 'https://evil/simple'\n", "index"),
    ("# [tool.uv.pip]\n# find-links = ['.']\n", "pip"),
    ("# [tool.uv]\n# override-dependencies = ['x @ file:///abs']\n", "override-dependencies"),
    ("# [tool.uv]\n# constraint-dependencies = ['./x']\n", "constraint-dependencies"),
    ("# [tool.uv]\n# dev-dependencies = ['x @ git+https://h/x']\n", "dev-dependencies"),
    ("# [tool.uv]\n# extra-build-dependencies = { x = ['y @ file:///a'] }\n", "extra-build-dependencies"),
])
def test_a_uv_table_that_names_other_sources_is_refused_naming_the_key(tool: str, key: str) -> None:
    need = uv_need("h.py", uv_script("x", tool=tool))
    assert need is not None and need.problem is not None
    assert need.problem.startswith(f"[tool.uv] {key}")


def test_a_uv_table_with_settings_only_is_fine() -> None:
    tool = "# [tool.uv]\n# exclude-newer = '2025-01-01T00:00:00Z'\n# prerelease = 'allow'\n"
    need = uv_need("h.py", uv_script("x", tool=tool))
    assert need is not None and need.problem is None
    # [tool.uv] sources with no dependencies: still refused (uv would honour it)
    bad = uv_need("h.py", uv_script(tool="# [tool.uv.sources]\n# x = { path = '/x' }\n"))
    assert bad is not None and bad.problem is not None and "sources" in bad.problem


@pytest.mark.parametrize("spec, kind", [
    ("evil/repo", "a git dependency (GitHub shorthand owner/repo)"),
    ("github:a/b", "a git dependency"),
    ("gitlab:a/b", "a git dependency"),
    ("bitbucket:a/b", "a git dependency"),
    ("gist:abc", "a git dependency"),
    ("a/b#v1", "a git dependency"),
    ("x#semver:^1", "a git dependency"),
    ("evil/repo#semver:^1.0", "a git dependency"),
    ("git+ssh://git@h/x.git", "a git dependency"),
    ("git://h/x.git", "a git dependency"),
    ("git@github.com:a/b.git", "a git dependency"),
    ("https://h/x.tgz", "a URL dependency"),
    ("http://h/x", "a URL dependency"),
    ("ftp://h/x", "a URL dependency"),
    ("npm:y@git+https://h/y.git", "the alias is not to a registry version"),
    ("npm:y@evil/repo", "the alias is not to a registry version"),
    ("npm:y@file:../../x", "the alias is not to a registry version"),
    ("npm:y@npm:z@1", "the alias is not to a registry version"),
    ("npm:../x", "the alias names no package"),
    ("next@beta", "not a registry version, range or tag"),
])
def test_node_specs_npm_would_not_fetch_from_the_registry_are_refused(spec: str, kind: str) -> None:
    problem = npm_spec_problem(spec)
    assert problem is not None and problem.startswith(kind)
    need = node_need("hooks", json.dumps({"dependencies": {"ok": "^1", "x": spec}}).encode())
    assert need is not None and need.problem is not None
    assert need.problem.startswith(f"x@{spec}: {kind}") or need.problem.startswith(f"x@{spec} lies outside")


@pytest.mark.parametrize("spec", ["^1.2.3", "1.2.3", "~1.2", ">=1 <2", "1.x || >=2.5.0", "*", "", "latest",
                                  "next", "npm:y@^1", "npm:y", "npm:@scope/y@1.0.0", "npm:y@latest"])
def test_registry_specs_stay_allowed(spec: str) -> None:
    assert npm_spec_problem(spec) is None
    need = node_need("hooks", json.dumps({"dependencies": {"x": spec}}).encode())
    assert need is not None and need.problem is None and need.registry == (f"x@{spec}",)


@pytest.mark.parametrize("field", ["optionalDependencies", "peerDependencies", "devDependencies"])
def test_git_specs_in_the_other_dependency_fields_are_refused_too(field: str) -> None:
    need = node_need("h", json.dumps({"dependencies": {"a": "^1"}, field: {"e": "evil/repo"}}).encode())
    assert need is not None and need.problem is not None and f"e@evil/repo (in {field})" in need.problem


def test_overrides_and_odd_names_are_refused() -> None:
    override = node_need("h", json.dumps({"dependencies": {"a": "^1"},
                                         "overrides": {"b": {"c": "github:x/y"}}}).encode())
    assert override is not None and override.problem is not None and "(in overrides)" in override.problem
    fine = node_need("h", json.dumps({"dependencies": {"a": "^1"}, "overrides": {"b": "2.0.0", "c": "$a"}}).encode())
    assert fine is not None and fine.problem is None
    named = node_need("h", json.dumps({"dependencies": {"../../x": "^1"}}).encode())
    assert named is not None and named.problem is not None and "not a package name" in named.problem


def lock(**entries: object) -> bytes:
    return json.dumps({"lockfileVersion": 3, "packages": {"": {"dependencies": {"a": "^1"}}, **entries}}).encode()


@pytest.mark.parametrize("entry", [
    {"version": "1.0.0", "resolved": "git+ssh://git@github.com/evil/repo.git#0123abc"},
    {"version": "1.0.0", "resolved": "https://evil.example/a-1.0.0.tgz"},
    {"version": "1.0.0", "resolved": "http://registry.npmjs.org/a/-/a-1.0.0.tgz"},
    {"version": "1.0.0", "resolved": "https://registry.npmjs.org.evil/a/-/a-1.0.0.tgz"},
    {"version": "1.0.0", "resolved": "file:../../../outside.tgz"},
    {"version": "1.0.0", "resolved": "/abs/a.tgz"},
    {"resolved": "../../outside", "link": True},
    {"version": "github:evil/repo#abc"},
    {"version": "git+https://h/x.git#abc"},
    {"version": "https://h/x.tgz"},
])
def test_a_lock_entry_npm_would_fetch_from_elsewhere_is_refused(entry: dict[str, object]) -> None:
    problem = lock_problem("h", "h/package-lock.json", lock(**{"node_modules/a": entry}))
    assert problem is not None and problem.startswith("h/package-lock.json: node_modules/a ")
    files = (state("h/package.json", b'{"dependencies": {"a": "^1"}}'),
             state("h/package-lock.json", lock(**{"node_modules/a": entry})))
    (need,) = find_needs(files)
    assert need.problem == problem


def test_a_v1_lock_and_a_shrinkwrap_are_read_too() -> None:
    v1 = json.dumps({"lockfileVersion": 1, "dependencies": {"a": {"version": "1.0.0", "dependencies": {
        "b": {"version": "bitbucket:evil/repo#abc"}}}}}).encode()
    files = (state("package.json", b'{"dependencies": {"a": "^1"}}'), state("npm-shrinkwrap.json", v1))
    (need,) = find_needs(files)
    assert need.problem is not None and need.problem.startswith("npm-shrinkwrap.json: b version 'bitbucket:")


def test_a_lock_of_registry_tarballs_and_local_packages_is_fine() -> None:
    data = lock(**{
        "node_modules/a": {"version": "1.0.0", "resolved": "https://registry.npmjs.org/a/-/a-1.0.0.tgz"},
        "node_modules/y": {"name": "@s/y", "version": "2.0.0",
                           "resolved": "https://registry.npmjs.org/@s/y/-/y-2.0.0.tgz"},
        "node_modules/w": {"resolved": "lib/words", "link": True},
        "lib/words": {"version": "1.0.0"},
        "node_modules/s": {"version": "1.0.0", "resolved": "file:vendor/s-1.0.0.tgz"},
    })
    assert lock_problem("h", "h/package-lock.json", data) is None
    v1 = json.dumps({"dependencies": {"y": {"version": "npm:@s/y@2.0.0"}, "s": {"version": "file:vendor/s.tgz"}}})
    assert lock_problem("h", "h/package-lock.json", v1.encode()) is None
    assert lock_problem("h", "h/package-lock.json", b"{nope") == "h/package-lock.json is not valid JSON"


def test_a_refused_need_is_kept_in_the_trust_profile() -> None:
    """So a trust record made before a spelling was refused no longer matches it."""
    need = uv_need("h.py", uv_script("x @ file:///abs"))
    assert need is not None and need.to_json()["problem"] == need.problem
    assert need.where() == "h.py" and Need("node", ".").where() == "package.json"
    assert Need("node", "a/b").where() == "a/b/package.json"


def test_an_upper_case_tarball_name_is_a_local_file_as_npm_reads_it() -> None:
    need = node_need("h", json.dumps({"dependencies": {"x": "X-1.0.TGZ", "y": "../../Y.TAR"}}).encode())
    assert need is not None and need.problem is not None and "y@../../Y.TAR lies outside the project" in need.problem
    fine = node_need("h", json.dumps({"dependencies": {"x": "X-1.0.TGZ"}}).encode())
    assert fine is not None and fine.local == ("h/X-1.0.TGZ",) and fine.registry == ()


# Property: whatever a repository writes, the classifiers answer (no exception), and an accepted
# Python requirement is one pip reads as a name: no URL, no slash, no archive ending before the marker.

_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
                     max_leaves=20)
_SPEC_CHARS = st.text(alphabet="abcXYZ019.-_/@:#^~<>=| +*!'()\\$\n", max_size=30)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=40), _SPEC_CHARS))
def test_any_python_dependency_is_answered_and_an_accepted_one_is_a_name(text: str) -> None:
    problem = requirement_problem(text)
    if problem is None:
        from packaging.requirements import Requirement

        requirement = Requirement(text)
        plain = str(requirement).split(";", 1)[0]
        assert requirement.url is None and "/" not in plain and "\\" not in plain and "@" not in plain


@settings(max_examples=300, deadline=None)
@given(_SPEC_CHARS, _JSON)
def test_any_node_spec_manifest_or_lock_is_answered(spec: str, value: object) -> None:
    problem = npm_spec_problem(spec)
    if problem is None:  # accepted: nothing npm reads as git, a URL or a path
        assert not any(c in spec for c in "/:#@\\") or spec.startswith("npm:")
    node_need("h", json.dumps({"dependencies": {"x": spec}, "overrides": value}).encode())
    lock_problem("h", "h/package-lock.json", json.dumps({"packages": value, "dependencies": value}).encode())
    uv_need("h.py", b"# /// script\n# dependencies = ['x']\n# [tool.uv]\n# sources = 1\n# ///\n")


def test_a_projects_npmrc_is_not_given_to_npm(tmp_path: Path) -> None:
    """A reviewed `.npmrc` beside the package (registry=..., git=...) would redirect the install."""
    from executor.prepare.depcache import DepCache
    from executor.sandbox.base import RunRequest, RunResult

    files = (state("h/package.json", b'{"dependencies": {"a": "^1"}}'), state("h/guard.js", b""),
             state("h/.npmrc", b"registry=http://evil.example/\ngit=/tmp/evil\n"))
    requests: list[RunRequest] = []

    def run(request: RunRequest) -> RunResult:
        requests.append(request)
        return RunResult(0)

    cache = DepCache(tmp_path / "deps")
    (tmp_path / "staging").mkdir()
    problem = cache.fetch("k", find_needs(files)[0], files, root=tmp_path, image=None, run=run,
                          staging=tmp_path / "staging", log=lambda line: None)
    assert problem is None
    assert (cache.path("k") / "node" / "h" / "package.json").is_file()
    assert not (cache.path("k") / "node" / "h" / ".npmrc").exists()
    (request,) = requests
    assert "--ignore-scripts" in request.command and request.options.workspace == "none"
