"""Sandbox backends by name: how each is built, what it checks, what it adds to the trust hash.

A hook's ``sandbox.backend`` is ``docker`` or ``host``
(:class:`~executor.core.options.SandboxOptions`); the executor, the daemon and
the CLI ask the functions here instead of testing names:

- :func:`build_sandbox`: the one factory. In-process it is cold (a fresh
  container per run for docker); ``pooled=True`` is the long-lived variant
  the daemon shares between dispatches (docker's warm pool); ``environ`` is
  the caller's environment for a backend the daemon builds anew for each
  caller (:func:`shared_by_callers` is false: host runs with the caller's
  environment);
- :func:`on_engine`, :func:`contained`, :func:`honoured_options`: what is so
  of a backend (its runs are containers on an engine; they are kept from the
  host; the per-hook ``sandbox`` options it honours);
- :func:`doctor_checks`: what ``hookcage doctor`` checks for the backends,
  in the order it prints them (:mod:`executor.sandbox.checks`);
- :func:`trust_profile`: a backend's part of a hook's trust profile, merged
  into the profile that is hashed (the image's id; the isolation of the
  runtime).

Importing this module loads no backend: each function imports the backend it
needs in its body, so ``hookcage`` commands that never run a hook never load
docker-py (a unit test checks).

To add a doctor check, add it to :func:`doctor_checks` (in the order
``doctor`` prints them). To add a backend, add its name to :data:`BACKENDS`
and a branch to each function below.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Final

from executor.core.options import SandboxOptions
from executor.errors import SandboxError
from executor.sandbox.base import Sandbox
from executor.sandbox.runtimes import isolation_part

if TYPE_CHECKING:
    from executor.sandbox.checks import Check, Probe
    from executor.settings import Settings

__all__ = [
    "BACKENDS",
    "DOCKER",
    "DOCKER_OPTIONS",
    "HOST",
    "UnknownBackend",
    "build_sandbox",
    "contained",
    "doctor_checks",
    "honoured_options",
    "known",
    "on_engine",
    "shared_by_callers",
    "trust_profile",
]

DOCKER: Final = "docker"
"""A fresh hardened, network-less container per run (warm pool in the daemon)."""
HOST: Final = "host"
"""A plain subprocess with your own rights (user and managed hooks that ask only)."""
BACKENDS: Final = (DOCKER, HOST)
"""Every backend's name."""

DOCKER_OPTIONS = frozenset({"image", "workspace", "network", "mounts", "memory", "cpus", "pids", "env", "home"})
"""What a ``docker`` hook's ``sandbox`` object may set (besides ``backend``)."""


class UnknownBackend(SandboxError):
    """A backend name that names no backend."""


def known(name: str) -> str:
    """``name``, when it names a backend.

    Raises:
        UnknownBackend: it does not (one line naming it and the backends).
    """
    if name not in BACKENDS:
        raise UnknownBackend(f"unknown sandbox backend {name!r}; registered: {', '.join(sorted(BACKENDS))}")
    return name


def build_sandbox(name: str, settings: Settings, *, pooled: bool = False,
                  environ: Mapping[str, str] | None = None) -> Sandbox:
    """The sandbox of backend ``name``, built from the settings (only that backend is loaded).

    Args:
        name: the backend.
        settings: the settings (the sandbox profile; the pool's size).
        pooled: the daemon's long-lived variant: for docker, a warm pool
            (``pool_size`` or ``pool_total`` 0: the cold ``DockerSandbox``);
            the rest as in-process.
        environ: host: the environment its runs start from (the daemon's
            caller's; None: hookcage's own).

    Raises:
        UnknownBackend: ``name`` names no backend.
    """
    if known(name) == HOST:
        from executor.sandbox.host import HostSandbox

        return HostSandbox() if environ is None else HostSandbox(base_env=environ)
    if pooled and settings.pool_size != 0 and settings.pool_total != 0:
        return _docker_pool(settings)
    from executor.sandbox.docker import DockerSandbox, docker_options

    return DockerSandbox(**docker_options(settings))


def _docker_pool(settings: Settings) -> Sandbox:
    """``docker`` with a warm pool.

    The pool's overlay files go next to the executor's own staged files
    (``$HOOKCAGE_HOME/staging``), where the engine already binds them from.
    """
    from executor.sandbox.docker import docker_options
    from executor.sandbox.pool import PooledDockerSandbox

    staging = settings.home / "staging"
    staging.mkdir(parents=True, exist_ok=True, mode=0o700)
    return PooledDockerSandbox(
        pool_size=settings.pool_size, pool_total=settings.pool_total,
        idle_timeout=settings.pool_idle_timeout, staging_dir=str(staging),
        **docker_options(settings),
    )


def shared_by_callers(name: str) -> bool:
    """Whether the daemon shares one sandbox of ``name`` between dispatches.

    False for host: it is built for each dispatch with the caller's
    environment (``build_sandbox(name, settings, environ=...)``), never shared.

    Raises:
        UnknownBackend: ``name`` names no backend.
    """
    return known(name) != HOST


def on_engine(name: str) -> bool:
    """Whether the runs of ``name`` are containers on an engine (an aborted dispatch removes them by label).

    False for a name that is no backend (a test's ``FakeSandbox`` is ``fake``).
    """
    return name == DOCKER


def contained(name: str) -> bool:
    """Whether the runs of ``name`` are kept from the host; False (host): they run with the user's own rights.

    Raises:
        UnknownBackend: ``name`` names no backend.
    """
    return known(name) != HOST


def honoured_options(name: str) -> frozenset[str]:
    """The per-hook ``sandbox`` options ``name`` honours (host: ``"sandbox": "host"``, nothing else to set).

    Raises:
        UnknownBackend: ``name`` names no backend.
    """
    return DOCKER_OPTIONS if known(name) == DOCKER else frozenset()


def doctor_checks(settings: Settings, probe: Probe) -> Iterator[Check]:
    """What ``hookcage doctor`` checks for the backends, in the order it prints them (host has none).

    ``probe`` shares what one check made with the next, such as the engine's
    client (:class:`executor.sandbox.checks.Probe`).
    """
    from executor.sandbox.docker import doctor

    for check in (doctor.engine_checks, doctor.runtime_checks, doctor.offline_build_checks,
                  doctor.path_map_checks, doctor.workspace_checks):
        yield from check(settings, probe)


def trust_profile(name: str, sandbox: Sandbox, options: SandboxOptions) -> dict[str, Any]:
    """The keys backend ``name`` adds to a hook's trust profile (``sandbox`` runs it with ``options``).

    Every backend: ``image``, the image the hook runs in by id (``sha256:...``:
    a retagged image needs a new review). Docker: also ``isolation`` under
    gVisor (:func:`executor.sandbox.runtimes.isolation_part`; absent under a
    shared kernel, so those hashes are as before).

    Raises:
        UnknownBackend: ``name`` names no backend.
    """
    known(name)
    profile: dict[str, Any] = {"image": sandbox.image_identity(options.image)}
    if name == DOCKER:
        profile.update(isolation_part(sandbox, options))
    return profile
