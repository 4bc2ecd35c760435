"""Trust on first use for repository hooks: the trust hash and the trust store.

How this works::

    words of the command ──collect_references──▶ FileState per referenced file
                                                  (path, kind, sha256, link, the bytes)
    hook + files + sandbox profile + capabilities ──TrustSubject.digest()──▶ sha256
    TrustStore(path).is_trusted(digest)  ◀── TrustRecord written at review

A project or local hook runs only when its *trust subject* hashes to a digest
the user trusted. The subject is everything that decides what the hook does:
the project root, the hook file, event, matcher, type and command, the state
of every project file the command names, the full sandbox profile and the
granted capabilities. Change any of it and the hook is untrusted again.

References are collected in two passes. The first resolves every word, one
path component at a time as the kernel does, and refuses (``UnsafeReference``)
any path that leaves the project: ``..`` past the root, an absolute path that
only looks inside, a symlink (or a chain, or a directory symlink) pointing
out. Nothing is read until every word has passed. The second pass reads each
file once, walking down from the root with ``O_NOFOLLOW`` at every component,
so a file swapped for a symlink meanwhile is refused, not followed; the bytes
kept in :attr:`FileState.data` are the bytes that were hashed and the bytes the
executor stages over the workspace path.

The store is one JSON document ``{"format": 1, "records": {digest: record}}``.
Every change is a read-modify-write under a ``filelock`` lock beside it, and
lands with an atomic rename of a fsynced temporary file, so a reader (readers
do not lock) sees the old document or the new one, never half of one. A
corrupt store is never written over: every operation raises
:class:`~executor.errors.TrustStoreError` naming the repair. Extra trust files
(``HOOKCAGE_TRUST_FILE``, the export format) are read, never written.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import json
import os
import posixpath
import re
import shlex
import stat
import tempfile
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import filelock

from executor import filecache, safeio
from executor.core.files import FileState
from executor.core.text import decode_exact
from executor.errors import HookcageError, TrustStoreError

TRUST_FORMAT = 1
"""The version of the trust hash and of the store document."""

ISOLATION_KEY = "isolation"
"""The profile key a hook's kernel isolation is in; only present when it is gVisor."""
GVISOR_ISOLATION = "gvisor"

MAX_REFERENCED_FILE = 8 * 1024 * 1024
"""Bytes a referenced file may hold; a larger one is refused."""

MAX_REFERENCED_FILES = 1000
"""Paths one command may reference (directories expanded)."""

MAX_REFERENCED_TOTAL = 64 * 1024 * 1024
"""Bytes all the referenced files of one command may hold together."""

MAX_REFERENCE_DEPTH = 64
"""Path components a reference may have, directories expanded (deeper is refused, quickly)."""

MAX_WALKED_PATHS = 5_000
"""Paths (directories included) one command's references may expand to before it is refused."""

MAX_FILE_TEXT = 256 * 1024
"""Bytes of each referenced file kept in a trust record for the next review's diff.

Kept exactly: decoded as UTF-8 with each byte that is not kept as a stand-in
(``surrogateescape``; the JSON store writes it as ``\\udcXX``), so the diff
shows a changed invalid byte. Records written before kept replacement
characters instead; whether a file changed is decided on its sha256 either way.
"""

LOCK_TIMEOUT = 30.0
"""Seconds to wait for another process's write to the store."""

FILE_KINDS = ("file", "missing", "symlink")

_MAX_SYMLINK_HOPS = 40  # as the kernel's MAXSYMLINKS
_MIN_PREFIX = 6
_HEX_DIGEST = re.compile(r"[0-9a-f]{64}\Z")
_HEX_PREFIX = re.compile(rf"[0-9a-f]{{{_MIN_PREFIX},64}}\Z")
# "--config=./x.toml", "CONF=./x.toml": the value after "=" is the path.
_ASSIGNMENT = re.compile(r"(?:--?[A-Za-z0-9][A-Za-z0-9_.-]*|[A-Za-z_][A-Za-z0-9_]*)=(.*)\Z", re.DOTALL)
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class UnsafeReference(HookcageError):
    """A path a hook command references is refused: it leaves the project, or cannot be read.

    Attributes:
        path: the word (or project-relative path) that was refused.
        reason: why, e.g. ``leaves the project /repo``.
    """

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(path, reason)
        self.path = path
        self.reason = reason

    def __str__(self) -> str:
        return f"{_show(self.path)}: {self.reason}"


def collect_references(words: Iterable[str], root: str) -> tuple[FileState, ...]:
    """The state of every project file the words of a hook command reference.

    A word is a reference when it is an absolute path inside ``root``, a
    relative path with a ``/`` (resolved against ``root``), a bare word naming
    an existing file (or a symlink to one) at the root or ending in a code
    suffix (``check.sh``, missing or not: :data:`CODE_SUFFIXES`), or the value of
    ``--opt=VALUE`` / ``NAME=VALUE`` that is one of those. Absolute paths
    outside the root name files in the sandbox image and are not references;
    URLs and the root itself are not either. A directory is expanded to every
    path under it.

    Args:
        words: the command's literal words, project-dir variables expanded.
        root: the project root (absolute).

    Returns:
        One state per path, deduplicated and sorted by path.

    Raises:
        UnsafeReference: a path leaves the project, is too large, is not a
            regular file, or cannot be read; raised before any file is read
            when the path itself is the problem.
    """
    refs = _References(root)
    for word in words:
        refs.add_word(word)
    return refs.read()


# -- what a command runs and what its scripts load ------------------------------------

CODE_SUFFIXES = (".sh", ".bash", ".zsh", ".ksh", ".dash", ".py", ".pyw", ".js", ".mjs", ".cjs",
                 ".ts", ".mts", ".cts", ".rb", ".pl", ".pm", ".php", ".lua", ".tcl", ".r", ".awk",
                 ".jq", ".sed")
