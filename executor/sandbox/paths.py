"""Where the Docker engine sees hookcage's files: ``path_map``, its detection, the one translation.

How this works: the engine resolves a bind mount's source (and an overlay's
``lowerdir``) on ITS host, in its own mount namespace. When hookcage runs on
that host, a path hookcage sees is the path the engine sees. When hookcage
runs in a container (the service of ``compose.yaml``) with the engine's
socket, the engine creates hook containers as siblings: the workspace that
hookcage sees at ``/work`` may be ``/home/me/work`` for the engine, and its
home a named volume under ``/var/lib/docker/volumes``. Every host path the
docker sandbox hands the engine goes through :func:`engine_path` first.

- ``path_map`` (``HOOKCAGE_PATH_MAP``, a JSON object ``{path as hookcage
  sees it: path as the engine's host sees it}``) says so explicitly.
- Unset, hookcage looks for its own container on the engine it talks to
  (the container id from ``/proc/self/mountinfo``, else ``/proc/self/cgroup``,
  else a hostname that is an id prefix; each one verified by inspecting it)
  and maps each of its mounts' ``Destination`` to its ``Source`` (a named
  volume's ``Source`` is its mountpoint on the host).
- No map at all (hookcage on the engine's host, or ``path_map = {}``):
  paths pass unchanged. A container of this engine with no mounts at all
  has a map with no entries: every path is refused.
- With a map, a path outside every entry is REFUSED, never passed
  unchanged: in a container it names a file of hookcage's own file system,
  which the engine cannot see, and passing it on would have the engine bind
  whatever its host holds at that path. An entry ``"/": "/"`` passes the rest
  unchanged on purpose.

A wrong entry (it points at another directory of the host) is found by
:mod:`executor.sandbox.pathcheck` (``hookcage doctor``, ``hookcage serve``).

The map itself, its parsing and the translation are pure and live in the
core (:mod:`executor.core.pathmap`); here, the detection:
:func:`detect_path_map` and :func:`own_container` read ``/proc`` and ask the
engine.
"""

from __future__ import annotations

import functools
import logging
import os
import posixpath
import re
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from executor.core.pathmap import IDENTITY, PathMap, normal_path, ordered, parse_path_map
from executor.errors import SandboxError

logger = logging.getLogger(__name__)


# --------------------------------------------------------------------------
# Detection: hookcage's own container and its mounts (parsing is pure)
# --------------------------------------------------------------------------

_ID = re.compile(r"containers/([0-9a-f]{64})/")
"""Docker's ``.../containers/<id>/hostname``, Podman's ``.../overlay-containers/<id>/userdata/hostname``."""
_ENGINE_FILES = frozenset({"/etc/hostname", "/etc/hosts", "/etc/resolv.conf"})
_CGROUP_ID = re.compile(r"(?<![0-9a-f])([0-9a-f]{64})(?![0-9a-f])")
_HOSTNAME_ID = re.compile(r"[0-9a-f]{12,64}")


