"""Checking a path map against the engine: is each entry, on the engine's host, the directory hookcage sees?

A wrong ``path_map`` entry does not fail loudly by itself: when it names a
directory the engine's host has, hooks would see that directory instead of
the workspace (or the staged files) hookcage means. So the entries are
probed with a tiny container: the runner image, no network, each entry's
engine path bound read-only at ``/probe/<i>``, printing each directory's
inode and a digest of its listing (one container for all; one per entry,
side by side, when the engine refuses it, to tell which path it lacks). hookcage compares them with what it sees itself (listing
before and after the probe, so that a file made meanwhile is no false
alarm). Same inode and same names: right. Otherwise, or when the engine has
no such path: wrong, with the fix.

``hookcage doctor`` checks every directory entry; ``hookcage serve`` checks
the entries under its home (staging, dependency caches and persistent homes
live there) when it starts, and refuses to run with a wrong one. The docker
sandbox checks every directory entry of a ``path_map`` SETTING before its
first run (:func:`verify_path_map`, once per process and entry): a wrong
entry fails the runs, one line naming it, instead of mounting another
directory. A detected map is the engine's own account of the mounts and is
not probed on every start.

The probe's container is the docker backend's
(:func:`executor.sandbox.docker.backend.probe_sandbox`), handed in by the
callers: the docker sandbox, and :mod:`executor.sandbox.docker.doctor` (the
doctor's check and ``hookcage serve``'s ``refuse_wrong_home_mapping``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import secrets
import stat
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from executor.core.options import SandboxOptions
from executor.core.pathmap import PathMap, normal_path, within
from executor.errors import SandboxError, SandboxUnavailable
from executor.sandbox.base import Bind, RunRequest, Sandbox

logger = logging.getLogger(__name__)

PROBE_ROOT = "/probe"
"""Entry ``i`` is bound at ``/probe/<i>`` in the probe's container."""
PROBE_TIMEOUT = 30.0
_PROBE = (
    "exec python3 -c 'import hashlib, json, os\n"
    "seen = {}\n"
    "for name in os.listdir(\"/probe\"):\n"
    "    path = \"/probe/\" + name\n"
    "    st = os.stat(path)\n"
    "    try:\n"
    "        names = sorted(os.listdir(path.encode()))\n"
    "        listing = {\"digest\": hashlib.sha256(b\"\\0\".join(names)).hexdigest(), \"count\": len(names)}\n"
    "    except OSError:\n"
    "        listing = {\"digest\": None, \"count\": None}\n"
    "    seen[name] = {\"ino\": st.st_ino, \"dir\": os.path.isdir(path), **listing}\n"
    "print(json.dumps(seen))'"
)

ProbeSandbox = Callable[[Any, str | None], Sandbox]
"""Makes the sandbox a probe runs in from an engine client and an image (None: the runner image);
the docker backend's :func:`~executor.sandbox.docker.backend.probe_sandbox`, handed in (it imports this module)."""


@dataclass(frozen=True)
class Seen:
    """A directory as one side sees it."""

    ino: int
    digest: str | None = None
    """sha256 of the sorted entry names joined by NUL; None when it cannot be listed."""
    count: int | None = None
    is_dir: bool = True


@dataclass(frozen=True)
class MappingCheck:
    """The verdict on one entry of the map."""

    service: str
    engine: str
    ok: bool | None
    """None: not checked (``detail`` says why)."""
    detail: str

    def line(self) -> str:
        """``SERVICE -> ENGINE: detail``."""
        return f"path_map {self.service} -> {self.engine}: {self.detail}"


def seen_here(path: str) -> Seen:
    """How hookcage sees ``path``.

    Raises:
        OSError: it cannot be stat'ed.
    """
    st = os.stat(path)
    if not os.path.isdir(path):
        return Seen(st.st_ino, is_dir=False)
    try:
        names = sorted(os.listdir(os.fsencode(path)))
    except OSError:
        return Seen(st.st_ino)
    return Seen(st.st_ino, hashlib.sha256(b"\0".join(names)).hexdigest(), len(names))


def compare(service: str, engine: str, before: Seen, there: Seen, after: Seen) -> tuple[bool, str]:
    """Whether the engine's ``engine`` is hookcage's ``service``, and what was found (pure).

    ``before`` and ``after`` are hookcage's views around the probe: the
    listing matches if it matches either.
    """
    if there.ino != before.ino:
        return False, (f"the engine's {engine} is another directory than hookcage's {service} "
                       f"(inode {there.ino} there, {before.ino} here)")
    if there.digest is None or before.digest is None:
        return True, "same directory (same inode; the listing could not be read on one side)"
    if there.digest not in (before.digest, after.digest):
        return False, (f"the engine's {engine} holds other entries than hookcage's {service} "
                       f"({there.count} there, {before.count} here)")
    return True, f"same directory (inode {there.ino}, {there.count} entries)"


