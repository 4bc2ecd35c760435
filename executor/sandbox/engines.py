"""Which engine answers at the engine address, and what hookcage changes for it (pure: no docker-py).

hookcage talks to any engine with Docker's Engine API: Docker itself, or
Podman's Docker-compatible service (``podman system service``), rootful or
rootless. :func:`detect_engine` reads the engine's ``/version`` and ``/info``
answers (and, on Podman, its own ``/libpod/info``, which holds what the
compatible ``/info`` leaves out or gets wrong) into :class:`EngineTraits`;
the docker backend builds its containers from those traits:

- **Runtimes.** Podman's compatible ``/info`` lists every runtime of
  ``containers.conf``'s ``[engine.runtimes]`` table, installed or not (runsc,
  kata, krun, ... on a stock Debian), so on Podman only its default runtime
  counts as one it has (:attr:`EngineTraits.runtimes`): ``runtime = auto``
  never picks a runtime that is not there. An explicit ``runtime`` is used as
  it is (the engine refuses one it lacks).
- **Resource limits (ulimits).** Once a container asks for any ulimit
  (hookcage asks for ``fsize`` and ``core``), Podman adds ``nofile`` 1048576
  and ``nproc`` 4194304 for a rootful container; where the engine's root lacks
  ``CAP_SYS_RESOURCE`` (Podman in a VM or a container) the runtime then fails
  with ``setrlimit RLIMIT_NOFILE: Operation not permitted``. hookcage names
  both itself on Podman (:data:`PODMAN_ULIMITS`).
- **cgroup limits.** A rootless Podman enforces memory, pids and CPU limits
  only on cgroup v2 with those controllers delegated to its user; elsewhere it
  accepts the limits and ignores them (its ``/info`` still says
  ``MemoryLimit: true``). hookcage reads the delegated controllers from
  ``/libpod/info`` and refuses to run hooks there (:func:`unenforced_limits`,
  :func:`limits_refusal`): a hook's limits are part of the profile it was
  reviewed under.
- **User namespace.** Rootless, the engine's user is root in the container
  and the invoking user's files would look like root's: hookcage asks for
  ``userns=keep-id``, so the hook's uid owns the workspace's files as on
  the host (``workspace: rw`` can write, a 0600 file stays readable).
- **Namespaces (seccomp).** Podman's default seccomp profile (containers-common's)
  lets an unprivileged process ``unshare`` a user namespace (``unshare
  -Urm``: root in a namespace of its own, and the kernel surface that opens);
  Docker's refuses namespace-creating ``clone``/``unshare``/``setns`` without
  ``CAP_SYS_ADMIN``. On Podman hookcage passes Podman's own default profile
  with those calls restricted as Docker's are (:func:`restrict_namespaces`),
  as a file the engine reads (Podman's API takes a path, not the JSON):
  :func:`podman_seccomp_file`.
- **OOM report.** Podman (conmon) may not see a cgroup v1 OOM kill:
  ``State.OOMKilled`` stays false and the exit code is 137. hookcage never
  SIGKILLs a run it did not time out, and nothing outside the container can,
  so on Podman such an exit is reported as the OOM kill it is
  (:func:`oom_unreported`; a hook that SIGKILLs itself is reported so too).
- **Attach noise.** When a hook exits leaving stdin unread, Podman writes its
  failed stdin copy (``Error: write unixpacket ...: connection reset by
  peer``) into the attach stream as stderr: :func:`strip_engine_noise` drops
  that last line (the warm pool stops reading at its end markers anyway).
- **Init.** Podman's init (catatonit) is ``podman-init`` in the container,
  Docker's ``docker-init``: :data:`INIT_NAMES` (the self-ending watch checks
  pid 1 against them).

Everything else hookcage uses behaves alike on Podman 4.3 (checked by
tests/integration/test_podman_engine.py): API version negotiation (Podman's
compatible API says 1.41), ``NetworkDisabled`` with network mode ``none``,
labels and label filters, attach and the stdin half-close, ``OOMKilled``,
the ``/tmp`` tmpfs options, ``--read-only``, ``cap-drop ALL`` and
``no-new-privileges``, image ids (``sha256:`` of the image config, the same
as Docker's for an image saved there and loaded here).
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

EngineKind = Literal["docker", "podman"]
DOCKER: Final[EngineKind] = "docker"
PODMAN: Final[EngineKind] = "podman"

INIT_NAMES: Final = ("docker-init", "podman-init")
"""What pid 1 is called (``/proc/1/comm``) when an engine runs its init in the container (``--init``)."""

PODMAN_NOFILE: Final = 1024
"""Open files a hook may have on Podman (the usual soft limit of a login shell)."""
PODMAN_NPROC: Final = 16384
"""Processes and threads of the hook's user on Podman (the pids limit is the tighter cap in practice)."""
PODMAN_ULIMITS: Final = (
    {"name": "nofile", "soft": PODMAN_NOFILE, "hard": PODMAN_NOFILE},
    {"name": "nproc", "soft": PODMAN_NPROC, "hard": PODMAN_NPROC},
)
"""The ulimits hookcage names itself on a rootful Podman (see the module docstring)."""