"""File names a command or a script runs or loads as code: such a bare word is a
reference even when no file has that name yet (adding it later is a change)."""

HOOKCAGE_CONFIG_FILES = frozenset({".hookcage/hooks.json", ".hookcage/hooks.local.json"})
"""hookcage's own configuration beside a hook's scripts: never brought in by the folder rule
(what it says about a hook is already in its subject; editing one hook must not unsettle the others)."""

MAX_SCANNED_SCRIPT = 1024 * 1024
"""Bytes of a script read for what it loads; past it only the folder rule covers it."""

_DIRECTORY_CHANGERS = frozenset({"cd", "pushd", "popd"})
_SHELL_LOADERS = frozenset({"source", "."})
# require('./x'), import x from "../y", import("./z"), export * from './w': relative specifiers only.
_NODE_SPECIFIER = re.compile(
    r"""(?:\brequire\s*\(\s*|\bimport\s*\(\s*|\bfrom\s*|\bimport\s+)(['"])(\.{1,2}/[^'"\n]{0,1024})\1"""
)
_NODE_EXTENSIONS = ("", ".js", ".mjs", ".cjs", ".json", ".ts", "/index.js", "/index.mjs", "/index.cjs",
                    "/package.json")


def command_words(words: Sequence[str]) -> list[str]:
    """The words of a command that name project files, as :func:`collect_references` takes them.

    Besides the words themselves: ``python -m NAME`` names ``./NAME.py`` and
    ``./NAME`` (its working directory, the project root, comes first on its
    path).

    Raises:
        UnsafeReference: the command changes directory (``cd``, ``pushd``,
            ``popd``) and then names a relative path: that path would be
            resolved in another folder than the one the review read.
    """
    out: list[str] = []
    moved: str | None = None
    for i, word in enumerate(words):
        if word in _DIRECTORY_CHANGERS:
            moved = word
            continue
        if moved is not None and _relative(word):
            raise UnsafeReference(
                word, f"comes after `{moved}`, so it would not be the file the review read;"
                " name it from the project root ($CLAUDE_PROJECT_DIR/...)"
            )
        out.append(word)
        if word == "-m" and i + 1 < len(words) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", words[i + 1]):
            top = words[i + 1].split(".")[0]
            out.extend((f"./{top}.py", f"./{top}"))
    return out


def _relative(word: str) -> bool:
    """Whether a word may be a path resolved against the working directory."""
    assignment = _ASSIGNMENT.match(word)
    if assignment:
        word = assignment.group(1)
    if not word or word.startswith(("/", "-")) or _URL.match(word):
        return False
    return "/" in word or word.lower().endswith(CODE_SUFFIXES) or word in (".", "..")


def is_script(state: FileState) -> bool:
    """Whether a referenced file is code a command runs: an execute bit, a ``#!`` line or a code suffix."""
    if state.data is None:
        return False
    return state.executable or state.data.startswith(b"#!") or state.path.lower().endswith(CODE_SUFFIXES)


def loaded_words(
    states: Iterable[FileState], root: str, *, shell_words: Callable[[str], list[str]],
    folders: bool = True,
) -> list[str]:
    """The words naming what the scripts among ``states`` load (for :func:`collect_references`).

    Resolved statically, against the project root (where a repository's hook
    runs) or the script's own folder, as the interpreter does:

    - shell (``.sh``..., or a ``sh``/``bash`` ``#!``): the script after
      ``source``/``.``, after an interpreter (``bash x.sh``, ``python3 y.py``),
      and every word ending in a code suffix (``lib/x.sh``);
    - Python: ``import NAME`` / ``from NAME import ...`` as ``NAME.py`` or the
      package ``NAME/`` beside the script (Python puts the script's folder
      first on its path), when one exists;
    - Node: relative ``require('./x')``, ``import ... from './x'``,
      ``import('./x')``, with Node's suffixes (``.js``, ``/index.js``...),
      when one exists.

    With ``folders``, and for what cannot be resolved statically
    (``. "$(dirname "$0")/lib.sh"``, ``sys.path.insert``...): every file under
    the folder of each script, or, for a script at the project root, every
    code file (by suffix) beside it. So a file added there later is a change too.
    """
    words: list[str] = []
    at_root = False
    for state in states:
        if not is_script(state):
            continue
        folder = posixpath.dirname(state.path)
        if folders:
            if folder:
                words.append(f"./{folder}")
            else:
                at_root = True
        text = (state.data or b"")[:MAX_SCANNED_SCRIPT].decode("utf-8", "replace")
        kind = _script_kind(state.path, text)
        if kind == "shell":
            words.extend(_shell_loads(shell_words(text)))
        elif kind == "python":
            words.extend(_existing(root, _python_imports(text, folder)))
        elif kind == "node":
            words.extend(_existing(root, _node_requires(text, folder)))
    if at_root:
        words.extend(root_code_files(root))
    return list(dict.fromkeys(words))


_INTERPRETERS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "python", "python3", "node", "deno",
                           "bun", "perl", "ruby", "php", "lua", "exec", "source", ".", "awk", "jq"})


def _shell_loads(words: Sequence[str]) -> list[str]:
    out = []
    for i, word in enumerate(words):
        if not _plain_path(word):
            continue
        before = words[i - 1] if i else ""
        after_interpreter = posixpath.basename(before) in _INTERPRETERS or before in ("-f", "--from-file")
        if after_interpreter or word.lower().endswith(CODE_SUFFIXES):
            out.append(word)
    return out