def fix_for(path_map: PathMap) -> str:
    """How to correct a wrong entry, for where the map came from."""
    if path_map.origin == "detected":
        return ("hookcage took this from its container's mounts; set HOOKCAGE_PATH_MAP (path_map) to "
                "{\"<path in hookcage's container>\": \"<that directory's path on the engine's host>\"} instead")
    return ("correct HOOKCAGE_PATH_MAP (path_map): each key a directory as hookcage sees it, each value that same "
            "directory's path on the Docker engine's host (for a container, the Source of its mount: "
            "docker inspect CONTAINER --format '{{json .Mounts}}')")


def _probe(sandbox: Any, engines: Sequence[str], labels: dict[str, str] | None) -> list[Seen | None]:
    """How the engine's host sees each of ``engines``: one container, each bound read-only at ``/probe/<i>``.

    Raises:
        SandboxUnavailable: the engine or the probe's image is missing, or the probe gave no answer.
        SandboxError: the engine refused the container (e.g. one of the paths does not exist there).
    """
    from executor.sandbox import orphans

    request = RunRequest(
        command=_PROBE, cwd="/tmp", project_dir="/", timeout=PROBE_TIMEOUT, options=SandboxOptions(workspace="none"),
        binds=tuple(Bind(engine, f"{PROBE_ROOT}/{i}", read_only=True) for i, engine in enumerate(engines)),
        labels={**(labels or {}), orphans.OWNER_LABEL: orphans.owner_value(), "hookcage.probe": "path_map"},
        warm=False, output_cap=256 * 1024,
    )
    for attempt in (1, 2):  # once more: a container removed under us (`hookcage gc --all` elsewhere) says nothing
        result = sandbox.run(request)
        try:
            data = json.loads(result.stdout)
            return [Seen(int(d["ino"]), d.get("digest"), d.get("count"), bool(d.get("dir", True))) if d else None
                    for d in (data.get(str(i)) for i in range(len(engines)))]
        except (ValueError, KeyError, TypeError, AttributeError):
            if attempt == 1 and not result.oom_killed and not result.timed_out:
                continue
        said = result.stderr.decode("utf-8", "replace").strip().splitlines()
        how = ("timed out" if result.timed_out else "ran out of memory" if result.oom_killed
               else f"exit {result.exit_code}" + (f": {said[-1][:200]}" if said else ""))
        break
    raise SandboxUnavailable(f"the path_map probe gave no answer ({how}); it runs python3 in the runner image")


def _verdict(service: str, engine: str, before: Seen, there: Seen | None) -> MappingCheck:
    if there is None:
        return MappingCheck(service, engine, False, f"the engine's {engine} was not mounted")
    if not there.is_dir:
        return MappingCheck(service, engine, False, f"the engine's {engine} is not a directory")
    try:
        after = seen_here(service)
    except OSError:
        after = before
    ok, detail = compare(service, engine, before, there, after)
    return MappingCheck(service, engine, ok, detail)


def check_path_map(
    client: Any,
    path_map: PathMap,
    probe_sandbox: ProbeSandbox,
    *,
    under: Sequence[str] = (),
    image: str | None = None,
    labels: dict[str, str] | None = None,
) -> list[MappingCheck]:
    """Probe the map's directory entries (all, or those that carry one of ``under``).

    All in one container; when the engine refuses it (a path its host does
    not have), one container per entry, side by side, to tell which. An
    entry carries a path when it translates it (the longest entry the path
    is in) or lies inside it (a mount within the path).

    ``probe_sandbox`` makes the probe's container's sandbox
    (:func:`executor.sandbox.docker.backend.probe_sandbox`).

    Returns:
        One check per entry, in the map's order (longest path first).

    Raises:
        SandboxUnavailable: the engine or the probe's image is missing.
    """
    entries = list(path_map.entries)
    if under:
        carrying: set[tuple[str, str]] = set()
        for path in under:
            carrying.update(carrying_entries(path_map, normal_path(os.path.realpath(path))))
        entries = [entry for entry in entries if entry in carrying]
    checks: dict[tuple[str, str], MappingCheck] = {}
    here: dict[tuple[str, str], Seen] = {}
    for service, engine in entries:
        try:
            seen = seen_here(service)
        except OSError as exc:
            checks[(service, engine)] = MappingCheck(service, engine, None,
                                                     f"not checked: hookcage cannot see it ({exc.strerror})")
            continue
        if seen.is_dir:
            here[(service, engine)] = seen
        else:
            checks[(service, engine)] = MappingCheck(service, engine, None, "not checked: a file, not a directory")
    if here:
        sandbox = probe_sandbox(client, image)
        try:
            checks.update(_check_all(sandbox, here, labels))
        finally:
            sandbox.close()
    return [checks[entry] for entry in entries]