LIMIT_CONTROLLERS: Final = ("memory", "pids", "cpu")
"""The cgroup controllers the sandbox profile's limits need."""

ENGINE_HINT: Final = "set engine (HOOKCAGE_ENGINE) or DOCKER_HOST to the engine's address"


@dataclass(frozen=True)
class EngineTraits:
    """What kind of engine answers, and what of the sandbox profile it can hold.

    Attributes:
        kind: ``docker`` or ``podman``.
        version: the engine's own version (Podman's, not its API's).
        rootless: the engine runs as an unprivileged user.
        default_runtime: the runtime containers get when none is named.
        runtimes: the runtimes it has (on Podman: its default only).
        cgroup_version: ``1`` or ``2`` (empty when the engine does not say).
        controllers: the cgroup controllers the engine can use; None when
            the engine does not say (Docker: all it needs, as ``/info`` reports).
    """

    kind: EngineKind = DOCKER
    version: str = ""
    rootless: bool = False
    default_runtime: str = "runc"
    runtimes: tuple[str, ...] = ("runc",)
    cgroup_version: str = ""
    controllers: tuple[str, ...] | None = None
    notes: tuple[str, ...] = field(default=())
    """What differs on this engine, one line each, for ``hookcage doctor``."""

    @property
    def name(self) -> str:
        """E.g. ``Docker 20.10.24`` or ``Podman 4.3.1 (rootless)``."""
        label = "Podman" if self.kind == PODMAN else "Docker"
        return f"{label} {self.version}".strip() + (" (rootless)" if self.rootless else "")


DOCKER_TRAITS: Final = EngineTraits()
"""What hookcage assumes before it has asked the engine (and for Docker, what holds)."""


def is_podman(version: Mapping[str, Any]) -> bool:
    """Whether a ``/version`` answer is Podman's (its ``Components`` name ``Podman Engine``)."""
    components = version.get("Components") or []
    names = [str(c.get("Name", "")) for c in components if isinstance(c, Mapping)]
    platform = version.get("Platform") or {}
    platform_name = str(platform.get("Name", "")) if isinstance(platform, Mapping) else ""
    return any(n.lower().startswith("podman") for n in names) or "podman" in platform_name.lower()


