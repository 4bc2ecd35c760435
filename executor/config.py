"""Finding and reading hook files of every scope and every agent (the I/O edge of :mod:`executor.core.hooks`).

hookcage's own files, in config order: managed (``/etc/hookcage/hooks.json``
or ``$HOOKCAGE_MANAGED_DIR/hooks.json``), user (``$HOOKCAGE_HOME/hooks.json``),
project (``<root>/.hookcage/hooks.json``) and local
(``<root>/.hookcage/hooks.local.json``). Then each agent's own files, as its
dialect names them (:meth:`executor.dialects.base.Dialect.sources`:
``.claude/settings.json``, ``.gemini/settings.json``, ``.github/hooks/*.json``
...), decoded as JSON, YAML or TOML and parsed by that dialect. A file that
cannot be read or parsed yields no hooks and one problem naming the agent,
the file and what is wrong; the other files still work.
"""

from __future__ import annotations

import glob as globlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from executor.core.envnames import PROJECT_DIR_VARS
from executor.core.hooks import HookFile, Problem, Scope, parse_hook_file
from executor.core.policy import HookSet, merge
from executor.dialects.base import Dialect, FileFormat, HookSource, Where
from executor.settings import Settings

MAX_HOOK_FILE = 4 * 1024 * 1024
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
    """What dialects need to name their files (HOME from the environment handed in)."""
    environ = os.environ if environ is None else environ
    home = environ.get("HOME") or os.path.expanduser("~")
    return Where(str(root) if root is not None else None, home, dict(environ))


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


def _read(path: Path, scope: Scope, agent: str) -> tuple[bytes | None, HookFile | None]:
    """The file's bytes; or None and a broken file; or (None, None) when it does not exist."""
    source = str(path)
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_HOOK_FILE + 1)
    except FileNotFoundError:
        return None, None
    except IsADirectoryError:
        return None, _broken(source, scope, "is a directory, not a hook file", agent)
    except OSError as exc:
        return None, _broken(source, scope, f"cannot be read: {exc.strerror}", agent)
    if len(raw) > MAX_HOOK_FILE:
        return None, _broken(source, scope, f"is larger than {MAX_HOOK_FILE // (1024 * 1024)} MiB", agent)
    return raw, None


MAX_ALIAS_NODES = 100_000
"""Nodes YAML anchors and aliases may add to a file once expanded; past it the file is refused
(a "billion laughs": a few lines of aliases naming aliases expand to gigabytes)."""