def _plain_path(word: str) -> bool:
    """A word that may be a file name (not an option, text with blanks, or a path with ``..``)."""
    if not word or word.startswith("-") or any(c.isspace() for c in word) or _URL.match(word):
        return False
    return ".." not in word.split("/")


def _existing(root: str, words: Iterable[str]) -> list[str]:
    return [w for w in words if os.path.lexists(os.path.join(root, w))]


def root_code_files(root: str) -> list[str]:
    """The code files directly at the project root (by suffix), as words."""
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return []
    return [f"./{n}" for n in names if n.lower().endswith(CODE_SUFFIXES)]


def _script_kind(path: str, text: str) -> str | None:
    first = text.split("\n", 1)[0] if text.startswith("#!") else ""
    lower = path.lower()
    if "python" in first or lower.endswith((".py", ".pyw")):
        return "python"
    if "node" in first or "deno" in first or "bun" in first or lower.endswith((".js", ".mjs", ".cjs", ".ts", ".mts", ".cts")):
        return "node"
    if re.search(r"\b(?:ba|da|z|k)?sh\b", first) or lower.endswith((".sh", ".bash", ".zsh", ".ksh", ".dash")):
        return "shell"
    return None


def _python_imports(text: str, folder: str) -> list[str]:
    if len(text) <= _CACHED_TEXT:
        return list(_cached_python_imports(text, folder))
    return list(_python_imports_of(text, folder))


_CACHED_TEXT = 64 * 1024
"""Scripts up to this size are parsed once per text (at most 1024 kept: 64 MiB in a daemon)."""


@functools.lru_cache(maxsize=1024)
def _cached_python_imports(text: str, folder: str) -> tuple[str, ...]:
    return _python_imports_of(text, folder)


def _python_imports_of(text: str, folder: str) -> tuple[str, ...]:
    """The words of :func:`_python_imports` (a pure function of its arguments: every hook of a
    folder covers the same scripts, and a review or a dispatch reads them once per hook)."""
    import ast

    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    prefix = f"./{folder}/" if folder else "./"
    words: list[str] = []
    for name in sorted(names):
        words.extend((f"{prefix}{name}.py", f"{prefix}{name}"))
    return tuple(words)


def _node_requires(text: str, folder: str) -> list[str]:
    words: list[str] = []
    for match in _NODE_SPECIFIER.finditer(text):
        spec = posixpath.normpath(posixpath.join(folder, match.group(2)))
        if spec == ".." or spec.startswith("../"):
            continue  # outside the project: not in the container either
        words.extend(f"./{spec}{suffix}" for suffix in _NODE_EXTENSIONS)
    return words


def collect_loaded(
    files: tuple[FileState, ...], root: str, *, shell_words: Callable[[str], list[str]]
) -> tuple[FileState, ...]:
    """``files`` plus the code their scripts load, transitively (see :func:`loaded_words`).

    The folder rule applies to the scripts in ``files`` (what the command
    runs); the static resolution to everything found, until nothing new is.

    Raises:
        UnsafeReference: a path leaves the project, or the files together pass
            :data:`MAX_REFERENCED_FILES` / :data:`MAX_REFERENCED_TOTAL`.
    """
    merged = {f.path: f for f in files}
    words = loaded_words(files, root, shell_words=shell_words)
    while words:
        found = collect_references(words, root)
        fresh = [f for f in found if f.path not in merged and f.path not in HOOKCAGE_CONFIG_FILES]
        merged.update((f.path, f) for f in fresh)
        if len(merged) > MAX_REFERENCED_FILES:
            raise UnsafeReference(
                words[0], f"the hook's scripts and what they load are more than {MAX_REFERENCED_FILES} files;"
                " keep a hook's scripts in a folder of their own (e.g. .hookcage/)"
            )
        if sum(len(f.data or b"") for f in merged.values()) > MAX_REFERENCED_TOTAL:
            raise UnsafeReference(words[0], f"the hook's scripts and what they load hold more than {_mib(MAX_REFERENCED_TOTAL)}")
        words = loaded_words(fresh, root, shell_words=shell_words, folders=False)
    return tuple(merged[path] for path in sorted(merged))


@dataclass
class _Pending:
    """A path found by the first pass, waiting to be read by the second."""

    path: str
    kind: str
    link: str | None
    target: tuple[str, ...] | None  # the real file to read, as parts under the root


_Parts = tuple[str, ...]
_Links = tuple[tuple[_Parts, str], ...]


def _show_path(parts: Sequence[str]) -> str:
    """A long path for a message: its first components, then how many more."""
    if len(parts) <= 8:
        return "/".join(parts)
    return "/".join(parts[:8]) + f"/... ({len(parts) - 8} more components)"


