"""What a container looks like: the profile, mounts, environment and ``create`` arguments (pure
apart from a few host-path checks)."""

from __future__ import annotations

import contextlib
import logging
import math
import os
import re
import stat
from dataclasses import dataclass
from typing import Any

import docker  # type: ignore[import-untyped, unused-ignore]
import docker.errors  # type: ignore[import-untyped, unused-ignore]
import docker.utils  # type: ignore[import-untyped, unused-ignore]

from executor.core.pathmap import IDENTITY, PathMap, engine_path
from executor.errors import SandboxError
from executor.sandbox.base import RunRequest
from executor.sandbox.conventions import (
    DEFAULT_IMAGE,
    EXPIRES_LABEL,
    EXPIRY_MARGIN,
    MANAGED_LABEL,
    SELF_END_GRACE,
    SELF_END_PIDS,
)
from executor.sandbox.engines import DOCKER_TRAITS, PODMAN, EngineTraits, extra_ulimits, userns_mode
from executor.sandbox.relay import RELAY_PIDS, relayed_script
from executor.sandbox.runtimes import GVISOR, gvisor_task_limits, isolation

logger = logging.getLogger(__name__)

NOBODY = "65534:65534"
BASE_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/tmp",
    "LANG": "C.UTF-8",
}


@dataclass(frozen=True)
class DockerProfile:
    """Executor-wide container defaults; a request's options may widen some."""

    image: str = DEFAULT_IMAGE
    runtime: str | None = None
    memory: str = "512m"
    cpus: float = 1.0
    pids: int = 256
    tmpfs_size: str = "64m"
    file_size: str = "64m"
    hostname: str = "hookcage"
    user: str | None = None
    """``uid:gid``; ``None``: decided per run by :func:`default_user`."""
    paths: PathMap = IDENTITY
    """Where the engine sees hookcage's paths (:mod:`executor.sandbox.paths`)."""
    counted_stdin: bool = False
    """Give the hook its stdin by count (:func:`counted_stdin`), not by a half-close of the
    attach connection: over TLS, where a terminator may not carry a half-close to the engine."""
    engine: EngineTraits = DOCKER_TRAITS
    """The engine the containers are made by (:mod:`executor.sandbox.engines`): Podman needs a few more args."""
    seccomp: str | None = None
    """A seccomp profile file (as hookcage sees it) instead of the engine's default (Podman's is too wide)."""


def default_user(project_dir: str | None = None) -> str:
    """Who hooks run as: the invoking ``uid:gid``; when that is root, the project's owner, or nobody.

    Never root: a root invoker (CI, a container) gets the owner of the project
    directory when that is not root (so ``workspace: rw`` can write a
    developer's checkout), else ``65534:65534``.
    """
    uid, gid = os.getuid(), os.getgid()
    if uid != 0:
        return f"{uid}:{gid}"
    if project_dir:
        try:
            st = os.stat(project_dir)
        except OSError:
            return NOBODY
        if st.st_uid != 0:
            return f"{st.st_uid}:{st.st_gid if st.st_gid != 0 else st.st_uid}"
    return NOBODY


def _size(value: str | int, what: str) -> int:
    try:
        size = int(docker.utils.parse_bytes(value))
    except (docker.errors.DockerException, ValueError, TypeError) as exc:
        raise SandboxError(f"invalid {what} {value!r}: use a size such as 512m") from exc
    if size <= 0:
        raise SandboxError(f"invalid {what} {value!r}: must be positive")
    return size


def _inside(path: str, root: str) -> bool:
    return os.path.commonpath([path, root]) == root


def engine_source(path: str, paths: PathMap) -> str:
    """Where the engine finds ``path`` (as hookcage sees it), to hand it as a mount source.

    With a path map in force, symlinks are resolved here first, as hookcage
    sees them: an absolute link means another thing on the engine's host.

    Raises:
        SandboxError: the engine cannot see ``path`` (outside every path_map entry).
    """
    if not paths.active:
        return path
    return engine_path(os.path.realpath(path), paths)


