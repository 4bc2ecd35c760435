"""Containers whose dispatch is gone: found by two labels, removed at once.

Every run the executor starts carries:

* ``hookcage.dispatch``: a random token of the :class:`~executor.executor.HookExecutor`
  that asked for it, so that one dispatch can remove exactly its own
  containers when it is cancelled (``hookcage dispatch`` on SIGTERM, the
  daemon when its caller hangs up);
* ``hookcage.owner``: ``<boot id>/<pid namespace>/<pid>`` of the process that
  started it, so that ``hookcage gc`` and ``hookcage serve`` can remove,
  running or not, the containers of a process that was killed outright
  (SIGKILL) without waiting for their ``hookcage.expires``. Only owners whose
  pid means something here (same boot, same pid namespace) are judged; a pid
  still alive keeps its containers.

Engine access is imported lazily (only the docker backend uses it).
"""

from __future__ import annotations

import functools
import logging
import os
from typing import Any

logger = logging.getLogger(__name__)

DISPATCH_LABEL = "hookcage.dispatch"
OWNER_LABEL = "hookcage.owner"


@functools.lru_cache(maxsize=1)
def pid_space() -> str:
    """Where a pid means something: this boot (Linux boot id, else the host name) and pid namespace."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as handle:
            boot = handle.read().strip()
    except OSError:
        boot = ""
    try:
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        namespace = ""
    return f"{boot or os.uname().nodename}/{namespace or '-'}"


def owner_value(pid: int | None = None) -> str:
    """The ``hookcage.owner`` label of a run started by ``pid`` (default: this process)."""
    return f"{pid_space()}/{os.getpid() if pid is None else pid}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return pid < 2**31  # someone else's process
    return True


def orphaned(labels: dict[str, str]) -> bool:
    """Whether a container's owner (``hookcage.owner``) is a process of this machine that is gone."""
    owner = labels.get(OWNER_LABEL, "")
    space, _, pid = owner.rpartition("/")
    if not space or space != pid_space() or not pid.isdigit():
        return False
    return int(pid) != os.getpid() and not _alive(int(pid))


def remove_labelled(client: Any, label: str, value: str) -> int:
    """Force-remove every hookcage container whose ``label`` is ``value``; how many went."""
    from executor.sandbox.conventions import MANAGED_LABEL
    from executor.sandbox.docker.engine import remove_container_quietly

    listed = client.containers(all=True, filters={"label": [f"{MANAGED_LABEL}=true", f"{label}={value}"]})
    removed = 0
    for entry in listed:
        try:
            removed += bool(remove_container_quietly(client, entry["Id"]))
        except Exception as exc:  # best effort: reap() removes it at expiry
            logger.warning("could not remove container %s: %s", str(entry.get("Id"))[:12], exc)
    return removed


def remove_orphans(client: Any) -> int:
    """Force-remove the hookcage containers whose owning process (on this machine) is gone."""
    from executor.sandbox.conventions import MANAGED_LABEL
    from executor.sandbox.docker.engine import remove_container_quietly

    listed = client.containers(all=True, filters={"label": [f"{MANAGED_LABEL}=true", OWNER_LABEL]})
    removed = 0
    for entry in listed:
        if not orphaned(dict(entry.get("Labels") or {})):
            continue
        try:
            removed += bool(remove_container_quietly(client, entry["Id"]))
        except Exception as exc:
            logger.warning("could not remove container %s: %s", str(entry.get("Id"))[:12], exc)
    return removed
