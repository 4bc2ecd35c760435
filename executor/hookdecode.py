"""Decoding a hook file's bytes as its agent does: JSON (with Gemini's comments), YAML, TOML (no I/O).

:func:`decode` gives JSON's kinds whatever the format (:func:`_plain`), so the
dialects' parsers see only what a JSON file could hold; YAML is read as infer
reads it (Go's yaml.v3: anchors, aliases and ``<<`` merges expanded), with its
aliases bounded (:data:`MAX_ALIAS_NODES`). Every failure is a ``ValueError``
with one line saying what is wrong and where. :mod:`executor.config` reads the
files and bounds what is decoded.
"""

from __future__ import annotations

import json
from typing import Any

from executor.dialects.base import FileFormat

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

    loader = None
    try:
        loader = Loader(text)  # its reader refuses some characters (a NUL) at once
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
        if loader is not None:
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
