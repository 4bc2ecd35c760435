"""What a hook's scripts need installed, read from their own metadata (no I/O).

Two kinds of hook carry their dependencies with them:

- **uv scripts**: a Python file with PEP 723 inline metadata (a ``# /// script``
  block whose TOML names ``dependencies`` and maybe ``requires-python``), run
  as ``uv run --script x.py``, ``uv run x.py`` or through a
  ``#!/usr/bin/env -S uv run --script`` shebang.
- **Node hooks**: a ``.js``/``.mjs``/``.cjs`` file next to (or below) a
  ``package.json`` with ``dependencies``.

Hook runs have no network, so these are fetched when the hook is reviewed
(``hookcage trust``) into a cache keyed by :func:`cache_key`, which covers the
bytes of every file that names them (the script, ``package.json``, the lock
file, local ``file:`` packages) and the image they were installed for: the
trust record that pins those bytes pins the cache. See :mod:`executor.sandbox.depcache`
for the fetching and the run-time mounts.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from executor.gates.trust import FileState

Kind = Literal["uv", "node"]

CACHE_FORMAT = 1
"""Bumped when the cache's layout changes (old caches are then fetched again)."""

# PEP 723's reference regular expression (packaging.python.org, "Inline script metadata") is
#   (?m)^# /// (?P<type>[a-zA-Z0-9-]+)$\s(?P<content>(^#(| .*)$\s)+)^# ///$
# Python's engine backtracks on it exponentially (a 50 KB script of "# /// script" lines took
# minutes, at every dispatch of a hook that references it): pep723_blocks finds the same
# blocks line by line, in linear time.
_PEP723_HEADER = re.compile(r"# /// ([a-zA-Z0-9-]+)")
NODE_SUFFIXES = (".js", ".mjs", ".cjs")
NODE_LOCKS = ("package-lock.json", "npm-shrinkwrap.json")
_LOCAL_SPEC = re.compile(r"(?:file|link):(?P<path>.*)\Z", re.DOTALL)
_TARBALL = re.compile(r".*\.(?:tgz|tar\.gz|tar)\Z")


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
    """The need of one Python file, or None when it names no dependencies."""
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
    if not deps:
        return None
    bad = [d for d in deps if not d.strip() or d.lstrip().startswith("-")]
    if bad:
        return Need("uv", path, tuple(deps), python, problem=f"not a requirement: {bad[0]!r}")
    return Need("uv", path, tuple(deps), python)


def node_need(folder: str, data: bytes) -> Need | None:
    """The need of one ``package.json`` (in project-relative ``folder``), or None when it has none."""
    try:
        manifest = json.loads(data)
    except ValueError:
        return Need("node", folder, problem="package.json is not valid JSON")
    if not isinstance(manifest, dict):
        return Need("node", folder, problem="package.json is not a JSON object")
    deps = manifest.get("dependencies") or {}
    if not isinstance(deps, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in deps.items()):
        return Need("node", folder, problem="'dependencies' must map names to version strings")
    if not deps:
        return None
    local: list[str] = []
    registry: list[str] = []
    for name, spec in sorted(deps.items()):
        target = _local_target(spec)
        if target is None:
            if spec.startswith(("git", "http:", "https:", "github:")) or "://" in spec:
                return Need("node", folder, _written(deps), problem=f"{name}@{spec}: git and URL dependencies are not fetched (vendor it as a file: tarball)")
            registry.append(f"{name}@{spec}")
            continue
        joined = posixpath.normpath(posixpath.join(folder, target))
        if joined == ".." or joined.startswith("../") or posixpath.isabs(target):
            return Need("node", folder, _written(deps), problem=f"{name}@{spec} lies outside the project")
        local.append(joined)
    return Need("node", folder, _written(deps), local=tuple(local), registry=tuple(registry))


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
    for state in files:
        if state.data is None:
            continue
        name = posixpath.basename(state.path)
        if name == "package.json":
            need = node_need(posixpath.dirname(state.path) or ".", state.data)
        elif state.path.endswith(".py") or (state.data.startswith(b"#!") and (b"python" in state.data[:200] or b"uv run" in state.data[:200])):
            need = uv_need(state.path, state.data)
        else:
            continue
        if need is not None:
            needs.append(need)
    return tuple(sorted(needs, key=lambda n: (n.path, n.kind)))


def cache_key(needs: Sequence[Need], files: Sequence[FileState], image: str) -> str:
    """The cache directory's name for a hook's needs: covers every byte that names them.

    Args:
        needs: the hook's needs.
        files: the files of its trust subject (their hashes are used).
        image: the image id the dependencies are installed for.
    """
    hashes = {f.path: f.sha256 for f in files}
    named: dict[str, str | None] = {}
    for need in needs:
        if need.kind == "uv":
            named[need.path] = hashes.get(need.path)
        else:
            prefix = "" if need.path == "." else need.path + "/"
            for path, digest in hashes.items():
                if path.startswith(prefix) or any(path == p or path.startswith(p + "/") for p in need.local):
                    named[path] = digest
    document = json.dumps(
        {"format": CACHE_FORMAT, "image": image, "needs": [n.to_json() for n in needs], "files": named},
        sort_keys=True, separators=(",", ":"),
    )
    return hashlib.sha256(document.encode()).hexdigest()[:32]
