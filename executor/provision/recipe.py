"""What the runner image is made of: its names, packages, pinned tools, labels, and the hash of it all.

``runner_inputs`` hashes everything a runner image is built from (the
version, :data:`RUNNER_PACKAGES`, the :data:`RUNNER_WHEELS` pins, the build
context's ``Dockerfile``, ``slim.sh`` and ``statx-shim.c``, and whether the
statx shim can be compiled); the image carries it as its ``hookcage.inputs``
label, and an image with another value is rebuilt. ``base_inputs`` does the
same for the offline base mmdebstrap makes (its ``hookcage.packages`` label).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from executor import __version__
from executor.places import outside_cwd
from executor.sandbox.docker import DEFAULT_IMAGE
from executor.sandbox.docker.imagefacts import ImageBuildError, squashed

__all__ = [
    "BASE_IMAGE",
    "DEBIAN_SUITE",
    "INPUTS_LABEL",
    "PACKAGES_LABEL",
    "RUNNER_IMAGE",
    "RUNNER_PACKAGES",
    "RUNNER_WHEELS",
    "SLIM_IMAGE",
    "STATX_SHIM_DIR",
    "STATX_SHIM_LIBRARY",
    "STATX_SHIM_SOURCE",
    "TOOLS_DIR",
    "Log",
    "WheelTool",
    "base_inputs",
    "log_stderr",
    "runner_context",
    "runner_inputs",
    "shim_compiler",
]

DEBIAN_SUITE = "bookworm"
RUNNER_IMAGE = DEFAULT_IMAGE
"""The default image every docker-sandboxed hook runs in."""
BASE_IMAGE = f"hookcage/base:{DEBIAN_SUITE}-{__version__}"
"""The base mmdebstrap makes for the offline build (kept to skip mmdebstrap next time)."""
SLIM_IMAGE = f"debian:{DEBIAN_SUITE}-slim"
"""The registry base the online build starts from."""
RUNNER_PACKAGES: tuple[str, ...] = (
    "bash",
    "coreutils",
    "python3",
    "nodejs",
    "npm",
    "jq",
    "git",
    "shellcheck",
    "gawk",
    "file",
    "patch",
    "ca-certificates",
    "procps",
    "iproute2",
    "sqlite3",
    "bc",
)
"""Debian packages the runner image carries on top of a minimal base.

