"""Finding and reading hook files of every scope and every agent (the I/O edge of :mod:`executor.core.hooks`).

hookcage's own files, in config order: managed (``/etc/hookcage/hooks.json``
or ``$HOOKCAGE_MANAGED_DIR/hooks.json``), user (``$HOOKCAGE_HOME/hooks.json``),
project (``<root>/.hookcage/hooks.json``) and local
(``<root>/.hookcage/hooks.local.json``). Then each agent's own files, as its
dialect names them (:meth:`executor.dialects.base.Dialect.sources`:
``.claude/settings.json``, ``.gemini/settings.json``, ``.github/hooks/*.json``
...), decoded as JSON, YAML or TOML (:mod:`executor.hookdecode`) and parsed
by that dialect. A file that cannot be read or parsed yields no hooks and one
problem naming the agent, the file and what is wrong; the other files still
work.
"""

from __future__ import annotations

import dataclasses
import glob as globlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from executor import filecache, safeio
from executor.core.envnames import AGENT_DIR_VARS, PROJECT_DIR_VARS
from executor.core.hookparse import parse_hook_file
from executor.core.hooks import HookFile, Problem, Scope
from executor.core.policy import HookSet, merge
from executor.dialects.base import Dialect, FileFormat, HookSource, Where
from executor.errors import OwnDirInProject
from executor.hookdecode import decode
from executor.places import in_project
from executor.settings import Settings

MAX_HOOK_FILE = 4 * 1024 * 1024
"""Bytes of a JSON hook file (json parses 4 MiB in ~50 ms here)."""
MAX_FILE_BYTES: dict[str, int] = {"json": MAX_HOOK_FILE, "toml": 256 * 1024, "yaml": 32 * 1024}
"""Bytes of a hook file by format: each format's worst file at its limit parses in well under a
second. Measured (CPU time, the worst shapes found: flow sequences and maps for YAML, one long
array for TOML): YAML 32 KiB 0.21 s (64 KiB 0.47 s; 4 MiB 18-54 s), TOML 256 KiB 0.17 s
(4 MiB 1-3 s), JSON 4 MiB 0.06-0.09 s."""
MAX_VALUES = 20_000
"""Values (objects, arrays, keys' values, scalars) one decoded hook file may hold; counted before
the agent's parser walks it, so a file of 40,000 tiny handlers costs milliseconds."""
MAX_DEPTH = 64
"""Levels of objects and arrays a hook file may nest (an agent's file nests about 6)."""
MAX_HANDLERS = 1_000
"""Handlers (hooks, routes included) one hook file may hold; a real repository has tens."""
MAX_REPOSITORY_HANDLERS = 1_000
"""Handlers a repository's files (project and local scope) may hold together, for one agent
(hookcage's own files counted for every agent); past it the files that do not fit are broken."""
MAX_PROBLEMS = 100
"""Problems kept per file; the rest are one problem that says how many."""
MAX_GLOB_FILES = 64
"""Files one glob source (``.github/hooks/*.json``) may name; more are reported, not read."""


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
    """hookcage's own hook files, in config order (whether or not they exist)."""
    files = [(Scope.MANAGED, settings.managed_hooks_file), (Scope.USER, settings.user_hooks_file)]
    if root is not None:
        files.append((Scope.PROJECT, root / ".hookcage" / "hooks.json"))
        files.append((Scope.LOCAL, root / ".hookcage" / "hooks.local.json"))
    return files


def where(root: Path | None, environ: Mapping[str, str] | None = None) -> Where:
    """What dialects need to name their files (HOME from the environment handed in).

    A relative ``HOME``, ``CLAUDE_CONFIG_DIR``, ``CODEX_HOME``... is taken against the
    project root (the directory the agent runs in, which resolves it there), so the
    file is read where the agent reads it and :func:`file_scope` judges that place.
    """
    environ = os.environ if environ is None else environ
    env = dict(environ)
    base = str(root) if root is not None else _cwd()
    for name in AGENT_DIR_VARS:
        value = env.get(name)
        if value and not os.path.isabs(value):
            env[name] = os.path.join(base, value)
    home = env.get("HOME") or os.path.expanduser("~")
    return Where(str(root) if root is not None else None, home, env)


