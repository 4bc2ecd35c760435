"""The one keep-out every path a remote (TCP) request names passes before anything runs.

A remote caller names paths the service then acts on: the project (mounted
into every hook's container, its hooks read), the working directory (the
hook's), the transcript (bound read-only into the container), and others the
agents' dialects hand to hooks as variables (``GEMINI_CWD``,
``JCODE_TRANSCRIPT_PATH``). Each of them passes :func:`fence_request`:

1. **Well-formed** (else HTTP 400): a string, absolute, no NUL byte, valid
   UTF-8 (no lone surrogate), at most :data:`MAX_PATH_BYTES` bytes and
   :data:`MAX_NAME_BYTES` per component, no ``..`` component.
2. **Resolved** (``realpath``: every symbolic link followed) and judged by
   where it really is (else HTTP 403):

   - never at or under what the service keeps to itself (:attr:`Fence.keep_out`:
     its ``HOOKCAGE_HOME``, managed directory, trust, run-log and state files,
     token file, TLS files, unix socket, the Docker sockets); a project may
     not contain one either (its hooks would see it);
   - the project lies in one of the operator's project roots
     (``--project-root``), when there are any;
   - everything else (working directories, transcripts) lies inside the
     request's own project, or, for transcripts, inside one of the
     operator's transcript roots (``--transcript-root``). A path outside
     those that does not exist on the service is let through as text
     (an agent's transcript in its own container: the service cannot see it,
     mounts nothing from it), unless it lies in the keep-out or in another
     project root.

The judging is pure (:func:`well_formed`, :func:`judge_project`,
:func:`judge_inside`); what the file system says (real paths, whether a path
exists, whether it is a regular file) is asked at the edge
(:func:`fence_request`). What passes is handed on resolved: the project as
its real path (pinned as the request's ``CLAUDE_PROJECT_DIR``) and each
transcript that may be mounted as its real path (:attr:`Fenced.transcripts`),
which the docker backend binds instead of the caller's string.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from executor.core.envnames import PROJECT_DIR_VARS

MAX_PATH_BYTES = 4096
"""Bytes a path a remote request names may have (Linux's ``PATH_MAX``); longer is 400."""
MAX_NAME_BYTES = 255
"""Bytes one component of such a path may have (``NAME_MAX``); longer is 400."""

WHERE_FIELDS = ("cwd", "workingDirectory", "new_cwd", "old_cwd", "worktree_path")
"""Top-level payload fields (raw and canonical) naming a working directory: inside the project."""
TRANSCRIPT_FIELDS = ("transcript_path", "transcriptPath", "agent_transcript_path", "agentTranscriptPath")
"""Top-level payload fields naming a transcript: inside the project or a transcript root."""
LIST_FIELDS = ("workspace_roots",)
"""Top-level payload fields holding a list of working directories (Cursor)."""


class NoProject(Exception):
    """The request names no project, or one the service does not have (HTTP 409): nothing has run."""


class PathRefused(Exception):
    """A path of a remote request is malformed (400) or out of bounds (403): nothing has run."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status


@dataclass(frozen=True)
class Fence:
    """Where a remote request's paths may lead, every entry a real (resolved) absolute path."""

    keep_out: tuple[str, ...] = ()
    project_roots: tuple[str, ...] = ()
    """Empty: any project (outside the keep-out)."""
    transcript_roots: tuple[str, ...] = ()


@dataclass(frozen=True)
class Fenced:
    """What a remote request may use, resolved."""

    project: str
    """The project's real path: the root every hook of the request sees."""
    transcripts: Mapping[str, str] = field(default_factory=dict)
    """A payload transcript path (as given) -> the regular file to bind for it (its real path)."""


# -- pure -----------------------------------------------------------------------------


def shown(value: object) -> str:
    """A path for a one-line message: escaped, at most 120 characters of it."""
    text = value if isinstance(value, str) else repr(value)
    cut = text[:120]
    return repr(cut)[1:-1] + ("..." if len(text) > 120 else "")


def well_formed(value: object, what: str) -> str:
    """``value`` if it is a usable absolute path.

    Raises:
        PathRefused: 400, naming ``what`` and the first rule broken.
    """
    if not isinstance(value, str):
        raise PathRefused(400, f"{what} must be a path (a string), not {type(value).__name__}")
    if "\x00" in value:
        raise PathRefused(400, f"{what} holds a NUL byte: {shown(value)}")
    try:
        encoded = value.encode("utf-8")
    except UnicodeEncodeError:
        raise PathRefused(400, f"{what} is not valid UTF-8 (a lone surrogate): {shown(value)}") from None
    if len(encoded) > MAX_PATH_BYTES:
        raise PathRefused(400, f"{what} is longer than {MAX_PATH_BYTES} bytes ({len(encoded)})")
    if not value.startswith("/"):
        raise PathRefused(400, f"{what} {shown(value)} is not an absolute path")
    parts = value.split("/")
    if ".." in parts:
        raise PathRefused(400, f"{what} {shown(value)} has a '..' component")
    if any(len(part.encode("utf-8")) > MAX_NAME_BYTES for part in parts):
        raise PathRefused(400, f"{what} has a component longer than {MAX_NAME_BYTES} bytes: {shown(value)}")
    return value


def inside(path: str, folder: str) -> bool:
    """Whether ``path`` is ``folder`` or under it (both normal absolute paths)."""
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def judge_project(real: str, fence: Fence, what: str = "the project directory") -> None:
    """Whether a project's real path may be mounted for a caller.

    Raises:
        PathRefused: 403: it is or contains or lies in the keep-out, or lies outside the project roots.
    """
    for secret in fence.keep_out:
        if inside(secret, real):
            raise PathRefused(403, f"{what} {shown(real)} contains {shown(secret)}: refused (its hooks would see it)")
        if inside(real, secret):
            raise PathRefused(403, f"{what} {shown(real)} lies in {shown(secret)}, which the service keeps to itself")
    if fence.project_roots and not any(inside(real, root) for root in fence.project_roots):
        listed = ", ".join(fence.project_roots)
        raise PathRefused(403, f"{what} {shown(real)} is outside the service's project roots ({listed})")


def judge_inside(real: str, given: str, what: str, project: str, fence: Fence, *,
                 transcript: bool, exists: bool) -> bool:
    """Whether another path of the request may be used; True when it may be mounted or entered.

    Returns False for a path the service cannot see (``exists`` False) outside
    the project, the transcript roots, the project roots and the keep-out:
    let through as text, nothing made of it.

    Raises:
        PathRefused: 403, naming the field and where the path really leads.
    """
    how = f"{shown(given)}" + (f" (really {shown(real)})" if real != given.rstrip("/") else "")
    for secret in fence.keep_out:
        if inside(real, secret):
            raise PathRefused(403, f"{what} {how} lies in {shown(secret)}, which the service keeps to itself")
    if inside(real, project):
        return True
    if transcript and any(inside(real, root) for root in fence.transcript_roots):
        return True
    allowed = "the request's project" + (" or the service's transcript roots" if transcript and fence.transcript_roots
                                          else "")
    if any(inside(real, root) for root in fence.project_roots):
        raise PathRefused(403, f"{what} {how} is outside {allowed} {shown(project)}")
    if exists:
        hint = " (the service admits transcripts from elsewhere only in its --transcript-root folders)" \
            if transcript else ""
        raise PathRefused(403, f"{what} {how} is outside {allowed} {shown(project)}{hint}")
    return False


def payload_paths(payload: Mapping[str, Any]) -> list[tuple[str, object, bool]]:
    """``(field, value, is_transcript)`` for every path field of a payload that is set (not null, not "")."""
    found: list[tuple[str, object, bool]] = []
    for name in (*WHERE_FIELDS, *TRANSCRIPT_FIELDS):
        value = payload.get(name)
        if value is not None and value != "":
            found.append((name, value, name in TRANSCRIPT_FIELDS))
    for name in LIST_FIELDS:
        value = payload.get(name)
        if isinstance(value, list):
            found.extend((f"{name}[{i}]", item, False) for i, item in enumerate(value)
                         if item is not None and item != "")
        elif value is not None:
            found.append((name, value, False))
    return found


# -- at the edge: what the file system says ---------------------------------------------


def real(path: str, what: str) -> str:
    """``path`` with every symbolic link resolved.

    Raises:
        PathRefused: 400 when it cannot be resolved (a loop, a component too long).
    """
    try:
        return os.path.realpath(path)
    except (OSError, ValueError) as exc:
        raise PathRefused(400, f"{what} {shown(path)} cannot be resolved ({type(exc).__name__})") from None


def make_fence(keep_out: Iterable[str | os.PathLike[str]], project_roots: Iterable[str | os.PathLike[str]] = (),
               transcript_roots: Iterable[str | os.PathLike[str]] = ()) -> Fence:
    """A :class:`Fence` of real paths (entries that cannot be resolved are kept as given)."""

    def resolved(paths: Iterable[str | os.PathLike[str]]) -> tuple[str, ...]:
        out: list[str] = []
        for path in paths:
            text = os.fspath(path)
            if not text or not os.path.isabs(text):
                continue
            with contextlib.suppress(OSError, ValueError):
                text = os.path.realpath(text)
            if text not in out:
                out.append(text)
        return tuple(out)

    return Fence(resolved(keep_out), resolved(project_roots), resolved(transcript_roots))


def _exists(path: str) -> bool:
    try:
        os.lstat(path)
    except (OSError, ValueError):
        return False
    return True


def _regular(path: str) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except (OSError, ValueError):
        return False


def fence_request(env: Mapping[str, str], payloads: Sequence[Mapping[str, Any]], cwd: object,
                  fence: Fence) -> Fenced:
    """Judge every path of a remote request; the project and the transcripts it may use, resolved.

    Args:
        env: the request's ``env`` (only the project-dir variables are read).
        payloads: the payload as the agent sent it, and in canonical keys
            (what the executor reads), when it could be made.
        cwd: the request's ``cwd`` (the client's working directory).
        fence: where the paths may lead.

    The project is the first project-dir variable set, else the canonical
    payload's ``cwd``, else the agent's, else ``cwd``: where the executor
    would look (the caller must pin it with the returned
    :attr:`Fenced.project`).

    Raises:
        PathRefused: 400 (malformed) or 403 (out of bounds), one line.
        NoProject: no project at all (no variable, no payload ``cwd``, no ``cwd``), or it
            does not exist on the service (the message says so).
    """
    chosen: tuple[str, str] | None = None
    for name in PROJECT_DIR_VARS:
        value = env.get(name)
        if value:
            well_formed(value, f"the caller's {name}")
            chosen = chosen or (name, value)
    if cwd is not None:
        well_formed(cwd, "the request's cwd")
    fields: list[tuple[str, object, bool]] = []
    for payload in payloads:
        for entry in payload_paths(payload):
            well_formed(entry[1], f"the payload's {entry[0]}")
            if entry not in fields:
                fields.append(entry)
    if chosen is None:
        for payload in reversed(payloads):  # the canonical payload's cwd first: the executor's root
            value = payload.get("cwd")
            if isinstance(value, str) and value:
                chosen = ("the payload's cwd", value)
                break
    if chosen is None and isinstance(cwd, str):
        chosen = ("the request's cwd", cwd)
    if chosen is None:
        raise NoProject("the caller has no working directory")
    what, given = chosen
    what = what if what.startswith("the ") else f"the caller's {what}"
    project = real(given, what)
    if not os.path.isdir(project):
        raise NoProject(
            f"the project directory {shown(project)} does not exist on the hookcage service "
            "(mount the workspace at the same path in the agent's and the service's containers)")
    judge_project(project, fence)
    transcripts: dict[str, str] = {}
    for name, path, transcript in fields:
        assert isinstance(path, str)  # well_formed said so
        resolved = real(path, f"the payload's {name}")
        usable = judge_inside(resolved, path, f"the payload's {name}", project, fence,
                              transcript=transcript, exists=_exists(resolved))
        if transcript and usable and _regular(resolved):
            transcripts[path] = resolved
    return Fenced(project, transcripts)
