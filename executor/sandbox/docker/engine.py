"""Engine access: the client (``DOCKER_HOST``, TLS), what the engine is, and the container
calls a run and ``reap`` make (inspect, kill, wait, remove)."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, TypeAlias, TypedDict

import docker  # type: ignore[import-untyped, unused-ignore]
import docker.errors  # type: ignore[import-untyped, unused-ignore]
import docker.utils  # type: ignore[import-untyped, unused-ignore]
import requests.exceptions  # type: ignore[import-untyped, unused-ignore]

from executor.sandbox.conventions import EXPIRES_LABEL, MANAGED_LABEL, POOL_LABEL, UNLABELLED_GRACE
from executor.sandbox.docker.errors import (
    BACKEND_ERRORS,
    explanation,
    is_timeout,
    map_engine_error,
    retry_transient,
    status_code,
)
from executor.sandbox.engines import (
    EngineTraits,
    detect_engine,
    engine_address,
    is_podman,
    unenforced_limits,
)

logger = logging.getLogger(__name__)

APIClient: TypeAlias = docker.APIClient
"""docker-py's low-level client (for modules outside this package: they never import docker-py)."""
DockerClient: TypeAlias = docker.DockerClient
"""docker-py's high-level client (idem)."""

DEFAULT_API_TIMEOUT = 10.0
"""Seconds the default client waits for one Engine API answer."""


def _env_engine_url(environ: Mapping[str, str]) -> str:
    return environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"


def engine_url(client: docker.APIClient) -> str:
    """The address a client talks to, as a user would write it (``unix:///...``)."""
    try:
        adapter = client.get_adapter(client.base_url)
    except (AttributeError, requests.exceptions.InvalidSchema):
        adapter = None  # not a requests-based client: its URL will do
    socket_path = getattr(adapter, "socket_path", None)
    if isinstance(socket_path, str):
        return f"unix://{socket_path}"
    return str(getattr(client, "base_url", "the Docker engine"))


def over_tls(client: docker.APIClient) -> bool:
    """Whether the client talks to its engine over TLS (``DOCKER_TLS_VERIFY``, e.g. GitLab's dind)."""
    return str(getattr(client, "base_url", "")).startswith("https://")


def default_client(
    *, timeout: float = DEFAULT_API_TIMEOUT, environ: Mapping[str, str] | None = None, engine: str | None = None
) -> docker.APIClient:
    """An ``APIClient`` configured like ``docker.from_env`` (``DOCKER_HOST``, TLS vars).

    The address is the ``engine`` setting (``engine``, else the settings
    files' when ``environ`` is not given), else ``HOOKCAGE_ENGINE``, else
    ``DOCKER_HOST`` (:func:`~executor.sandbox.engines.engine_address`):
    Docker's or Podman's socket alike.

    The API version is negotiated with the engine (one ``/version`` call), so
    this contacts the engine.

    Args:
        timeout: seconds to wait for each API answer.
        environ: where to read ``DOCKER_*`` from; ``os.environ`` by default.
        engine: the ``engine`` setting (an address), if set.

    Raises:
        SandboxUnavailable: the engine cannot be reached.
        SandboxError: the environment's Docker settings are unusable.
    """
    env = dict(os.environ if environ is None else environ)
    if engine is None and environ is None:
        engine = _engine_setting()
    address = engine_address(engine, env)
    if address is not None:
        env["DOCKER_HOST"] = address
    url = _env_engine_url(env)
    kwargs: dict[str, Any] = {}
    try:
        # kwargs_from_env reads os.environ when handed an empty mapping.
        kwargs = docker.utils.kwargs_from_env(environment=env or {"DOCKER_HOST": url})
        return EngineClient(version="auto", timeout=timeout, **kwargs)
    except BACKEND_ERRORS as exc:
        raise map_engine_error(exc, step="connect", url=url, tls=bool(kwargs.get("tls"))) from exc


def _engine_setting() -> str | None:
    """The ``engine`` setting of the settings files (``config.toml``), for callers that pass none.

    Raises:
        ConfigError: a settings file or variable is invalid (one line naming it).
    """
    from executor.settings import load_settings

    return load_settings().engine


class EngineClient(docker.APIClient):  # type: ignore[misc, unused-ignore]
    """docker-py's ``APIClient``, but the engine's CA from ``DOCKER_CERT_PATH`` stays the one checked.

    ``requests`` lets ``REQUESTS_CA_BUNDLE`` / ``CURL_CA_BUNDLE`` replace a
    session's CA file on every request (many CI images set them), so a TLS
    engine (GitLab's ``docker:dind``) would be checked against the system
    bundle and refused. The docker CLI never reads those variables.
    """

    def merge_environment_settings(
        self, url: Any, proxies: Any, stream: Any, verify: Any, cert: Any
    ) -> dict[str, Any]:
        settings: dict[str, Any] = super().merge_environment_settings(url, proxies, stream, verify, cert)
        if isinstance(self.verify, str) and verify is None:
            settings["verify"] = self.verify
        return settings


