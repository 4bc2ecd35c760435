"""Sandbox backends: where a hook command actually runs.

Every backend implements :class:`Sandbox` (``run(RunRequest) -> RunResult``
plus ``close()``). Only ``docker`` imports docker-py; only ``host`` imports
``subprocess``; ``fake`` ships for tests, like ``httpx.MockTransport``.
"""

from executor.core.options import SandboxOptions
from executor.sandbox.base import RunRequest, RunResult, Sandbox
from executor.sandbox.fake import FakeSandbox

__all__ = ["FakeSandbox", "RunRequest", "RunResult", "Sandbox", "SandboxOptions"]
