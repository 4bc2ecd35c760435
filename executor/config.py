"""Finding and reading hook files of every scope (the I/O edge of :mod:`executor.core.hooks`).

Scopes, in config order: managed (``/etc/hookcage/hooks.json`` or
``$HOOKCAGE_MANAGED_DIR/hooks.json``), user (``$HOOKCAGE_HOME/hooks.json``),
project (``<root>/.hookcage/hooks.json``) and local
(``<root>/.hookcage/hooks.local.json``). A file that cannot be read or parsed
yields no hooks and one problem naming it; the other scopes still work.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from executor.core.hooks import HookFile, Problem, Scope, parse_hook_file
from executor.core.policy import HookSet, merge
from executor.settings import Settings

PROJECT_DIR_VARS = ("CLAUDE_PROJECT_DIR", "HOOKCAGE_PROJECT_DIR", "CODEBUDDY_PROJECT_DIR")
MAX_HOOK_FILE = 4 * 1024 * 1024


def project_root(payload: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None) -> Path:
    """The project root: ``$CLAUDE_PROJECT_DIR`` (or a sibling variable), else the payload's cwd, else the cwd."""
    environ = os.environ if environ is None else environ
    for name in PROJECT_DIR_VARS:
        if environ.get(name):
            return Path(os.path.realpath(environ[name]))
    cwd = (payload or {}).get("cwd")
    if isinstance(cwd, str) and cwd:
        return Path(os.path.realpath(cwd))
    return Path(os.path.realpath(os.getcwd()))


def scope_files(settings: Settings, root: Path | None) -> list[tuple[Scope, Path]]:
    """Every hook file hookcage reads, in config order (whether or not it exists)."""
    files = [(Scope.MANAGED, settings.managed_hooks_file), (Scope.USER, settings.user_hooks_file)]
    if root is not None:
        files.append((Scope.PROJECT, root / ".hookcage" / "hooks.json"))
        files.append((Scope.LOCAL, root / ".hookcage" / "hooks.local.json"))
    return files


def guess_scope(path: Path, settings: Settings) -> Scope:
    """Which scope a hook file named on the command line belongs to, by where it is."""
    real = os.path.realpath(path)
    for scope, candidate in scope_files(settings, None):
        if real == os.path.realpath(candidate):
            return scope
    return Scope.LOCAL if path.name == "hooks.local.json" else Scope.PROJECT


def load_hook_file(path: Path, scope: Scope, root: Path | None) -> HookFile | None:
    """Read and parse one hook file; ``None`` when it does not exist."""
    source = str(path)
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_HOOK_FILE + 1)
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        return _broken(source, scope, "is a directory, not a hook file")
    except OSError as exc:
        return _broken(source, scope, f"cannot be read: {exc.strerror}")
    if len(raw) > MAX_HOOK_FILE:
        return _broken(source, scope, f"is larger than {MAX_HOOK_FILE // (1024 * 1024)} MiB")
    try:
        text = raw.decode("utf-8")
        data = json.loads(text) if text.strip() else {}
    except UnicodeDecodeError:
        return _broken(source, scope, "is not UTF-8 text")
    except json.JSONDecodeError as exc:
        return _broken(source, scope, f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})")
    except RecursionError:
        return _broken(source, scope, "not valid JSON: nests too deeply")
    except ValueError as exc:  # an integer past Python's digit limit
        return _broken(source, scope, f"not valid JSON: {exc}")
    return parse_hook_file(data, scope=scope, source=source, project_root=str(root) if root else None)


def _broken(source: str, scope: Scope, message: str) -> HookFile:
    return HookFile(source, scope, problems=(Problem(source, "$", message),))


def load_hooks(settings: Settings, root: Path | None) -> HookSet:
    """Read every scope's hook file and merge them."""
    files = [
        loaded
        for scope, path in scope_files(settings, root)
        if (loaded := load_hook_file(path, scope, root)) is not None
    ]
    return merge(files)