def _bind(source: str, target: str, *, read_only: bool, paths: PathMap = IDENTITY) -> dict[str, Any]:
    """A bind of ``source`` (as hookcage sees it) at ``target`` in the container.

    The Mount API (unlike ``-v``) refuses a source the engine's host does not
    have instead of creating an empty directory there: a wrong path_map fails
    the run (see ``map_engine_error``), it never mounts an empty workspace.
    """
    # NonRecursive: on engines before API 1.44 a read-only bind is not
    # recursively read-only, so a host mount nested in the workspace would be
    # writable. Not bringing submounts along at all closes that.
    return {
        "Type": "bind",
        "Source": engine_source(source, paths),
        "Target": target,
        "ReadOnly": read_only,
        "BindOptions": {"NonRecursive": True},
    }


def staged_tree(request: RunRequest) -> str | None:
    """The folder that mirrors the project with the run's staged files, if the overlays form one.

    The executor stages the reviewed bytes of ``ROOT/a/b.sh`` at
    ``TREE/a/b.sh`` (one ``TREE`` per run). Such a run's read-only workspace
    is an overlay file system, ``TREE`` over the project, rather than a bind of
    the project with a bind of each staged file: a bind over a file is
    detached the moment that file is unlinked or renamed over on the host (a
    ``git checkout`` during the run), and the container would then read the
    new file. An overlay layer is looked up by name at every access, and the
    staged layer is hookcage's own: nothing in the project can take it away.

    Returns:
        ``TREE``, or None when there are no overlays or they do not mirror
        the project this way (then each is bound over its path).
    """
    if not request.overlays:
        return None
    project = os.path.normpath(request.project_dir)
    tree: str | None = None
    for target, source in request.overlays.items():
        target = os.path.normpath(target)
        if not os.path.isabs(target) or not _inside(target, project) or target == project:
            return None
        relative = os.path.relpath(target, project)
        source = os.path.normpath(source)
        if not source.endswith(os.sep + relative):
            return None
        base = source[: -len(relative) - 1]
        if tree is None:
            tree = base
        elif base != tree:
            return None
    return tree


# Characters the kernel's overlay options cannot carry unescaped.
_OVERLAY_UNSAFE = re.compile(r"[,:\\\0\n]")


def _overlay_workspace(tree: str, project: str, paths: PathMap = IDENTITY) -> dict[str, Any]:
    """An anonymous volume mounting ``tree`` over ``project`` (read-only: no upper layer).

    The engine mounts it on its host: both layers are given as the engine
    sees them (``paths``). A project path the overlay options cannot carry
    (``,``, ``:``, a backslash) is reached through a symlink beside the tree,
    holding the project's path on the engine's host, which the kernel
    follows there when it mounts.
    """
    upper_tree = engine_source(tree, paths)
    lower = engine_source(project, paths)
    if _OVERLAY_UNSAFE.search(lower):
        link = os.path.join(os.path.dirname(tree), "project")
        with contextlib.suppress(FileExistsError):
            os.symlink(lower, link)
        lower = os.path.join(engine_source(os.path.dirname(tree), paths), "project")  # not the link's target
    for path in (upper_tree, lower):
        if _OVERLAY_UNSAFE.search(path):
            raise SandboxError(f"cannot lay the reviewed files over the workspace: {path!r} holds ',', ':' or '\\'")
    return {
        "Type": "volume",
        "Target": project,
        "VolumeOptions": {
            "NoCopy": True,
            "DriverConfig": {
                "Name": "local",
                "Options": {"type": "overlay", "device": "overlay", "o": f"lowerdir={upper_tree}:{lower}"},
            },
        },
    }