class _References:
    """The two passes of :func:`collect_references` over one project root."""

    def __init__(self, root: str) -> None:
        root = os.path.abspath(root)
        self.root = root
        self.real_root = os.path.realpath(root)
        # Words may name the root as given or by its real path; the longer prefix is tried first.
        self.prefixes = sorted({_parts(root), _parts(self.real_root)}, key=len, reverse=True)
        self.pending: dict[str, _Pending] = {}
        self.walks: dict[_Parts, tuple[_Parts | None, _Links]] = {}
        self.kinds: dict[_Parts, str] = {}
        self.total = 0
        self.walked = 0  # paths expanded so far (MAX_WALKED_PATHS)

    # -- first pass: resolve and check, read nothing --------------------------------

    def add_word(self, word: str) -> None:
        """Resolve one word of the command and record what it references."""
        raw = self._candidate(word)
        if raw is None:
            return
        if len(raw) > MAX_REFERENCE_DEPTH:
            raise UnsafeReference(_show_path(raw), f"has more than {MAX_REFERENCE_DEPTH} path components")
        parts = self._lexical(raw, word)
        if parts:  # the root itself is the workspace, not a reference
            self._add_tree(parts, word)

    def _candidate(self, word: str) -> _Parts | None:
        """The word's path as raw parts under the root, or None when it is no reference."""
        assignment = _ASSIGNMENT.match(word)
        if assignment:
            word = assignment.group(1)
        if not word or "\0" in word or _URL.match(word):
            return None
        if word.startswith("/"):
            parts = _parts(word)
            for prefix in self.prefixes:
                if parts[: len(prefix)] == prefix:
                    return parts[len(prefix):]
            if self._strip_root(_parts(posixpath.normpath(word))) is not None:
                raise UnsafeReference(word, f"passes outside the project {self.root} to come back in")
            return None
        if "/" in word or word == "..":
            return _parts(word)
        if word == ".":
            return None
        try:
            st = os.lstat(self._abs((word,)))
        except (OSError, ValueError):
            # `sh check.sh` before check.sh exists: adding it later is a change, as for `./check.sh`
            return (word,) if word.lower().endswith(CODE_SUFFIXES) and _plain_path(word) else None
        if stat.S_ISREG(st.st_mode):
            return (word,)
        if stat.S_ISLNK(st.st_mode):
            real, _ = self._walk((word,), word)
            if real is None or self._kind(real, word) == "file":
                return (word,)
        return None  # a bare word naming a directory ("test", "src") is an argument, not a script

    def _lexical(self, raw: _Parts, word: str) -> _Parts:
        """Apply ``..`` to the word's own parts; refuse when it leaves the root.

        ``..`` right after a symlink is refused too: the kernel would go to the
        link target's parent, the reviewer would read the lexical path.
        """
        out: list[str] = []
        for part in raw:
            if part != "..":
                out.append(part)
                continue
            if not out:
                raise UnsafeReference(word, f"leaves the project {self.root}")
            if os.path.islink(self._abs(tuple(out))):
                raise UnsafeReference(word, f"has '..' after the symlink {'/'.join(out)}")
            out.pop()
        return tuple(out)

    def _add_tree(self, parts: _Parts, word: str) -> None:
        """Record a path, expanding directories below it (depth first, loops cut)."""
        stack: list[tuple[_Parts, frozenset[_Parts]]] = [(parts, frozenset())]
        while stack:
            lexical, ancestors = stack.pop()
            self.walked += 1
            if self.walked > MAX_WALKED_PATHS:
                raise UnsafeReference(word, f"expands to more than {MAX_WALKED_PATHS} paths")
            if len(lexical) > MAX_REFERENCE_DEPTH:
                raise UnsafeReference(_show_path(lexical), f"nests deeper than {MAX_REFERENCE_DEPTH} directories")
            real, links = self._walk(lexical, word)
            for location, text in links:
                self._add_link(location, text, word)
            kind = self._kind(real, word) if real is not None else "missing"
            try:
                st = os.lstat(self._abs(lexical))
            except OSError:
                st = None
            if st is not None and stat.S_ISLNK(st.st_mode):
                self._add_link(lexical, self._readlink(lexical), word)
            elif kind == "missing":
                self._put(_Pending("/".join(lexical), "missing", None, None), word)
            elif kind == "file":
                self._put(_Pending("/".join(lexical), "file", None, real), word)
            # A link back to the root is not expanded: the root is the workspace, as above.
            if kind == "dir" and real and real not in ancestors:
                try:
                    names = sorted(os.listdir(self._abs(real)))
                except OSError as exc:
                    raise UnsafeReference("/".join(lexical), f"cannot be listed ({_reason(exc)})") from exc
                if self.walked + len(stack) + len(names) > MAX_WALKED_PATHS:
                    raise UnsafeReference(word, f"expands to more than {MAX_WALKED_PATHS} paths")
                below = ancestors | {real}
                stack.extend(((*lexical, name), below) for name in reversed(names))

    def _add_link(self, location: _Parts, text: str, word: str) -> None:
        path = "/".join(location)
        if path in self.pending:
            return
        real, _ = self._walk(location, word)
        target = real if real is not None and self._kind(real, word) == "file" else None
        self._put(_Pending(path, "symlink", text, target), word)

    def _put(self, item: _Pending, word: str) -> None:
        if item.path in self.pending:
            return
        if len(self.pending) >= MAX_REFERENCED_FILES:
            raise UnsafeReference(word, f"references more than {MAX_REFERENCED_FILES} files")
        self.pending[item.path] = item

    def _walk(self, parts: _Parts, word: str) -> tuple[_Parts | None, _Links]:
        """Resolve ``parts`` component by component, following symlinks as the kernel does.

        Returns:
            The real path (parts under the root, no symlinks) or None when
            something on the way does not exist; and every symlink passed,
            as (where it is, its text).

        Raises:
            UnsafeReference: a symlink on the way leads out of the project.
        """
        cached = self.walks.get(parts)
        if cached is not None:
            return cached
        queue = deque(parts)
        cur: _Parts = ()
        links: list[tuple[_Parts, str]] = []
        result: _Parts | None = None
        while True:
            if not queue:
                result = cur
                break
            part = queue.popleft()
            if part == "..":  # only link texts bring ".." here
                if not cur:
                    if not links:
                        raise UnsafeReference(word, f"leaves the project {self.root}")
                    raise UnsafeReference(word, self._points_out(*links[-1]))
                cur = cur[:-1]
                continue
            candidate = (*cur, part)
            try:
                st = os.lstat(self._abs(candidate))
            except (FileNotFoundError, NotADirectoryError):
                break
            except OSError as exc:
                raise UnsafeReference("/".join(candidate), f"cannot be examined ({_reason(exc)})") from exc
            if not stat.S_ISLNK(st.st_mode):
                cur = candidate
                continue
            if len(links) >= _MAX_SYMLINK_HOPS:
                raise UnsafeReference(word, "has too many levels of symbolic links")
            text = self._readlink(candidate)
            links.append((candidate, text))
            if not text:
                break  # an empty link leads nowhere, as for the kernel
            if text.startswith("/"):
                inside = self._strip_root(_parts(text))
                if inside is None:
                    raise UnsafeReference(word, self._points_out(candidate, text))
                cur = ()
                queue.extendleft(reversed(inside))
            else:
                queue.extendleft(reversed(_parts(text)))
        answer = (result, tuple(links))
        self.walks[parts] = answer
        return answer

    def _kind(self, real: _Parts, word: str) -> str:
        """``"file"`` or ``"dir"`` for a resolved path; counts file sizes against the caps."""
        known = self.kinds.get(real)
        if known is not None:
            return known
        path = "/".join(real)
        try:
            st = os.lstat(self._abs(real))
        except OSError as exc:
            raise UnsafeReference(path or word, f"cannot be examined ({_reason(exc)})") from exc
        if stat.S_ISDIR(st.st_mode):
            kind = "dir"
        elif stat.S_ISREG(st.st_mode):
            kind = "file"
            if st.st_size > MAX_REFERENCED_FILE:
                raise UnsafeReference(path, f"is larger than {_mib(MAX_REFERENCED_FILE)} ({st.st_size} bytes)")
            self.total += st.st_size
            if self.total > MAX_REFERENCED_TOTAL:
                raise UnsafeReference(word, f"references more than {_mib(MAX_REFERENCED_TOTAL)} of files in all")
        else:
            raise UnsafeReference(path, f"is {safeio.kind(st.st_mode)}, not a regular file or directory: refused")
        self.kinds[real] = kind
        return kind

    def _readlink(self, parts: _Parts) -> str:
        try:
            return os.readlink(self._abs(parts))
        except OSError as exc:
            raise UnsafeReference("/".join(parts), f"cannot be examined ({_reason(exc)})") from exc

    def _strip_root(self, parts: _Parts) -> _Parts | None:
        for prefix in self.prefixes:
            if parts[: len(prefix)] == prefix:
                return parts[len(prefix):]
        return None

    def _points_out(self, location: _Parts, text: str) -> str:
        return f"{'/'.join(location)} is a symlink to {_show(text)}, outside the project {self.root}"

    def _abs(self, parts: _Parts) -> str:
        return os.path.join(self.real_root, *parts)

    # -- second pass: read each file once ----------------------------------------

    def read(self) -> tuple[FileState, ...]:
        """Read every pending file once and return the states, sorted by path."""
        cache: dict[_Parts, tuple[bytes, bool]] = {}
        total = 0
        states = []
        for path in sorted(self.pending):
            item = self.pending[path]
            data: bytes | None = None
            executable = False
            if item.target is not None:
                read = cache.get(item.target)
                if read is None:
                    read = self._read_beneath(item.target)
                    total += len(read[0])
                    if total > MAX_REFERENCED_TOTAL:
                        raise UnsafeReference(path, f"the references hold more than {_mib(MAX_REFERENCED_TOTAL)} in all")
                    cache[item.target] = read
                data, executable = read
            digest = hashlib.sha256(data).hexdigest() if data is not None else None
            states.append(FileState(item.path, item.kind, digest, item.link, data, executable))
        return tuple(states)

    def _read_beneath(self, real: _Parts) -> tuple[bytes, bool]:
        """Read a file by walking down from the root, never following a symlink.

        Returns:
            Its bytes, and whether it has an execute bit (read from the same open file).
        """
        path = "/".join(real)
        try:
            fd = os.open(self.real_root, os.O_RDONLY | os.O_DIRECTORY | _O_CLOEXEC)
        except OSError as exc:
            raise UnsafeReference(self.root, f"cannot be opened ({_reason(exc)})") from exc
        try:
            for part in real[:-1]:
                child = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _O_CLOEXEC, dir_fd=fd)
                os.close(fd)
                fd = child
            # The one opener of repository files: never blocks, refuses anything but a regular file.
            file_fd = safeio.open_regular(real[-1], follow=False, dir_fd=fd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise UnsafeReference(path, "changed into a symlink while being read") from exc
            raise UnsafeReference(path, f"cannot be read ({_reason(exc)})") from exc
        except safeio.Unreadable as exc:
            raise UnsafeReference(path, exc.reason) from exc
        finally:
            os.close(fd)
        try:
            data = safeio.read_fd(file_fd, MAX_REFERENCED_FILE)
            return data, bool(os.fstat(file_fd).st_mode & 0o111)
        except safeio.Unreadable as exc:
            raise UnsafeReference(path, exc.reason) from exc
        except OSError as exc:
            raise UnsafeReference(path, f"cannot be read ({_reason(exc)})") from exc
        finally:
            os.close(file_fd)


def _parts(path: str) -> _Parts:
    return tuple(p for p in path.split("/") if p not in ("", "."))


def _show(text: str) -> str:
    return text if text and text.isprintable() else repr(text)


def _mib(size: int) -> str:
    return f"{size // (1024 * 1024)} MiB"


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


# -- the trust hash -----------------------------------------------------------------


def _canonical_json(value: Any) -> str:
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False,
        default=_plain,
    )


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"a trust subject holds a {type(value).__name__}, which is not JSON")


