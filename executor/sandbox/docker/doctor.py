"""The docker backend's ``hookcage doctor`` checks (run in order by :func:`executor.sandbox.backends.doctor_checks`),
and the one ``hookcage serve`` makes when it starts (:func:`refuse_wrong_home_mapping`).

Each doctor check is ``(settings, probe) -> checks``; the engine's client and its
description are made once per doctor run and shared through the probe
(:func:`engine_of`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from executor.errors import HookcageError, SandboxError, SandboxUnavailable
from executor.sandbox.checks import Check, Probe
from executor.sandbox.conventions import DEFAULT_IMAGE
from executor.sandbox.docker.engine import EngineInfo, default_client, engine_info
from executor.sandbox.docker.imagefacts import STATX_SHIM_LABEL, image_exists, inspect_image
from executor.sandbox.runtimes import (
    AUTO,
    GET_GVISOR,
    GVISOR,
    GVISOR_RUNTIME,
    describe,
    isolation,
    resolve_runtime,
)

if TYPE_CHECKING:
    from executor.settings import Settings

CLIENT = "docker.client"
INFO = "docker.info"
ENGINE_FIX = "start Docker (systemctl start docker) or set DOCKER_HOST"


def engine_of(probe: Probe, engine: str | None = None) -> tuple[Any, EngineInfo]:
    """The engine's client and description, made on first use and shared by the doctor's checks.

    ``engine`` is the ``engine`` setting (an address over ``DOCKER_HOST``); the first call makes the client.

    Raises:
        SandboxUnavailable, SandboxError: the engine cannot be reached or described.
    """
    client = probe.get(CLIENT, lambda: default_client(engine=engine), close=lambda made: made.close())
    return client, probe.get(INFO, lambda: engine_info(client))


def engine_checks(settings: Settings, probe: Probe) -> Iterator[Check]:
    """The engine answers; the image is there and current; the limits are enforced; its runtimes."""
    try:
        client, info = engine_of(probe, settings.engine)
    except HookcageError as exc:
        yield Check(f"Docker engine: {exc}", ok=False, fix=ENGINE_FIX, stop=True)
        return
    yield Check(f"{_engine_title(info)} {info['version']} (API {info['api_version']}), {info['os']}, "
                f"kernel {info['kernel']}", ok=True)
    yield from podman_checks(info)
    image_name = settings.image or DEFAULT_IMAGE
    present = image_exists(client, image_name)
    yield Check(f"image {image_name} present", ok=present, fix="hookcage image build")
    if present and image_name == DEFAULT_IMAGE and probe.provisioning is not None:
        # An image built from older inputs lacks what hooks now expect (node, uv, ruff...).
        yield Check(f"image {image_name} built from this version's recipe",
                    ok=probe.provisioning.runner_image_current(client),
                    fix="hookcage image build (rebuilds what changed)")
    yield Check("memory limits enforced", ok=info["memory_limit"], fix="enable the memory cgroup controller")
    yield Check("swap limits enforced (no swap for hooks)", ok=info["swap_limit"] or info["cgroup_version"] == "2",
                fix="boot with swapaccount=1, or use cgroup v2")
    yield Check("pids limits enforced (fork bombs stop)", ok=info["pids_limit"],
                fix="enable the pids cgroup controller")
    yield Check("CPU limits enforced", ok=info["cpu_limit"], fix="enable CFS quota in the cpu cgroup controller")
    yield Check(f"cgroup v{info['cgroup_version'] or '?'} ({info['cgroup_driver']}), runtimes: "
                f"{', '.join(info['runtimes']) or 'none'} (default {info['default_runtime']})")


def _engine_title(info: EngineInfo) -> str:
    """``Docker engine``, ``Podman engine`` or ``Podman engine (rootless)``."""
    if info["engine"] != "podman":
        return "Docker engine" + (" (rootless)" if info["rootless"] else "")
    return "Podman engine" + (" (rootless)" if info["rootless"] else " (rootful)")


def podman_checks(info: EngineInfo) -> Iterator[Check]:
    """On Podman: what hookcage does differently there, and whether hooks may run at all."""
    from executor.sandbox.engines import LIMIT_CONTROLLERS

    if info["engine"] != "podman":
        return
    yield Check("Podman's Docker-compatible API: handled as docs/engines.md says", ok=None,
                detail=tuple(info["engine_notes"]))
    missing = info["unenforced_limits"]
    yield Check(
        f"{info['engine_name']} enforces the hooks' {', '.join(LIMIT_CONTROLLERS)} limits"
        + (f" (it would ignore: {', '.join(missing)}; hookcage refuses to run hooks there)" if missing else ""),
        ok=not missing,
        fix="use a rootful Podman or Docker, or cgroup v2 with memory, pids and cpu delegated to the "
            "engine's user (systemd: Delegate=memory pids cpu)",
    )


def runtime_checks(settings: Settings, probe: Probe) -> Iterator[Check]:
    """``hookcage doctor``: the runtime hooks get (the setting resolved on this engine), gVisor or not."""
    _, info = engine_of(probe)
    runtimes, setting = info["runtimes"], settings.runtime
    runtime = resolve_runtime(setting, runtimes, info["default_runtime"])
    how = "runtime auto" if setting == AUTO else f"runtime = {setting}"
    if runtime not in runtimes:
        yield Check(f"hooks get runtime {runtime} ({how}), which the engine does not have", ok=False,
                    fix=f'register {runtime} with the engine, or set runtime = "auto"'
                        + (f" ({GET_GVISOR})" if isolation(runtime) == GVISOR else ""))
        return
    detail: tuple[str, ...] = ()
    if isolation(runtime) != GVISOR:
        detail = (('gVisor (runsc) is registered: set runtime = "auto" to use it',) if GVISOR_RUNTIME in runtimes
                  else (f"for gVisor (a kernel of the hooks' own, which contains kernel exploits): {GET_GVISOR}",))
    yield Check(f"hooks get {describe(runtime)} ({how})", detail=detail)
    if isolation(runtime) == GVISOR:
        yield from _gvisor_lists(probe, runtime)


def _gvisor_lists(probe: Probe, runtime: str) -> Iterator[Check]:
    """Whether coreutils' ``ls -l`` works under this gVisor (a tiny container; needs the runner image)."""
    from executor.sandbox.docker.probe import STATX_BUG, lists_files

    client, _ = engine_of(probe)
    if not image_exists(client, DEFAULT_IMAGE):
        return
    try:
        said = lists_files(client, runtime)
    except HookcageError as exc:
        yield Check(f"a container under {runtime} did not start: {exc}", ok=False,
                    fix='hookcage setup runsc --force, or set runtime = "runc"')
        return
    info = inspect_image(client, DEFAULT_IMAGE) or {}
    shim = ((info.get("Config") or {}).get("Labels") or {}).get(STATX_SHIM_LABEL) == "1"
    if said:
        yield Check(f"warning: {STATX_BUG}", detail=(
            f"ls -l / under {runtime}: {said}",
            f"{DEFAULT_IMAGE} carries hookcage's statx shim, which did not help" if shim else
            f"{DEFAULT_IMAGE} has no statx shim (built without a C compiler): apt-get install gcc, "
            "then hookcage image build"))
    elif shim:
        yield Check(f"{DEFAULT_IMAGE} carries hookcage's statx shim: coreutils ls/stat work in it under {runtime} "
                    "(a user image without it, or a static program, may not: docs/sandbox.md)")