grep, sed, findutils and diffutils are Essential (in every base) and mawk
provides ``awk``; gawk, file and patch are not in ``--variant=minbase``.
sqlite3 and bc are what real hooks call besides (1Password's agent hooks read
their app's database with ``sqlite3``; shell hooks do arithmetic with ``bc``).
"""


@dataclass(frozen=True)
class WheelTool:
    """A tool the runner carries as a binary taken from a pinned PyPI wheel.

    Attributes:
        project: the PyPI project (also the wheel's file-name prefix).
        version: the pinned version.
        binaries: the wheel's ``<project>-<version>.data/scripts/`` files to install.
        sha256: the manylinux wheel's sha256 per machine (``uname -m``); a
            wheel is used only when its hash is the pinned one.
    """

    project: str
    version: str
    binaries: tuple[str, ...]
    sha256: Mapping[str, str]

    @property
    def requirement(self) -> str:
        """``project==version``."""
        return f"{self.project}=={self.version}"

    def member(self, binary: str) -> str:
        """The path of ``binary`` inside the wheel (a zip)."""
        return f"{self.project}-{self.version}.data/scripts/{binary}"


RUNNER_WHEELS: tuple[WheelTool, ...] = (
    WheelTool(
        "uv",
        "0.13.9",
        ("uv", "uvx"),
        {
            "x86_64": "d7f459fe4fd247d830351c75686d3996ace3c6f3f728eb0e85a30b7ada0cef19",
            "aarch64": "5435c5ce14a56431208ca0996416d310f1598e8c2c8ba707688985a16bb82dbe",
        },
    ),
    WheelTool(
        "ruff",
        "0.17.6",
        ("ruff",),
        {
            "x86_64": "aa3b08254a732acba246891089a152c47c5733dc36b8ecb76ce8602f8326e5e4",
            "aarch64": "435241c61af5909a022f76219d3d1bf24730dc1bf0acabb5ddf4b569ab3cbb30",
        },
    ),
)
"""Tools not packaged in Debian bookworm, pinned here and only here (version and wheel hashes).

To move a pin: change the version, then take each machine's hash from
``pip download --no-deps --only-binary=:all: --platform manylinux2014_<machine>
PROJECT==VERSION`` (``sha256sum`` of the wheel) or from PyPI's file list.
"""
INPUTS_LABEL = "hookcage.inputs"
"""Runner image label: :func:`runner_inputs` of the build that made it."""
PACKAGES_LABEL = "hookcage.packages"
"""Base image label: :func:`base_inputs` of the mmdebstrap run that made it."""
TOOLS_DIR = "tools"
"""Where, in the prepared build context, the wheels' binaries are (COPYed to /usr/local/bin)."""
STATX_SHIM_SOURCE = "statx-shim.c"
"""The shim's C source in the runner build context (compiled by the host's cc at build time)."""
STATX_SHIM_DIR = "shim"
"""Where, in the prepared build context, the compiled shim is (COPYed to /usr/local/lib/hookcage)."""
STATX_SHIM_LIBRARY = "libhookcage-statx.so"
"""The shim: statx() retried without AT_NO_AUTOMOUNT when the kernel says EINVAL (gVisor 20221219)."""
_CONTEXT_FILES = ("Dockerfile", "slim.sh", STATX_SHIM_SOURCE)
"""The build context's files whose bytes decide the image (README.md does not)."""

Log = Callable[[str], None]


def log_stderr(line: str) -> None:
    """Default ``log``: one line to stderr, flushed."""
    print(line, file=sys.stderr, flush=True)


def _digest(data: object) -> str:
    """``sha256:`` of the canonical JSON of ``data``."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def base_inputs(packages: Sequence[str] = RUNNER_PACKAGES) -> str:
    """What the offline base is made of: the suite and the package list, hashed.

    BASE_IMAGE carries it as its ``hookcage.packages`` label; a base with
    another value (or none) lacks packages and is made again.
    """
    return _digest({"suite": DEBIAN_SUITE, "packages": sorted(packages)})


def runner_inputs(
    context: Path,
    *,
    packages: Sequence[str] = RUNNER_PACKAGES,
    wheels: Sequence[WheelTool] = RUNNER_WHEELS,
    statx_shim: bool | None = None,
) -> str:
    """Everything the runner image is built from, hashed.

    The version, the package list, every wheel pin (all machines), the
    bytes of the context's ``Dockerfile``, ``slim.sh`` and ``statx-shim.c``,
    and whether the shim can be compiled (``statx_shim``; default: whether
    :func:`shim_compiler` finds a C compiler), so an image built without a
    compiler is rebuilt, with the shim, once one is installed. RUNNER_IMAGE
    carries it as its ``hookcage.inputs`` label; an image with another value
    (or none) is rebuilt.

    Raises:
        ImageBuildError: a context file is unreadable.
    """
    files: dict[str, str] = {}
    for name in _CONTEXT_FILES:
        try:
            files[name] = hashlib.sha256((context / name).read_bytes()).hexdigest()
        except OSError as exc:
            raise ImageBuildError(
                f"cannot read {context / name} of the runner build context: {squashed(exc)}"
            ) from exc
    return _digest(
        {
            "version": __version__,
            "base": base_inputs(packages),
            "wheels": [
                [tool.project, tool.version, list(tool.binaries), dict(tool.sha256)]
                for tool in wheels
            ],
            "files": files,
            "statx_shim": shim_compiler() is not None if statx_shim is None else statx_shim,
        }
    )


def shim_compiler(environ: Mapping[str, str] | None = None) -> str | None:
    """The C compiler that builds the statx shim: ``$CC`` (its first word) or ``cc`` on ``$PATH``; None if neither."""
    env = os.environ if environ is None else environ
    named = (env.get("CC") or "").split()
    name = named[0] if named else "cc"
    if "/" in name and not os.path.isabs(name):
        return None  # ./cc: the directory this runs in is a checkout's
    return shutil.which(name, path=outside_cwd(env.get("PATH", "")))  # never a checkout's ./cc


def runner_context() -> Path:
    """The runner's build context: ``images/runner`` of a checkout, or its copy in the wheel.

    Raises:
        ImageBuildError: the directory or its Dockerfile is missing.
    """
    package = Path(__file__).resolve().parents[1]  # executor/
    candidates = (package.parent / "images" / "runner", package / "_images" / "runner")
    context = next((c for c in candidates if (c / "Dockerfile").is_file()), candidates[0])
    if not (context / "Dockerfile").is_file():
        raise ImageBuildError(
            f"the runner build context {context} is missing: "
            "build from a hookcage source checkout, or pass context= a copy of images/runner"
        )
    return context