@dataclass(frozen=True)
class TrustSubject:
    """Everything a repository hook is trusted with; its digest is the trust hash.

    ``profile`` is the full sandbox profile the executor will launch with
    (image id or digest, workspace, network, mounts, env, limits, timeout),
    as plain JSON values; ``capabilities`` the granted ones.
    """

    root: str
    source: str
    event: str
    matcher: str | None
    type: str
    command: str
    files: tuple[FileState, ...]
    profile: Mapping[str, Any]
    capabilities: tuple[str, ...]
    agent: str = ""
    """The agent whose file the hook is in (its dialect decides what its answer means)."""
    selectors: tuple[tuple[str, str | None], ...] = ()
    """Further payload fields the hook matches on (an agent's file patterns), as written."""
    direct: tuple[str, ...] = field(default=(), compare=False)
    """The paths among ``files`` that the command itself names (what the hook runs), as
    opposed to what it covers beside them; not hashed (the command is)."""
    condition: str | None = None
    """The handler's ``if`` rule as written: a changed condition is a changed hook."""

    def canonical(self) -> str:
        """The subject as canonical JSON (sorted keys, no spaces, ASCII).

        Raises:
            TypeError: the profile holds a value that is not JSON.
        """
        return _canonical_json({
            "format": TRUST_FORMAT,
            "root": self.root,
            "source": self.source,
            "event": self.event,
            "matcher": self.matcher,
            "type": self.type,
            "command": self.command,
            # The execute bit is appended only when set, so the hash of a hook
            # whose files carry none is what it was before the bit was covered.
            "files": [
                [f.path, f.kind, f.sha256, f.link, *(["x"] if f.executable else [])]
                for f in sorted(self.files, key=_by_path)
            ],
            "profile": self.profile,
            "capabilities": sorted(set(self.capabilities)),
            # Only when set: records of hookcage's own hooks keep the hash they had.
            **({"agent": self.agent} if self.agent else {}),
            **({"selectors": [list(pair) for pair in self.selectors]} if self.selectors else {}),
            **({"if": self.condition} if self.condition is not None else {}),
        })

    def digest(self) -> str:
        """The trust hash: sha256 (hex) of :meth:`canonical`."""
        return hashlib.sha256(self.canonical().encode("ascii")).hexdigest()

    def covering_digests(self) -> tuple[str, ...]:
        """The digests whose record lets this subject run: its own, and for a run under
        gVisor also the digest of the same hook reviewed under a shared kernel.

        The profile of a run under gVisor holds ``"isolation": "gvisor"``; a run
        under a shared-kernel runtime has no such key (so records written before
        the runtime was covered count as reviewed under a shared kernel). A
        review covers runs with the same or stronger isolation, never weaker:
        trusted under gVisor, a run under runc needs a review of its own.
        """
        own = self.digest()
        if self.profile.get(ISOLATION_KEY) != GVISOR_ISOLATION:
            return (own,)
        shared = {key: value for key, value in self.profile.items() if key != ISOLATION_KEY}
        return (own, replace(self, profile=shared).digest())