def _cwd() -> str:
    try:
        return os.getcwd()
    except OSError:  # the working directory was removed
        return "/"


def file_scope(path: Path | str, scope: Scope, root: Path | None) -> tuple[Scope, Problem | None]:
    """The scope a hook file has by where it IS, and the note saying why when that differs.

    A managed or user file (any agent's, or hookcage's own) that lies in the project, as
    named or through a symlink, is the repository's: project scope (reviewed by trust,
    never run on the host), whatever variable (``CLAUDE_CONFIG_DIR``, ``CODEX_HOME``,
    ``GEMINI_CLI_HOME``, ``HOOKCAGE_HOME``...) put it there. Every reader of hook files
    goes through here (:func:`load_hook_file`).
    """
    if scope.from_repository or not in_project(path, root):
        return scope, None
    return Scope.PROJECT, Problem(
        str(path), "$", f"{scope.value} file inside the project ({root}): treated as project scope "
        "(reviewed by trust, never run on the host)", severity="warning")


def own_dirs_in_project(home: Path, managed_dir: Path, root: Path | None) -> list[tuple[str, Path]]:
    """hookcage's own directories (``HOOKCAGE_HOME``, ``HOOKCAGE_MANAGED_DIR``) that lie in the project."""
    return [(name, path) for name, path in (("HOOKCAGE_HOME", home), ("HOOKCAGE_MANAGED_DIR", managed_dir))
            if in_project(path, root)]


def refuse_own_dirs_in_project(home: Path, managed_dir: Path, root: Path | None) -> None:
    """Raise when hookcage's home or managed directory lies in the project (dispatch blocks).

    Raises:
        OwnDirInProject: naming the variable, the directory and the project.
    """
    inside = own_dirs_in_project(home, managed_dir, root)
    if inside:
        name, path = inside[0]
        raise OwnDirInProject(
            f"{name} ({os.path.abspath(path)}) is inside the project ({root}): its settings, allow-list "
            "and trust store would be the repository's, so hookcage refuses it (dispatch blocks every event); "
            "point it outside the project")


def own_dirs_file(settings: Settings, root: Path | None) -> HookFile | None:
    """When hookcage's own home or managed directory lies in the project, its settings (the
    allow-list), trust store and hook files would be the repository's: a file that switches
    every project and local hook off, with one error saying why (fail closed)."""
    inside = own_dirs_in_project(settings.home, settings.managed_dir, root)
    if not inside:
        return None
    name, path = inside[0]
    why = (f"{name} ({os.path.abspath(path)}) is inside the project ({root}): its settings and trust store would be "
           "the repository's, so no project hook runs; point it outside the project")
    return HookFile(str(path), Scope.PROJECT, problems=(Problem(str(path), "$", why),),
                    disable_all=True, disable_reason=f"{name} inside the project")


def guess_scope(path: Path, settings: Settings, agents: Sequence[Dialect] = (),
                environ: Mapping[str, str] | None = None) -> tuple[Scope, Dialect | None]:
    """Which scope (and agent) a hook file named on the command line belongs to, by where it is."""
    real = os.path.realpath(path)
    for scope, candidate in scope_files(settings, None):
        if real == os.path.realpath(candidate):
            return scope, None
    root = _find_root(path)
    for dialect in agents:
        for source in dialect.sources(where(root, environ)):
            if _names(source, real):
                return source.scope, dialect
    return (Scope.LOCAL if path.name == "hooks.local.json" else Scope.PROJECT), (agents[0] if agents else None)


def _find_root(path: Path) -> Path | None:
    """The project a file named on the command line is in: the parent of its agent directory."""
    parent = Path(os.path.realpath(path)).parent
    if parent.name.startswith("."):
        return parent.parent
    if parent.parent.name.startswith("."):  # .github/hooks/x.json
        return parent.parent.parent
    return None