def _load_yaml(text: str) -> Any:
    """YAML as infer reads it (Go's yaml.v3: anchors, aliases and ``<<`` merges are expanded), bounded.

    The document is composed first (an alias is a reference there, so composing costs what the
    text costs), then the nodes its aliases would add are counted before anything is built: past
    :data:`MAX_ALIAS_NODES`, or an alias inside its own anchor (a loop), the file is refused in
    one line. PyYAML is imported here, not at start-up: only infer's file is YAML, and the import
    costs ~14 ms on every in-process dispatch."""
    import yaml

    class Loader(yaml.SafeLoader):
        def compose_node(self, parent: Any, index: Any) -> Any:
            event = self.peek_event()  # type: ignore[no-untyped-call]
            if not isinstance(event, yaml.AliasEvent) and getattr(event, "anchor", None) is not None:
                self.anchors.pop(event.anchor, None)  # redefined: later aliases take the new one (yaml.v3)
            return super().compose_node(parent, index)

    loader = Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _bound_aliases(node)
        return _plain(loader.construct_document(node))
    except _Refused:
        raise
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where_ = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ValueError(f"not valid YAML: {problem}{where_}") from None
    except (ValueError, OverflowError) as exc:  # a constructor's own: !!timestamp 2001-13-01, 5,000 digits
        raise ValueError(f"not valid YAML: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
    finally:
        loader.dispose()


class _Refused(ValueError):
    """A YAML file refused whole, said in one line of its own."""


def _bound_aliases(root: Any) -> None:
    """Refuse a composed YAML document whose aliases add more than :data:`MAX_ALIAS_NODES` nodes,
    or loop. Each distinct node is visited once (its expanded size is remembered), without recursion.

    Raises:
        ValueError: one line saying which.
    """
    import yaml

    def children(node: Any) -> list[Any]:
        if isinstance(node, yaml.MappingNode):
            return [part for pair in node.value for part in pair]
        return list(node.value) if isinstance(node, yaml.SequenceNode) else []

    cap = 1 << 62
    size: dict[int, int] = {}
    open_: set[int] = set()  # started, not finished: the path from the root
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        if finished:
            size[key] = min(cap, 1 + sum(size[id(c)] for c in children(node)))
            open_.discard(key)
            continue
        if key in size:
            continue
        open_.add(key)
        stack.append((node, True))
        for child in children(node):
            if id(child) in open_:
                mark = child.start_mark
                raise _Refused(f"not valid YAML: the anchor at line {mark.line + 1}, column {mark.column + 1} "
                               "holds an alias to itself (the document would never end)")
            if id(child) not in size:
                stack.append((child, False))
    added = size[id(root)] - len(size)
    if added > MAX_ALIAS_NODES:
        raise _Refused(f"refused: its YAML aliases expand to {added if added < cap else 'more than 2**62'} more "
                       f"nodes, past hookcage's limit of {MAX_ALIAS_NODES} (a \"billion laughs\")")


def _plain(value: Any) -> Any:
    """A decoded YAML or TOML value as JSON's kinds, copied (no node shared by two aliases): keys
    become strings as Go's decoders make them (``1`` -> ``"1"``, ``true`` -> ``"true"``), dates and
    times their ISO text, anything else JSON has no kind for its text. The dialects' parsers see
    only what a JSON file could hold."""
    import datetime

    if isinstance(value, dict):
        return {_key(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def _key(key: Any) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, bool):
        return "true" if key else "false"
    if key is None:
        return "null"
    plain = _plain(key)
    return plain if isinstance(plain, str) else json.dumps(plain)


def decode(raw: bytes, form: FileFormat, *, comments: bool = False) -> Any:
    """Decode a hook file's bytes.

    A leading UTF-8 byte order mark is skipped (editors on Windows write one). With
    ``comments`` (Gemini CLI's files), JSON may hold ``//`` and ``/* */`` comments
    (:mod:`executor.core.jsonc`). YAML and TOML come back as JSON's kinds (:func:`_plain`).

    Raises:
        ValueError: with a one-line message saying what is wrong and where.
    """
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ValueError("is not UTF-8 text") from None
    if not text.strip():
        return {}
    if form == "json":
        if comments:
            from executor.core.jsonc import strip_comments

            text = strip_comments(text)
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
        except RecursionError:
            raise ValueError("not valid JSON: nests too deeply") from None
        except ValueError as exc:  # an integer past Python's digit limit
            raise ValueError(f"not valid JSON: {exc}") from None
    if form == "toml":
        import tomllib  # only Codex's files are TOML

        try:
            return _plain(tomllib.loads(text))
        except tomllib.TOMLDecodeError as exc:
            raise ValueError(f"not valid TOML: {exc}") from None
        except RecursionError:
            raise ValueError("not valid TOML: nests too deeply") from None
        except ValueError as exc:  # an integer past Python's digit limit
            raise ValueError(f"not valid TOML: {str(exc).splitlines()[0]}") from None
    try:
        return _load_yaml(text)
    except RecursionError:
        raise ValueError("not valid YAML: nests too deeply") from None


def load_hook_file(path: Path, scope: Scope, root: Path | None, dialect: Dialect | None = None,
                   form: FileFormat = "json", environ: Mapping[str, str] | None = None) -> HookFile | None:
    """Read and parse one hook file (hookcage's own, or ``dialect``'s); ``None`` when it does not exist."""
    agent = dialect.name if dialect else ""
    raw, broken = _read(path, scope, agent)
    if raw is None:
        return broken
    source = str(path)
    try:
        data = decode(raw, form, comments=dialect is not None and dialect.json_comments)
    except ValueError as exc:
        return _broken(source, scope, str(exc), agent)
    project = str(root) if root else None
    try:
        if dialect is None:
            return parse_hook_file(data, scope=scope, source=source, project_root=project)
        return dialect.parse(data, scope=scope, source=source, project_root=project,
                             environ=os.environ if environ is None else environ)
    except Exception as exc:  # a parser's bug (the property tests say none is left): this file only
        return _broken(source, scope, f"hookcage could not read it (internal error: {type(exc).__name__}); "
                       "none of its hooks run", agent)


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
        raw, broken = _read(Path(source.path), source.scope, dialect.name)
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


def hook_files(settings: Settings, root: Path | None, agents: Sequence[Dialect] = (),
               environ: Mapping[str, str] | None = None) -> list[HookFile]:
    """hookcage's own hook files and those of ``agents``, read and parsed, in config order; files
    past a bound are there as problems (:func:`unread_files`)."""
    files = [
        loaded
        for scope, path in scope_files(settings, root)
        if (loaded := load_hook_file(path, scope, root)) is not None
    ]
    for dialect in agents:
        for source, path in agent_files(dialect, root, environ):
            loaded = load_hook_file(path, source.scope, root, dialect, source.format, environ)
            if loaded is not None:
                files.append(loaded)
        files.extend(unread_files(dialect, root, environ))
    return files


def load_hooks(settings: Settings, root: Path | None, agents: Sequence[Dialect] = (),
               environ: Mapping[str, str] | None = None) -> HookSet:
    """Read hookcage's own hook files and those of ``agents``, and merge them."""
    return merge(hook_files(settings, root, agents, environ))