def _by_path(state: FileState) -> str:
    return state.path


@dataclass(frozen=True)
class TrustRecord:
    """One trusted digest, with what was reviewed (for listing and for the next diff)."""

    digest: str
    root: str
    source: str
    event: str
    matcher: str | None
    command: str
    files: tuple[tuple[str, str, str | None], ...]
    file_text: Mapping[str, str]
    profile: Mapping[str, Any]
    capabilities: tuple[str, ...]
    trusted_at: str
    executable: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        """The short id people type: the digest's first 12 characters."""
        return self.digest[:12]

    @classmethod
    def of(cls, subject: TrustSubject, now: str) -> TrustRecord:
        """The record of trusting ``subject`` at ``now`` (ISO 8601, UTC)."""
        files = sorted(subject.files, key=_by_path)
        return cls(
            digest=subject.digest(),
            root=subject.root,
            source=subject.source,
            event=subject.event,
            matcher=subject.matcher,
            command=subject.command,
            files=tuple((f.path, f.kind, f.sha256) for f in files),
            file_text={f.path: decode_exact(f.data[:MAX_FILE_TEXT]) for f in files if f.data is not None},
            profile=json.loads(_canonical_json(subject.profile)),
            capabilities=tuple(sorted(set(subject.capabilities))),
            trusted_at=now,
            executable=tuple(f.path for f in files if f.executable),
        )

    def to_json(self) -> dict[str, Any]:
        """The record as plain JSON values (what the store and exports hold)."""
        return {
            "digest": self.digest,
            "root": self.root,
            "source": self.source,
            "event": self.event,
            "matcher": self.matcher,
            "command": self.command,
            "files": [list(f) for f in self.files],
            "file_text": dict(self.file_text),
            "profile": dict(self.profile),
            "capabilities": list(self.capabilities),
            "trusted_at": self.trusted_at,
            "executable": list(self.executable),
        }

    @classmethod
    def from_json(cls, data: Any) -> TrustRecord:
        """Validate and build a record from :meth:`to_json`'s shape (unknown keys ignored).

        Raises:
            TrustStoreError: the shape is wrong; the message says where.
        """
        if not isinstance(data, dict):
            raise TrustStoreError("a trust record must be an object")
        digest = _field(data, "digest", str)
        if not _HEX_DIGEST.match(digest):
            raise TrustStoreError(f"trust record digest {digest[:80]!r} is not a sha256 hex digest")
        where = f"trust record {digest[:12]}"
        matcher = data.get("matcher")
        if matcher is not None and not isinstance(matcher, str):
            raise TrustStoreError(f"{where}: 'matcher' must be a string or null")
        files = _field(data, "files", list, where)
        for entry in files:
            if not (
                isinstance(entry, list) and len(entry) == 3
                and isinstance(entry[0], str) and entry[1] in FILE_KINDS
                and (entry[2] is None or (isinstance(entry[2], str) and _HEX_DIGEST.match(entry[2])))
            ):
                raise TrustStoreError(f"{where}: each of 'files' must be [path, kind, sha256 or null]")
        file_text = _field(data, "file_text", dict, where)
        if not all(isinstance(v, str) for v in file_text.values()):
            raise TrustStoreError(f"{where}: 'file_text' must map paths to strings")
        capabilities = _field(data, "capabilities", list, where)
        if not all(isinstance(c, str) for c in capabilities):
            raise TrustStoreError(f"{where}: 'capabilities' must be a list of strings")
        executable = data.get("executable", [])
        if not isinstance(executable, list) or not all(isinstance(p, str) for p in executable):
            raise TrustStoreError(f"{where}: 'executable' must be a list of paths")
        return cls(
            digest=digest,
            root=_field(data, "root", str, where),
            source=_field(data, "source", str, where),
            event=_field(data, "event", str, where),
            matcher=matcher,
            command=_field(data, "command", str, where),
            files=tuple((e[0], e[1], e[2]) for e in files),
            file_text=file_text,
            profile=_field(data, "profile", dict, where),
            capabilities=tuple(capabilities),
            trusted_at=_field(data, "trusted_at", str, where),
            executable=tuple(executable),
        )


