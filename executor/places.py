"""Whether a path lies in the project, or in the directory a command runs in (standard library only).

The one rule behind "scope comes from where a file is" (:func:`executor.config.file_scope`)
and "nothing on PATH inside the current directory" (:func:`outside_cwd`): a path is in a
directory as named or where its symlinks lead, except that a directory holding your home
(an agent or command started in ``~`` or above it) does not make what is under your home
its own.
"""

from __future__ import annotations

import os
from pathlib import Path

from executor.filecache import per_look, realpath


def _inside(path: str, root: str) -> bool:
    root = root.rstrip("/") or "/"
    return path == root or path.startswith(root if root == "/" else root + "/")


def in_project(path: Path | str, root: Path | None) -> bool:
    """``path`` is in the project: as named, or where its symlinks lead.

    A project that holds your home directory (an agent started in ``~`` or above it) does
    not make what is under your home the repository's: there the rule is for the rest.
    A project root of ``/`` (an agent started there, as in a container without a working
    directory) is no checkout: nothing is "in" it.
    """
    if root is None:
        return False
    home = _real_home()
    for top in {os.path.abspath(root), realpath(root)} - {"/"}:
        holds_home = home is not None and _inside(home, top)
        for spot in {os.path.abspath(path), realpath(path)}:
            if _inside(spot, top) and not (holds_home and home is not None and _inside(spot, home)):
                return True
    return False


def _real_home() -> str | None:
    """The user's home as the system knows it (never ``$HOME``, which the environment sets)."""
    return per_look(("real home", os.getuid()), _real_home_now)


def _real_home_now() -> str | None:
    try:
        import pwd

        home = pwd.getpwuid(os.getuid()).pw_dir
    except (ImportError, KeyError):
        return None
    return realpath(home) if home and home != "/" else None


def outside_cwd(search: str) -> str:
    """``PATH`` without the entries a repository could fill: empty and relative ones (``.``,
    ``bin``), and absolute ones inside the current directory, as named or resolved (unless it
    holds your home and the entry is under it: a command run from ``~``).

    What hookcage records or runs from PATH (the agent behind install's wrapper, hookcage's own
    command, runsc, the compiler and mmdebstrap of an image build) comes from these only.
    """
    try:
        here: Path | None = Path(os.getcwd())
    except OSError:  # the working directory was removed
        here = None
    return os.pathsep.join(d for d in search.split(os.pathsep) if os.path.isabs(d) and not in_project(d, here))