def _unescape_mountinfo(field: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def container_ids_from_mountinfo(text: str) -> list[str]:
    """Container ids named by the files the engine bound into a container (``/etc/hostname``...).

    ``text`` is ``/proc/self/mountinfo``: the 4th field of a line is the
    mount's root in its file system, e.g.
    ``/var/lib/docker/containers/<id>/hostname``, the 5th its mount point.
    Works under cgroup v2 and a private cgroup namespace, where
    ``/proc/self/cgroup`` says only ``0::/``.
    """
    ids: list[str] = []
    for line in text.splitlines():
        fields = line.split(" ")
        if len(fields) < 5 or _unescape_mountinfo(fields[4]) not in _ENGINE_FILES:
            continue
        match = _ID.search(_unescape_mountinfo(fields[3]))
        if match and match.group(1) not in ids:
            ids.append(match.group(1))
    return ids


def container_ids_from_cgroup(text: str) -> list[str]:
    """Container ids in ``/proc/self/cgroup`` paths (``/docker/<id>``, ``docker-<id>.scope``...)."""
    ids: list[str] = []
    for line in text.splitlines():
        path = line.split(":", 2)[-1]
        found = _CGROUP_ID.findall(path)
        if found and found[-1] not in ids:
            ids.append(found[-1])
    return ids


def hostname_id(hostname: str) -> str | None:
    """The container id prefix a default container hostname is (12+ hex digits), if it is one."""
    return hostname if _HOSTNAME_ID.fullmatch(hostname) else None


def map_from_mounts(
    mounts: Sequence[Mapping[str, Any]], requested: Sequence[Mapping[str, Any]] = ()
) -> tuple[tuple[str, str], ...]:
    """The entries a container's ``Mounts`` (``docker inspect``) give: ``Destination -> Source``.

    Binds and volumes with a ``Source`` on the engine's host count (a local
    named volume's ``Source`` is its ``_data`` folder); tmpfs and mounts
    without a source do not (the engine cannot bind what is in them).
    ``requested`` is the container's ``HostConfig.Mounts``: a volume mounted
    with ``VolumeOptions.Subpath`` (API 1.45) is that folder of the volume,
    which ``Mounts`` does not say.
    """
    subpaths = {
        str(m.get("Target")): str(((m.get("VolumeOptions") or {}).get("Subpath")) or "")
        for m in requested if m.get("Type") == "volume"
    }
    entries: dict[str, str] = {}
    for mount in mounts:
        if mount.get("Type") not in ("bind", "volume"):
            continue
        source, destination = mount.get("Source"), mount.get("Destination")
        if not isinstance(source, str) or not isinstance(destination, str):
            continue
        subpath = subpaths.get(destination, "") if mount.get("Type") == "volume" else ""
        if ".." in subpath.split("/"):
            continue  # the engine refuses such a subpath; never guess where it would lead
        try:
            entries[normal_path(destination)] = normal_path(posixpath.join(source, subpath.lstrip("/")))
        except ValueError:
            continue  # not a Linux path (a Windows engine's): nothing hookcage can bind
    return ordered(entries.items())


# --------------------------------------------------------------------------
# Detection: the I/O
# --------------------------------------------------------------------------


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return ""


@dataclass(frozen=True)
class Candidates:
    """Where this process may be a container: ids to verify with the engine."""

    full: tuple[str, ...] = ()
    """Whole ids (from mountinfo and cgroup)."""
    prefix: str | None = None
    """An id prefix (the hostname)."""

    @classmethod
    def of_this_process(cls) -> Candidates:
        """Read ``/proc/self/mountinfo``, ``/proc/self/cgroup`` and the hostname."""
        full = container_ids_from_mountinfo(_read("/proc/self/mountinfo"))
        full += [i for i in container_ids_from_cgroup(_read("/proc/self/cgroup")) if i not in full]
        return cls(tuple(full), hostname_id(os.environ.get("HOSTNAME") or socket.gethostname()))


def own_container(client: Any, candidates: Candidates | None = None) -> dict[str, Any] | None:
    """The engine's ``inspect`` of the container this process runs in, or None.

    None when the process is not in a container of THIS engine (on the
    engine's host, or in a container of another engine: then the paths it
    sees are not the engine's business either way).

    Raises:
        SandboxUnavailable, SandboxError: the engine cannot be asked.
    """
    from executor.sandbox.docker.engine import engine_url
    from executor.sandbox.docker.errors import (
        BACKEND_ERRORS,
        APIError,
        NotFound,
        map_engine_error,
        retry_transient,
    )

    found = candidates or Candidates.of_this_process()
    tries = [(c, True) for c in found.full] + ([(found.prefix, False)] if found.prefix else [])
    for candidate, whole in tries:
        try:
            inspected = retry_transient(functools.partial(client.inspect_container, candidate))
        except NotFound:
            continue
        except APIError as exc:
            if getattr(exc, "status_code", 0) in (400, 404):
                continue  # e.g. an ambiguous prefix
            raise map_engine_error(exc, step="inspect", url=engine_url(client)) from exc
        except BACKEND_ERRORS as exc:
            raise map_engine_error(exc, step="inspect", url=engine_url(client)) from exc
        ident = str(inspected.get("Id") or "")
        hostname = str((inspected.get("Config") or {}).get("Hostname") or "")
        # A hostname names a container only as its default one: the id's prefix.
        verified = ident == candidate if whole else ident.startswith(candidate) and hostname == candidate
        if verified:
            return dict(inspected)
    return None


def detect_path_map(client: Any, candidates: Candidates | None = None) -> PathMap:
    """The map hookcage's own container's mounts give, or :data:`IDENTITY` when not in one.

    Raises:
        SandboxUnavailable, SandboxError: the engine cannot be asked.
    """
    found = candidates or Candidates.of_this_process()
    if not found.full and not found.prefix:
        return IDENTITY
    inspected = own_container(client, found)
    if inspected is None:
        return IDENTITY
    entries = map_from_mounts(inspected.get("Mounts") or [], (inspected.get("HostConfig") or {}).get("Mounts") or [])
    container = str(inspected.get("Id") or "")
    path_map = PathMap(entries, "detected", container)
    logger.info("hookcage runs in container %s: path_map %s", container[:12], path_map.describe())
    return path_map


def resolve_path_map(setting: Mapping[str, str] | None, client: Any) -> PathMap:
    """The map in force: the ``path_map`` setting when set (``{}``: none), else detected.

    Raises:
        SandboxError: the setting is invalid, or detection could not ask the engine.
    """
    if setting is None:
        return detect_path_map(client)
    try:
        entries = parse_path_map(setting)
    except ValueError as exc:
        raise SandboxError(str(exc)) from exc
    return PathMap(entries, "setting") if entries else IDENTITY


__all__ = [
    "Candidates",
    "container_ids_from_cgroup",
    "container_ids_from_mountinfo",
    "detect_path_map",
    "hostname_id",
    "map_from_mounts",
    "own_container",
    "resolve_path_map",
]