def _field(data: Mapping[str, Any], key: str, kind: type[Any], where: str = "trust record") -> Any:
    value = data.get(key)
    if not isinstance(value, kind):
        raise TrustStoreError(f"{where}: {key!r} must be a{'n' if kind is dict else ''} {_KIND_NAMES[kind]}")
    return value


_KIND_NAMES: dict[type[Any], str] = {str: "string", list: "list", dict: "object"}


# -- the store ----------------------------------------------------------------------


class TrustStore:
    """The user's trusted digests (a JSON file) plus read-only extra trust files.

    Args:
        path: the store, ``$HOOKCAGE_HOME/trust.json``; created on first write.
        extra: trust files in the export format (``HOOKCAGE_TRUST_FILE``),
            only ever read.

    Every method raises :class:`TrustStoreError` when the store or an extra
    file is corrupt or unreadable, or a write fails (the store is then left as
    it was).
    """

    def __init__(self, path: Path, *, extra: Sequence[Path] = ()) -> None:
        self.path = Path(path)
        self.extra = tuple(Path(p) for p in extra)
        self._filelock: filelock.FileLock | None = None

    @property
    def _lock(self) -> filelock.FileLock:
        """The store's write lock, made on first write (reading needs none)."""
        if self._filelock is None:
            self._filelock = filelock.FileLock(f"{self.path}.lock", timeout=LOCK_TIMEOUT, mode=0o600)
        return self._filelock

    def is_trusted(self, digest: str | Iterable[str]) -> bool:
        """True when ``digest`` (or one of several: :meth:`TrustSubject.covering_digests`) is in
        the store or in an extra trust file."""
        wanted = {digest} if isinstance(digest, str) else set(digest)
        return any(r.digest in wanted for r in self.records())

    def records(self) -> list[TrustRecord]:
        """Every record, the store's first, then each extra file's (oldest first in each)."""
        seen: set[str] = set()
        out: list[TrustRecord] = []
        for group in [self._load_store(cached=True), *(self._load_extra(p) for p in self.extra)]:
            for record in sorted(group.values(), key=lambda r: (r.trusted_at, r.digest)):
                if record.digest not in seen:
                    seen.add(record.digest)
                    out.append(record)
        return out

    def find(self, id_or_digest_prefix: str) -> TrustRecord | None:
        """The one record whose digest starts with the prefix (at least 6 hex digits).

        Returns:
            The record, or None when none or several match, or the prefix is too short.
        """
        prefix = _prefix(id_or_digest_prefix)
        if prefix is None:
            return None
        matches = [r for r in self.records() if r.digest.startswith(prefix)]
        return matches[0] if len(matches) == 1 else None

    def add(self, records: Iterable[TrustRecord]) -> None:
        """Trust these records (a record with the same digest is replaced)."""
        new = list(records)

        def change(stored: dict[str, TrustRecord]) -> int:
            for record in new:
                stored[record.digest] = record
            return len(new)

        self._update(change)

    def revoke(self, ids: Iterable[str]) -> int:
        """Remove the store's records matching any id or digest prefix (>= 6 hex digits).

        Returns:
            How many were removed. Records of extra files are never removed.
        """
        prefixes = [p for p in map(_prefix, ids) if p is not None]
        return self.prune(lambda r: not any(r.digest.startswith(p) for p in prefixes))

    def revoke_all(self) -> int:
        """Remove every record of the store; returns how many."""
        return self.prune(lambda r: False)

    def prune(self, keep: Callable[[TrustRecord], bool]) -> int:
        """Remove the store's records for which ``keep`` is false; returns how many."""

        def change(stored: dict[str, TrustRecord]) -> int:
            gone = [d for d, r in stored.items() if not keep(r)]
            for digest in gone:
                del stored[digest]
            return len(gone)

        return self._update(change)

    def export(self) -> str:
        """All records (store and extra files) as JSON text, the format extra files are read in."""
        return _document({r.digest: r for r in self.records()})

    def previous(self, subject: TrustSubject) -> TrustRecord | None:
        """The latest record of the same hook with another digest, to diff against at review.

        The same hook is the same root, source, event and matcher; a record
        with the same command too is preferred.
        """
        digest = subject.digest()
        key = (subject.root, subject.source, subject.event, subject.matcher)
        same = [
            r for r in self.records()
            if (r.root, r.source, r.event, r.matcher) == key and r.digest != digest
        ]
        best = [r for r in same if r.command == subject.command] or same
        return max(best, key=lambda r: (r.trusted_at, r.digest), default=None)

    # -- reading and writing ------------------------------------------------------

    def _update(self, change: Callable[[dict[str, TrustRecord]], int]) -> int:
        """Read, change and write the store under its lock; write only when something changed."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as exc:
            raise TrustStoreError(f"cannot create {self.path.parent} for the trust store ({_reason(exc)})") from exc
        try:
            with self._lock:
                stored = self._load_store()
                changed = change(stored)
                if changed:
                    self._write(stored)
                return changed
        except filelock.Timeout as exc:
            raise TrustStoreError(
                f"timed out after {LOCK_TIMEOUT:g}s waiting for the trust store lock {self._lock.lock_file}"
                " (another hookcage is writing; if none is, remove the lock file)"
            ) from exc
        except OSError as exc:
            raise TrustStoreError(f"cannot lock the trust store ({self._lock.lock_file}: {_reason(exc)})") from exc

    def _load_store(self, *, cached: bool = False) -> dict[str, TrustRecord]:
        """The store's records; ``cached``: shared with other calls (:mod:`executor.filecache`),
        not to be changed (a write reads afresh, under the lock)."""
        path = self.path

        def parse(raw: bytes) -> dict[str, TrustRecord]:
            return _parse(raw, lambda problem: _store_trouble(path, problem))

        try:
            if cached:
                return filecache.FILES.load(path, ("trust store", str(path)), path.read_bytes, parse)
            raw = path.read_bytes()
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise TrustStoreError(_store_trouble(path, f"cannot be read ({_reason(exc)})")) from exc
        return parse(raw)

    def _load_extra(self, path: Path) -> dict[str, TrustRecord]:
        """An extra trust file's records (shared: :mod:`executor.filecache`; never written)."""
        def parse(raw: bytes) -> dict[str, TrustRecord]:
            return _parse(raw, lambda problem: f"trust file {path} (HOOKCAGE_TRUST_FILE) {problem}: "
                          "fix it or stop pointing at it")

        try:
            return filecache.FILES.load(path, ("trust file", str(path)), path.read_bytes, parse)
        except OSError as exc:
            raise TrustStoreError(
                f"trust file {path} (HOOKCAGE_TRUST_FILE) cannot be read ({_reason(exc)})"
            ) from exc

    def _write(self, records: Mapping[str, TrustRecord]) -> None:
        """Replace the store atomically: temp file, fsync, rename, fsync the directory."""
        data = _document(records).encode("ascii")
        directory = self.path.parent
        try:
            fd, temp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=directory)
        except OSError as exc:
            raise TrustStoreError(f"cannot write the trust store {self.path} ({_reason(exc)})") from exc
        try:
            with os.fdopen(fd, "wb") as out:  # mkstemp made it 0600
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temp, self.path)
        except BaseException as exc:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            if isinstance(exc, OSError):
                raise TrustStoreError(
                    f"cannot write the trust store {self.path} ({_reason(exc)}); it was left as it was"
                ) from exc
            raise
        try:
            dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | _O_CLOEXEC)
        except OSError:
            return
        # The rename is done; a file system that cannot fsync a directory keeps it all the same.
        with contextlib.suppress(OSError):
            os.fsync(dir_fd)
        os.close(dir_fd)


