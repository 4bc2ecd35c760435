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
    transcript_folder: str | None = None
    """The transcript's folder (container path) its spares bind a folder of their own over
    (``transcript_folder_target``), or None: the transcript, if any, is part of the key."""


def transcript_folder_target(request: RunRequest) -> str | None:
    """The transcript's folder, when a spare may bind a folder of its own there; else None.

    A transcript is per session (Claude Code's ``~/.claude/projects/SLUG/SESSION.jsonl``),
    so binding the file itself would make every session a key of its own: each
    session's first hook would run cold and old sessions' spares would hold the pool.
    A spare binds its own empty folder over the transcript's folder instead, and
    the session's transcript is linked into it when the job comes
    (``poolspare.link_transcript``): the hook sees its own transcript, at its path,
    and no other file of that folder. Only where hiding the folder hides nothing of
    the image or the project:

    - the folder lies strictly inside a hidden folder (``.claude``, ``.gemini``,
      ``.codex``...), which no image ships content for;
    - it neither lies in the project nor holds it, nor any file hookcage stages
      or mounts (overlays, extra mounts, binds);
    - the transcript is the caller's own path (not the service's resolved one,
      ``transcript_source``).
    """
    path = request.transcript_path
    if not path or not os.path.isabs(path) or request.transcript_source is not None:
        return None
    folder = os.path.dirname(os.path.normpath(path))
    parts = folder.split("/")[1:-1]  # strictly above the folder itself
    if not any(part.startswith(".") and part not in (".", "..") for part in parts):
        return None
    others = [os.path.normpath(request.project_dir), *request.overlays, *request.options.mounts,
              *(bind.target for bind in request.binds)]
    for other in others:
        other = os.path.normpath(other)
        if os.path.commonpath([other, folder]) in (other, folder):
            return None
    return folder


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
    create: Mapping[str, Any], host: Mapping[str, Any], targets: Sequence[str], executable: frozenset[str],
    transcript_folder: str | None = None,
) -> str:
    """:func:`creation_key` plus the overlay files' execute bits (fixed when a spare is made).

    ``transcript_folder``: a spare's own folder is bound there (its source is not part of the key)."""
    blank = (*targets, transcript_folder) if transcript_folder else targets
    return creation_key(create, host, blank) + "|x=" + json.dumps(sorted(executable))


def _overlaid(request: RunRequest) -> bool:
    """Whether the cold path lays the request's staged files over the workspace as an overlay."""
    return request.options.workspace == "ro" and staged_tree(request) is not None


def key_template(
    request: RunRequest, targets: tuple[str, ...], labels: Mapping[str, str],
    executable: frozenset[str] = frozenset(), transcript_folder: str | None = None,
) -> KeyTemplate:
    """The creation template of ``request``'s key: nothing of the run itself is kept."""
    project = os.path.normpath(request.project_dir)
    if _overlaid(request):  # no bind per target to check: the overlay cannot be taken away
        return KeyTemplate(
            request=replace(request, command=":", stdin=b"", env={}, cwd=project, labels=dict(labels),
                            overlays={}),
            targets=targets, mount_points=(), executable=executable, tree=True,
            transcript_folder=transcript_folder,
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
        transcript_folder=transcript_folder,
    )


def _mount_point(target: str, project: str) -> str:
    """Where the engine puts a bind over ``target`` (it resolves symlinks inside the project)."""
    real_project = os.path.realpath(project)
    real = os.path.realpath(target)
    if real != real_project and os.path.commonpath([real, real_project]) == real_project:
        return os.path.join(project, os.path.relpath(real, real_project))
    return target



__all__ = [
    "KeyTemplate",
    "executable_targets",
    "has_writable_bind",
    "key_template",
    "pool_key",
    "transcript_folder_target",
]
