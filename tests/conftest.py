"""Settings for the whole suite (unit and integration).

``HOOKCAGE_DAEMON=off``: a ``hookcage dispatch`` that finds no daemon does not start one
(thousands of CLI calls in tests would each leave a daemon behind, idling for 20 minutes).
It is set in this process's environment, and added to the environment of every subprocess
a test starts with one of its own (``env={...}`` built from scratch, or with hookcage's
variables stripped) unless that environment names ``HOOKCAGE_DAEMON`` itself: the tests of
the self-start (``tests/integration/test_daemon_autostart.py``) set ``HOOKCAGE_DAEMON=auto``
and stop every daemon they start. A daemon a test starts by hand (``hookcage serve``) is
used as before.

Under ``pytest-xdist`` (README's test command runs ``-n 4``, ``--dist loadfile``: a module's tests
on one worker) every worker is a test session of its own: it gets its own
``HOOKCAGE_TEST_SESSION`` (the controller's, which the workers inherit, is replaced), so that one
worker's leftover sweeps never count or remove another's containers; the controller names the
folder of the engine's turn locks (``tests/integration/engine_turns.py``) the workers share.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Mapping
from typing import Any

import pytest

SWITCH = "HOOKCAGE_DAEMON"

os.environ[SWITCH] = "off"

TURNS_ENV = "HOOKCAGE_TEST_TURNS"
"""The folder of the engine's turn locks (``tests/integration/engine_turns.py``), shared by the workers."""

if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["HOOKCAGE_TEST_SESSION"] = uuid.uuid4().hex[:12]
else:  # the controller (or the only process): its workers inherit the folder
    os.environ[TURNS_ENV] = os.path.join(tempfile.gettempdir(), f"hookcage-test-turns-{uuid.uuid4().hex[:12]}")


def pytest_sessionfinish(session: pytest.Session) -> None:
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        shutil.rmtree(os.environ.get(TURNS_ENV, ""), ignore_errors=True)


_popen_init = subprocess.Popen.__init__


def _no_self_start(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> None:
    env = kwargs.get("env")
    if isinstance(env, Mapping) and SWITCH not in env:
        kwargs["env"] = {**env, SWITCH: "off"}
    _popen_init(self, args, *rest, **kwargs)


subprocess.Popen.__init__ = _no_self_start  # type: ignore[method-assign]