def _prefix(text: str) -> str | None:
    prefix = text.strip().lower()
    return prefix if _HEX_PREFIX.match(prefix) else None


def _document(records: Mapping[str, TrustRecord]) -> str:
    body = {"format": TRUST_FORMAT, "records": {d: r.to_json() for d, r in records.items()}}
    return json.dumps(body, indent=2, sort_keys=True, ensure_ascii=True) + "\n"


def _store_trouble(path: Path, problem: str) -> str:
    aside = shlex.quote(f"{path}.bad")
    return (
        f"trust store {path} {problem}: move it aside (mv {shlex.quote(str(path))} {aside})"
        " and review again with `hookcage trust`"
    )


def _parse(raw: bytes, trouble: Callable[[str], str]) -> dict[str, TrustRecord]:
    """Parse a store or export document.

    Args:
        raw: the file's bytes.
        trouble: builds the one-line error message from what is wrong.
    """
    try:
        doc = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise TrustStoreError(trouble(f"is corrupt (not UTF-8 at byte {exc.start})")) from exc
    except json.JSONDecodeError as exc:
        raise TrustStoreError(trouble(f"is corrupt ({exc.msg} at line {exc.lineno})")) from exc
    except RecursionError as exc:
        raise TrustStoreError(trouble("is corrupt (nested too deeply)")) from exc
    if not isinstance(doc, dict):
        raise TrustStoreError(trouble("is corrupt (not a JSON object)"))
    version = doc.get("format")
    if version != TRUST_FORMAT or isinstance(version, bool):
        if isinstance(version, int) and not isinstance(version, bool) and version > TRUST_FORMAT:
            raise TrustStoreError(trouble(
                f"has format {version}, from a newer hookcage (this one reads format {TRUST_FORMAT};"
                " upgrading hookcage fixes it too)"
            ))
        if "format" not in doc:
            raise TrustStoreError(trouble("is corrupt (no format number)"))
        raise TrustStoreError(trouble(f"is corrupt (format {json.dumps(version)[:20]}, expected {TRUST_FORMAT})"))
    records = doc.get("records")
    if not isinstance(records, dict):
        raise TrustStoreError(trouble("is corrupt ('records' must be an object)"))
    out: dict[str, TrustRecord] = {}
    for digest, data in records.items():
        try:
            record = TrustRecord.from_json(data)
        except TrustStoreError as exc:
            raise TrustStoreError(trouble(f"is corrupt ({exc})")) from exc
        if record.digest != digest:
            raise TrustStoreError(trouble(f"is corrupt (record {digest[:12]!r} holds digest {record.digest[:12]})"))
        out[digest] = record
    return out
