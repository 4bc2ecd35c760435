"""Which OCI runtime hook containers get, and what registering gVisor in ``daemon.json`` changes (pure).

The ``runtime`` setting is ``auto`` (the default), ``runc``, ``runsc`` or any
runtime name the engine has. :func:`resolve_runtime` turns it into the name
every container is created with: ``auto`` is gVisor (``runsc``) when the
engine has it, else the engine's default runtime (``runc`` on Docker, ``crun``
on Podman). :func:`isolation` says what that name means for a hook: its own
user-space kernel (gVisor) or the host's kernel, shared with every container.

:func:`merge_runtime` is the edit ``hookcage setup runsc`` makes to the
engine's ``daemon.json`` (one ``runtimes`` entry added, every other key kept),
and :func:`unexpected_keys` checks that ``runsc install`` made that edit and no
other. No I/O here: :mod:`executor.provision.runsc` reads, runs ``runsc
install`` and reloads.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal

if TYPE_CHECKING:
    from executor.core.options import SandboxOptions
    from executor.sandbox.base import Sandbox

AUTO: Final = "auto"
GVISOR_RUNTIME: Final = "runsc"
RUNSC_ARGS: Final = ("--network=none",)
"""runsc refuses network-less containers (``--network none``) without it."""

Isolation = Literal["gvisor", "shared kernel"]
GVISOR: Final[Isolation] = "gvisor"
SHARED_KERNEL: Final[Isolation] = "shared kernel"

GET_GVISOR: Final = "apt-get install runsc && hookcage setup runsc"
"""How a Debian machine gets gVisor for its hooks."""


def resolve_runtime(setting: str | None, engine_runtimes: Sequence[str], engine_default: str) -> str:
    """The runtime containers are created with for the ``runtime`` setting.

    ``auto`` (or unset/empty) is ``runsc`` when the engine lists it, else the
    engine's default (``runc`` when the engine names none). Any other value is
    used as it is: a runtime the engine lacks is refused when a container is
    created (never silently replaced by a weaker one).

    Example::

        resolve_runtime("auto", ["runc", "runsc"], "runc")  # "runsc"
        resolve_runtime("auto", ["runc"], "runc")           # "runc"
    """
    name = (setting or "").strip()
    if name and name != AUTO:
        return name
    if GVISOR_RUNTIME in engine_runtimes:
        return GVISOR_RUNTIME
    return engine_default or "runc"


def isolation(runtime: str) -> Isolation:
    """``"gvisor"`` for runsc (and names that say runsc, e.g. ``runsc-debug``), else ``"shared kernel"``.

    Only gVisor is known to give hooks a kernel of their own; any other
    runtime counts as the host's kernel (the weaker claim is the safe one).
    """
    return GVISOR if runtime == GVISOR_RUNTIME or runtime.startswith(GVISOR_RUNTIME + "-") else SHARED_KERNEL


GVISOR_HOST_TASKS_PER_TASK: Final = 24
GVISOR_HOST_TASKS_BASE: Final = 1024
"""gVisor runs a sandbox's tasks on host threads of its own (the sentry's Go threads, the ptrace
platform's stubs): measured with runsc 20221219 on this machine kind, a 64-task fork bomb held
1,109 host tasks, with a base of ~100. Those are what the engine's pids limit counts."""


def gvisor_task_limits(tasks: int) -> tuple[int, int]:
    """``(host pids limit, RLIMIT_NPROC)`` for a container under gVisor whose processes may number ``tasks``.

    Under gVisor the engine's pids limit counts the sentry's host threads, not the hook's
    processes: a limit of ``tasks`` there kills the whole sandbox (the sentry cannot make a
    thread, exits 2 and says nothing) long before the hook reaches ``tasks``. So the hook's
    limit becomes ``RLIMIT_NPROC``, which gVisor's own kernel enforces inside the sandbox
    (a fork past it fails with EAGAIN, as under runc); the host limit stays as a backstop
    scaled to what the sentry needs for that many tasks. Under runc ``RLIMIT_NPROC``
    would count the uid's processes across the whole host: never set it there.
    """
    return tasks * GVISOR_HOST_TASKS_PER_TASK + GVISOR_HOST_TASKS_BASE, tasks


def describe(runtime: str) -> str:
    """E.g. ``runsc (gVisor: a kernel of its own)`` or ``runc (shared kernel: the host's)``."""
    if isolation(runtime) == GVISOR:
        return f"{runtime} (gVisor: hooks get a kernel of their own)"
    return f"{runtime} (shared kernel: hooks reach the host's kernel)"