def offline_build_checks(settings: Settings, probe: Probe) -> Iterator[Check]:
    """Whether the runner image can be built without a registry (mmdebstrap, installed or fetched)."""
    if probe.provisioning is None:
        return
    client, _ = engine_of(probe)
    offline_ready, offline_how = probe.provisioning.offline_build_tool()
    yield Check(f"image build without a registry: {offline_how}",
                ok=offline_ready or image_exists(client, settings.image or DEFAULT_IMAGE),
                fix="install mmdebstrap with your package manager")


def path_map_checks(settings: Settings, probe: Probe) -> Iterator[Check]:
    """The path_map section: where the engine sees hookcage's paths; each directory entry probed."""
    from executor.core.pathmap import engine_path, with_resolved_keys
    from executor.core.text import one_line
    from executor.sandbox import pathcheck
    from executor.sandbox.docker.backend import probe_sandbox
    from executor.sandbox.paths import Candidates, resolve_path_map

    client, _ = engine_of(probe)
    try:
        path_map = resolve_path_map(settings.path_map, client)
    except HookcageError as exc:
        yield Check(f"path_map: {exc}", ok=False, fix="set HOOKCAGE_PATH_MAP, or start Docker")
        return
    if not path_map.active:
        found = Candidates.of_this_process()
        note = (" (this process looks containerised, but the engine knows no container of it: "
                "right when the engine shares hookcage's file system)"
                if settings.path_map is None and (found.full or found.prefix) else "")
        yield Check(f"path_map {path_map.describe()}{note}")
        return
    yield Check(f"path_map {path_map.describe()}")
    try:  # staged files, dependency caches and persistent homes are bound from there
        engine_path(os.path.realpath(settings.home), with_resolved_keys(path_map, os.path.realpath))
    except HookcageError as exc:
        yield Check(f"hookcage's home {settings.home}: {exc}", ok=False,
                    fix="mount the home into hookcage's container (a named volume will do), or add it to "
                        "HOOKCAGE_PATH_MAP")
    if not image_exists(client, DEFAULT_IMAGE):
        yield Check(f"path_map not checked: the probe needs the image {DEFAULT_IMAGE}", ok=False,
                    fix="hookcage image build")
        return
    try:
        checks = pathcheck.check_path_map(client, path_map, probe_sandbox)
    except HookcageError as exc:
        yield Check(f"path_map not checked: {exc}", ok=False, fix="hookcage image build")
        return
    for check in checks:
        yield Check(one_line(check.line()), ok=check.ok, fix=pathcheck.fix_for(path_map))


