"""Sandbox backends by name: how each is built, what it checks, what it adds to the trust hash.

A hook's ``sandbox.backend`` (``docker``, ``host``) names a :class:`Backend`
here; the executor, the daemon and the CLI look it up instead of testing
names. A backend declares:

- ``options``: the per-hook ``sandbox`` option names it honours;
- ``build(settings)``: the sandbox an in-process executor uses (cold: a fresh
  container per run for docker); ``pooled(settings)``: the long-lived
  variant the daemon shares between dispatches (docker's warm pool), and
  ``per_caller(settings, environ)`` for a backend the daemon must build
  anew for each caller (host: it runs with the caller's environment);
- ``checks``: what ``hookcage doctor`` checks for it, each a callable
  ``(settings, probe) -> iterable of Check`` (printed as ``[ok]``, ``[!!]``
  with a fix, or ``[..]``; ``probe`` shares what one check made with the
  next, such as the engine's client);
- ``profile``: its part of a hook's trust profile, each a callable
  ``(sandbox, options) -> mapping`` merged into the profile that is hashed
  (the image's id; the isolation of the runtime).

Importing this module loads no backend: builders and checks import their
backend when called (``lazy("module:function")`` names one by path), so
``hookcage`` commands that never run a hook never load docker-py.

To add a doctor check or a profile part to a registered backend, add one
entry to its ``checks`` or ``profile`` tuple below (order is the order
``doctor`` prints them in). To add a backend, ``register(Backend(...))``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

from executor.core.options import SandboxOptions
from executor.errors import SandboxError
from executor.sandbox.base import Sandbox

if TYPE_CHECKING:
    from executor.settings import Settings

_T = TypeVar("_T")


class UnknownBackend(SandboxError):
    """A backend name no backend is registered under."""


@dataclass(frozen=True)
class Check:
    """One line (or a few) of ``hookcage doctor``.

    Attributes:
        what: what was checked, or what is so (for ``ok=None``).
        ok: True ``[ok]``, False ``[!!]`` (a problem: counted, ``fix`` shown),
            None ``[..]`` (information).
        fix: what to do when not ok.
        detail: further lines, printed indented under it.
        stop: nothing after this can be checked (the engine is unreachable):
            the doctor stops here and fails.
    """

    what: str
    ok: bool | None = None
    fix: str = ""
    detail: tuple[str, ...] = ()
    stop: bool = False

    def lines(self) -> list[str]:
        """The check as ``doctor`` prints it."""
        mark = {True: "ok", False: "!!", None: ".."}[self.ok]
        out = [f"[{mark}] {self.what}"]
        if self.ok is False and self.fix:
            out.append(f"     fix: {self.fix}")
        out.extend(f"     {line}" for line in self.detail)
        return out


class Provisioning(Protocol):
    """What the doctor's checks ask of image provisioning (:mod:`executor.provision`, which the sandbox never imports)."""

    def runner_image_current(self, client: Any) -> bool:
        """Whether the runner image was built from this version's recipe (one inspect call)."""

    def offline_build_tool(self) -> tuple[bool, str]:
        """Whether an offline build can have a debootstrap, and one line saying how."""


class Probe:
    """What the checks of one ``doctor`` run share: things made once, closed at the end.

    The first check that needs the engine's client makes it with
    ``probe.get("docker.client", make, close=...)``; later ones get the same.
    ``provisioning`` answers the checks about building images; without it
    (this class as is) those checks are left out: ``hookcage doctor`` uses
    :class:`executor.provision.doctor.Probe`, which has it.
    """

    provisioning: Provisioning | None = None

    def __init__(self) -> None:
        self._made: dict[str, Any] = {}
        self._closers: list[Callable[[], None]] = []

    def get(self, key: str, make: Callable[[], _T], *, close: Callable[[_T], None] | None = None) -> _T:
        """The thing made under ``key``, made now by ``make`` if it was not yet (exceptions pass through)."""
        if key not in self._made:
            made = self._made[key] = make()
            if close is not None:
                self._closers.append(lambda: close(made))
        return cast(_T, self._made[key])

    def has(self, key: str) -> bool:
        """Whether something was made under ``key``."""
        return key in self._made

    def close(self) -> None:
        """Close what was made, newest first; a failure to close is not the doctor's concern."""
        while self._closers:
            closer = self._closers.pop()
            try:
                closer()
            except Exception:  # best effort: the doctor has said what it found
                continue


CheckFn = Callable[["Settings", Probe], Iterable[Check]]
"""A doctor check: ``(settings, probe) -> checks``."""
ProfilePart = Callable[[Sandbox, SandboxOptions], Mapping[str, Any]]
"""A backend's part of a hook's trust profile: ``(sandbox, hook's options) -> keys to merge``."""
Builder = Callable[["Settings"], Sandbox]


@dataclass(frozen=True)
class Backend:
    """A sandbox backend as hookcage knows it (see the module docstring)."""

    name: str
    summary: str
    options: frozenset[str]
    build: Builder
    pooled: Builder | None = None
    """The daemon's shared variant; None: ``build``."""
    per_caller: Callable[[Settings, Mapping[str, str]], Sandbox] | None = None
    """Built for each dispatch with the caller's environment, never shared; None: shared."""
    engine: bool = False
    """Its runs are containers on an engine (an aborted dispatch removes them by label)."""
    contained: bool = True
    """Its runs are kept from the host; False (host): they run with the user's own rights."""
    checks: tuple[CheckFn, ...] = ()
    profile: tuple[ProfilePart, ...] = ()

    def build_pooled(self, settings: Settings) -> Sandbox:
        """The daemon's variant (``pooled``, else ``build``)."""
        return (self.pooled or self.build)(settings)

    def trust_profile(self, sandbox: Sandbox, options: SandboxOptions) -> dict[str, Any]:
        """This backend's keys of a hook's trust profile (``profile`` parts, merged in order)."""
        merged: dict[str, Any] = {}
        for part in self.profile:
            merged.update(part(sandbox, options))
        return merged