def detect_engine(
    version: Mapping[str, Any], info: Mapping[str, Any], libpod_info: Mapping[str, Any] | None = None
) -> EngineTraits:
    """The traits of the engine that gave these answers.

    Args:
        version: the engine's ``/version``.
        info: its ``/info``.
        libpod_info: Podman's ``/libpod/info`` (None for Docker, or when it
            could not be had: then rootless and the controllers are taken
            from ``info``).
    """
    security = [str(s) for s in info.get("SecurityOptions") or []]
    rootless = any("rootless" in s for s in security)
    cgroup_version = str(info.get("CgroupVersion", ""))
    default = str(info.get("DefaultRuntime") or "runc")
    if not is_podman(version):
        return EngineTraits(
            kind=DOCKER,
            version=str(version.get("Version", "")),
            rootless=rootless,
            default_runtime=default,
            runtimes=tuple(sorted(info.get("Runtimes") or {default: {}})),
            cgroup_version=cgroup_version,
        )
    podman_version = str(version.get("Version", ""))
    for component in version.get("Components") or []:
        if isinstance(component, Mapping) and str(component.get("Name", "")).lower() == "podman engine":
            podman_version = str(component.get("Version", podman_version))
    controllers: tuple[str, ...] | None = None
    host = (libpod_info or {}).get("host") or {}
    if isinstance(host, Mapping) and host:
        security_info = host.get("security") or {}
        if isinstance(security_info, Mapping) and "rootless" in security_info:
            rootless = bool(security_info.get("rootless"))
        listed = host.get("cgroupControllers")
        if isinstance(listed, list):
            controllers = tuple(str(c) for c in listed)
        cgroup_version = str(host.get("cgroupVersion", "") or cgroup_version).removeprefix("v")
        runtime = host.get("ociRuntime") or {}
        if isinstance(runtime, Mapping) and runtime.get("name"):
            default = str(runtime["name"])
    traits = EngineTraits(
        kind=PODMAN,
        version=podman_version,
        rootless=rootless,
        default_runtime=default,
        runtimes=(default,),
        cgroup_version=cgroup_version,
        controllers=controllers,
    )
    return EngineTraits(**{**traits.__dict__, "notes": tuple(podman_notes(traits))})


def unenforced_limits(traits: EngineTraits) -> list[str]:
    """The profile's limits (``memory``, ``pids``, ``cpu``) this engine would accept and not enforce."""
    if traits.kind != PODMAN or not traits.rootless:
        return []
    if traits.controllers is None:
        return []  # the engine did not say: Docker's /info flags are checked by doctor
    if traits.cgroup_version == "1":
        return list(LIMIT_CONTROLLERS)  # rootless on cgroup v1: no limit is ever set
    return [c for c in LIMIT_CONTROLLERS if c not in traits.controllers]


def limits_refusal(traits: EngineTraits, url: str) -> str | None:
    """The one-line refusal for an engine that cannot enforce the profile's limits; None when it can."""
    missing = unenforced_limits(traits)
    if not missing:
        return None
    where = (
        "on cgroup v1 a rootless Podman sets no limit at all"
        if traits.cgroup_version == "1"
        else f"the {'/'.join(missing)} cgroup controller{'s are' if len(missing) > 1 else ' is'} "
        "not delegated to the engine's user"
    )
    return (
        f"the {traits.name} engine at {url} cannot enforce the hooks' {', '.join(missing)} limits "
        f"({where}): use a rootful Podman or Docker, or cgroup v2 with the controllers delegated "
        "(systemd: Delegate=memory pids cpu); see docs/engines.md"
    )


def podman_notes(traits: EngineTraits) -> list[str]:
    """What ``hookcage doctor`` says about a Podman engine, one line each."""
    if traits.kind != PODMAN:
        return []
    notes = [
        f"runtimes: only the default ({traits.default_runtime}) is taken as present "
        "(Podman's /info lists containers.conf's table, installed or not)",
        f"ulimits: nofile {PODMAN_NOFILE} and nproc {PODMAN_NPROC} named explicitly "
        "(Podman would ask for more than a root without CAP_SYS_RESOURCE may grant)"
        if not traits.rootless
        else "ulimits: nofile and nproc are the engine user's own",
    ]
    if traits.rootless:
        notes.append("user namespace: keep-id (the hook's uid owns the workspace's files as on the host)")
    return notes


def userns_mode(traits: EngineTraits) -> str | None:
    """The ``UsernsMode`` hookcage asks for: ``keep-id`` on a rootless Podman, else the engine's default."""
    return "keep-id" if traits.kind == PODMAN and traits.rootless else None


def extra_ulimits(traits: EngineTraits) -> Sequence[Mapping[str, Any]]:
    """The ulimits hookcage adds to ``fsize`` and ``core`` for this engine."""
    return PODMAN_ULIMITS if traits.kind == PODMAN and not traits.rootless else ()


