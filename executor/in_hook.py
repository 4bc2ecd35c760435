"""``HOOKCAGE_IN_HOOK``: a ``hookcage dispatch`` run by one of hookcage's own hooks answers at once.

The guard stops hookcage calling itself (a host hook whose script runs ``hookcage
dispatch`` would loop). A plain variable could be set by anyone who sets an agent's
environment, and would silence every hook, managed ones included; so its value is a
proof only a running hookcage can give (Linux):

- the executor that runs hooks holds a memfd named ``hookcage-in-hook-<nonce>`` for as
  long as its hooks may run (:class:`Marker`; close-on-exec: no hook inherits it), and
  hands each hook ``<pid>:<fd>:<nonce>``;
- a dispatch that sees the variable takes it only when that pid is one of its own
  ancestors and ``/proc/<pid>/fd/<fd>`` is that memfd (:func:`genuine`). An agent's
  dispatch is never a descendant of a hookcage that runs hooks (unless the agent itself
  was started by a hook, which is the case the guard is for), so a value copied from a
  hook's environment, or made up, is ignored with one line on stderr and every hook runs.

Where there is no ``/proc`` or no memfd (macOS), the variable is taken at its word, as
before (docs/install.md says so). A hook in a container is not a descendant of the
hookcage that started it (the engine starts it): hookcage inside a container is not
guarded this way, and no container is given hookcage's socket.

Standard library only: :mod:`executor.entry` checks it before anything else is imported.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import NoReturn

PREFIX = "hookcage-in-hook-"
MAX_ANCESTORS = 256


class Marker:
    """The memfd a running executor holds while its hooks may run, and the value hooks get."""

    def __init__(self) -> None:
        self._fd: int | None = None
        self._value = "1"

    def value(self) -> str:
        """``<pid>:<fd>:<nonce>`` (made at the first call); ``"1"`` where memfds do not exist."""
        if self._fd is None and hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd"):
            nonce = os.urandom(16).hex()
            try:
                self._fd = os.memfd_create(PREFIX + nonce)  # close-on-exec by default
            except OSError:
                return self._value
            self._value = f"{os.getpid()}:{self._fd}:{nonce}"
        return self._value

    def close(self) -> None:
        """The hooks are done: the value proves nothing any more."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def genuine(value: str) -> bool:
    """Whether ``value`` was handed to a hook by a hookcage this process descends from."""
    if not os.path.isdir("/proc/self/fd"):
        return True  # no way to check here (macOS): taken at its word, as before
    pid_text, _, rest = value.partition(":")
    fd_text, _, nonce = rest.partition(":")
    if not (pid_text.isdigit() and fd_text.isdigit() and len(nonce) == 32 and nonce.isalnum()):
        return False
    pid = int(pid_text)
    if pid not in ancestors():  # pid 1 too: hookcage serve may be a container's init
        return False
    try:
        target = os.readlink(f"/proc/{pid}/fd/{int(fd_text)}")
    except OSError:
        return False
    return target == f"/memfd:{PREFIX}{nonce} (deleted)"


def ancestors() -> set[int]:
    """The pids above this process, up to init (bounded)."""
    found: set[int] = set()
    pid = os.getppid()
    while pid >= 1 and pid not in found and len(found) < MAX_ANCESTORS:
        found.add(pid)
        if pid == 1:
            break
        try:
            with open(f"/proc/{pid}/stat", "rb") as handle:
                stat = handle.read(4096)
        except OSError:
            break
        fields = stat[stat.rfind(b")") + 2:].split()  # after "pid (comm) "
        if len(fields) < 2 or not fields[1].isdigit():
            break
        pid = int(fields[1])
    return found


_warned = False


def recursing(environ: Mapping[str, str], name: str) -> bool:
    """Whether this dispatch runs inside one of hookcage's hooks (answer at once).

    A value that is not :func:`genuine` is ignored, said once on stderr.
    """
    global _warned
    value = environ.get(name)
    if not value:
        return False
    if genuine(value):
        return True
    if not _warned:
        _warned = True
        sys.stderr.write(f"hookcage: {name} is set, but not by a hook hookcage runs: ignored, every hook runs\n")
    return False


def refuse_recursion() -> NoReturn:
    """A ``hookcage dispatch`` run by one of hookcage's hooks answers at once (:mod:`executor.in_hook`).

    No configuration can make hookcage call itself: an agent's file whose
    hook routes to hookcage, run on the host, would otherwise loop.
    """
    sys.stdout.write("{}\n")
    sys.stderr.write("hookcage: dispatch called from inside a hook: nothing run (hookcage never calls itself)\n")
    sys.exit(0)