def _check_all(sandbox: Any, here: dict[tuple[str, str], Seen],
               labels: dict[str, str] | None) -> dict[tuple[str, str], MappingCheck]:
    todo = list(here)
    try:
        seen = _probe(sandbox, [engine for _, engine in todo], labels)
    except SandboxUnavailable:
        raise
    except SandboxError as exc:
        if len(todo) == 1:
            (service, engine), = todo
            return {todo[0]: MappingCheck(service, engine, False, f"the engine cannot mount it: {exc}")}
        with ThreadPoolExecutor(max_workers=min(4, len(todo)), thread_name_prefix="hookcage-probe") as pool:
            parts = list(pool.map(lambda entry: _check_all(sandbox, {entry: here[entry]}, labels), todo))
        return {k: v for part in parts for k, v in part.items()}
    return {(s, e): _verdict(s, e, here[(s, e)], there) for (s, e), there in zip(todo, seen, strict=True)}


def carrying_entries(path_map: PathMap, path: str) -> list[tuple[str, str]]:
    """The entries that carry ``path`` (resolved): the one translating it, and those inside it.

    An entry's own path is compared as written and with its symlinks resolved.
    """
    def forms(service: str) -> set[str]:
        return {service, normal_path(os.path.realpath(service))}

    found = [entry for entry in path_map.entries if any(within(f, path) and f != path for f in forms(entry[0]))]
    translating = next((entry for entry in path_map.entries if any(within(path, f) for f in forms(entry[0]))), None)
    return found + ([translating] if translating else [])


_verdicts: dict[tuple[str, str, int, int], MappingCheck] = {}
_verdicts_lock = threading.Lock()


def verify_path_map(client: Any, path_map: PathMap, probe_sandbox: ProbeSandbox) -> None:
    """Refuse a ``path_map`` setting with a wrong directory entry (probed once per process and entry).

    An entry is probed again when the directory hookcage sees is another one
    (device and inode). An engine or image that is missing leaves the map
    unchecked (logged): the runs fail on their own then, and a source the
    engine lacks is refused by the engine anyway.

    Raises:
        SandboxError: an entry names another directory on the engine's host (the message says which, and the fix).
    """
    if path_map.origin != "setting":
        return
    keys: dict[tuple[str, str], tuple[str, str, int, int]] = {}
    for service, engine in path_map.entries:
        try:
            st = os.stat(service)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode):
            keys[(service, engine)] = (service, engine, st.st_dev, st.st_ino)
    with _verdicts_lock:
        todo = tuple(entry for entry, key in keys.items() if key not in _verdicts)
        if todo:
            try:
                checks = check_path_map(client, PathMap(todo, "setting"), probe_sandbox)
            except SandboxUnavailable as exc:
                logger.warning("path_map not checked: %s", exc)
                return
            for check in checks:
                _verdicts[keys[(check.service, check.engine)]] = check
        wrong = [_verdicts[key] for key in keys.values() if _verdicts[key].ok is False]
    if wrong:
        raise SandboxError(f"wrong {wrong[0].line()}; fix: {fix_for(path_map)}")


# --------------------------------------------------------------------------
# The workspace on the engine's host (remote engines, path_map)
# --------------------------------------------------------------------------

MARKER_PREFIX = ".hookcage-seen-"
WORKSPACE_PROBE_LABEL = "hookcage.probe"


def engine_is_elsewhere(url: str, path_map: PathMap) -> bool:
    """Whether the engine may see other files than hookcage at the same paths (pure).

    A ``tcp://`` (``http``/``https``) or ``ssh://`` engine runs on a host of
    its own, maybe another machine; a map in force says hookcage's paths are
    not the engine's. A local unix socket without a map shares hookcage's
    file system.
    """
    remote = ("tcp://", "http://", "https://", "ssh://", "http+docker://ssh")
    return url.startswith(remote) or path_map.active


@dataclass(frozen=True)
class WorkspaceCheck:
    """Whether the engine's host has the workspace at the path hooks mount it from."""

    workspace: str
    url: str
    ok: bool | None
    """None: not checked (``detail`` says why)."""
    detail: str

    def line(self) -> str:
        # docker-py's https://HOST:PORT is the tcp://HOST:PORT the user set (DOCKER_HOST).
        url = re.sub(r"^https?://", "tcp://", self.url)
        return f"workspace {self.workspace} on the engine at {url}: {self.detail}"


