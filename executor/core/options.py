"""How one hook asked to run: its sandbox options, as its hook file said (pure data).

The core owns this type (a hook's identity includes it); the sandbox
backends read it (``executor.sandbox.base`` imports it from here).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

WorkspaceMode = Literal["ro", "rw", "none"]
HomeMode = Literal["tmp", "persistent"]


@dataclass(frozen=True)
class SandboxOptions:
    """Where and how one hook runs, as its config asked (part of its identity).

    ``backend`` is ``"docker"`` (the default: a fresh hardened container) or
    ``"host"`` (plain subprocess, only for user and managed hooks that ask).
    The other fields are the docker profile's per-hook widenings; ``None``
    means the executor-wide default. ``home`` is ``"tmp"`` (``HOME=/tmp``,
    thrown away with the container) or ``"persistent"`` (a writable home kept
    per project and hook under ``$HOOKCAGE_HOME/homes``; docker only).
    """

    backend: Literal["docker", "host"] = "docker"
    image: str | None = None
    workspace: WorkspaceMode = "ro"
    network: str = "none"
    mounts: tuple[str, ...] = ()
    memory: str | None = None
    cpus: float | None = None
    pids: int | None = None
    home: HomeMode = "tmp"

    def describe(self) -> str:
        """A short human-readable form, e.g. ``docker(ro, network=none)``."""
        if self.backend == "host":
            return "host"
        parts = [f"workspace={self.workspace}", f"network={self.network}"]
        if self.image:
            parts.insert(0, f"image={self.image}")
        if self.mounts:
            parts.append("mounts=" + ",".join(self.mounts))
        for name in ("memory", "cpus", "pids"):
            value = getattr(self, name)
            if value is not None:
                parts.append(f"{name}={value}")
        if self.home != "tmp":
            parts.append(f"home={self.home}")
        return "docker(" + ", ".join(parts) + ")"