def _names(source: HookSource, real: str) -> bool:
    if source.glob:
        import fnmatch

        return fnmatch.fnmatch(real, os.path.realpath(os.path.dirname(source.path)) + "/" + os.path.basename(source.path))
    return real == os.path.realpath(source.path)


def file_format(path: Path, dialect: Dialect | None) -> FileFormat:
    """How a hook file named on the command line is decoded: by its agent's sources, else its suffix."""
    if dialect is not None:
        real = os.path.realpath(path)
        root = _find_root(path)
        for source in dialect.sources(where(root)):
            if _names(source, real):
                return source.format
    return "yaml" if path.suffix in (".yaml", ".yml") else "toml" if path.suffix == ".toml" else "json"


def read_hook_bytes(path: Path, scope: Scope, agent: str, form: FileFormat = "json", *,
          follow: bool = True, source: str | None = None) -> tuple[bytes | None, HookFile | None]:
    """The file's bytes; or None and a broken file; or (None, None) when it does not exist.

    Opened by :func:`executor.safeio.read_regular`: a FIFO, a device, a socket or a
    directory (or a symlink to one: ``/dev/tty``, ``/proc/self/fd/1``) is refused
    without being read, and nothing blocks.
    """
    limit = MAX_FILE_BYTES.get(form, MAX_HOOK_FILE)
    try:
        return safeio.read_regular(path, limit, follow=follow, what=f"a {form.upper()} hook file"), None
    except safeio.Unreadable as exc:
        if exc.missing:
            return None, None
        return None, _broken(source or str(path), scope, exc.reason, agent)


def _measure(data: Any) -> str | None:
    """Why decoded ``data`` is past :data:`MAX_VALUES` or :data:`MAX_DEPTH`; None within both.

    Iterative (a deep file cannot exhaust the stack) and stops at the first bound passed.
    """
    values = 0
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        values += 1
        if values > MAX_VALUES:
            return f"holds more than {MAX_VALUES:,} values (the limit of a hook file): refused before parsing"
        if isinstance(value, dict):
            items: Any = value.values()
        elif isinstance(value, list | tuple | set | frozenset):
            items = value
        else:
            continue
        if depth >= MAX_DEPTH and items:
            return f"nests deeper than {MAX_DEPTH} levels (the limit of a hook file): refused"
        stack.extend((item, depth + 1) for item in items)
    return None


def _bounded(loaded: HookFile) -> HookFile:
    """``loaded``, broken when it holds more than :data:`MAX_HANDLERS`; its problems capped."""
    handlers = len(loaded.hooks) + len(loaded.routes)
    if handlers > MAX_HANDLERS:
        return _broken(loaded.source, loaded.scope, f"holds {handlers:,} handlers, more than the {MAX_HANDLERS:,} "
                       "a hook file may hold: none of its hooks run", loaded.agent)
    if len(loaded.problems) > MAX_PROBLEMS:
        more = len(loaded.problems) - MAX_PROBLEMS + 1
        last = Problem(loaded.source, "$", f"{more:,} more problems not shown (at most {MAX_PROBLEMS} a file)",
                       agent=loaded.agent)
        return replace(loaded, problems=(*loaded.problems[: MAX_PROBLEMS - 1], last))
    return loaded


def load_hook_file(path: Path, scope: Scope, root: Path | None, dialect: Dialect | None = None,
                   form: FileFormat = "json", environ: Mapping[str, str] | None = None) -> HookFile | None:
    """Read and parse one hook file (hookcage's own, or ``dialect``'s); ``None`` when it does not exist.

    Its scope is the one it has by where it is (:func:`file_scope`): a user or managed
    file inside the project is read as a project file, with a warning saying so.
    """
    scope, moved = file_scope(path, scope, root)
    loaded = _load_hook_file(path, scope, root, dialect, form, environ)
    if loaded is None or moved is None:
        return loaded
    return dataclasses.replace(loaded, problems=(dataclasses.replace(moved, agent=loaded.agent),
                                                 *loaded.problems))