_BACKENDS: dict[str, Backend] = {}


def register(backend: Backend, *, replace: bool = False) -> Backend:
    """Add ``backend`` under its name (``replace``: over one registered before).

    Raises:
        ValueError: the name is taken and ``replace`` is false.
    """
    if backend.name in _BACKENDS and not replace:
        raise ValueError(f"sandbox backend {backend.name!r} is registered already")
    _BACKENDS[backend.name] = backend
    return backend


def backend(name: str) -> Backend:
    """The backend registered as ``name``.

    Raises:
        UnknownBackend: none is (one line naming it and the registered ones).
    """
    try:
        return _BACKENDS[name]
    except KeyError:
        raise UnknownBackend(f"unknown sandbox backend {name!r}; registered: {', '.join(sorted(_BACKENDS))}") from None


def find(name: str) -> Backend | None:
    """The backend registered as ``name``, or None (e.g. for a test's ``FakeSandbox``)."""
    return _BACKENDS.get(name)


def backends() -> tuple[Backend, ...]:
    """Every registered backend, in registration order."""
    return tuple(_BACKENDS.values())


def lazy(target: str) -> Callable[..., Any]:
    """A callable that imports ``"package.module:function"`` on first call and calls it.

    For ``checks``, ``profile`` and builders: registering a backend loads
    nothing of it.
    """
    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"lazy target {target!r} is not 'module:function'")

    def call(*args: Any, **kwargs: Any) -> Any:
        return getattr(importlib.import_module(module_name), attribute)(*args, **kwargs)

    call.__name__ = attribute
    call.__qualname__ = target
    return call


# -- the built-in backends -------------------------------------------------------------


def docker_options(settings: Settings) -> dict[str, Any]:
    """The ``DockerSandbox`` arguments the settings give (the sandbox profile)."""
    return {
        "image": settings.image, "runtime": settings.runtime, "memory": settings.memory,
        "cpus": settings.cpus, "pids": settings.pids, "tmpfs_size": settings.tmpfs_size,
        "path_map": settings.path_map, "engine": settings.engine,
    }


def _build_host(settings: Settings) -> Sandbox:
    from executor.sandbox.host import HostSandbox

    return HostSandbox()


def _host_for_caller(settings: Settings, environ: Mapping[str, str]) -> Sandbox:
    from executor.sandbox.host import HostSandbox

    return HostSandbox(base_env=environ)


def _build_docker(settings: Settings) -> Sandbox:
    from executor.sandbox.docker import DockerSandbox

    return DockerSandbox(**docker_options(settings))


def _build_docker_pooled(settings: Settings) -> Sandbox:
    """``docker`` with a warm pool; ``pool_size`` (or ``pool_total``) 0: the cold ``DockerSandbox``.

    The pool's overlay files go next to the executor's own staged files
    (``$HOOKCAGE_HOME/staging``), where the engine already binds them from.
    """
    if settings.pool_size == 0 or settings.pool_total == 0:
        return _build_docker(settings)
    from executor.sandbox.pool import PooledDockerSandbox

    staging = settings.home / "staging"
    staging.mkdir(parents=True, exist_ok=True, mode=0o700)
    return PooledDockerSandbox(
        pool_size=settings.pool_size, pool_total=settings.pool_total,
        idle_timeout=settings.pool_idle_timeout, staging_dir=str(staging),
        **docker_options(settings),
    )


def image_part(sandbox: Sandbox, options: SandboxOptions) -> Mapping[str, Any]:
    """The image the hook runs in, by id (``sha256:...``): a retagged image needs a new review."""
    return {"image": sandbox.image_identity(options.image)}


DOCKER_OPTIONS = frozenset({"image", "workspace", "network", "mounts", "memory", "cpus", "pids", "env", "home"})
"""What a ``docker`` hook's ``sandbox`` object may set (besides ``backend``)."""

register(Backend(
    name="docker",
    summary="a fresh hardened, network-less container per run (warm pool in the daemon)",
    options=DOCKER_OPTIONS,
    build=_build_docker,
    pooled=_build_docker_pooled,
    engine=True,
    checks=(
        lazy("executor.sandbox.docker.doctor:engine_checks"),
        lazy("executor.sandbox.docker.doctor:runtime_checks"),
        lazy("executor.sandbox.docker.doctor:offline_build_checks"),
        lazy("executor.sandbox.docker.doctor:path_map_checks"),
        lazy("executor.sandbox.docker.doctor:workspace_checks"),
    ),
    profile=(
        image_part,
        lazy("executor.sandbox.runtimes:isolation_part"),
    ),
))

register(Backend(
    name="host",
    summary="a plain subprocess with your own rights (user and managed hooks that ask only)",
    options=frozenset(),  # `sandbox: "host"`: nothing else to set
    build=_build_host,
    per_caller=_host_for_caller,
    contained=False,
    profile=(
        image_part,
    ),
))
