"""What a hook's scripts need installed, read from their own metadata (no I/O).

Two kinds of hook carry their dependencies with them:

- **uv scripts**: a Python file with PEP 723 inline metadata (a ``# /// script``
  block whose TOML names ``dependencies`` and maybe ``requires-python``), run
  as ``uv run --script x.py``, ``uv run x.py`` or through a
  ``#!/usr/bin/env -S uv run --script`` shebang.
- **Node hooks**: a ``.js``/``.mjs``/``.cjs`` file next to (or below) a
  ``package.json`` with ``dependencies``.

Only dependencies that are fetched as packages from an index or registry are
accepted (:func:`requirement_problem`, :func:`npm_spec_problem`): anything a
tool would fetch from a URL, a path or version control, or build from source,
is a ``problem`` of the need, and the hook is refused at review.

Hook runs have no network, so these are fetched when the hook is reviewed
(``hookcage trust``), one cache per script or package, keyed by :func:`need_key`,
which covers the bytes of every file that names them (the script,
``package.json``, the lock file, local ``file:`` packages), the image they were
installed for and the project's root: the trust record that pins those bytes
pins the cache. :func:`own_need` tells a hook's own needs (its command names
the script) from those of scripts it only covers. See :mod:`executor.prepare.depcache`
for the fetching and the run-time mounts.
"""

from __future__ import annotations

import functools
import hashlib
import json
import posixpath
import re
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from packaging.requirements import InvalidRequirement, Requirement

from executor.core.files import FileState

Kind = Literal["uv", "node"]

CACHE_FORMAT = 2
"""Bumped when the cache's layout changes (old caches are then fetched again).

2: one cache per script or package (was: per hook), bound at its own path."""

# PEP 723's reference regular expression (packaging.python.org, "Inline script metadata") is
#   (?m)^# /// (?P<type>[a-zA-Z0-9-]+)$\s(?P<content>(^#(| .*)$\s)+)^# ///$
# Python's engine backtracks on it exponentially (a 50 KB script of "# /// script" lines took
# minutes, at every dispatch of a hook that references it): pep723_blocks finds the same
# blocks line by line, in linear time.
_PEP723_HEADER = re.compile(r"# /// ([a-zA-Z0-9-]+)")
NODE_SUFFIXES = (".js", ".mjs", ".cjs")
NODE_LOCKS = ("package-lock.json", "npm-shrinkwrap.json")
_LOCAL_SPEC = re.compile(r"(?:file|link):(?P<path>.*)\Z", re.DOTALL)
_TARBALL = re.compile(r".*\.(?:tgz|tar\.gz|tar)\Z", re.IGNORECASE)  # a file to npm-package-arg

# pip takes a requirement whose name ends like an archive for a file to build (pip's
# ARCHIVE_EXTENSIONS; "x-1.0.tar.gz" and "x.whl" are valid PEP 508 names).
_ARCHIVE_NAME = re.compile(r".*\.(?:zip|whl|tar|tgz|tbz|txz|tlz|tar\.(?:gz|bz2|xz|lz|lzma))\Z", re.IGNORECASE)
# A requirement without its marker, as pip reads it: a name, extras and PEP 440 versions only.
_PLAIN_REQUIREMENT = re.compile(r"[A-Za-z0-9._\-\[\],<>=!~*+ ]+\Z")
# What a script's [tool.uv] table may hold: settings that name no place to get packages from.
# Requirement lists are checked like `dependencies`; every other key (sources, index, index-url,
# extra-index-url, find-links, pip, workspace, ...) would make uv get packages from somewhere
# the review does not fetch from, and is refused.
_UV_SAFE_KEYS = frozenset({
    "exclude-newer", "exclude-newer-package", "prerelease", "resolution", "index-strategy", "fork-strategy",
    "python-preference", "python-downloads", "compile-bytecode", "link-mode", "no-build", "no-build-package",
    "no-binary", "no-binary-package", "no-build-isolation", "no-build-isolation-package", "no-cache",
    "offline", "native-tls", "upgrade", "upgrade-package", "reinstall", "reinstall-package", "no-index",
    "no-sources", "required-version", "environments", "required-environments", "conflicts",
})
_UV_REQUIREMENT_KEYS = frozenset({
    "override-dependencies", "constraint-dependencies", "build-constraint-dependencies", "dev-dependencies",
})
ONLY_INDEX = "only requirements by name, fetched as wheels from an index, are accepted"
ONLY_REGISTRY = ("only registry versions, ranges, tags and npm: aliases are fetched "
                 "(vendor anything else as a file: tarball in the project)")
