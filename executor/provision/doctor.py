"""What ``hookcage doctor`` asks of provisioning: is the runner image current, can it be built offline.

The doctor's checks live with their backend (:mod:`executor.sandbox.docker.doctor`),
which must not import this package; they ask these questions through the
probe they share, and this :class:`Probe` is the one that can answer them.
"""

from __future__ import annotations

from typing import Any

from executor.provision.images import runner_image_current
from executor.provision.mmdebstrap import offline_build_tool
from executor.sandbox import checks

__all__ = ["Answers", "Probe"]


class Answers:
    """:class:`executor.sandbox.checks.Provisioning`, answered by this package."""

    def runner_image_current(self, client: Any) -> bool:
        """Whether the runner image was built from this version's recipe (one inspect call)."""
        return runner_image_current(client)

    def offline_build_tool(self) -> tuple[bool, str]:
        """Whether an offline build can have an mmdebstrap, and one line saying how."""
        return offline_build_tool()


class Probe(checks.Probe):
    """The doctor's probe: what its checks share, and the answers about building images."""

    provisioning = Answers()