def host_config(client: docker.APIClient, host: Mapping[str, Any]) -> dict[str, Any]:
    """``client.create_host_config(**host)``, where ``userns_mode`` may also be Podman's ``keep-id``.

    docker-py accepts no user-namespace mode but ``host``.
    """
    options = dict(host)
    userns = options.pop("userns_mode", None)
    config: dict[str, Any] = client.create_host_config(**options)
    if userns:
        config["UsernsMode"] = userns
    return config


class StateInfo(TypedDict):
    """The parts of ``State`` that a run's result needs."""

    running: bool
    exit_code: int | None
    oom_killed: bool


def inspect_state(client: docker.APIClient, container: str) -> StateInfo:
    """The container's run state (retried: inspecting is safe to repeat)."""
    inspected = retry_transient(lambda: client.inspect_container(container))
    state = inspected.get("State") or {}
    code = state.get("ExitCode")
    return StateInfo(
        running=bool(state.get("Running")),
        exit_code=code if isinstance(code, int) else None,
        oom_killed=bool(state.get("OOMKilled")),
    )


def remove_container_quietly(client: docker.APIClient, container: str) -> bool:
    """Remove a container (force); ``False`` when it was already gone."""

    def call() -> bool:
        try:
            client.remove_container(container, force=True, v=True)
        except docker.errors.NotFound:
            return False
        except docker.errors.APIError as exc:
            if status_code(exc) == 409 and "in progress" in explanation(exc):
                return False  # someone else is removing it
            raise
        return True

    return retry_transient(call)


def kill_container(client: docker.APIClient, container: str) -> None:
    """SIGKILL a container by id; a container that already stopped is fine."""

    def call() -> None:
        try:
            client.kill(container)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
            if status_code(exc) != 409:  # 409: not running any more
                raise

    retry_transient(call)