def run_mounts(request: RunRequest, paths: PathMap = IDENTITY) -> tuple[list[dict[str, Any]], str]:
    """The bind mounts of a run and its working directory.

    Every check looks at the paths as hookcage sees them; every source handed
    to the engine is translated by ``paths`` (:func:`engine_source`).
    """
    options = request.options
    mounts: list[dict[str, Any]] = []
    targets: set[str] = set()
    workdir = "/tmp"
    project = os.path.normpath(request.project_dir)
    tree = staged_tree(request)
    if options.workspace != "none":
        if not os.path.isabs(project) or project == "/":
            raise SandboxError(f"refusing to mount {request.project_dir!r} as the workspace")
        if not os.path.isdir(project):
            raise SandboxError(f"the project directory {project} does not exist")
        if tree is not None and options.workspace == "ro":
            mounts.append(_overlay_workspace(tree, project, paths))
            targets.update(os.path.normpath(t) for t in request.overlays)
        else:
            mounts.append(_bind(project, project, read_only=options.workspace != "rw", paths=paths))
        targets.add(project)
        cwd = os.path.normpath(request.cwd)
        workdir = (
            cwd if os.path.isabs(cwd) and _inside(cwd, project) and os.path.isdir(cwd) else project
        )
    for target, source in sorted(request.overlays.items()):
        target = os.path.normpath(target)
        if not os.path.isabs(target) or not _inside(target, project) or target == project:
            raise SandboxError(f"staged file {target!r} is not inside the project {project}")
        if target in targets:
            continue  # laid over the workspace by the overlay file system
        mounts.append(_bind(source, target, read_only=True, paths=paths))
        targets.add(target)
    real_project = os.path.realpath(project)
    for extra in options.mounts:
        path = os.path.normpath(extra)
        real = os.path.realpath(path)
        if not os.path.isabs(path) or real_project == "/" or not _inside(real, real_project):
            raise SandboxError(f"extra mount {extra!r} is not inside the project {project}")
        try:
            mode = os.stat(real).st_mode
        except OSError as exc:
            raise SandboxError(f"extra mount {extra!r} does not exist") from exc
        if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
            raise SandboxError(f"extra mount {extra!r} is not a file or directory")
        if path not in targets:
            mounts.append(_bind(real, path, read_only=True, paths=paths))
            targets.add(path)
    for bind in request.binds:
        target = os.path.normpath(bind.target)
        if not os.path.isabs(target) or not os.path.isabs(bind.source) or target in targets:
            raise SandboxError(f"refusing to bind {bind.source!r} at {bind.target!r}")
        mounts.append(_bind(bind.source, target, read_only=bind.read_only, paths=paths))
        targets.add(target)
    transcript = request.transcript_path
    if transcript and os.path.isabs(transcript) and request.transcript_folder is not None:
        # A pooled container's: its own folder over the transcript's, the session's transcript
        # linked into it at job time (``poolkeys.transcript_folder_target`` says when).
        folder = os.path.dirname(os.path.normpath(transcript))
        if folder in targets or any(_inside(t, folder) or _inside(folder, t) for t in targets):
            raise SandboxError(f"refusing to bind a folder over the transcript's folder {folder!r}")
        mounts.append(_bind(request.transcript_folder, folder, read_only=True, paths=paths))
    elif transcript and os.path.isabs(transcript):
        transcript = os.path.normpath(transcript)
        source = transcript
        if request.transcript_source is not None:
            # Judged and resolved by the service's keep-out: bound only if it still is that real,
            # regular file (a directory on the way swapped for a symlink since is not followed).
            source = request.transcript_source
            if os.path.realpath(source) != source:
                source = ""
        try:
            # lstat: a symlink posing as the transcript could point at a secret.
            regular = bool(source) and stat.S_ISREG(os.lstat(source).st_mode)
        except (OSError, ValueError):
            regular = False
        if regular and transcript not in targets:
            try:
                mounts.append(_bind(source, transcript, read_only=True, paths=paths))
            except SandboxError as exc:
                # As when hookcage cannot see it: the hook runs without the transcript.
                logger.warning("not mounting the transcript: %s", exc)
    return mounts, workdir


def _environment(request: RunRequest) -> dict[str, str]:
    env = {**BASE_ENV, **request.env}
    for key, value in env.items():
        if not key or "=" in key or "\0" in key or "\0" in value:
            raise SandboxError(f"invalid environment variable name or value: {key!r}")
    return env


def _script(profile: DockerProfile, request: RunRequest) -> str:
    drain = profile.engine.kind == PODMAN and not profile.counted_stdin
    script = self_ending(request.command, request.timeout, relay=relays_output(profile), drain=drain)
    return counted_stdin(script, len(request.stdin)) if profile.counted_stdin else script


