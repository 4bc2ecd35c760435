"""Checking a path map against the engine: is each entry, on the engine's host, the directory hookcage sees?

A wrong ``path_map`` entry does not fail loudly by itself: when it names a
directory the engine's host has, hooks would see that directory instead of
the workspace (or the staged files) hookcage means. So each entry is probed
with a tiny container: the runner image, no network, the entry's engine path
bound read-only at ``/probe``, printing the directory's inode and a digest
of its listing. hookcage compares them with what it sees itself (listing
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
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import stat
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from executor.errors import HookcageError, SandboxError, SandboxUnavailable
from executor.sandbox.base import Bind, RunRequest, SandboxOptions
from executor.sandbox.paths import PathMap, engine_path, normal_path

logger = logging.getLogger(__name__)

PROBE_TARGET = "/probe"
PROBE_TIMEOUT = 30.0
_PROBE = (
    "exec python3 -c 'import hashlib, json, os\n"
    "st = os.stat(\"/probe\")\n"
    "try:\n"
    "    names = sorted(os.listdir(b\"/probe\"))\n"
    "    seen = {\"digest\": hashlib.sha256(b\"\\0\".join(names)).hexdigest(), \"count\": len(names)}\n"
    "except OSError:\n"
    "    seen = {\"digest\": None, \"count\": None}\n"
    "print(json.dumps({\"ino\": st.st_ino, \"dir\": os.path.isdir(\"/probe\"), **seen}))'"
)


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


def _probe_sandbox(client: Any, image: str | None) -> Any:
    from executor.sandbox.docker import DEFAULT_IMAGE, DockerSandbox
    from executor.sandbox.paths import IDENTITY

    # No map: the probe binds the engine's path exactly as the entry gives it.
    return DockerSandbox(image=image or DEFAULT_IMAGE, user=f"{os.getuid()}:{os.getgid()}", path_map=IDENTITY,
                         client=client, reap_on_start=False, memory="64m", pids=32)


def check_entry(sandbox: Any, service: str, engine: str, labels: dict[str, str] | None = None) -> MappingCheck:
    """Probe one entry with a container of ``sandbox`` (one without a map, see :func:`check_path_map`).

    Raises:
        SandboxUnavailable: the engine or the probe's image is missing (nothing could be checked).
    """
    from executor.sandbox import orphans

    try:
        before = seen_here(service)
    except OSError as exc:
        return MappingCheck(service, engine, None, f"not checked: hookcage cannot see it ({exc.strerror})")
    if not before.is_dir:
        return MappingCheck(service, engine, None, "not checked: a file, not a directory")
    request = RunRequest(
        command=_PROBE, cwd="/tmp", project_dir="/", timeout=PROBE_TIMEOUT,
        options=SandboxOptions(workspace="none"), binds=(Bind(engine, PROBE_TARGET, read_only=True),),
        labels={**(labels or {}), orphans.OWNER_LABEL: orphans.owner_value(), "hookcage.probe": "path_map"},
        warm=False, output_cap=64 * 1024,
    )
    try:
        result = sandbox.run(request)
    except SandboxUnavailable:
        raise
    except SandboxError as exc:
        return MappingCheck(service, engine, False, f"the engine cannot mount it: {exc}")
    try:
        data = json.loads(result.stdout)
        there = Seen(int(data["ino"]), data.get("digest"), data.get("count"), bool(data.get("dir", True)))
    except (ValueError, KeyError, TypeError):
        said = result.stderr.decode("utf-8", "replace").strip().splitlines()
        raise SandboxUnavailable(
            f"the path_map probe did not answer (exit {result.exit_code}"
            + (f": {said[-1][:200]}" if said else "") + "): it needs python3 in the runner image"
        ) from None
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
    *,
    under: Sequence[str] = (),
    image: str | None = None,
    labels: dict[str, str] | None = None,
) -> list[MappingCheck]:
    """Probe the map's entries (all, or those that carry one of ``under``), side by side.

    An entry carries a path when it translates it (the longest entry the
    path is in) or lies inside it (a mount within the path).

    Returns:
        One check per entry, in the map's order (longest path first).

    Raises:
        SandboxUnavailable: the engine or the probe's image is missing.
    """
    entries = list(path_map.entries)
    if under:
        carrying: set[tuple[str, str]] = set()
        for path in under:
            carrying.update(_carrying(path_map, normal_path(os.path.realpath(path))))
        entries = [entry for entry in entries if entry in carrying]
    if not entries:
        return []
    sandbox = _probe_sandbox(client, image)
    try:
        with ThreadPoolExecutor(max_workers=min(4, len(entries)), thread_name_prefix="hookcage-probe") as pool:
            return list(pool.map(lambda entry: check_entry(sandbox, entry[0], entry[1], labels), entries))
    finally:
        sandbox.close()


def _inside(path: str, prefix: str) -> bool:
    return prefix == "/" or path == prefix or path.startswith(prefix + "/")


def _carrying(path_map: PathMap, path: str) -> list[tuple[str, str]]:
    """The entries that carry ``path`` (resolved): the one translating it, and those inside it.

    An entry's own path is compared as written and with its symlinks resolved.
    """
    def forms(service: str) -> set[str]:
        return {service, normal_path(os.path.realpath(service))}

    found = [entry for entry in path_map.entries if any(_inside(f, path) and f != path for f in forms(entry[0]))]
    translating = next((entry for entry in path_map.entries if any(_inside(path, f) for f in forms(entry[0]))), None)
    return found + ([translating] if translating else [])


_verdicts: dict[tuple[str, str, int, int], MappingCheck] = {}
_verdicts_lock = threading.Lock()


def verify_path_map(client: Any, path_map: PathMap) -> None:
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
                checks = check_path_map(client, PathMap(todo, "setting"))
            except SandboxUnavailable as exc:
                logger.warning("path_map not checked: %s", exc)
                return
            for check in checks:
                _verdicts[keys[(check.service, check.engine)]] = check
        wrong = [_verdicts[key] for key in keys.values() if _verdicts[key].ok is False]
    if wrong:
        raise SandboxError(f"wrong {wrong[0].line()}; fix: {fix_for(path_map)}")


def refuse_wrong_home_mapping(home: Path, path_map_setting: dict[str, str] | None) -> None:
    """What ``hookcage serve`` checks when it starts: the map in force carries its home rightly.

    Nothing happens without a map in force (hookcage on the engine's host).
    An engine that cannot be reached, or a probe that cannot run, is not a
    wrong map: the runs say so themselves.

    Raises:
        SandboxError: the home is outside the map, or an entry carrying it is wrong (the message says how to fix it).
    """
    from executor.sandbox.docker import default_client
    from executor.sandbox.paths import Candidates, resolve_path_map, with_resolved_keys

    if path_map_setting == {} or (path_map_setting is None and Candidates.of_this_process() == Candidates()):
        return  # no map, or not in a container: nothing to ask the engine
    try:
        client = default_client()
    except HookcageError:
        return
    try:
        path_map = resolve_path_map(path_map_setting, client)
        if not path_map.active:
            return
        real_home = os.path.realpath(home)
        try:
            engine_path(real_home, with_resolved_keys(path_map, os.path.realpath))
        except SandboxError as exc:
            raise SandboxError(f"hookcage's home {home}: {exc}") from None
        with contextlib.suppress(SandboxUnavailable):
            for check in check_path_map(client, path_map, under=[real_home]):
                if check.ok is False:
                    raise SandboxError(f"wrong {check.line()} (it carries hookcage's home {home}); "
                                       f"fix: {fix_for(path_map)}; `hookcage doctor` checks every entry")
    finally:
        client.close()


__all__ = [
    "MappingCheck",
    "Seen",
    "check_entry",
    "check_path_map",
    "compare",
    "fix_for",
    "refuse_wrong_home_mapping",
    "seen_here",
]