def wait_container(client: docker.APIClient, container: str, timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for a container to stop; False if it did not."""
    try:
        client.wait(container, timeout=timeout)
    except (requests.exceptions.Timeout, requests.exceptions.ConnectionError) as exc:
        if is_timeout(exc):
            return False
        raise
    return True


def _finished_at(client: docker.APIClient, entry: Mapping[str, Any]) -> float:
    """When a stopped container stopped (Unix time); its creation if it never ran."""
    created = float(entry.get("Created") or 0)
    inspected = client.inspect_container(entry["Id"])
    finished = str((inspected.get("State") or {}).get("FinishedAt") or "")
    if finished.startswith("0001-") or not finished:
        return created
    # RFC 3339 with nanoseconds; fromisoformat takes at most microseconds.
    stamp, _, fraction = finished.rstrip("Z").partition(".")
    parsed = datetime.fromisoformat(stamp).replace(tzinfo=UTC)
    return parsed.timestamp() + float(f"0.{fraction or 0}"[:8])


def _run_is_over(
    client: docker.APIClient, entry: Mapping[str, Any], now: float, include_running_expired: bool
) -> bool:
    labels = entry.get("Labels") or {}
    try:
        expires: float | None = float(labels[EXPIRES_LABEL])
    except (KeyError, TypeError, ValueError):
        expires = None
    expired = expires is not None and expires <= now
    state = entry.get("State")
    if state in ("exited", "dead", "created"):
        if expires is None or (POOL_LABEL in labels and not expired):
            # Not a hook run (an image build, say), or a warm pool's container
            # that ended (its pool may have been killed; a pooled container
            # never starts again): its owner may still be reading it.
            return _finished_at(client, entry) + UNLABELLED_GRACE <= now
        return expired
    if state == "removing":
        return False
    return include_running_expired and expired


def reap(
    client: docker.APIClient,
    *,
    include_running_expired: bool = True,
    everything: bool = False,
    now: float | None = None,
    labels: Mapping[str, str] | None = None,
) -> int:
    """Remove the ``hookcage.managed`` containers whose run is over.

    Over means: stopped (exited, dead or never started) and past its
    ``hookcage.expires`` (until then its run may still be reading the exit
    code), or, with ``include_running_expired``, still running past it.
    Stopped containers without the label count as over a minute after they
    stopped; running ones without it are never touched.

    Args:
        client: the Engine API client.
        include_running_expired: also remove running containers past expiry.
        everything: remove every hookcage container, runs in flight included
            (``hookcage gc --all``).
        now: the current Unix time (for tests).
        labels: only containers that also carry these labels (one engine
            may serve several users, sessions or services: touch only yours).

    Returns:
        How many containers this call removed.

    Raises:
        SandboxUnavailable: the engine cannot be reached.
        SandboxError: the engine refused to list containers.
    """
    now = time.time() if now is None else now
    url = engine_url(client)
    wanted = [f"{MANAGED_LABEL}=true", *(f"{name}={value}" for name, value in (labels or {}).items())]
    try:
        listed = retry_transient(
            lambda: client.containers(all=True, filters={"label": wanted})
        )
    except BACKEND_ERRORS as exc:
        raise map_engine_error(exc, step="list", url=url) from exc
    removed = 0
    for entry in listed:
        try:
            if everything or _run_is_over(client, entry, now, include_running_expired):
                removed += remove_container_quietly(client, entry["Id"])
        except docker.errors.NotFound:
            continue  # gone meanwhile
        except BACKEND_ERRORS as exc:
            # Left for the next reap; one stuck container must not stop the rest.
            logger.warning("could not remove container %s: %s", str(entry.get("Id"))[:12], exc)
    return removed


class EngineInfo(TypedDict):
    """What ``engine_info`` reports about the Docker engine."""

    version: str
    api_version: str
    os: str
    kernel: str
    runtimes: list[str]
    default_runtime: str
    cgroup_version: str
    cgroup_driver: str
    storage_driver: str
    memory_limit: bool
    swap_limit: bool
    pids_limit: bool
    cpu_limit: bool
    rootless: bool
    security_options: list[str]
    warnings: list[str]
    engine: str
    """``docker`` or ``podman``."""
    engine_name: str
    """E.g. ``Podman 4.3.1 (rootless)``."""
    engine_notes: list[str]
    """What hookcage does differently on this engine, one line each."""
    unenforced_limits: list[str]
    """The profile's limits the engine would accept and ignore (a rootless Podman without the controllers)."""


def engine_info(client: docker.APIClient) -> EngineInfo:
    """The engine's version and what of the sandbox profile it can enforce.

    Raises:
        SandboxUnavailable: the engine cannot be reached.
        SandboxError: the engine refused to answer.
    """
    version, info, traits = _described(client)
    security = [str(s) for s in info.get("SecurityOptions") or []]
    missing = unenforced_limits(traits)
    return EngineInfo(
        version=str(version.get("Version", "")),
        api_version=str(version.get("ApiVersion", "")),
        os=str(info.get("OperatingSystem", "")),
        kernel=str(info.get("KernelVersion", "")),
        runtimes=sorted(traits.runtimes) if traits.kind == "podman" else sorted(info.get("Runtimes") or {}),
        default_runtime=traits.default_runtime if traits.kind == "podman" else str(info.get("DefaultRuntime", "")),
        cgroup_version=str(info.get("CgroupVersion", "")),
        cgroup_driver=str(info.get("CgroupDriver", "")),
        storage_driver=str(info.get("Driver", "")),
        memory_limit=bool(info.get("MemoryLimit")) and "memory" not in missing,
        swap_limit=bool(info.get("SwapLimit")) and "memory" not in missing,
        pids_limit=bool(info.get("PidsLimit")) and "pids" not in missing,
        cpu_limit=bool(info.get("CpuCfsQuota")) and "cpu" not in missing,
        rootless=traits.rootless,
        security_options=security,
        warnings=[str(w) for w in info.get("Warnings") or []],
        engine=traits.kind,
        engine_name=traits.name,
        engine_notes=list(traits.notes),
        unenforced_limits=missing,
    )


_LIBPOD_ERRORS: tuple[type[BaseException], ...] = (*BACKEND_ERRORS, ValueError)
"""What asking ``/libpod/info`` can raise (ValueError: an answer that is not JSON)."""


def _libpod_info(client: docker.APIClient) -> dict[str, Any] | None:
    """Podman's own ``/libpod/info`` (rootless, delegated cgroup controllers); None when it does not answer.

    Podman's Docker-compatible ``/info`` says neither: its ``SecurityOptions``
    lack ``rootless`` (4.3) and its ``MemoryLimit`` is true where a rootless
    engine sets no limit at all.
    """
    try:
        response = client.get(f"{client.base_url}/v4.0.0/libpod/info", timeout=client.timeout)
        answer = client._result(response, json=True)
    except _LIBPOD_ERRORS as exc:
        logger.debug("no /libpod/info from %s: %s", engine_url(client), exc)
        return None
    return answer if isinstance(answer, dict) else None


def engine_traits(client: docker.APIClient) -> EngineTraits:
    """What kind of engine ``client`` talks to (:func:`~executor.sandbox.engines.detect_engine`).

    Raises:
        SandboxUnavailable: the engine cannot be reached.
        SandboxError: the engine refused to answer.
    """
    return _described(client)[2]


def _described(client: docker.APIClient) -> tuple[dict[str, Any], dict[str, Any], EngineTraits]:
    """The engine's ``/version``, ``/info`` and the traits read from them (and Podman's ``/libpod/info``).

    Raises:
        SandboxUnavailable: the engine cannot be reached.
        SandboxError: the engine refused to answer.
    """
    try:
        version = retry_transient(client.version)
        info = retry_transient(client.info)
    except BACKEND_ERRORS as exc:
        raise map_engine_error(exc, step="describe", url=engine_url(client)) from exc
    return version, info, detect_engine(version, info, _libpod_info(client) if is_podman(version) else None)