def isolation_part(sandbox: Sandbox, options: SandboxOptions) -> Mapping[str, Any]:
    """The docker backend's part of a hook's trust profile: ``{"isolation": "gvisor"}`` under gVisor, else nothing.

    Nothing under a shared kernel, so those hashes are what they were before the
    runtime was covered (old records count as reviewed under a shared kernel);
    :meth:`executor.gates.trust.TrustSubject.covering_digests` lets a shared-kernel
    review cover a gVisor run, never the other way round.
    """
    runtime = sandbox.runtime()
    return {"isolation": GVISOR} if runtime is not None and isolation(runtime) == GVISOR else {}


# --------------------------------------------------------------------------
# daemon.json
# --------------------------------------------------------------------------


def runtime_entry(path: str, args: Sequence[str] = RUNSC_ARGS) -> dict[str, Any]:
    """A ``daemon.json`` ``runtimes`` entry: ``{"path": ..., "runtimeArgs": [...]}``."""
    return {"path": path, "runtimeArgs": list(args)}


class DaemonJsonError(ValueError):
    """``daemon.json`` cannot be merged (its text is not a JSON object, or ``runtimes`` is not one)."""


def parse_daemon_json(text: str) -> dict[str, Any]:
    """The object in ``daemon.json``'s text; blank text is ``{}``.

    Raises:
        DaemonJsonError: not JSON, not an object, or a key given twice (dockerd
            refuses those; which one wins would be a guess).
    """
    if not text.strip():
        return {}

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        for key, value in items:
            if key in seen:
                raise DaemonJsonError(f"key {key!r} appears twice")
            seen[key] = value
        return seen

    try:
        data = json.loads(text, object_pairs_hook=pairs)
    except json.JSONDecodeError as exc:
        raise DaemonJsonError(f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    if not isinstance(data, dict):
        raise DaemonJsonError(f"not a JSON object (a {type(data).__name__})")
    return data


@dataclass(frozen=True)
class Merge:
    """What adding one runtime to ``daemon.json`` does.

    ``config`` is the whole new object (equal to the old one when nothing
    changes); ``changed`` whether it differs; ``conflict`` non-empty when an
    entry of that name exists with other settings (what differs) and
    ``force`` was not given (``config`` is then the old one).
    """

    config: dict[str, Any]
    changed: bool
    conflict: str = ""
    replaced: dict[str, Any] = field(default_factory=dict)


def _differences(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    said = []
    for key in sorted(old.keys() | new.keys()):
        if old.get(key) != new.get(key):
            have = json.dumps(old[key]) if key in old else "absent"
            want = json.dumps(new[key]) if key in new else "absent"
            said.append(f"{key} is {have}, hookcage would set {want}")
    return said


def merge_runtime(config: Mapping[str, Any], name: str, entry: Mapping[str, Any], *, force: bool = False) -> Merge:
    """``config`` with ``runtimes[name] = entry``, every other key (and entry) kept in its order.

    An entry of that name with other settings is a conflict (nothing
    changes) unless ``force``: then it is replaced.

    Raises:
        DaemonJsonError: ``runtimes`` exists and is not an object, or ``name``'s
            entry is not one.
    """
    runtimes = config.get("runtimes", {})
    if not isinstance(runtimes, dict):
        raise DaemonJsonError(f'"runtimes" is not a JSON object (a {type(runtimes).__name__})')
    current = runtimes.get(name)
    wanted = dict(entry)
    if current == wanted:
        return Merge(dict(config), False)
    if current is not None:
        if not isinstance(current, dict):
            raise DaemonJsonError(f'"runtimes"."{name}" is not a JSON object')
        if not force:
            return Merge(dict(config), False, "; ".join(_differences(current, wanted)))
    new = dict(config)
    new["runtimes"] = {**runtimes, name: wanted}
    return Merge(new, True, replaced=dict(current) if isinstance(current, dict) else {})


def unexpected_keys(expected: Mapping[str, Any], written: Mapping[str, Any]) -> list[str]:
    """The keys whose values differ between ``expected`` and ``written`` (``runtimes.NAME`` inside ``runtimes``).

    Values compare as JSON data (key order and formatting do not count; an
    integer rounded through a float does).

    Example::

        unexpected_keys({"mtu": 1400}, {"mtu": 1400, "userland-proxy": False})  # ["userland-proxy"]
    """
    found = []
    for key in sorted(expected.keys() | written.keys()):
        have, want = written.get(key, _ABSENT), expected.get(key, _ABSENT)
        if key == "runtimes" and isinstance(have, dict) and isinstance(want, dict):
            found += [f"runtimes.{name}" for name in sorted(have.keys() | want.keys())
                      if have.get(name, _ABSENT) != want.get(name, _ABSENT)]
        elif have != want:
            found.append(key)
    return found


_ABSENT: Final = object()
