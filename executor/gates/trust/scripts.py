"""What a command runs and what its scripts load.

:func:`command_words` picks the words of a command that name project files,
:func:`loaded_words` the code a script loads, and :func:`collect_loaded` follows
that transitively through :func:`~executor.gates.trust.references.collect_references`.
"""

from __future__ import annotations

import functools
import os
import posixpath
import re
from collections.abc import Callable, Iterable, Sequence

from executor.core.files import FileState
from executor.gates.trust import references
from executor.gates.trust.references import (
    ASSIGNMENT,
    CODE_SUFFIXES,
    URL,
    UnsafeReference,
    collect_references,
    mib,
    plain_path,
)

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
    assignment = ASSIGNMENT.match(word)
    if assignment:
        word = assignment.group(1)
    if not word or word.startswith(("/", "-")) or URL.match(word):
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
        if not plain_path(word):
            continue
        before = words[i - 1] if i else ""
        after_interpreter = posixpath.basename(before) in _INTERPRETERS or before in ("-f", "--from-file")
        if after_interpreter or word.lower().endswith(CODE_SUFFIXES):
            out.append(word)
    return out


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
        if len(merged) > references.MAX_REFERENCED_FILES:
            raise UnsafeReference(
                words[0], f"the hook's scripts and what they load are more than {references.MAX_REFERENCED_FILES} files;"
                " keep a hook's scripts in a folder of their own (e.g. .hookcage/)"
            )
        if sum(len(f.data or b"") for f in merged.values()) > references.MAX_REFERENCED_TOTAL:
            raise UnsafeReference(words[0], f"the hook's scripts and what they load hold more than {mib(references.MAX_REFERENCED_TOTAL)}")
        words = loaded_words(fresh, root, shell_words=shell_words, folders=False)
    return tuple(merged[path] for path in sorted(merged))
