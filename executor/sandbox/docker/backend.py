"""The docker backend: one fresh, hardened, network-less container per hook run.

How a run works (docker-py's low-level ``APIClient``; never the CLI, never
``containers.run``, which leaves ``StdinOnce`` off and loses end-of-input):

1. ``container_args`` turns the profile and the request into create
   arguments (pure apart from a few host-path checks; unit-tested).
2. create the container (``/bin/sh -c COMMAND``, stdin open once), retried
   on transient engine errors with a fresh name each time.
3. attach to stdin/stdout/stderr BEFORE start: nothing the hook prints can be
   missed, and no hook output can sit in the HTTP layer's buffer.
4. start, exactly once (never retried: a hook must not run twice). The
   deadline is the moment before start plus the request's timeout.
5. pump: write stdin and half-close the socket's write side (the hook sees
   end-of-input), while reading the multiplexed stream through a selector
   bounded by the deadline. ``demux_frames`` (pure) splits the 8-byte-header
   frames, wherever the reads cut them; each stream keeps ``output_cap``
   bytes and discards the rest, so memory stays bounded whatever the hook
   prints.
6. at end of stream, wait for the exit within the deadline; at the deadline,
   kill the container by id (its init process takes every child with it).
7. inspect (exit code, ``OOMKilled``) and remove (force) in ``finally``.

Engine errors (docker-py's own and the ``requests``/socket ones it lets
through) are mapped to hookcage's in one place, ``map_engine_error``. Every
container carries ``hookcage.managed=true`` and ``hookcage.expires`` so that
``reap`` can remove what a crashed run left behind.
"""

from __future__ import annotations

import logging
import os
import secrets
import threading
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import docker  # type: ignore[import-untyped, unused-ignore]

from executor.core.pathmap import IDENTITY, PathMap, with_resolved_keys
from executor.errors import SandboxUnavailable
from executor.sandbox.base import RunRequest, RunResult, Sandbox
from executor.sandbox.conventions import DEFAULT_IMAGE
from executor.sandbox.docker.engine import (
    StateInfo,
    default_client,
    engine_traits,
    engine_url,
    host_config,
    inspect_state,
    kill_container,
    over_tls,
    reap,
    remove_container_quietly,
    wait_container,
)
from executor.sandbox.docker.errors import BACKEND_ERRORS, map_engine_error, retry_transient
from executor.sandbox.docker.frames import CappedBuffer, close_attached, pump, raw_socket
from executor.sandbox.docker.profile import DockerProfile, container_args
from executor.sandbox.engines import (
    PODMAN,
    EngineTraits,
    limits_refusal,
    oom_unreported,
    podman_seccomp_file,
    strip_engine_noise,
)
from executor.sandbox.paths import detect_path_map, resolve_path_map
from executor.sandbox.runtimes import AUTO, resolve_runtime

if TYPE_CHECKING:
    from executor.settings import Settings

logger = logging.getLogger(__name__)