def _load_hook_file(path: Path, scope: Scope, root: Path | None, dialect: Dialect | None,
                    form: FileFormat, environ: Mapping[str, str] | None) -> HookFile | None:
    agent = dialect.name if dialect else ""
    if scope.from_repository and root is not None:
        # A repository's file may be a symlink within the repository, never one out of it
        # (/proc/self/fd/1, a file of the user's): the resolved path is opened, not followed again.
        real = Path(filecache.realpath(path))
        if not real.is_relative_to(filecache.realpath(root)):
            if not os.path.lexists(path):
                return None
            return _broken(str(path), scope, f"is a symlink that leads out of the project (to {real}): "
                           "refused without reading it", agent)
        read_path, follow = real, False
    else:
        read_path, follow = path, True
    environ = os.environ if environ is None else environ
    # Everything the parse depends on besides the bytes (a dialect may read the environment).
    key = ("hook file", str(read_path), follow, str(path), scope, str(root) if root else None, agent, form,
           tuple(sorted(environ.items())) if dialect is not None else ())

    def read() -> bytes:
        raw, broken = read_hook_bytes(read_path, scope, agent, form, follow=follow, source=str(path))
        if raw is None:
            raise _NotRead(broken)
        return raw

    try:
        return filecache.FILES.load(read_path, key, read,
                                    lambda raw: _parse_hook_bytes(raw, path, scope, root, dialect, form, environ),
                                    follow=follow)
    except _NotRead as missing:
        return missing.result


class _NotRead(Exception):
    """A hook file that is missing (``result`` None) or refused before parsing (a broken file)."""

    def __init__(self, result: HookFile | None) -> None:
        super().__init__()
        self.result = result


def _parse_hook_bytes(raw: bytes, path: Path, scope: Scope, root: Path | None, dialect: Dialect | None,
                      form: FileFormat, environ: Mapping[str, str]) -> HookFile:
    """A hook file's bytes, decoded, bounded and parsed by its agent's dialect (hookcage's own without one)."""
    agent = dialect.name if dialect else ""
    source = str(path)
    try:
        data = decode(raw, form, comments=dialect is not None and dialect.json_comments)
    except ValueError as exc:
        return _broken(source, scope, str(exc), agent)
    if (too_much := _measure(data)) is not None:
        return _broken(source, scope, too_much, agent)
    project = str(root) if root else None
    try:
        if dialect is None:
            parsed = parse_hook_file(data, scope=scope, source=source, project_root=project)
        else:
            parsed = dialect.parse(data, scope=scope, source=source, project_root=project, environ=environ)
    except Exception as exc:  # a parser's bug (the property tests say none is left): this file only
        return _broken(source, scope, f"hookcage could not read it (internal error: {type(exc).__name__}); "
                       "none of its hooks run", agent)
    return _bounded(parsed)


def _broken(source: str, scope: Scope, message: str, agent: str = "") -> HookFile:
    return HookFile(source, scope, problems=(Problem(source, "$", message, agent=agent),), agent=agent)


def _expand(source: HookSource) -> tuple[list[str], list[str]]:
    """A glob source's files, sorted: those read (the first :data:`MAX_GLOB_FILES`) and those not."""
    matches = sorted(globlib.glob(globlib.escape(os.path.dirname(source.path)) + "/"
                                  + os.path.basename(source.path)))
    return matches[:MAX_GLOB_FILES], matches[MAX_GLOB_FILES:]


def _sources(dialect: Dialect, root: Path | None, environ: Mapping[str, str] | None) -> list[HookSource]:
    return [
        source for source in dialect.sources(where(root, environ))
        if not (source.scope.from_repository and root is None)
        # the agent reads only the first file it finds (infer)
        and not (source.unless_exists and os.path.exists(source.unless_exists))
    ]


def agent_files(dialect: Dialect, root: Path | None, environ: Mapping[str, str] | None = None
                ) -> list[tuple[HookSource, Path]]:
    """The files of one agent that exist (globs expanded, sorted), in config order."""
    found: list[tuple[HookSource, Path]] = []
    for source in _sources(dialect, root, environ):
        if not source.glob:
            found.append((source, Path(source.path)))
            continue
        found.extend((source, Path(m)) for m in _expand(source)[0])
    return found