NPM_REGISTRY = "https://registry.npmjs.org/"
"""The registry the sandbox's npm installs from (it has no .npmrc but its own)."""
_NPM_FIELDS = ("dependencies", "optionalDependencies", "peerDependencies", "devDependencies")
# npm-package-arg: a tag is what encodeURIComponent leaves alone; a semver range adds these.
_NPM_REGISTRY_SPEC = re.compile(r"[A-Za-z0-9\-_.!~*'()^<>=|+ \t]*\Z")
_NPM_NAME = re.compile(r"(?:@[A-Za-z0-9\-~][A-Za-z0-9\-._~]*/)?[A-Za-z0-9\-~][A-Za-z0-9\-._~]*\Z")
_NPM_HOSTS = ("github:", "gitlab:", "bitbucket:", "gist:")


@dataclass(frozen=True)
class Need:
    """The dependencies one script (uv) or one package (Node) of a hook names.

    Attributes:
        kind: ``uv`` or ``node``.
        path: project-relative: the script (uv) or the package's directory
            (Node; ``"."`` for the project root).
        dependencies: as written by the author (requirement strings, or
            ``name@spec`` for Node), for people to read.
        requires_python: the script's ``requires-python``, if any.
        local: Node only: project-relative paths of ``file:`` packages.
        registry: Node only: the dependencies fetched from a registry.
        problem: why the metadata cannot be used (then nothing is fetched
            and the hook says so at review and at run).
    """

    kind: Kind
    path: str
    dependencies: tuple[str, ...] = ()
    requires_python: str | None = None
    local: tuple[str, ...] = ()
    registry: tuple[str, ...] = ()
    problem: str | None = None

    def where(self) -> str:
        """The file that names the dependencies: the script, or the package's ``package.json``."""
        if self.kind == "uv":
            return self.path
        return "package.json" if self.path == "." else f"{self.path}/package.json"

    def describe(self) -> str:
        """One line for people: what is needed, by which file."""
        what = ", ".join(self.dependencies) or "nothing"
        where = f"uv script {self.path}" if self.kind == "uv" else f"Node package {self.path}/package.json"
        python = f" (requires-python {self.requires_python})" if self.requires_python else ""
        return f"{where}: {what}{python}"

    def to_json(self) -> dict[str, Any]:
        """Plain JSON values, for the trust subject's profile and the cache's record."""
        data: dict[str, Any] = {"kind": self.kind, "path": self.path, "dependencies": list(self.dependencies)}
        if self.requires_python:
            data["requires_python"] = self.requires_python
        if self.problem:
            data["problem"] = self.problem
        return data


def pep723_blocks(text: str) -> list[tuple[str, str]]:
    """Every PEP 723 block in ``text`` as ``(type, content)``: what ``finditer`` of the
    reference regular expression finds (the content lines with their newlines), in linear time.

    A block is a line ``# /// TYPE``, one or more comment lines (``#`` or
    ``# ...``), and the LAST line ``# ///`` of that run of comment lines.
    """
    lines = text.split("\n")
    count = len(lines)
    # last_close[i]: the last "# ///" line of the run of comment lines starting at line i (-1: none).
    last_close = [-1] * (count + 1)
    for i in range(count - 1, -1, -1):
        line = lines[i]
        if line == "#" or line.startswith("# "):
            later = last_close[i + 1]
            last_close[i] = later if later >= 0 else (i if line == "# ///" else -1)
    blocks = []
    i = 0
    while i < count - 1:  # a header is followed by a newline
        header = _PEP723_HEADER.fullmatch(lines[i])
        close = last_close[i + 1] if header else -1
        if header is None or close < i + 2:
            i += 1
            continue
        blocks.append((header.group(1), "".join(line + "\n" for line in lines[i + 1:close])))
        i = close + 1
    return blocks


