"""The exceptions hookcage raises.

Hook-level trouble (a non-zero exit, a timeout, an OOM kill, garbage output)
is never an exception: it is data in the hook's outcome. Exceptions are for
"no verdict can be produced", split by whose fault it is::

    HookcageError
    ├── ConfigError          our settings or hook files are wrong (names file and place)
    │   └── OwnDirInProject  HOOKCAGE_HOME or the managed directory lies in the project (blocks)
    ├── PayloadError         the agent handed us bad input (stdin, event name)
    ├── TrustStoreError      the trust store cannot be read or written
    └── SandboxError         a sandbox backend failed for a reason of its own
        └── SandboxUnavailable  the backend cannot be reached at all (engine down, image missing)

Backend exceptions (docker-py's, and the ``requests`` ones it lets through)
are mapped to these once, at the edge, and chained with ``raise ... from``.
"""

from __future__ import annotations


class HookcageError(Exception):
    """Base of every exception hookcage raises on purpose."""


class ConfigError(HookcageError):
    """A settings or hook file is invalid; the message names the file and where."""


class OwnDirInProject(ConfigError):
    """hookcage's home or managed directory lies inside the project: its settings, allow-list,
    trust store and hooks would be the repository's. Dispatch blocks (fail closed)."""


class PayloadError(HookcageError):
    """The agent's input (stdin payload or event name) is unusable."""


class TrustStoreError(HookcageError):
    """The trust store is unreadable, corrupt or could not be written."""


class SandboxError(HookcageError):
    """A sandbox backend could not run a hook for a reason of its own."""


class SandboxUnavailable(SandboxError):
    """The sandbox backend cannot be used at all; the message says what to do."""
