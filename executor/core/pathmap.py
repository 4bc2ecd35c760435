"""A path map: where the Docker engine sees hookcage's paths, parsed and translated (pure).

``path_map`` maps prefixes of the paths hookcage sees to where the engine's
host sees them (the setting ``HOOKCAGE_PATH_MAP``, or detected from
hookcage's own container by :mod:`executor.sandbox.paths`, whose docstring
tells how and why). :func:`engine_path` is THE translation: with a map in
force, a path outside every entry is refused, never passed unchanged.

The core owns this type: the settings check a ``path_map`` with
:func:`parse_path_map`, the docker sandbox translates with :func:`engine_path`.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from executor.errors import SandboxError

Origin = Literal["none", "setting", "detected"]


@dataclass(frozen=True)
class PathMap:
    """Prefixes of hookcage's paths and where the engine sees each one.

    Attributes:
        entries: ``(hookcage path, engine path)`` pairs, normalised, the
            longest hookcage path first.
        origin: ``"setting"`` (``path_map``), ``"detected"`` (hookcage's own
            container's mounts) or ``"none"`` (paths pass unchanged). With
            another origin and no entries, every path is refused.
        container: the container the entries were detected from (its id).
    """

    entries: tuple[tuple[str, str], ...] = ()
    origin: Origin = "none"
    container: str = ""

    @property
    def active(self) -> bool:
        """Whether paths are translated (and those outside every entry refused)."""
        return self.origin != "none"

    def describe(self) -> str:
        """One line for people: where the map came from and its entries."""
        if not self.active:
            return "none: the engine sees hookcage's paths as they are"
        where = {"setting": "path_map setting", "detected": f"detected from container {self.container[:12]}",
                 "none": "none"}[self.origin]
        return f"{where}: " + (", ".join(f"{s} -> {e}" for s, e in sorted(self.entries)) or "no mounts")


IDENTITY = PathMap()
"""No translation: hookcage and the engine see the same paths."""


def normal_path(path: str, what: str = "path") -> str:
    """``path`` made canonical for prefix matching: absolute, ``.``/``..``/``//`` collapsed, no trailing ``/``.

    ``..`` is collapsed lexically, so ``/work/../etc`` is ``/etc`` (not under
    ``/work``): a path cannot climb out of an entry and stay translated by it.

    Raises:
        ValueError: not absolute, or holding a NUL byte or a newline.
    """
    if not isinstance(path, str) or not path.startswith("/"):
        raise ValueError(f"{what} {path!r} is not an absolute path")
    if "\0" in path or "\n" in path:
        raise ValueError(f"{what} {path!r} holds a NUL byte or a newline")
    normal = posixpath.normpath(path)
    return "/" + normal.lstrip("/")  # POSIX keeps a leading "//"; the engine does not


def parse_path_map(value: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The entries of a ``path_map`` setting, normalised, longest hookcage path first.

    Raises:
        ValueError: an entry is not a pair of absolute paths, holds ``..``, a
            NUL byte or a newline, or two entries name the same path (after
            normalising, e.g. ``/work`` and ``/work/``) with different targets.
    """
    if not isinstance(value, Mapping):
        raise ValueError("path_map must be a JSON object {path as hookcage sees it: path on the engine's host}")
    entries: dict[str, str] = {}
    for service, engine in value.items():
        for path, what in ((service, "path_map key"), (engine, f"path_map[{service!r}]")):
            if isinstance(path, str) and ".." in path.split("/"):
                raise ValueError(f"{what} {path!r} holds '..': write the path it means")
        key = normal_path(service, "path_map key")
        target = normal_path(engine, f"path_map[{service!r}]") if isinstance(engine, str) else engine
        if not isinstance(target, str):
            raise ValueError(f"path_map[{service!r}] must be a path, not {type(engine).__name__}")
        if entries.get(key, target) != target:
            raise ValueError(f"path_map names {key} twice with different targets ({entries[key]}, {target})")
        entries[key] = target
    return ordered(entries.items())


def ordered(pairs: Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """``pairs`` as a map's entries: the longest hookcage path first (equal lengths by path)."""
    return tuple(sorted(pairs, key=lambda pair: (-len(pair[0]), pair[0])))


def within(path: str, prefix: str) -> bool:
    """Whether ``path`` is ``prefix`` or inside it, by whole components (``/work`` is not under ``/wor``)."""
    return prefix == "/" or path == prefix or path.startswith(prefix + "/")


def engine_path(path: str, path_map: PathMap) -> str:
    """Where the engine finds ``path`` (a path as hookcage sees it): THE translation.

    The longest entry ``path`` is under (by whole components, after
    normalising) gives the answer; with no map in force (origin ``none``)
    the path is returned as it is.

    Raises:
        SandboxError: with entries, ``path`` is outside all of them (the
            engine cannot see it), or it is not an absolute path.
    """
    if not path_map.active:
        return path
    try:
        normal = normal_path(path)
    except ValueError as exc:
        raise SandboxError(f"cannot hand the Docker engine {exc}") from exc
    for service, engine in path_map.entries:
        if normal == service:
            return engine
        if within(normal, service):
            rest = normal if service == "/" else normal[len(service):]
            return engine.rstrip("/") + rest
    raise SandboxError(
        f"{normal} is outside every path_map entry ({path_map.describe()}): the Docker engine cannot see it; "
        "mount it into hookcage's container (same path on both sides is simplest), or add it to "
        "HOOKCAGE_PATH_MAP"
    )


def with_resolved_keys(path_map: PathMap, resolve: Callable[[str], str]) -> PathMap:
    """``path_map`` plus, for each entry whose hookcage path ``resolve`` changes, the resolved path.

    The docker sandbox translates paths with their symlinks resolved (as
    hookcage sees them: an absolute symlink means another thing on the
    engine's host); an entry whose own path goes through a symlink must then
    match the resolved form too.
    """
    entries = dict(path_map.entries)
    for service, engine in path_map.entries:
        resolved = normal_path(resolve(service))
        entries.setdefault(resolved, engine)
    return PathMap(ordered(entries.items()), path_map.origin, path_map.container)


__all__ = [
    "IDENTITY",
    "Origin",
    "PathMap",
    "engine_path",
    "normal_path",
    "ordered",
    "parse_path_map",
    "with_resolved_keys",
    "within",
]