def script_metadata(text: str) -> tuple[dict[str, Any] | None, str | None]:
    """The ``script`` block of PEP 723 inline metadata in ``text``.

    Returns:
        ``(metadata, None)``; ``(None, None)`` when there is no block;
        ``(None, problem)`` when the block is repeated or is not valid TOML.
    """
    blocks = [content for kind, content in pep723_blocks(text) if kind == "script"]
    if not blocks:
        return None, None
    if len(blocks) > 1:
        return None, "more than one '# /// script' block (PEP 723 allows one)"
    content = "".join(
        line[2:] if line.startswith("# ") else line[1:]
        for line in blocks[0].splitlines(keepends=True)
    )
    try:
        return tomllib.loads(content), None
    except tomllib.TOMLDecodeError as exc:
        return None, f"its '# /// script' block is not valid TOML ({exc})"


def uv_need(path: str, data: bytes) -> Need | None:
    """The need of one Python file, or None when it names no dependencies (a pure function,
    read once per file's bytes up to 64 KiB: every hook of a folder covers the same scripts)."""
    if len(data) <= 64 * 1024:
        return _cached_uv_need(path, data)
    return _uv_need(path, data)


@functools.lru_cache(maxsize=1024)
def _cached_uv_need(path: str, data: bytes) -> Need | None:
    return _uv_need(path, data)


def _uv_need(path: str, data: bytes) -> Need | None:
    text = data.decode("utf-8", errors="replace")
    metadata, problem = script_metadata(text)
    if problem:
        return Need("uv", path, problem=problem)
    if metadata is None:
        return None
    deps = metadata.get("dependencies", [])
    python = metadata.get("requires-python")
    if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
        return Need("uv", path, problem="'dependencies' must be a list of strings")
    if python is not None and not isinstance(python, str):
        return Need("uv", path, problem="'requires-python' must be a string")
    tool = metadata.get("tool", {})
    uv = tool.get("uv", {}) if isinstance(tool, dict) else None
    if not isinstance(uv, dict):
        return Need("uv", path, tuple(deps), python, problem="'tool.uv' must be a table")
    problem = _uv_table_problem(uv)
    if problem:
        return Need("uv", path, tuple(deps), python, problem=problem)
    if not deps:
        return None
    for dep in deps:
        problem = requirement_problem(dep)
        if problem:
            return Need("uv", path, tuple(deps), python, problem=problem)
    return Need("uv", path, tuple(deps), python)


def requirement_problem(text: str) -> str | None:
    """Why a PEP 723 dependency is refused, or None for a requirement by name from an index.

    Refused: anything that is not a PEP 508 requirement (paths, archives, pip options),
    a requirement with a URL (``name @ url``: https, file, git+...), and a name pip
    would take for an archive to build (``x-1.0.tar.gz``, ``x.whl``). pip builds
    those on this machine whatever ``--only-binary`` says.
    """
    try:
        requirement = Requirement(text)
    except InvalidRequirement:
        return f"dependency {text!r} is not a requirement by name (a path, an archive, a URL or a pip option?); {ONLY_INDEX}"
    if requirement.url is not None:
        scheme = requirement.url.split(":", 1)[0] if ":" in requirement.url else "a path"
        return f"dependency {text!r} names a URL ({scheme}), not a package from an index; {ONLY_INDEX}"
    # What pip reads as the requirement: the text before the marker. pip takes it for a path
    # when it has a slash or ends like an archive, and builds what is there: "x-1.0.tar.gz",
    # "x.whl", or a version that is a path ("x===/../../tmp/x-1.0.tar.gz", which PEP 440's
    # arbitrary equality lets through).
    plain = str(requirement).split(";", 1)[0].strip()
    if _ARCHIVE_NAME.match(plain) or not _PLAIN_REQUIREMENT.match(plain):
        return f"dependency {text!r} names an archive file or a path, not a package; {ONLY_INDEX}"
    return None