def workspace_checks(settings: Settings, probe: Probe) -> Iterator[Check]:
    """An engine elsewhere (``tcp://``, ``ssh://``, a path map in force) has the workspace at its path.

    The workspace is ``$CLAUDE_PROJECT_DIR``, else the current directory. A
    marker file written there must be seen from a container that mounts it as
    hooks do (:func:`executor.sandbox.pathcheck.check_workspace`); a local
    engine shares hookcage's files and is not asked.
    """
    from executor.core.text import one_line
    from executor.sandbox import pathcheck
    from executor.sandbox.docker.backend import DockerSandbox, docker_options
    from executor.sandbox.docker.engine import engine_url
    from executor.sandbox.paths import resolve_path_map

    client, _ = engine_of(probe)
    url = engine_url(client)
    try:
        path_map = resolve_path_map(settings.path_map, client)
    except HookcageError:
        return  # path_map_checks says what is wrong
    if not pathcheck.engine_is_elsewhere(url, path_map):
        return
    workspace = os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd()
    options = {**docker_options(settings), "client": client, "reap_on_start": False}
    sandbox = DockerSandbox(**options)
    try:
        check = pathcheck.check_workspace(sandbox, workspace, url)
    except HookcageError as exc:
        yield Check(one_line(f"workspace {workspace} not checked on the engine at {url}: {exc}"), ok=False,
                    fix="hookcage image build")
        return
    finally:
        sandbox.close()
    yield Check(one_line(check.line()), ok=check.ok, fix=pathcheck.WORKSPACE_FIX)


def refuse_wrong_home_mapping(home: Path, path_map_setting: dict[str, str] | None) -> None:
    """What ``hookcage serve`` checks when it starts: the map in force carries its home rightly.

    Nothing happens without a map in force (hookcage on the engine's host).
    An engine that cannot be reached, or a probe that cannot run, is not a
    wrong map: the runs say so themselves.

    Raises:
        SandboxError: the home is outside the map, or an entry carrying it is wrong (the message says how to fix it).
    """
    from executor.core.pathmap import engine_path, with_resolved_keys
    from executor.sandbox.docker.backend import probe_sandbox
    from executor.sandbox.pathcheck import check_path_map, fix_for
    from executor.sandbox.paths import Candidates, resolve_path_map

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
            for check in check_path_map(client, path_map, probe_sandbox, under=[real_home]):
                if check.ok is False:
                    raise SandboxError(f"wrong {check.line()} (it carries hookcage's home {home}); "
                                       f"fix: {fix_for(path_map)}; `hookcage doctor` checks every entry")
    finally:
        client.close()