class DockerSandbox(Sandbox):
    """Runs each hook in a fresh hardened container through the Engine API."""

    name = "docker"

    def __init__(
        self,
        *,
        image: str | None = None,
        runtime: str | None = None,
        memory: str = "512m",
        cpus: float = 1.0,
        pids: int = 256,
        tmpfs_size: str = "64m",
        file_size: str = "64m",
        hostname: str = "hookcage",
        user: str | None = None,
        path_map: PathMap | Mapping[str, str] | None = None,
        client: docker.APIClient | None = None,
        reap_on_start: bool = True,
        engine: str | None = None,
    ) -> None:
        """Set up the backend; no engine call happens on this thread.

        Args:
            image: the default image, ``hookcage/runner:<version>`` when None
                (a hook's ``options.image`` overrides it).
            runtime: the ``runtime`` setting: ``auto``/None (gVisor's ``runsc`` when the
                engine has it, else the engine's default; resolved once, with the
                client) or a runtime registered with the engine (e.g. ``runc``).
            memory: memory limit, swap included (no swap), e.g. ``512m``.
            cpus: CPUs the container may use (fractional).
            pids: most processes and threads at once.
            tmpfs_size: size of the writable ``/tmp``.
            file_size: the largest file a hook may write (``RLIMIT_FSIZE``).
            hostname: the container's fixed hostname.
            user: ``uid:gid`` to run as; the invoking user by default, or
                nobody (65534) when that is root.
            path_map: where the engine sees hookcage's paths
                (:mod:`executor.sandbox.paths`): ``{path here: path on the
                engine's host}``; ``{}``: the same paths; None: detected from
                hookcage's own container (with the first engine call) when it
                runs in one.
            client: an Engine API client; by default one from ``DOCKER_HOST``
                is made on first use (and closed by ``close()``).
            reap_on_start: remove stale hookcage containers once, in the
                background, best-effort.
            engine: the ``engine`` setting (an address, over ``DOCKER_HOST``)
                for the default client.
        """
        self._runtime_setting = runtime
        self.profile = DockerProfile(
            image=image or DEFAULT_IMAGE,
            runtime=None if (runtime or AUTO).strip() == AUTO else (runtime or "").strip(),  # auto: with the client
            memory=memory,
            cpus=cpus,
            pids=pids,
            tmpfs_size=tmpfs_size,
            file_size=file_size,
            hostname=hostname,
            user=user,
        )
        self._paths: PathMap | None = None
        """The map in force; None until detected (with the first engine call)."""
        self._paths_applied = False
        if isinstance(path_map, PathMap):
            self._paths = path_map
        elif path_map is not None:
            self._paths = resolve_path_map(path_map, None)  # no engine call for a setting; SandboxError if invalid
        self._client = client
        self._engine = engine
        self._traits: EngineTraits | None = None
        """What the engine is (Docker, Podman, rootless): asked once, with the first engine call."""
        self._owns_client = client is None
        self._lock = threading.Lock()
        self._reaper: threading.Thread | None = None
        if reap_on_start:
            self._reaper = threading.Thread(
                target=self._reap_quietly, name="hookcage-reap", daemon=True
            )
            self._reaper.start()

    @property
    def client(self) -> docker.APIClient:
        """The Engine API client, made on first use.

        Raises:
            SandboxUnavailable: the engine cannot be reached.
        """
        with self._lock:
            if self._client is None:
                self._client = default_client(engine=self._engine)
            if self._traits is None:
                # Once: Podman needs a few more container args, and a rootless one may hold no limit.
                self._traits = engine_traits(self._client)
                self.profile = replace(self.profile, engine=self._traits, seccomp=_seccomp_for(self._traits))
            if refusal := limits_refusal(self._traits, engine_url(self._client)):
                raise SandboxUnavailable(refusal)
            if not self.profile.counted_stdin and over_tls(self._client):
                # A TLS terminator in front of the engine may not carry a half-close: count stdin.
                self.profile = replace(self.profile, counted_stdin=True)
            if not self._paths_applied:
                # Once, before any mount is built: where the engine sees hookcage's paths.
                if self._paths is None:
                    self._paths = detect_path_map(self._client)
                from executor.sandbox.pathcheck import verify_path_map

                verify_path_map(self._client, self._paths, probe_sandbox)  # a wrong setting: every run refused, one line
                if self._paths.active:
                    self.profile = replace(self.profile, paths=with_resolved_keys(self._paths, os.path.realpath))
                self._paths_applied = True
            if self.profile.runtime is None:
                # Once per sandbox: what `auto` is on this engine (its traits: on Podman, only runtimes it has).
                self.profile = replace(self.profile, runtime=resolve_runtime(
                    self._runtime_setting, list(self._traits.runtimes), self._traits.default_runtime))
            return self._client

    def runtime(self) -> str:
        """The runtime every container of this sandbox gets: the setting, or what ``auto`` resolved to.

        Raises:
            SandboxUnavailable: ``auto`` and the engine cannot be reached.
        """
        if self.profile.runtime is None:
            self.client  # noqa: B018 -- resolves it
        return str(self.profile.runtime)

    def image_identity(self, image: str | None) -> str:
        """The id (``sha256:...``) of ``image`` (or the default image) in the engine.

        Raises:
            SandboxUnavailable: the engine cannot be reached or the image is missing.
        """
        name = image or self.profile.image
        client = self.client
        try:
            return str(retry_transient(lambda: client.inspect_image(name))["Id"])
        except BACKEND_ERRORS as exc:
            raise map_engine_error(exc, step="inspect", url=engine_url(client), image=name) from exc

    def _reap_quietly(self) -> None:
        try:
            count = reap(self.client)
        except Exception as exc:  # best-effort: the next start tries again
            logger.debug("reaping stale containers failed: %s", exc)
        else:
            if count:
                logger.debug("removed %d stale hookcage containers", count)

    def verify_workspace(self, request: RunRequest) -> None:
        """Refuse a run whose workspace the engine's host does not have at its path.

        Only for an engine elsewhere (``tcp://``/``ssh://``, or a path map in
        force), once per process and workspace: a marker file written in the
        workspace must be seen from a container that mounts it as hooks do
        (:func:`executor.sandbox.pathcheck.verify_workspace`), never an empty
        directory mounted silently.

        Raises:
            SandboxError: the engine's host has another directory there, or none.
            SandboxUnavailable: the engine or the image is missing.
        """
        from executor.sandbox.pathcheck import verify_workspace

        client = self.client
        verify_workspace(self, request, engine_url(client), self._paths or IDENTITY)

    def run(self, request: RunRequest) -> RunResult:
        """Run one hook command in a fresh container (see the module docstring).

        The result's ``duration`` runs from creation to the exit being known
        (removal excluded); ``exit_code`` is None after a timeout or OOM kill.

        Raises:
            SandboxUnavailable: the engine is unreachable, the image or runtime missing.
            SandboxError: the engine refused or broke off this run.
        """
        self.verify_workspace(request)
        began = time.monotonic()
        client = self.client
        image = request.options.image or self.profile.image
        url = engine_url(client)
        step = "create"
        container: str | None = None
        try:
            container = self._create(client, request)
            step = "attach"
            attached = client.attach_socket(
                container, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
            )
            try:
                sock = raw_socket(attached)
                step = "start"
                deadline = time.monotonic() + request.timeout
                client.start(container)
                step = "stream from"
                stdout = CappedBuffer(request.output_cap)
                stderr = CappedBuffer(request.output_cap)
                # Over TLS the container counts its stdin (profile.counted_stdin): no half-close.
                ended = pump(sock, request.stdin, deadline, stdout, stderr,
                             end_input=not self.profile.counted_stdin)
            finally:
                close_attached(attached)
            step = "wait for"
            timed_out, state = self._finish(client, container, ended, deadline)
            if oom_unreported(self.profile.engine, exit_code=state["exit_code"], oom_killed=state["oom_killed"],
                              timed_out=timed_out):
                state = {**state, "oom_killed": True}  # Podman on cgroup v1: conmon misses it (engines.py)
            duration = time.monotonic() - began
        except BACKEND_ERRORS as exc:
            raise map_engine_error(
                exc, step=step, url=url, image=image, runtime=self.profile.runtime
            ) from exc
        finally:
            if container is not None:
                self._discard(client, container)
        return RunResult(
            exit_code=None if timed_out or state["oom_killed"] else state["exit_code"],
            stdout=stdout.getvalue(),
            stderr=strip_engine_noise(self.profile.engine, stderr.getvalue()),
            duration=duration,
            timed_out=timed_out,
            oom_killed=state["oom_killed"],
            stdout_truncated=stdout.truncated,
            stderr_truncated=stderr.truncated,
        )

    def _create(self, client: docker.APIClient, request: RunRequest) -> str:
        """Create the run's container (a fresh name on each try); its id."""

        def call() -> str:
            name = f"hookcage-{secrets.token_hex(8)}"
            create, host = container_args(self.profile, request, name=name, now=time.time())
            created = client.create_container(
                host_config=host_config(client, host), **create
            )
            return str(created["Id"])

        return retry_transient(call, conflict=True)

    @staticmethod
    def _finish(
        client: docker.APIClient, container: str, ended: bool, deadline: float
    ) -> tuple[bool, StateInfo]:
        """Make sure the container stopped by ``deadline`` (killing it if not).

        Returns:
            Whether the run timed out, and the container's final state.
        """
        if ended:
            # The stream ends when the init process exits; the engine may
            # record the exit a moment later.
            state = inspect_state(client, container)
            if not state["running"]:
                return False, state
            remaining = deadline - time.monotonic()
            if remaining > 0 and wait_container(client, container, remaining):
                return False, inspect_state(client, container)
        kill_container(client, container)
        return True, inspect_state(client, container)

    @staticmethod
    def _discard(client: docker.APIClient, container: str) -> None:
        try:
            remove_container_quietly(client, container)
        except BACKEND_ERRORS as exc:
            # The result (or the error in flight) matters more; reap() removes
            # it later, as its hookcage.expires label says.
            logger.warning("could not remove container %s: %s", container[:12], exc)

    def close(self) -> None:
        """Close the client if this sandbox made it."""
        if self._reaper is not None:
            self._reaper.join(timeout=2.0)
        with self._lock:
            if self._owns_client and self._client is not None:
                self._client.close()
                self._client = None



