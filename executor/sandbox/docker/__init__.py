"""The docker backend: one fresh, hardened, network-less container per hook run.

The only part of hookcage that imports docker-py (a unit test checks). Its
modules, each with one job:

- :mod:`~executor.sandbox.docker.frames`: the Engine's multiplexed attach
  stream (pure demultiplexer, capped buffers) and the socket pump.
- :mod:`~executor.sandbox.docker.errors`: every engine exception mapped to
  hookcage's in one place; retrying the transient ones.
- :mod:`~executor.sandbox.docker.engine`: the client (``DOCKER_HOST``, TLS),
  what the engine is, and inspect/kill/wait/remove/``reap``.
- :mod:`~executor.sandbox.docker.profile`: what a container looks like
  (``DockerProfile``, mounts, environment, ``container_args``).
- :mod:`~executor.sandbox.docker.backend`: ``DockerSandbox``, one run (and
  ``docker_options``: its arguments from the settings).

The labels, margins and stream ids the pure pool helpers share live in
:mod:`executor.sandbox.conventions` (no docker-py). Everything other modules
import is re-exported here: ``from executor.sandbox.docker import X`` works.
"""

from executor.sandbox.conventions import (
    DEFAULT_IMAGE,
    EXPIRES_LABEL,
    EXPIRY_MARGIN,
    MANAGED_LABEL,
    POOL_LABEL,
    RUNNER_REPOSITORY,
    SELF_END_GRACE,
    SELF_END_PIDS,
    STDERR,
    STDIN,
    STDOUT,
    SYSTEMERR,
    UNLABELLED_GRACE,
)
from executor.sandbox.docker.backend import DockerSandbox, docker_options
from executor.sandbox.docker.engine import (
    DEFAULT_API_TIMEOUT,
    APIClient,
    DockerClient,
    EngineClient,
    EngineInfo,
    StateInfo,
    default_client,
    engine_info,
    engine_traits,
    engine_url,
    host_config,
    over_tls,
    reap,
    remove_container_quietly,
)
from executor.sandbox.docker.errors import (
    BACKEND_ERRORS,
    ENGINE_HINT,
    TLS_HINT,
    APIError,
    NotFound,
    is_transient,
    map_engine_error,
    retry_transient,
)
from executor.sandbox.docker.frames import (
    FRAME_HEADER_SIZE,
    CappedBuffer,
    FrameError,
    FrameState,
    PumpEnd,
    buffered,
    close_attached,
    demux_frames,
    half_close,
    pump,
    pump_frames,
    raw_socket,
)
from executor.sandbox.docker.profile import (
    BASE_ENV,
    NOBODY,
    DockerProfile,
    container_args,
    default_user,
    engine_source,
    run_mounts,
    self_ending,
    staged_tree,
)

__all__ = [
    "BACKEND_ERRORS",
    "BASE_ENV",
    "DEFAULT_API_TIMEOUT",
    "DEFAULT_IMAGE",
    "ENGINE_HINT",
    "EXPIRES_LABEL",
    "EXPIRY_MARGIN",
    "FRAME_HEADER_SIZE",
    "MANAGED_LABEL",
    "NOBODY",
    "POOL_LABEL",
    "RUNNER_REPOSITORY",
    "SELF_END_GRACE",
    "SELF_END_PIDS",
    "STDERR",
    "STDIN",
    "STDOUT",
    "SYSTEMERR",
    "TLS_HINT",
    "UNLABELLED_GRACE",
    "APIClient",
    "APIError",
    "CappedBuffer",
    "DockerClient",
    "DockerProfile",
    "DockerSandbox",
    "EngineClient",
    "EngineInfo",
    "FrameError",
    "FrameState",
    "NotFound",
    "PumpEnd",
    "StateInfo",
    "buffered",
    "close_attached",
    "container_args",
    "default_client",
    "default_user",
    "demux_frames",
    "docker_options",
    "engine_info",
    "engine_source",
    "engine_traits",
    "engine_url",
    "half_close",
    "host_config",
    "is_transient",
    "map_engine_error",
    "over_tls",
    "pump",
    "pump_frames",
    "raw_socket",
    "reap",
    "remove_container_quietly",
    "retry_transient",
    "run_mounts",
    "self_ending",
    "staged_tree",
]
