"""Settings for the whole suite (unit and integration).

``HOOKCAGE_DAEMON=off``: a ``hookcage dispatch`` that finds no daemon does not start one
(thousands of CLI calls in tests would each leave a daemon behind, idling for 20 minutes).
It is set in this process's environment, and added to the environment of every subprocess
a test starts with one of its own (``env={...}`` built from scratch, or with hookcage's
variables stripped) unless that environment names ``HOOKCAGE_DAEMON`` itself: the tests of
the self-start (``tests/integration/test_daemon_autostart.py``) set ``HOOKCAGE_DAEMON=auto``
and stop every daemon they start. A daemon a test starts by hand (``hookcage serve``) is
used as before.

Under ``pytest-xdist`` (README's test command runs ``-n 4``) every worker is a test session of
its own: it gets its own ``HOOKCAGE_TEST_SESSION`` (the controller's, which the workers inherit,
is replaced), so that one worker's leftover sweeps never count or remove another's containers.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Mapping
from typing import Any

SWITCH = "HOOKCAGE_DAEMON"

os.environ[SWITCH] = "off"

if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["HOOKCAGE_TEST_SESSION"] = uuid.uuid4().hex[:12]

_popen_init = subprocess.Popen.__init__


def _no_self_start(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> None:
    env = kwargs.get("env")
    if isinstance(env, Mapping) and SWITCH not in env:
        kwargs["env"] = {**env, SWITCH: "off"}
    _popen_init(self, args, *rest, **kwargs)


subprocess.Popen.__init__ = _no_self_start  # type: ignore[method-assign]