def docker_options(settings: Settings) -> dict[str, Any]:
    """The ``DockerSandbox`` arguments the settings give (the sandbox profile)."""
    return {
        "image": settings.image, "runtime": settings.runtime, "memory": settings.memory,
        "cpus": settings.cpus, "pids": settings.pids, "tmpfs_size": settings.tmpfs_size,
        "path_map": settings.path_map, "engine": settings.engine,
    }

def probe_sandbox(client: docker.APIClient, image: str | None) -> DockerSandbox:
    """The sandbox a path map probe runs in (:mod:`executor.sandbox.pathcheck`): ``image`` (None: the runner image)."""
    # No map: the probe binds the engine's path exactly as the entry gives it. The engine's own
    # default runtime, not gVisor: runsc shows a bind mount's root with an inode of its own (1),
    # and the inode is what tells the engine's directory from another one.
    try:
        runtime = str(client.info().get("DefaultRuntime") or "") or None
    except Exception:  # the probe's own run says what is wrong with the engine
        runtime = None
    return DockerSandbox(image=image or DEFAULT_IMAGE, user=f"{os.getuid()}:{os.getgid()}", path_map=IDENTITY,
                         client=client, reap_on_start=False, memory="128m", runtime=runtime)


def _seccomp_for(traits: EngineTraits) -> str | None:
    """The seccomp profile file containers get on this engine: on Podman, its default with namespaces refused.

    Raises:
        SandboxUnavailable: Podman's default profile cannot be read or the file written (hooks would
            otherwise run with ``unshare`` allowed).
    """
    if traits.kind != PODMAN:
        return None
    from executor.cachedir import cache_dir

    try:
        return podman_seccomp_file(cache_dir())
    except (OSError, ValueError) as exc:
        raise SandboxUnavailable(
            f"cannot make the seccomp profile hooks need on Podman (its default lets them create namespaces): {exc}"
        ) from exc
