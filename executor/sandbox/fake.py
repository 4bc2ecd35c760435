"""An in-memory sandbox for tests, like ``httpx.MockTransport``."""

from __future__ import annotations

import threading
from collections.abc import Callable

from executor.sandbox.base import RunRequest, RunResult, Sandbox

FakeHandler = Callable[[RunRequest], RunResult]


def _default_handler(request: RunRequest) -> RunResult:
    return RunResult(exit_code=0)


class FakeSandbox(Sandbox):
    """Answers every run with ``handler(request)`` and records the requests.

    Example::

        sandbox = FakeSandbox(lambda req: RunResult(0, stdout=b'{"continue": false}'))
    """

    name = "fake"

    def __init__(self, handler: FakeHandler | None = None) -> None:
        self.handler: FakeHandler = handler or _default_handler
        self.requests: list[RunRequest] = []
        self._lock = threading.Lock()
        self.closed = False

    def run(self, request: RunRequest) -> RunResult:
        with self._lock:
            self.requests.append(request)
        return self.handler(request)

    def close(self) -> None:
        self.closed = True