def relays_output(profile: DockerProfile) -> bool:
    """Whether the hook's stdout and stderr go through the sandbox's own pipes (under gVisor:
    :mod:`executor.sandbox.relay`)."""
    return bool(profile.runtime) and isolation(str(profile.runtime)) == GVISOR


def self_ending(command: str, timeout: float, *, relay: bool = False, drain: bool = False) -> str:
    """``command`` as a shell script that ends its own container ``SELF_END_GRACE`` s past ``timeout``.

    The hookcage process that started a run kills its container at the
    deadline. When that process is gone (``hookcage serve`` killed with
    SIGKILL, its container stopped), nobody would: this watch does. Before
    the hook starts, a detached subshell (a child of the container's init,
    not of the hook: the hook's ``wait`` never waits for it) sleeps, then
    kills every process of the container (``kill -9 -1``: all but init and
    itself), so init exits and the container stops; the next reap removes it
    (see ``hookcage.expires``). It fires only when pid 1 is the engine's
    init, ``docker-init`` or Podman's ``podman-init`` (the container's own
    pid namespace). Then the shell execs the hook
    as ``/bin/sh -c COMMAND``, so the hook sees what it always saw: the same
    pid, ``$0``, environment (``SHLVL`` unset, as a warm run has it) and
    working directory. An image without ``sleep`` just lacks the watch.

    With ``relay`` (under gVisor) the hook runs as the shell's child instead,
    its stdout and stderr copied out through the sandbox's own pipes
    (:mod:`executor.sandbox.relay`): gVisor cuts a large write to the
    container's own pipes short, and a program that does not write the rest
    loses it silently.

    With ``drain`` (Podman, stdin ended by a half-close) the hook runs as the
    shell's child too, and the shell reads what is left of stdin to its end
    (``cat >/dev/null``) before it exits with the hook's status: conmon
    closes its attach socket when the container exits, and with stdin the
    hook left unread still queued in it the kernel reports a reset to Podman
    before the output queued the other way, so Podman dropped the hook's last
    bytes (``head -c 10; echo`` with 10 MiB of stdin lost its newline).
    """
    seconds = math.ceil(timeout) + SELF_END_GRACE
    quoted = "'" + command.replace("'", "'\"'\"'") + "'"
    watch = (
        f"( (sleep {seconds} && read -r _hc_p </proc/1/comm && {{ [ \"$_hc_p\" = docker-init ] || [ \"$_hc_p\" = podman-init ]; }} && kill -9 -1)"
        f" </dev/null >/dev/null 2>&1 & ); unset SHLVL _hc_p; "
    )
    if relay:
        return watch + relayed_script(f"/bin/sh -c {quoted}")
    if drain:
        return watch + (f"/bin/sh -c {quoted}; _hc_r=$?; "
                        "! command -v cat >/dev/null 2>&1 || cat >/dev/null 2>&1; exit $_hc_r")
    return watch + f"exec /bin/sh -c {quoted}"


COUNTED_STDIN_PIDS = 3
"""Processes :func:`counted_stdin` adds while the hook runs: its shell, ``head`` and (briefly) a subshell."""


def counted_stdin(script: str, length: int) -> str:
    """``script`` run with exactly ``length`` bytes of the container's stdin as its stdin, then end-of-input.

    For engines reached through TLS: ending the hook's stdin by half-closing
    the attach connection works with dockerd (Go reads a TCP end of stream
    under TLS as the end of input) but a TLS terminator in front of an engine
    (stunnel, OpenSSL 3) answers it with a fatal alert. ``head -c N``
    (coreutils, busybox) copies the counted bytes into a pipe and ends it;
    it runs in the background of a subshell that exits at once, so the
    shell waits for the hook only (a background child of the hook holding
    the pipe never hangs the run; the container's end takes ``head``). No
    stdin: an empty pipe. An image without ``head``: the run fails with one
    line on stderr rather than giving the hook a silently empty stdin.
    """
    quoted = "'" + script.replace("'", "'\"'\"'") + "'"
    if length == 0:
        return f": | /bin/sh -c {quoted}"
    return (f"command -v head >/dev/null 2>&1 || {{ echo 'hookcage: this image has no head(1), which a hook "
            f"with stdin needs on an engine reached over TLS' >&2; exit 127; }}; "
            f"(exec 3<&0; head -c {int(length)} <&3 3<&- &) | /bin/sh -c {quoted}")


