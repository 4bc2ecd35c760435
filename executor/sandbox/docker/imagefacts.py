"""What the engine holds of an image: its id and labels, whether it is there (never builds, never pulls).

The run-time side of images: ``hookcage doctor`` and the gVisor check ask
these; the builders (:mod:`executor.provision`) ask them too, and raise the
same :class:`ImageBuildError` for an engine that fails while they build.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, TypeAlias

from executor.errors import SandboxError, SandboxUnavailable
from executor.sandbox.docker.engine import APIClient, DockerClient
from executor.sandbox.docker.errors import BACKEND_ERRORS, NotFound, map_engine_error

__all__ = [
    "STATX_SHIM_LABEL",
    "Client",
    "ImageBuildError",
    "api_of",
    "engine_errors",
    "image_exists",
    "image_labels",
    "inspect_image",
    "local_image_id",
    "squashed",
]

STATX_SHIM_LABEL = "org.hookcage.statx-shim"
"""Runner image label: ``1`` when the image preloads the statx shim, ``0`` when built without it."""

Client: TypeAlias = "DockerClient | APIClient"
"""Either docker-py client: the high-level one or the low-level ``APIClient``."""


class ImageBuildError(SandboxError):
    """The runner image (or its base) could not be built; the message says what to do."""


def squashed(text: object) -> str:
    """Squash any exception text into one line."""
    return " ".join(str(text).split())


@contextlib.contextmanager
def engine_errors(action: str) -> Iterator[None]:
    """Map docker-py and requests exceptions raised inside to hookcage's, once.

    Whether the engine is reachable at all is decided by the docker backend's
    one mapping table (:func:`executor.sandbox.docker.map_engine_error`); any
    other engine failure while building is an :class:`ImageBuildError`.

    Raises:
        SandboxUnavailable: the engine could not be reached at all.
        ImageBuildError: the engine answered with an error, or stopped answering.
    """
    try:
        yield
    except BACKEND_ERRORS as exc:
        mapped = map_engine_error(exc, step=action, url="DOCKER_HOST")
        if isinstance(mapped, SandboxUnavailable) and not isinstance(exc, NotFound):
            raise mapped from exc
        detail = getattr(exc, "explanation", None) or exc
        raise ImageBuildError(f"{action} failed: {squashed(detail)}") from exc


def api_of(client: Any) -> Any:
    """The low-level ``APIClient`` of a ``DockerClient``, or the ``APIClient`` itself."""
    return getattr(client, "api", client)


def inspect_image(client: Client, tag: str) -> dict[str, Any] | None:
    """The engine's description of the local image ``tag`` (never pulls), or None when absent.

    Raises:
        SandboxUnavailable: the engine cannot be reached.
        ImageBuildError: the engine answered with an error other than "not found".
    """
    with engine_errors(f"inspecting image {tag}"):
        try:
            return dict(api_of(client).inspect_image(tag))
        except NotFound:
            return None


def image_labels(client: Any, tag: str) -> tuple[str, dict[str, str]] | None:
    """The id (``sha256:...``) and labels of the local image ``tag``, or None when absent."""
    info = inspect_image(client, tag)
    if info is None:
        return None
    labels = (info.get("Config") or {}).get("Labels") or {}
    return str(info["Id"]), {str(k): str(v) for k, v in labels.items()}


def local_image_id(client: Any, tag: str) -> str | None:
    """The id (``sha256:...``) of the local image ``tag``, or None when absent."""
    found = image_labels(client, tag)
    return None if found is None else found[0]


def image_exists(client: Client, tag: str) -> bool:
    """Whether the engine holds image ``tag`` locally (never pulls).

    Raises:
        SandboxUnavailable: the engine cannot be reached.
        ImageBuildError: the engine answered with an error other than "not found".
    """
    return local_image_id(client, tag) is not None