def unread_files(dialect: Dialect, root: Path | None, environ: Mapping[str, str] | None = None) -> list[HookFile]:
    """The files of one agent hookcage does not read: past a bound (a glob's 65th file on), or of a
    shape hookcage does not know (:meth:`Dialect.unread_sources`, when it holds hooks). Each is named,
    with why. Nothing hookcage skips disappears without a line: the agent may run these files itself.
    """
    out = []
    for source, why in dialect.unread_sources(where(root, environ)):
        raw, broken = read_hook_bytes(Path(source.path), source.scope, dialect.name, source.format)
        try:
            data = decode(raw, source.format) if raw is not None else None
        except ValueError:
            data = {"hooks": "?"}  # unreadable to hookcage: it may hold hooks all the same
        if broken is not None or (isinstance(data, dict) and data.get("hooks")):
            out.append(_broken(source.path, source.scope, f"not read: {why}", dialect.name))
    for source in _sources(dialect, root, environ):
        if not source.glob:
            continue
        unread = _expand(source)[1]
        for name in unread:
            out.append(_broken(
                name, source.scope,
                f"not read: {os.path.dirname(source.path)} holds {MAX_GLOB_FILES + len(unread)} "
                f"{os.path.basename(source.path)} files and hookcage reads the first {MAX_GLOB_FILES} "
                "(by name); none of this file's hooks run through hookcage or are reviewed",
                dialect.name))
    return out


def read_hook_files(settings: Settings, root: Path | None, agents: Sequence[Dialect] = (),
                    environ: Mapping[str, str] | None = None) -> list[HookFile]:
    """hookcage's own hook files and those of ``agents`` that exist, read and parsed, in config order.

    A file that two scopes of one agent name (the project is ``HOME``) is read once, in
    the first; with hookcage's home or managed directory inside the project, every
    project hook is off (:func:`own_dirs_file`). A repository's files (project and
    local scope) hold at most :data:`MAX_REPOSITORY_HANDLERS` handlers together for
    one agent (hookcage's own project files count for each agent); a file that would
    pass it is broken. Files of an agent hookcage does not read (past a bound, or of
    an unknown shape) are there as problems (:func:`unread_files`).
    """
    files: list[HookFile] = []
    seen: set[tuple[str, str]] = set()

    def add(loaded: HookFile | None, path: Path, budget: RepositoryBudget) -> None:
        if loaded is None:
            return
        key = (loaded.agent, filecache.realpath(path))
        if key not in seen:
            seen.add(key)
            files.append(budget.take(loaded))

    refused = own_dirs_file(settings, root)
    if refused is not None:
        files.append(refused)
    budget = RepositoryBudget()
    for scope, path in scope_files(settings, root):
        add(load_hook_file(path, scope, root), path, budget)
    for dialect in agents:
        agent_budget = replace(budget)
        for source, path in agent_files(dialect, root, environ):
            add(load_hook_file(path, source.scope, root, dialect, source.format, environ), path, agent_budget)
        files.extend(unread_files(dialect, root, environ))  # past a bound, or unknown: named
    return files


@dataclass
class RepositoryBudget:
    """Handlers of a repository's files counted so far (:data:`MAX_REPOSITORY_HANDLERS`)."""

    used: int = 0

    def take(self, loaded: HookFile) -> HookFile:
        if not loaded.scope.from_repository:
            return loaded
        handlers = len(loaded.hooks) + len(loaded.routes)
        if self.used + handlers > MAX_REPOSITORY_HANDLERS:
            return _broken(loaded.source, loaded.scope,
                           f"holds {handlers:,} handlers, past the {MAX_REPOSITORY_HANDLERS:,} a repository's "
                           f"files may hold together ({self.used:,} in the files read before it): "
                           "none of its hooks run", loaded.agent)
        self.used += handlers
        return loaded


def load_hooks(settings: Settings, root: Path | None, agents: Sequence[Dialect] = (),
               environ: Mapping[str, str] | None = None) -> HookSet:
    """Read hookcage's own hook files and those of ``agents`` (:func:`read_hook_files`), and merge them."""
    return merge(read_hook_files(settings, root, agents, environ))