def container_args(
    profile: DockerProfile, request: RunRequest, *, name: str, now: float
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``create_container`` and ``create_host_config`` arguments of one run.

    Args:
        profile: the executor-wide defaults.
        request: the run; its options override image, limits, network, workspace.
        name: the container name.
        now: the Unix time of creation, for the ``hookcage.expires`` label.

    Returns:
        ``(create_kwargs, host_config_kwargs)``; ``create_kwargs`` lacks
        ``host_config``, which the client builds from the second dict.

    Raises:
        SandboxError: an image or command starting with ``-``, a bad size, a
            mount that does not exist or leaves the project.
    """
    options = request.options
    image = options.image or profile.image
    if not image or image.startswith("-"):
        raise SandboxError(f"refusing image name {image!r}")
    if request.command.startswith("-") or "\0" in request.command:
        raise SandboxError("refusing a hook command that starts with '-' or holds a NUL byte")
    memory = _size(options.memory or profile.memory, "memory limit")
    cpus = options.cpus if options.cpus is not None else profile.cpus
    pids = options.pids if options.pids is not None else profile.pids
    if cpus <= 0 or pids <= 0:
        raise SandboxError(f"invalid limits: cpus={cpus}, pids={pids}")
    file_size = _size(profile.file_size, "file size limit")
    tmpfs_size = _size(profile.tmpfs_size, "tmpfs size")
    mounts, workdir = run_mounts(request, profile.paths)
    network_disabled = options.network == "none"
    labels = {
        **request.labels,
        MANAGED_LABEL: "true",
        EXPIRES_LABEL: str(math.ceil(now + request.timeout) + EXPIRY_MARGIN),
    }
    create = {
        "image": image,
        "command": ["/bin/sh", "-c", _script(profile, request)],
        "name": name,
        "hostname": profile.hostname,
        "user": profile.user or default_user(request.project_dir),
        "environment": _environment(request),
        "working_dir": workdir,
        "labels": labels,
        "stdin_open": True,  # with attach: OpenStdin, StdinOnce, AttachStdin/out/err
        "tty": False,
        "network_disabled": network_disabled,
    }
    host = {
        "read_only": True,
        "tmpfs": {"/tmp": f"rw,noexec,nosuid,nodev,size={tmpfs_size}"},
        "mounts": mounts,
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges",
                         *([f"seccomp={engine_source(profile.seccomp, profile.paths)}"] if profile.seccomp else [])],
        "pids_limit": pids + SELF_END_PIDS + (COUNTED_STDIN_PIDS if profile.counted_stdin else 0),
        "mem_limit": memory,
        "memswap_limit": memory,
        "nano_cpus": round(cpus * 1e9),
        "ulimits": [
            {"name": "fsize", "soft": file_size, "hard": file_size},
            {"name": "core", "soft": 0, "hard": 0},
            *(dict(limit) for limit in extra_ulimits(profile.engine)),
        ],
        "init": True,
        "log_config": {"type": "none"},
        "network_mode": "none" if network_disabled else options.network,
    }
    if profile.runtime:
        host["runtime"] = profile.runtime
        if isolation(profile.runtime) == GVISOR:
            # The engine's pids limit counts gVisor's own host threads: the hook's limit is RLIMIT_NPROC there.
            # The relay of the hook's output (relays_output) runs beside it: its processes on top.
            tasks = pids + SELF_END_PIDS + RELAY_PIDS + (COUNTED_STDIN_PIDS if profile.counted_stdin else 0)
            host["pids_limit"], nproc = gvisor_task_limits(tasks)
            host["ulimits"] = [*host["ulimits"], {"name": "nproc", "soft": nproc, "hard": nproc}]  # type: ignore[misc]
    if userns := userns_mode(profile.engine):
        host["userns_mode"] = userns  # Podman's keep-id: build with engine.host_config, not docker-py's
    return create, host