def engine_address(setting: str | None, environ: Mapping[str, str]) -> str | None:
    """The engine address in force: the ``engine`` setting, else ``HOOKCAGE_ENGINE``, else ``DOCKER_HOST``.

    Returns:
        The address, or None for docker-py's default (``unix:///var/run/docker.sock``).
    """
    for value in (setting, environ.get("HOOKCAGE_ENGINE"), environ.get("DOCKER_HOST")):
        if value and value.strip():
            return value.strip()
    return None


# --------------------------------------------------------------------------
# Podman: seccomp and the OOM report
# --------------------------------------------------------------------------

PODMAN_SECCOMP_DEFAULT: Final = "/usr/share/containers/seccomp.json"
"""containers-common's default profile: what Podman gives a container when none is named."""
NAMESPACE_FLAGS: Final = 0x7E020000
"""CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET: ``clone`` with any is refused."""
_NAMESPACE_CALLS = frozenset({"clone", "clone3", "unshare", "setns"})
ENOSYS: Final = 38


def restrict_namespaces(profile: Mapping[str, Any]) -> dict[str, Any]:
    """``profile`` (a seccomp profile in the OCI/Docker JSON form) with namespace creation refused.

    As Docker's default profile does for a container without ``CAP_SYS_ADMIN``:
    ``unshare`` and ``setns`` refused (EPERM), ``clone`` allowed only without
    namespace flags, ``clone3`` answered ENOSYS (its flags sit in memory a
    filter cannot read; libc then falls back to ``clone``). Everything else
    is left as the profile has it.
    """
    restricted = copy.deepcopy(dict(profile))
    rules = []
    for rule in restricted.get("syscalls") or []:
        names = [n for n in rule.get("names") or [] if n not in _NAMESPACE_CALLS]
        if names:
            rules.append({**rule, "names": names})
    rules += [
        {"names": ["clone"], "action": "SCMP_ACT_ALLOW",
         "args": [{"index": 0, "value": NAMESPACE_FLAGS, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}]},
        {"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": ENOSYS},
        {"names": ["unshare", "setns"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1},
    ]
    restricted["syscalls"] = rules
    return restricted


def podman_seccomp_file(cache_dir: Path, default_profile: str = PODMAN_SECCOMP_DEFAULT) -> str:
    """The restricted profile (:func:`restrict_namespaces` of Podman's default) as a file; its path.

    Written once per content (its name holds the content's hash; atomically,
    0644: the profile is no secret, and a rootless engine reads it as its own
    user) under ``cache_dir/seccomp``.

    Raises:
        OSError, ValueError: the default profile is missing or not JSON, or the file cannot be written.
    """
    with open(default_profile, encoding="utf-8") as handle:
        text = json.dumps(restrict_namespaces(json.load(handle)), sort_keys=True)
    folder = cache_dir / "seccomp"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"podman-{hashlib.sha256(text.encode()).hexdigest()[:16]}.json"
    if not path.is_file():
        fd, temporary = tempfile.mkstemp(dir=folder, prefix=".seccomp-")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
            os.chmod(temporary, 0o644)
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
    return str(path)


def oom_unreported(traits: EngineTraits, *, exit_code: int | None, oom_killed: bool, timed_out: bool) -> bool:
    """Whether a run's SIGKILL exit (137) is an OOM kill the engine did not report (Podman only)."""
    return traits.kind == PODMAN and not oom_killed and not timed_out and exit_code == 137


_PODMAN_ATTACH_ERROR = re.compile(
    rb"(?:^|(?<=\n))Error: (?:read|write) unixpacket [^\n]*: (?:connection reset by peer|broken pipe)\n\Z"
)
"""What Podman writes on the attach stream's stderr when the hook leaves stdin unread and exits."""


def strip_engine_noise(traits: EngineTraits, stderr: bytes) -> bytes:
    """A run's stderr without what the engine itself appended (Podman's attach error line), if anything.

    Podman copies stdin to the container while the hook runs; when the hook
    exits with stdin unread, the copy fails and Podman writes ``Error: write
    unixpacket @->/proc/self/fd/14/attach: write: connection reset by peer``
    into the stream as stderr. A hook that prints that very line last loses it
    on Podman (and nothing else).
    """
    if traits.kind != PODMAN:
        return stderr
    return _PODMAN_ATTACH_ERROR.sub(b"", stderr, count=1)