WORKSPACE_FIX = ("run hookcage on the engine's host, or share the workspace with the engine's host at the same "
                 "path (or map it: HOOKCAGE_PATH_MAP)")


def check_workspace(sandbox: Any, workspace: str, url: str, *, image: str | None = None,
                    labels: dict[str, str] | None = None) -> WorkspaceCheck:
    """Write a marker file in ``workspace`` and look for it from a container that mounts it as hooks do.

    The marker (a hidden file, random name and content, made with
    ``O_EXCL``) is removed right after. The container is ``sandbox``'s own
    kind (same image, runtime, user, path map), network-less, with the
    workspace bound read-only as a hook's: the engine sees the same file
    with the same content, or it mounts another directory (or none).

    Raises:
        SandboxUnavailable: the engine or the image is missing.
    """
    from executor.sandbox import orphans

    real = os.path.realpath(workspace)
    name = MARKER_PREFIX + secrets.token_hex(8)
    content = secrets.token_hex(16)
    marker = os.path.join(real, name)
    try:
        fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        return WorkspaceCheck(workspace, url, None, f"not checked: cannot write a marker file there ({exc.strerror})")
    try:
        with os.fdopen(fd, "w") as out:
            out.write(content)
        os.chmod(marker, 0o644)  # not narrowed by the umask: the probe's user reads it
        request = RunRequest(
            command=f"cat -- ./{name}", cwd=real, project_dir=real, timeout=PROBE_TIMEOUT,
            options=SandboxOptions(workspace="ro", image=image),
            labels={**(labels or {}), orphans.OWNER_LABEL: orphans.owner_value(), WORKSPACE_PROBE_LABEL: "workspace"},
            warm=False, output_cap=4096,
        )
        try:
            result = sandbox.run(request)
        except SandboxUnavailable:
            raise
        except SandboxError as exc:
            return WorkspaceCheck(workspace, url, False, f"the engine cannot mount it ({exc})")
    finally:
        with contextlib.suppress(OSError):
            os.unlink(marker)
    if result.stdout.decode("utf-8", "replace") == content:
        return WorkspaceCheck(workspace, url, True, "same directory (a marker file written here is seen there)")
    if result.timed_out or result.oom_killed:
        raise SandboxUnavailable(f"the workspace probe gave no answer ({'timed out' if result.timed_out else 'OOM'})")
    said = result.stderr.decode("utf-8", "replace").strip().splitlines()
    if result.exit_code != 0 and not any("No such file" in line or "can't open" in line for line in said):
        # Not the marker's absence: the image has no cat, the container could not start...
        raise SandboxUnavailable(
            f"the workspace probe failed (exit {result.exit_code}" + (f": {said[-1][:200]})" if said else ")"))
    return WorkspaceCheck(workspace, url, False,
                          "the engine sees no such directory there (a marker file written here is not in it)")


_workspaces: dict[tuple[str, str, int, int], WorkspaceCheck] = {}
_workspaces_lock = threading.Lock()


def verify_workspace(sandbox: Any, request: RunRequest, url: str, path_map: PathMap) -> None:
    """Refuse a run whose workspace the engine's host does not have (checked once per process and workspace).

    Only for an engine elsewhere (:func:`engine_is_elsewhere`) and a run that
    mounts its workspace; the probe itself is not checked. Not checkable (a
    workspace hookcage cannot write to): logged (info), the run goes on.

    Raises:
        SandboxError: the engine would mount another directory, or none (one line, with the fix).
        SandboxUnavailable: the engine or the image is missing.
    """
    if request.options.workspace == "none" or WORKSPACE_PROBE_LABEL in request.labels:
        return
    if not engine_is_elsewhere(url, path_map):
        return
    try:
        st = os.stat(request.project_dir)
    except OSError:
        return  # the run refuses a missing workspace itself
    key = (url, os.path.realpath(request.project_dir), st.st_dev, st.st_ino)
    with _workspaces_lock:
        check = _workspaces.get(key)
        if check is None:
            check = check_workspace(sandbox, request.project_dir, url, image=request.options.image,
                                    labels=dict(request.labels))
            _workspaces[key] = check
            if check.ok is None:  # e.g. a workspace mounted read-only into hookcage's container
                logger.info("%s", check.line())
    if check.ok is False:
        raise SandboxError(f"{check.line()}; {WORKSPACE_FIX}")


__all__ = [
    "WORKSPACE_FIX",
    "MappingCheck",
    "Seen",
    "WorkspaceCheck",
    "check_path_map",
    "check_workspace",
    "compare",
    "engine_is_elsewhere",
    "fix_for",
    "seen_here",
    "verify_workspace",
]