def _uv_table_problem(table: Mapping[str, Any]) -> str | None:
    """Why a script's ``[tool.uv]`` table is refused: a key that names where packages come from."""
    for key in sorted(table):
        value = table[key]
        if key in _UV_REQUIREMENT_KEYS:
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                return f"[tool.uv] {key} must be a list of strings"
            for item in value:
                problem = requirement_problem(item)
                if problem:
                    return f"[tool.uv] {key}: {problem}"
        elif key not in _UV_SAFE_KEYS:
            return (f"[tool.uv] {key}: it would make uv get packages from somewhere else than "
                    f"the wheels fetched at review (a path, a URL, git or another index); {ONLY_INDEX}")
    return None


def node_need(folder: str, data: bytes) -> Need | None:
    """The need of one ``package.json`` (in project-relative ``folder``), or None when it has none."""
    try:
        manifest = json.loads(data)
    except ValueError:
        return Need("node", folder, problem="package.json is not valid JSON")
    if not isinstance(manifest, dict):
        return Need("node", folder, problem="package.json is not a JSON object")
    fields: dict[str, dict[str, str]] = {}
    for field in _NPM_FIELDS:
        value = manifest.get(field) or {}
        if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
            return Need("node", folder, problem=f"'{field}' must map names to version strings")
        fields[field] = value
    deps = fields["dependencies"]
    if not deps:
        return None
    local: list[str] = []
    registry: list[str] = []
    for field, entries in fields.items():
        for name, spec in sorted(entries.items()):
            problem = _npm_dependency_problem(folder, name, spec, field)
            if problem:
                return Need("node", folder, _written(deps), problem=problem)
            if field != "dependencies":
                continue
            target = _local_target(spec)
            if target is None:
                registry.append(f"{name}@{spec}")
            else:
                local.append(posixpath.normpath(posixpath.join(folder, target)))
    for name, spec in _overrides(manifest.get("overrides")):
        problem = _npm_dependency_problem(folder, name, spec, "overrides", check_name=False)
        if problem:
            return Need("node", folder, _written(deps), problem=problem)
    return Need("node", folder, _written(deps), local=tuple(local), registry=tuple(registry))


def _npm_dependency_problem(folder: str, name: str, spec: str, field: str, *, check_name: bool = True) -> str | None:
    """Why one ``name: spec`` of a package.json is refused (None: a registry spec or a local package)."""
    where = "" if field == "dependencies" else f" (in {field})"
    if check_name and not _NPM_NAME.match(name):
        return f"{name}@{spec}{where}: not a package name"
    target = _local_target(spec)
    if target is not None:
        joined = posixpath.normpath(posixpath.join(folder, target))
        if joined == ".." or joined.startswith("../") or posixpath.isabs(target) or target.startswith("~"):
            return f"{name}@{spec}{where} lies outside the project"
        return None
    problem = npm_spec_problem(spec)
    return f"{name}@{spec}{where}: {problem}" if problem else None


