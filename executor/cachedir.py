"""hookcage's cache folder: a fetched mmdebstrap, Podman's seccomp profile for hooks."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import platformdirs

__all__ = ["cache_dir"]


def cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """hookcage's cache: ``$HOOKCAGE_HOME/cache`` when that is set, else the user's (``~/.cache/hookcage``)."""
    env = os.environ if environ is None else environ
    home = env.get("HOOKCAGE_HOME")
    if home:
        return Path(home).expanduser() / "cache"
    xdg = env.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "hookcage"
    return Path(platformdirs.user_cache_dir("hookcage"))
