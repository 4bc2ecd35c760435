"""A warm run's key and template as this host makes them.

``pool_key``: :func:`executor.sandbox.poolbook.creation_key` (pure) plus the
execute bits of the request's staged overlay files; ``key_template``: how to
create a container of one key (a request with nothing of the run in it, and
where the engine puts each overlay's bind); ``has_writable_bind``: whether
a run's markers may count only once its container's last process is gone.
These read the host (``stat``, ``realpath``): :mod:`executor.sandbox.pool`
calls them when a run or a spare is planned.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from executor.sandbox.base import RunRequest
from executor.sandbox.docker import staged_tree
from executor.sandbox.poolbook import creation_key


@dataclass(frozen=True)
class KeyTemplate:
    """How to create a container of one key: a request with nothing per run in it."""

    request: RunRequest
    targets: tuple[str, ...]
    mount_points: tuple[str, ...]
    executable: frozenset[str] = frozenset()
    tree: bool = False  # the overlays are an overlay file system (docker.staged_tree), not binds


def has_writable_bind(host: Mapping[str, Any]) -> bool:
    """Whether a container with these host arguments can write anywhere outside itself."""
    return any(
        mount.get("Type") == "bind" and not mount.get("ReadOnly")
        for mount in host.get("mounts") or []
    )


def executable_targets(overlays: Mapping[str, str]) -> frozenset[str]:
    """The overlay targets whose staged copy carries an execute bit (``./hook.sh`` runs)."""
    executable = set()
    for target, staged in overlays.items():
        with contextlib.suppress(OSError):
            if os.stat(staged).st_mode & 0o111:
                executable.add(os.path.normpath(target))
    return frozenset(executable)


def pool_key(
    create: Mapping[str, Any], host: Mapping[str, Any], targets: Sequence[str], executable: frozenset[str]
) -> str:
    """:func:`creation_key` plus the overlay files' execute bits (fixed when a spare is made)."""
    return creation_key(create, host, targets) + "|x=" + json.dumps(sorted(executable))


def _overlaid(request: RunRequest) -> bool:
    """Whether the cold path lays the request's staged files over the workspace as an overlay."""
    return request.options.workspace == "ro" and staged_tree(request) is not None


def key_template(
    request: RunRequest, targets: tuple[str, ...], labels: Mapping[str, str],
    executable: frozenset[str] = frozenset(),
) -> KeyTemplate:
    """The creation template of ``request``'s key: nothing of the run itself is kept."""
    project = os.path.normpath(request.project_dir)
    if _overlaid(request):  # no bind per target to check: the overlay cannot be taken away
        return KeyTemplate(
            request=replace(request, command=":", stdin=b"", env={}, cwd=project, labels=dict(labels),
                            overlays={}),
            targets=targets, mount_points=(), executable=executable, tree=True,
        )
    return KeyTemplate(
        request=replace(
            request,
            command=":",
            stdin=b"",
            env={},
            cwd=project,
            labels=dict(labels),
            overlays={},
        ),
        targets=targets,
        mount_points=tuple(_mount_point(t, project) for t in targets),
        executable=executable,
    )


def _mount_point(target: str, project: str) -> str:
    """Where the engine puts a bind over ``target`` (it resolves symlinks inside the project)."""
    real_project = os.path.realpath(project)
    real = os.path.realpath(target)
    if real != real_project and os.path.commonpath([real, real_project]) == real_project:
        return os.path.join(project, os.path.relpath(real, real_project))
    return target



__all__ = ["KeyTemplate", "executable_targets", "has_writable_bind", "key_template", "pool_key"]