def npm_spec_problem(spec: str) -> str | None:
    """Why npm would not fetch ``spec`` from the registry (None: a version, range, tag or ``npm:`` alias of one).

    Classified as npm-package-arg does: ``owner/repo``, ``github:``, ``gitlab:``,
    ``bitbucket:``, ``gist:``, ``git+...``, ``user@host:path`` and anything with a
    ``#`` ref are git; ``http(s):`` is a URL; local paths are handled by the caller.
    """
    if spec.startswith("npm:"):
        name, at, version = spec[4:].partition("@") if not spec.startswith("npm:@") else _scoped(spec[4:])
        if not _NPM_NAME.match(name):
            return f"the alias names no package ({spec[4:]!r}); {ONLY_REGISTRY}"
        problem = npm_spec_problem(version) if at else None
        if problem or (at and _local_target(version) is not None) or version.startswith("npm:"):
            return f"the alias is not to a registry version; {ONLY_REGISTRY}"
        return None
    if _NPM_REGISTRY_SPEC.match(spec) and not spec.startswith("."):
        return None
    if (spec.startswith(_NPM_HOSTS) or spec.startswith(("git+", "git:")) or "#" in spec
            or re.match(r"[^@/:]+@[^:]+:", spec)):  # user@host:path, as ssh and git write it
        kind = "a git dependency"
    elif spec.startswith(("http:", "https:")) or "://" in spec:
        kind = "a URL dependency"
    elif "/" in spec:
        kind = "a git dependency (GitHub shorthand owner/repo)"
    else:
        kind = "not a registry version, range or tag"
    return f"{kind}, not fetched; {ONLY_REGISTRY}"


def _scoped(text: str) -> tuple[str, str, str]:
    """``@scope/name@range`` split at the ``@`` after the scope."""
    scope, slash, rest = text.partition("/")
    name, at, version = rest.partition("@")
    return scope + slash + name, at, version


def _overrides(value: Any, depth: int = 0) -> Iterator[tuple[str, str]]:
    """Every ``name: spec`` of npm's ``overrides`` (nested objects; ``"."`` is the package itself)."""
    if not isinstance(value, dict) or depth > 32:
        return
    for key, item in value.items():
        if isinstance(item, str):
            if not item.startswith("$"):  # "$name": the spec in the package's own dependencies
                yield str(key), item
        else:
            yield from _overrides(item, depth + 1)


def lock_problem(folder: str, name: str, data: bytes) -> str | None:
    """Why a package's lock file is refused: an entry npm would fetch from git, a URL, another
    registry, or a path outside the project (None: registry tarballs and local packages only)."""
    try:
        lock = json.loads(data)
    except ValueError:
        return f"{name} is not valid JSON"
    if not isinstance(lock, dict):
        return f"{name} is not a JSON object"
    for entry_name, entry in _lock_entries(lock):
        if not isinstance(entry, dict):
            continue
        for field in ("resolved", "version"):
            value = entry.get(field)
            if not isinstance(value, str) or not value:
                continue
            if field == "resolved" and value.startswith(NPM_REGISTRY):
                continue
            target = _local_target(value)
            if field == "resolved" and target is None and not re.match(r"[a-z][a-z0-9+.-]*:", value):
                target = value  # npm writes a linked folder's resolved as a bare relative path
            if target is not None:
                joined = posixpath.normpath(posixpath.join(folder, target))
                if not (joined == ".." or joined.startswith("../") or posixpath.isabs(target) or target.startswith("~")):
                    continue
                return f"{name}: {entry_name} {field} {value!r} lies outside the project"
            if field == "version" and npm_spec_problem(value) is None:
                continue
            return (f"{name}: {entry_name} {field} {value!r} is not a tarball from {NPM_REGISTRY}: "
                    f"not fetched; {ONLY_REGISTRY}")
    return None


