"""Names and numbers every engine backend shares (pure: no docker-py here).

The labels hookcage puts on its containers and the margins ``reap`` and the
warm pool's bookkeeping count with, the default runner image, and the stream
ids of the Engine's multiplexed attach stream. Kept out of
:mod:`executor.sandbox.docker` so the pure pool helpers (``warmjob``,
``poolbook``) can use them without importing docker-py.
"""

from __future__ import annotations

from executor import __version__

RUNNER_REPOSITORY = "hookcage/runner"
DEFAULT_IMAGE = f"{RUNNER_REPOSITORY}:{__version__}"
MANAGED_LABEL = "hookcage.managed"
EXPIRES_LABEL = "hookcage.expires"
POOL_LABEL = "hookcage.pool"
"""Label of a warm pool's containers (its value: the pid of the pool's process)."""
EXPIRY_MARGIN = 30
"""Seconds past a run's timeout after which its container is surely abandoned."""
UNLABELLED_GRACE = 60
"""Seconds after it stopped that ``reap`` leaves a managed container without expiry."""
SELF_END_GRACE = 10
"""Seconds past its timeout after which a hook's container ends itself (``self_ending``)."""
SELF_END_PIDS = 2
"""Processes the self-ending watch takes (a subshell and its ``sleep``), on top of the hook's ``pids``."""

STDIN, STDOUT, STDERR, SYSTEMERR = 0, 1, 2, 3
"""The stream ids of the Engine's multiplexed attach stream (a frame header's first byte)."""