def _lock_entries(lock: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    """Every package entry of a lock file: v2/v3 ``packages`` and v1's nested ``dependencies``."""
    packages = lock.get("packages")
    if isinstance(packages, dict):
        for key, entry in packages.items():
            if key:  # "" is the package itself
                yield str(key), entry
    stack: list[tuple[Any, int]] = [(lock.get("dependencies"), 0)]
    while stack:
        deps, depth = stack.pop()
        if not isinstance(deps, dict) or depth > 64:
            continue
        for key, entry in deps.items():
            yield str(key), entry
            if isinstance(entry, dict):
                stack.append((entry.get("dependencies"), depth + 1))


def _written(deps: Mapping[str, str]) -> tuple[str, ...]:
    return tuple(f"{name}@{spec}" for name, spec in sorted(deps.items()))


def _local_target(spec: str) -> str | None:
    """The path a local dependency spec points at (``file:x``, ``./x``, ``x.tgz``), else None."""
    match = _LOCAL_SPEC.match(spec)
    if match:
        return match.group("path") or "."
    if spec.startswith(("./", "../", "/", "~/")) or (_TARBALL.match(spec) and "://" not in spec):
        return spec
    return None


def find_needs(files: Sequence[FileState]) -> tuple[Need, ...]:
    """Every need of a hook, from the files its trust subject covers (sorted by path).

    A uv need comes from each ``.py`` file (or shebang'd script) with PEP 723
    metadata; a Node need from each ``package.json`` among the files (the
    executor adds the nearest one above each Node script it references).
    """
    needs: list[Need] = []
    data = {state.path: state.data for state in files if state.data is not None}
    for state in files:
        if state.data is None:
            continue
        name = posixpath.basename(state.path)
        if name == "package.json":
            folder = posixpath.dirname(state.path) or "."
            need = node_need(folder, state.data)
            if need is not None and need.problem is None:
                for lock in NODE_LOCKS:
                    path = lock if folder == "." else f"{folder}/{lock}"
                    problem = lock_problem(folder, path, data[path]) if path in data else None
                    if problem:
                        need = Need("node", folder, need.dependencies, problem=problem)
                        break
        elif state.path.endswith(".py") or (state.data.startswith(b"#!") and (b"python" in state.data[:200] or b"uv run" in state.data[:200])):
            need = uv_need(state.path, state.data)
        else:
            continue
        if need is not None:
            needs.append(need)
    return tuple(sorted(needs, key=lambda n: (n.path, n.kind)))


def need_key(need: Need, files: Sequence[FileState], image: str, root: str) -> str:
    """The cache folder's name for one need: covers every byte that names it.

    One script (uv) or one package (Node) has one cache, whichever hooks
    cover it: a script that cannot be fetched never stands in another's way,
    and a review of a script already fetched fetches nothing again.

    Args:
        need: one need of a hook.
        files: the files of the hook's trust subject (their hashes are used).
        image: the image id the dependencies are installed for.
        root: the project root (uv names a script's environment after its
            absolute path, and the install runs at that path).
    """
    hashes = {f.path: f.sha256 for f in files}
    named: dict[str, str | None] = {}
    if need.kind == "uv":
        named[need.path] = hashes.get(need.path)
    else:
        prefix = "" if need.path == "." else need.path + "/"
        for path, digest in hashes.items():
            if path.startswith(prefix) or any(path == p or path.startswith(p + "/") for p in need.local):
                named[path] = digest
    document = json.dumps(
        {"format": CACHE_FORMAT, "image": image, "root": root, "need": need.to_json(), "files": named},
        sort_keys=True, separators=(",", ":"),
    )
    return hashlib.sha256(document.encode()).hexdigest()[:32]


def own_need(need: Need, direct: Sequence[str]) -> bool:
    """Whether ``need`` is the hook's own: its command names the script (or a Node script of
    the package), as opposed to a script the hook only covers (beside its own, or loaded).

    A hook is refused, or reports an error instead of running, only for its own
    needs; another script's dependencies that cannot be had make that script
    fail when (and if) the hook runs it, as on a machine without network.
    """
    if need.kind == "uv":
        return need.path in direct
    prefix = "" if need.path == "." else need.path + "/"
    return any(path.startswith(prefix) and path.endswith(NODE_SUFFIXES) for path in direct)
