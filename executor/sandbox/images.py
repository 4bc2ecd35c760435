"""Build the default runner image, ``hookcage/runner:<version>``, with or without a registry.

The runner image (``images/runner/Dockerfile``) is Debian bookworm plus the
interpreters and tools real hooks run: sh, bash, coreutils, python3, node
(with npm and npx), jq, git, shellcheck, gawk, file, patch, ca-certificates,
procps, iproute2, sqlite3 and bc (``RUNNER_PACKAGES``), and uv (with uvx) and ruff, whose
binaries come from pinned, hash-checked PyPI wheels (``RUNNER_WHEELS``; they
are not packaged in bookworm). The wheels are fetched on the host side (pip,
or the folder ``$HOOKCAGE_WHEELHOUSE``) and their binaries extracted into a
temporary copy of the build context, so the ``docker build`` itself never
needs a network. The image is built ``FROM`` one of two bases:

- **online**: ``debian:bookworm-slim`` from the engine, pulled when absent;
  the Dockerfile ``apt-get install``s what is missing, so the build needs a
  Debian mirror.
- **offline**: ``hookcage/base:bookworm-<version>``, made on this machine by
  ``debootstrap --variant=minbase`` from a Debian mirror, slimmed, and
  streamed as a tar into the engine's image import. No registry is touched
  and the ``docker build`` runs with no network at all. Needs root; a
  debootstrap that is not installed is fetched with apt into hookcage's
  cache (:mod:`executor.sandbox.debootstrap`), nothing system-wide.

By default the choice is automatic: online when the engine has
``debian:bookworm-slim`` or a registry gives it (the pull attempt gives up
after 20 s without an answer), offline otherwise; the log says which.

``build_runner_image`` is idempotent: an existing runner image built from the
same inputs (its ``hookcage.inputs`` label: a hash of the package list, the
wheel pins and the Dockerfile and ``slim.sh``) is returned as is; one built
from other inputs is rebuilt (``rebuild=True`` runs ``docker build`` again
anyway, which the layer cache makes quick; ``force=True`` also re-creates the
base). The base image is reused while its ``hookcage.packages`` label matches
the package list, so debootstrap runs once per package list and machine.

Usable as ``python -m executor.sandbox.images [--offline|--online] [--rebuild] [--force]``,
or ``python -m executor.sandbox.images --prepare DIR`` to write a ready build context
for a ``docker build`` by hand.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, TypeAlias

from executor import __version__
from executor.errors import HookcageError, SandboxError, SandboxUnavailable
from executor.places import outside_cwd
from executor.sandbox.debootstrap import Debootstrap, DebootstrapFetchError, find_debootstrap
from executor.sandbox.docker import (
    BACKEND_ERRORS,
    DEFAULT_IMAGE,
    APIClient,
    DockerClient,
    NotFound,
    default_client,
    map_engine_error,
)

__all__ = [
    "APT_AFTER_DEBOOTSTRAP",
    "BASE_IMAGE",
    "DEFAULT_MIRROR",
    "INPUTS_LABEL",
    "MIRROR_ENV",
    "PACKAGES_LABEL",
    "RUNNER_IMAGE",
    "RUNNER_PACKAGES",
    "RUNNER_WHEELS",
    "SLIM_IMAGE",
    "STATX_SHIM_DIR",
    "STATX_SHIM_LABEL",
    "STATX_SHIM_LIBRARY",
    "STATX_SHIM_SOURCE",
    "WHEELHOUSE_ENV",
    "ImageBuildError",
    "WheelTool",
    "base_inputs",
    "build_base_image",
    "build_runner_image",
    "build_statx_shim",
    "debootstrap_packages",
    "docker_build",
    "engine_machine",
    "extract_binaries",
    "fetch_wheels",
    "image_exists",
    "inspect_image",
    "mirror_from_apt_sources",
    "normalize_machine",
    "prepare_context",
    "remove_superseded",
    "resolve_mirror",
    "runner_context",
    "runner_image_current",
    "runner_inputs",
    "shim_compiler",
]

DEBIAN_SUITE = "bookworm"
RUNNER_IMAGE = DEFAULT_IMAGE
"""The default image every docker-sandboxed hook runs in."""
BASE_IMAGE = f"hookcage/base:{DEBIAN_SUITE}-{__version__}"
"""The debootstrapped base the offline build imports (kept to skip debootstrap next time)."""
SLIM_IMAGE = f"debian:{DEBIAN_SUITE}-slim"
"""The registry base the online build starts from."""
DEFAULT_MIRROR = "http://deb.debian.org/debian"
MIRROR_ENV = "HOOKCAGE_DEBIAN_MIRROR"
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
WHEELHOUSE_ENV = "HOOKCAGE_WHEELHOUSE"
"""A folder holding the pinned wheels: when set, they are taken from there and pip is not run."""
INPUTS_LABEL = "hookcage.inputs"
"""Runner image label: :func:`runner_inputs` of the build that made it."""
PACKAGES_LABEL = "hookcage.packages"
"""Base image label: :func:`base_inputs` of the debootstrap that made it."""
TOOLS_DIR = "tools"
"""Where, in the prepared build context, the wheels' binaries are (COPYed to /usr/local/bin)."""
APT_AFTER_DEBOOTSTRAP: tuple[str, ...] = ("npm",)
"""Packages of RUNNER_PACKAGES that debootstrap cannot install: apt-get installs them in the chroot after.

debootstrap's resolver does not follow virtual packages, and npm's
dependencies name some (node-has, node-cssesc, node-postcss-selector-parser,
...), so dpkg would leave it unconfigured.
"""
STATX_SHIM_LABEL = "org.hookcage.statx-shim"
"""Runner image label: ``1`` when the image preloads :data:`STATX_SHIM_LIBRARY`, ``0`` when built without it."""
STATX_SHIM_SOURCE = "statx-shim.c"
"""The shim's C source in the runner build context (compiled by the host's cc at build time)."""
STATX_SHIM_DIR = "shim"
"""Where, in the prepared build context, the compiled shim is (COPYed to /usr/local/lib/hookcage)."""
STATX_SHIM_LIBRARY = "libhookcage-statx.so"
"""The shim: statx() retried without AT_NO_AUTOMOUNT when the kernel says EINVAL (gVisor 20221219)."""
_CONTEXT_FILES = ("Dockerfile", "slim.sh", STATX_SHIM_SOURCE)
"""The build context's files whose bytes decide the image (README.md does not)."""
_PIP_TIMEOUT = 900  # seconds for the whole pip download
_MACHINES = {"amd64": "x86_64", "x86-64": "x86_64", "arm64": "aarch64", "armv8": "aarch64"}

DEBIAN_KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")
_IMAGE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_BUILD_TIMEOUT = 1800  # seconds without a byte from the engine before a build read gives up

Log = Callable[[str], None]
Client: TypeAlias = "DockerClient | APIClient"
"""Either docker-py client: the high-level one or the low-level ``APIClient``."""


class ImageBuildError(SandboxError):
    """The runner image (or its base) could not be built; the message says what to do."""


def _log_stderr(line: str) -> None:
    """Default ``log``: one line to stderr, flushed."""
    print(line, file=sys.stderr, flush=True)


def _one_line(text: object) -> str:
    """Squash any exception text into one line."""
    return " ".join(str(text).split())


# --------------------------------------------------------------------------- engine


@contextlib.contextmanager
def _engine_errors(action: str) -> Iterator[None]:
    """Map docker-py and requests exceptions raised inside to hookcage's, once.

    Whether the engine is reachable at all is decided by the docker backend's
    one mapping table (:func:`executor.sandbox.docker.map_engine_error`); any
    other engine failure while building is an :class:`ImageBuildError`.

    Raises:
        SandboxUnavailable: the engine could not be reached at all.
        ImageBuildError: the engine answered with an error, or stopped answering.
    """
    try:
        yield
    except BACKEND_ERRORS as exc:
        mapped = map_engine_error(exc, step=action, url="DOCKER_HOST")
        if isinstance(mapped, SandboxUnavailable) and not isinstance(exc, NotFound):
            raise mapped from exc
        detail = getattr(exc, "explanation", None) or exc
        raise ImageBuildError(f"{action} failed: {_one_line(detail)}") from exc


def _connect() -> Any:
    """A client from the environment (``DOCKER_HOST`` etc.).

    Raises:
        SandboxUnavailable: the engine cannot be reached.
    """
    return default_client(timeout=_BUILD_TIMEOUT)


def _api(client: Any) -> Any:
    """The low-level ``APIClient`` of a ``DockerClient``, or the ``APIClient`` itself."""
    return getattr(client, "api", client)


def inspect_image(client: Client, tag: str) -> dict[str, Any] | None:
    """The engine's description of the local image ``tag`` (never pulls), or None when absent.

    Raises:
        SandboxUnavailable: the engine cannot be reached.
        ImageBuildError: the engine answered with an error other than "not found".
    """
    with _engine_errors(f"inspecting image {tag}"):
        try:
            return dict(_api(client).inspect_image(tag))
        except NotFound:
            return None


def _image_labels(client: Any, tag: str) -> tuple[str, dict[str, str]] | None:
    """The id (``sha256:...``) and labels of the local image ``tag``, or None when absent."""
    info = inspect_image(client, tag)
    if info is None:
        return None
    labels = (info.get("Config") or {}).get("Labels") or {}
    return str(info["Id"]), {str(k): str(v) for k, v in labels.items()}


def _image_id(client: Any, tag: str) -> str | None:
    """The id (``sha256:...``) of the local image ``tag``, or None when absent."""
    found = _image_labels(client, tag)
    return None if found is None else found[0]


def image_exists(client: Client, tag: str) -> bool:
    """Whether the engine holds image ``tag`` locally (never pulls).

    Raises:
        SandboxUnavailable: the engine cannot be reached.
        ImageBuildError: the engine answered with an error other than "not found".
    """
    return _image_id(client, tag) is not None


# --------------------------------------------------------------------------- mirror


def _deb822_stanzas(text: str) -> Iterator[dict[str, str]]:
    """Parse deb822 text (``*.sources``) into stanzas of lower-cased field names."""
    fields: dict[str, str] = {}
    key: str | None = None
    for raw in text.splitlines():
        if raw.startswith("#"):
            continue
        if not raw.strip():
            if fields:
                yield fields
            fields, key = {}, None
            continue
        if raw[0] in " \t" and key is not None:
            fields[key] += " " + raw.strip()
            continue
        name, sep, value = raw.partition(":")
        if sep:
            key = name.strip().lower()
            fields[key] = value.strip()
    if fields:
        yield fields


_ONE_LINE_ENTRY = re.compile(r"^(deb|deb-src)\s+(?:\[[^\]]*\]\s+)?(\S+)\s+(\S+)")


def _apt_entries(etc_apt: Path) -> Iterator[tuple[str, str]]:
    """Every enabled binary (``deb``) entry of an apt config dir, as (uri, suite), in apt's order."""
    files = [etc_apt / "sources.list"]
    parts = etc_apt / "sources.list.d"
    if parts.is_dir():
        files += sorted(p for p in parts.iterdir() if p.suffix in (".list", ".sources"))
    for path in files:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if path.suffix == ".sources":
            for stanza in _deb822_stanzas(text):
                if stanza.get("enabled", "yes").lower() in ("no", "false", "0"):
                    continue
                if "deb" not in stanza.get("types", "").split():
                    continue
                for uri in stanza.get("uris", "").split():
                    for suite in stanza.get("suites", "").split():
                        yield uri, suite
        else:
            for line in text.splitlines():
                match = _ONE_LINE_ENTRY.match(line.split("#", 1)[0].strip())
                if match and match.group(1) == "deb":
                    yield match.group(2), match.group(3)


def mirror_from_apt_sources(
    etc_apt: Path = Path("/etc/apt"), suite: str = DEBIAN_SUITE
) -> str | None:
    """The Debian mirror this machine's apt already uses, if it has one that fits.

    Reads ``sources.list`` and ``sources.list.d/*.list`` (one-line format) and
    ``sources.list.d/*.sources`` (deb822), skipping disabled entries and other
    file names. Prefers an http(s) or file URI that serves ``suite`` itself
    (not ``suite-security``/``-updates``); else any URI whose path ends in
    ``/debian`` (a Debian archive root serving another release).

    Args:
        etc_apt: apt's configuration directory (tests pass a fake one).
        suite: the Debian release to be served.

    Returns:
        The mirror URI without a trailing slash, or None when nothing fits.
    """
    fallback: str | None = None
    for uri, entry_suite in _apt_entries(etc_apt):
        if not uri.startswith(("http://", "https://", "file:/")):
            continue  # cdrom:, mirror+file:, tor+http: ... mean nothing to debootstrap
        uri = uri.rstrip("/")
        if entry_suite.rstrip("/") == suite:
            return uri
        if fallback is None and uri.endswith("/debian") and "-" not in entry_suite:
            fallback = uri
    return fallback


def resolve_mirror(
    mirror: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    etc_apt: Path = Path("/etc/apt"),
) -> str:
    """The Debian mirror to build from: ``mirror``, else $HOOKCAGE_DEBIAN_MIRROR, else apt's, else deb.debian.org.

    Args:
        mirror: an explicit mirror URI; wins when given.
        environ: the environment to read (default ``os.environ``).
        etc_apt: apt's configuration directory to detect from.
    """
    env = os.environ if environ is None else environ
    chosen = mirror or env.get(MIRROR_ENV) or mirror_from_apt_sources(etc_apt)
    return (chosen or DEFAULT_MIRROR).rstrip("/")


# --------------------------------------------------------------------------- inputs


def _digest(data: object) -> str:
    """``sha256:`` of the canonical JSON of ``data``."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def base_inputs(packages: Sequence[str] = RUNNER_PACKAGES) -> str:
    """What the debootstrapped base is made of: the suite and the package list, hashed.

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
                f"cannot read {context / name} of the runner build context: {_one_line(exc)}"
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


# --------------------------------------------------------------------------- statx shim


def shim_compiler(environ: Mapping[str, str] | None = None) -> str | None:
    """The C compiler that builds the statx shim: ``$CC`` (its first word) or ``cc`` on ``$PATH``; None if neither."""
    env = os.environ if environ is None else environ
    named = (env.get("CC") or "").split()
    name = named[0] if named else "cc"
    if "/" in name and not os.path.isabs(name):
        return None  # ./cc: the directory this runs in is a checkout's
    return shutil.which(name, path=outside_cwd(env.get("PATH", "")))  # never a checkout's ./cc


_NO_SHIM = (
    "coreutils' ls and stat will fail in hooks under gVisor 20221219 (Debian's runsc: statx with "
    "AT_NO_AUTOMOUNT is refused); to get hookcage's statx shim, install a C compiler "
    "(apt-get install gcc) and run hookcage image build again"
)


def build_statx_shim(
    context: Path,
    dest: Path,
    machine: str,
    *,
    environ: Mapping[str, str] | None = None,
    run: Runner = subprocess.run,
    log: Log = _log_stderr,
) -> bool:
    """Compile ``context``'s ``statx-shim.c`` into ``dest``/libhookcage-statx.so with the host's cc.

    ``dest`` is always created (the Dockerfile COPYs it). Without a compiler,
    for an engine of another machine, or when the compile fails, nothing is
    put there and one line says what ``ls`` will do under gVisor and how to
    get the shim: the image is still built, without it.

    Returns:
        Whether the library is in ``dest``.
    """
    dest.mkdir(parents=True, exist_ok=True)
    compiler = shim_compiler(environ)
    host = normalize_machine(platform.machine())
    if compiler is None:
        log(f"no C compiler (cc) on this machine: building without the statx shim; {_NO_SHIM}")
        return False
    if host != machine:
        log(f"the engine is {machine}, this machine {host}: building without the statx shim; {_NO_SHIM}")
        return False
    output = dest / STATX_SHIM_LIBRARY
    command = [compiler, "-O2", "-fPIC", "-shared", "-o", str(output), str(context / STATX_SHIM_SOURCE)]
    try:
        done = run(command, capture_output=True, text=True, timeout=120, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        failure = _one_line(exc)
    else:
        if done.returncode == 0 and output.is_file():
            output.chmod(0o644)
            log(f"compiled the statx shim ({STATX_SHIM_LIBRARY}) with {compiler}")
            return True
        failure = _one_line((done.stderr or "").strip() or f"exit status {done.returncode}")
    output.unlink(missing_ok=True)
    log(f"{compiler} could not compile {STATX_SHIM_SOURCE} ({failure}): building without the statx shim; {_NO_SHIM}")
    return False


# --------------------------------------------------------------------------- wheels


def normalize_machine(name: str) -> str:
    """``uname -m`` spelling of a machine name (Docker and Go say ``amd64``/``arm64``)."""
    lowered = name.strip().lower()
    return _MACHINES.get(lowered, lowered)


def engine_machine(client: Client) -> str:
    """The engine's machine (``x86_64``, ``aarch64``): which wheels the image needs.

    Raises:
        SandboxUnavailable: the engine cannot be reached.
        ImageBuildError: the engine answered with an error.
    """
    with _engine_errors("asking the engine for its architecture"):
        info = _api(client).info()
    return normalize_machine(str(info.get("Architecture") or platform.machine()))


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _pinned(tool: WheelTool, machine: str) -> str:
    """The pinned wheel hash of ``tool`` for ``machine``.

    Raises:
        ImageBuildError: no wheel is pinned for that machine.
    """
    pinned = tool.sha256.get(machine)
    if pinned is None:
        raise ImageBuildError(
            f"no {tool.project} {tool.version} wheel is pinned for the engine's architecture "
            f"{machine} (pinned: {', '.join(sorted(tool.sha256))}): add its sha256 to "
            "RUNNER_WHEELS in executor/sandbox/images.py"
        )
    return pinned


def _wheel_in(folder: Path, tool: WheelTool, machine: str) -> Path | None:
    """The wheel of ``tool`` in ``folder`` whose sha256 is the pinned one for ``machine``."""
    pinned = _pinned(tool, machine)
    prefix = f"{tool.project}-{tool.version}-".lower()
    with contextlib.suppress(OSError):
        for path in sorted(folder.iterdir()):
            if path.name.lower().startswith(prefix) and path.name.endswith(".whl"):
                with contextlib.suppress(OSError):
                    if path.is_file() and _file_sha256(path) == pinned:
                        return path
    return None


def _pip_hint(tools: Sequence[WheelTool], machine: str, folder: str = "DIR") -> str:
    """The pip command that fills a wheelhouse with the pinned wheels."""
    return (
        f"pip download --no-deps --only-binary=:all: --platform manylinux2014_{machine} "
        f"-d {folder} " + " ".join(tool.requirement for tool in tools)
    )


def _pip_error(stderr: str) -> str:
    """The line of pip's output that says what went wrong."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("ERROR:")]
    return (errors or lines or ["no output"])[-1]


Runner = Callable[..., "subprocess.CompletedProcess[str]"]


def fetch_wheels(
    dest: Path,
    machine: str,
    *,
    tools: Sequence[WheelTool] = RUNNER_WHEELS,
    environ: Mapping[str, str] | None = None,
    run: Runner = subprocess.run,
    log: Log = _log_stderr,
) -> dict[str, Path]:
    """The pinned wheels of ``tools`` for ``machine``, hash-checked.

    From the folder ``$HOOKCAGE_WHEELHOUSE`` when it is set (pip is not run:
    an air-gapped site provides the wheels there), else downloaded into
    ``dest`` by ``python -m pip download`` in hash-checking mode (pip's own
    configuration, such as an index or find-links, applies).

    Args:
        dest: where pip downloads to (a temporary folder).
        machine: the engine's machine (``x86_64``, ``aarch64``).
        tools: the wheels to get.
        environ: the environment to read ``HOOKCAGE_WHEELHOUSE`` from (default ``os.environ``).
        run: ``subprocess.run`` (tests pass a fake).
        log: where progress lines go.

    Returns:
        Each tool's project name -> its verified wheel.

    Raises:
        ImageBuildError: a wheel is missing, could not be downloaded, or its
            hash is not the pinned one; the one-line message says how to fix it.
    """
    env = os.environ if environ is None else environ
    hashes = {tool.project: _pinned(tool, machine) for tool in tools}
    names = ", ".join(f"{tool.project} {tool.version}" for tool in tools)
    house = env.get(WHEELHOUSE_ENV)
    found: dict[str, Path] = {}
    if house:
        folder = Path(house).expanduser()
        if not folder.is_dir():
            raise ImageBuildError(
                f"{WHEELHOUSE_ENV}={house} is not a folder: point it at a folder holding the "
                f"pinned wheels ({_pip_hint(tools, machine)}), or unset it to download them with pip"
            )
        log(f"taking the {names} wheels ({machine}) from {WHEELHOUSE_ENV}={folder}")
        for tool in tools:
            wheel = _wheel_in(folder, tool, machine)
            if wheel is None:
                raise ImageBuildError(
                    f"{WHEELHOUSE_ENV}={folder} holds no {tool.project} {tool.version} wheel for "
                    f"{machine} with the pinned sha256 {hashes[tool.project][:12]}...: add it with "
                    f"`{_pip_hint([tool], machine, str(folder))}`"
                )
            found[tool.project] = wheel
        return found
    dest.mkdir(parents=True, exist_ok=True)
    requirements = dest / "requirements.txt"
    requirements.write_text(
        "".join(f"{tool.requirement} --hash=sha256:{hashes[tool.project]}\n" for tool in tools)
    )
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--platform",
        f"manylinux2014_{machine}",
        "--disable-pip-version-check",
        "--no-input",
        "--progress-bar=off",
        "-d",
        str(dest),
        "-r",
        str(requirements),
    ]
    log(f"downloading the {names} wheels ({machine}) with pip")
    fix = (
        f"check pip's access to PyPI (or its index settings), or set {WHEELHOUSE_ENV} to a "
        f"folder holding the wheels ({_pip_hint(tools, machine)})"
    )
    try:
        done = run(
            cmd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=_PIP_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise ImageBuildError(
            f"downloading the {names} wheels failed ({_one_line(exc)}); {fix}"
        ) from exc
    if done.returncode != 0:
        raise ImageBuildError(
            f"downloading the {names} wheels failed: {_one_line(_pip_error(done.stderr or ''))}; {fix}"
        )
    for tool in tools:
        wheel = _wheel_in(dest, tool, machine)
        if wheel is None:
            raise ImageBuildError(
                f"pip did not leave a {tool.project} {tool.version} wheel for {machine} with the "
                f"pinned sha256 in {dest}; {fix}"
            )
        found[tool.project] = wheel
    return found


def extract_binaries(wheel: Path, tool: WheelTool, dest: Path) -> list[Path]:
    """Write ``tool``'s binaries out of ``wheel`` (a zip) into ``dest``, mode 0755.

    Returns:
        The files written, in ``tool.binaries`` order.

    Raises:
        ImageBuildError: the wheel is not a zip, or lacks a binary, or holds
            something else than a Linux executable there.
    """
    dest.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    try:
        with zipfile.ZipFile(wheel) as archive:
            for binary in tool.binaries:
                member = tool.member(binary)
                try:
                    info = archive.getinfo(member)
                except KeyError:
                    raise ImageBuildError(
                        f"{wheel.name} has no {member}: is it a {tool.project} {tool.version} wheel?"
                    ) from None
                target = dest / binary
                with archive.open(info) as source, target.open("wb") as out:
                    head = source.read(4)
                    if head != b"\x7fELF":
                        raise ImageBuildError(
                            f"{member} in {wheel.name} is not a Linux executable (ELF)"
                        )
                    out.write(head)
                    shutil.copyfileobj(source, out, 1 << 20)
                target.chmod(0o755)
                written.append(target)
    except (OSError, zipfile.BadZipFile) as exc:
        raise ImageBuildError(
            f"cannot extract {tool.project} from {wheel}: {_one_line(exc)}"
        ) from exc
    return written


def prepare_context(
    source: Path,
    dest: Path,
    machine: str,
    *,
    tools: Sequence[WheelTool] = RUNNER_WHEELS,
    environ: Mapping[str, str] | None = None,
    run: Runner = subprocess.run,
    log: Log = _log_stderr,
) -> Path:
    """Copy the build context ``source`` to ``dest``, add the wheels' binaries under ``tools/`` and the statx shim.

    The shim (see :func:`build_statx_shim`) goes under ``shim/``, which is
    empty when it could not be compiled.

    ``source`` (a checkout's ``images/runner`` or the wheel's copy) is only
    read. The wheels are fetched (see :func:`fetch_wheels`) into a temporary
    folder that is deleted after.

    Returns:
        ``dest``, ready for ``docker build`` with no network.

    Raises:
        ImageBuildError: the context cannot be copied, or a wheel cannot be had.
    """
    try:
        shutil.copytree(
            source,
            dest,
            ignore=shutil.ignore_patterns(TOOLS_DIR, STATX_SHIM_DIR, "__pycache__", "*.pyc"),
        )
    except (OSError, shutil.Error) as exc:
        raise ImageBuildError(
            f"cannot copy the build context {source} to {dest}: {_one_line(exc)}"
        ) from exc
    with tempfile.TemporaryDirectory(prefix="hookcage-wheels-") as downloads:
        wheels = fetch_wheels(
            Path(downloads), machine, tools=tools, environ=environ, run=run, log=log
        )
        installed: list[str] = []
        for tool in tools:
            for path in extract_binaries(wheels[tool.project], tool, dest / TOOLS_DIR):
                installed.append(path.name)
    log(f"verified the wheels' sha256 and extracted {', '.join(installed)}")
    build_statx_shim(source, dest / STATX_SHIM_DIR, machine, environ=environ, run=run, log=log)
    return dest


# --------------------------------------------------------------------------- offline base


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


@contextlib.contextmanager
def _require_debootstrap(
    *, search_path: str | None = None, cache: Path | None = None, log: Log = _log_stderr
) -> Iterator[Debootstrap]:
    """A debootstrap to run (the system's, else hookcage's copy, fetched once), after checking root and keyring.

    Args:
        search_path: where to look for an installed debootstrap (default ``$PATH`` and the sbin folders).
        cache: where a fetched copy is kept (default :func:`executor.sandbox.debootstrap.cache_dir`).
        log: where progress lines go.

    Raises:
        ImageBuildError: we are not root, the keyring is missing, or no debootstrap could be had.
    """
    if os.geteuid() != 0:
        raise ImageBuildError(
            "debootstrap needs root to build the offline base image: run the build as root "
            "(e.g. sudo), or load debian:bookworm-slim into the engine and build online"
        )
    if not DEBIAN_KEYRING.is_file():
        raise ImageBuildError(
            f"{DEBIAN_KEYRING} is missing, so Debian's signatures cannot be checked: "
            "install debian-archive-keyring (apt-get install debian-archive-keyring)"
        )
    try:
        with find_debootstrap(search_path=search_path, cache=cache, log=log) as tool:
            yield tool
    except DebootstrapFetchError as exc:
        raise ImageBuildError(str(exc)) from exc


_INDEX_FILES = ("InRelease", "Release", "Release.gpg", "Packages")
_PHASES = {
    "Retrieving": "retrieved and validated",
    "Validating": "retrieved and validated",
    "Extracting": "extracted",
    "Unpacking": "unpacked",
    "Configuring": "configured",
}


def _package_verb(words: Sequence[str]) -> str | None:
    """The verb of a per-package debootstrap line (``I: Retrieving libc6 2.36-9``), else None."""
    if len(words) < 3 or words[0] != "I:" or words[1] not in _PHASES:
        return None
    verb = words[1]
    if verb in ("Retrieving", "Validating"):
        return verb if len(words) == 4 and words[2] not in _INDEX_FILES else None
    return verb if len(words) == 3 and words[2].endswith("...") else None


_HEARTBEAT = 15.0
"""Seconds: a long phase (unpacking, apt-get in the chroot) says how far it got at least this often."""
_APT_PHASES = (("Get:", "downloaded"), ("Unpacking ", "unpacked"), ("Setting up ", "configured"))


def _debootstrap_phase(text: str) -> tuple[str, bool] | None:
    """(phase, counts a package) of a per-package debootstrap line, else None."""
    verb = _package_verb(text.split())
    return None if verb is None else (_PHASES[verb], verb != "Validating")


def _apt_phase(text: str) -> tuple[str, bool] | None:
    """(phase, counts a package) of a per-package ``apt-get install`` line, else None."""
    for prefix, phase in _APT_PHASES:
        if text.startswith(prefix):
            return phase, True
    return None


class _PhaseLog:
    """Fold a tool's per-package chatter into one line per phase, with a heartbeat in long phases.

    Args:
        log: where lines go.
        name: the tool's name, the prefix of each line.
        phase_of: (phase, counts) of a per-package line, else None.
        echo: also log the tool's other lines (debootstrap's are few; apt's are noise).
        clock: seconds (tests pass a fake).
    """

    def __init__(
        self,
        log: Log,
        name: str = "debootstrap",
        phase_of: Callable[[str], tuple[str, bool] | None] = _debootstrap_phase,
        *,
        echo: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._log = log
        self._name = name
        self._phase_of = phase_of
        self._echo = echo
        self._clock = clock
        self._said = clock()
        self._phase: str | None = None
        self._count = 0
        self.tail: collections.deque[str] = collections.deque(maxlen=20)
        self.last_error: str | None = None

    def _say(self, text: str) -> None:
        self._log(f"{self._name}: {text}")
        self._said = self._clock()

    def line(self, raw: str) -> None:
        """Take one output line of the tool."""
        text = raw.rstrip()
        if not text:
            return
        self.tail.append(text)
        found = self._phase_of(text)
        if found is not None:
            phase, counts = found
            if phase != self._phase:
                self.flush()
                self._phase = phase
            self._count += counts
            if self._clock() - self._said >= _HEARTBEAT:
                self._say(f"... {self._phase} {self._count} packages so far")
            return
        self.flush()
        if text.startswith("E:"):
            self.last_error = text[2:].strip()
        if self._echo or text.startswith(("E:", "W:")):
            self._say(text.removeprefix("I: "))

    def flush(self) -> None:
        """Emit the pending ``<phase> N packages`` line, if any."""
        if self._phase is not None:
            self._say(f"... {self._phase} {self._count} packages")
        self._phase, self._count = None, 0


def debootstrap_packages(packages: Sequence[str] = RUNNER_PACKAGES) -> list[str]:
    """The packages handed to ``debootstrap --include``: all but APT_AFTER_DEBOOTSTRAP."""
    return [name for name in packages if name not in APT_AFTER_DEBOOTSTRAP]


def _run_debootstrap(debootstrap: Debootstrap, rootfs: Path, mirror: str, log: Log) -> None:
    """Run debootstrap into ``rootfs``, logging a summary.

    Raises:
        ImageBuildError: debootstrap failed (its last error is in the message).
    """
    cmd = [
        *debootstrap.argv,
        "--variant=minbase",
        "--components=main",
        f"--include={','.join(debootstrap_packages())}",
        f"--keyring={DEBIAN_KEYRING}",
        DEBIAN_SUITE,
        str(rootfs),
        mirror,
    ]
    env = dict(os.environ)
    env.update(LC_ALL="C", DEBIAN_FRONTEND="noninteractive", **debootstrap.env)
    env["PATH"] = env.get("PATH", "") + ":/usr/local/sbin:/usr/sbin:/sbin:/usr/bin:/bin"
    log("running " + " ".join(cmd))
    summary = _PhaseLog(log)
    proc = subprocess.Popen(
        cmd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        text=True,
        errors="replace",
    )
    try:
        assert proc.stdout is not None
        for raw in proc.stdout:
            summary.line(raw)
        code = proc.wait()
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    summary.flush()
    if code != 0:
        logfile = rootfs / "debootstrap" / "debootstrap.log"
        with contextlib.suppress(OSError):
            for text in logfile.read_text(errors="replace").splitlines()[-15:]:
                log("debootstrap.log: " + text)
        reason = summary.last_error or (summary.tail[-1] if summary.tail else "no output")
        raise ImageBuildError(
            f"debootstrap {DEBIAN_SUITE} from {mirror} failed (exit {code}): {reason}; "
            f"check the mirror (set {MIRROR_ENV}) and that {rootfs.parent} allows exec and device files"
        )


_PROXY_VARIABLES = (
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
)


@contextlib.contextmanager
def _mirror_visible_in(rootfs: Path, mirror: str) -> Iterator[None]:
    """Make a ``file:`` mirror readable at its own path inside ``rootfs`` (a read-only bind mount).

    Raises:
        ImageBuildError: the bind mount failed.
    """
    if not mirror.startswith("file:"):
        yield
        return
    source = Path("/" + mirror.removeprefix("file:").lstrip("/"))
    target = rootfs / str(source).lstrip("/")
    target.mkdir(parents=True, exist_ok=True)
    for cmd in (
        ["mount", "--bind", str(source), str(target)],
        ["mount", "-o", "remount,bind,ro", str(target)],
    ):
        done = subprocess.run(cmd, capture_output=True, text=True, errors="replace", check=False)
        if done.returncode != 0:
            subprocess.run(["umount", "--lazy", str(target)], capture_output=True, check=False)
            raise ImageBuildError(
                f"cannot show the mirror {source} inside the chroot ({' '.join(cmd[:2])} failed: "
                f"{_one_line(done.stderr)})"
            )
    try:
        yield
    finally:
        subprocess.run(["umount", "--lazy", str(target)], capture_output=True, check=False)


def _apt_in_chroot(rootfs: Path, packages: Sequence[str], mirror: str, log: Log) -> None:
    """``apt-get install`` what debootstrap could not (APT_AFTER_DEBOOTSTRAP) in ``rootfs``.

    Uses the ``sources.list`` debootstrap wrote (the same mirror) and apt's own
    signature checks (the base has debian-archive-keyring).

    Raises:
        ImageBuildError: apt-get failed (its last error is in the message).
    """
    if not packages:
        return
    env = {"PATH": _IMAGE_PATH, "LC_ALL": "C", "DEBIAN_FRONTEND": "noninteractive"}
    env.update({k: v for k, v in os.environ.items() if k in _PROXY_VARIABLES})
    script = (
        "set -e; apt-get update -q --error-on=any; "
        'apt-get install -y -q --no-install-recommends "$@"; apt-get clean'
    )
    log(f"apt-get install {' '.join(packages)} in the chroot (debootstrap cannot resolve them)")
    summary = _PhaseLog(log, "apt-get", _apt_phase, echo=False)
    installed = ""
    with _mirror_visible_in(rootfs, mirror):
        proc = subprocess.Popen(
            ["chroot", str(rootfs), "/bin/sh", "-c", script, "sh", *packages],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            env=env,
        )
        try:
            assert proc.stdout is not None
            for raw in proc.stdout:
                summary.line(raw)
                if "newly installed" in raw:
                    installed = raw.strip()
            code = proc.wait()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    summary.flush()
    if code != 0:
        reason = summary.last_error or (summary.tail[-1] if summary.tail else "no output")
        raise ImageBuildError(
            f"apt-get install {' '.join(packages)} in the debootstrap tree failed "
            f"(exit {code}): {reason}; check the mirror {mirror} (set {MIRROR_ENV})"
        )
    log(f"apt-get: {installed or 'done'}")


def _slim_rootfs(rootfs: Path, context: Path, log: Log) -> None:
    """Run the context's ``slim.sh`` chrooted in ``rootfs`` and drop host leftovers.

    Raises:
        ImageBuildError: the script failed.
    """
    log("slimming the root filesystem (docs, man pages, locales, apt lists)")
    with (context / "slim.sh").open("rb") as script:
        done = subprocess.run(
            ["chroot", str(rootfs), "/bin/sh", "-s"],
            stdin=script,
            capture_output=True,
            env={"PATH": _IMAGE_PATH, "LC_ALL": "C"},
            check=False,
        )
    if done.returncode != 0:
        raise ImageBuildError(
            f"slimming the debootstrap tree failed (exit {done.returncode}): "
            + _one_line(done.stderr.decode(errors="replace")[-500:])
        )
    # debootstrap copies the host's resolver and hostname; the engine provides both at run time.
    for name in ("etc/resolv.conf", "etc/hostname"):
        target = rootfs / name
        if target.is_file() and not target.is_symlink():
            target.write_text("")


def _imported_id(answer: Any) -> str | None:
    """The image id an import's answer names (``{"status": "sha256:..."}``, Podman's), if any."""
    for text in str(answer).splitlines():
        with contextlib.suppress(ValueError):
            message = json.loads(text)
            for key in ("id", "status"):
                value = message.get(key) if isinstance(message, dict) else None
                if isinstance(value, str) and re.fullmatch(r"sha256:[0-9a-f]{64}", value):
                    return value
    return None


def _chunks(stream: IO[bytes], counter: list[int], size: int = 1 << 20) -> Iterator[bytes]:
    """Read ``stream`` in ``size`` chunks, adding their length to ``counter[0]``."""
    while chunk := stream.read(size):
        counter[0] += len(chunk)
        yield chunk


def _import_rootfs(client: Any, rootfs: Path, log: Log, tag: str = BASE_IMAGE) -> str:
    """Stream ``tar -C rootfs -c .`` into the engine's image import as ``tag`` (default BASE_IMAGE).

    Raises:
        ImageBuildError: tar or the import failed.
        SandboxUnavailable: the engine went away.
    """
    repository, version = tag.rsplit(":", 1)
    changes = [
        f"ENV PATH={_IMAGE_PATH}",
        "ENV LANG=C.UTF-8",
        'CMD ["bash"]',
        f"LABEL hookcage.image=base hookcage.version={__version__} "
        f"{PACKAGES_LABEL}={base_inputs()} "
        f'org.opencontainers.image.title="hookcage base ({DEBIAN_SUITE}, debootstrap minbase)"',
    ]
    log(f"importing the root filesystem as {tag}")
    with tempfile.TemporaryFile() as tar_err:
        tar = subprocess.Popen(
            [
                "tar",
                "-C",
                str(rootfs),
                "--numeric-owner",
                "--exclude=./dev/*",
                "--exclude=./proc/*",
                "--exclude=./sys/*",
                "--exclude=./debootstrap",
                "-c",
                ".",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=tar_err,
        )
        sent = [0]
        try:
            assert tar.stdout is not None
            with _engine_errors(f"importing {tag}"):
                answer = _api(client).import_image_from_stream(
                    _chunks(tar.stdout, sent), repository=repository, tag=version, changes=changes
                )
        finally:
            if tar.poll() is None and tar.stdout is not None:
                tar.stdout.close()
            code = tar.wait()
        if code != 0:
            tar_err.seek(0)
            raise ImageBuildError(
                f"tar of the debootstrap tree failed (exit {code}): "
                + _one_line(tar_err.read().decode(errors="replace")[-500:])
            )
    for text in str(answer).splitlines():
        with contextlib.suppress(ValueError):
            message = json.loads(text)
            if isinstance(message, dict) and message.get("error"):
                raise ImageBuildError(f"importing {tag} failed: {message['error']}")
    image_id = _image_id(client, tag)
    if image_id is None and (imported := _imported_id(answer)):
        # Podman 4.3's compatible import ignores the repository it is given (the image comes out
        # untagged, its id in the answer): tag it by that id.
        with _engine_errors(f"tagging {tag}"):
            _api(client).tag(imported, repository, version)
        image_id = _image_id(client, tag)
    if image_id is None:
        raise ImageBuildError(f"the engine accepted the import but has no {tag}: {answer!r}")
    log(f"imported {tag} ({image_id[:19]}, {sent[0] / 1e6:.0f} MB of tar)")
    return image_id


def _mount_points_under(path: Path) -> list[str]:
    """Mount points at or below ``path``, deepest first (from /proc/self/mountinfo)."""
    prefix = str(path)
    found: list[str] = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            fields = line.split()
            if len(fields) > 4:
                point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])
                if point == prefix or point.startswith(prefix + "/"):
                    found.append(point)
    return sorted(found, key=len, reverse=True)


def _remove_tree(path: Path, log: Log) -> None:
    """Delete a temporary root filesystem, never through a mount left inside it."""
    for point in _mount_points_under(path):
        subprocess.run(["umount", "--lazy", point], capture_output=True, check=False)
    left = _mount_points_under(path)
    if left:
        log(f"warning: not deleting {path}: still mounted below it: {', '.join(left)}")
        return
    try:
        shutil.rmtree(path)
    except OSError as exc:
        log(f"warning: could not delete {path}: {_one_line(exc)}")


def build_base_image(
    client: Client,
    *,
    mirror: str | None = None,
    force: bool = False,
    context: Path | None = None,
    log: Log = _log_stderr,
    tag: str = BASE_IMAGE,
    cache: Path | None = None,
    search_path: str | None = None,
) -> str:
    """Make BASE_IMAGE offline (debootstrap, slim, import), or reuse it when it is current.

    A present BASE_IMAGE is reused when its ``hookcage.packages`` label is
    :func:`base_inputs` (it holds every package of RUNNER_PACKAGES); one made
    for another package list is made again (and replaced under the same tag).

    Args:
        client: a connected docker-py client.
        mirror: the Debian mirror; default :func:`resolve_mirror`.
        force: debootstrap again even when a current BASE_IMAGE exists.
        context: the runner build context holding ``slim.sh``; default :func:`runner_context`.
        log: where progress lines go.
        tag: the image to make (default BASE_IMAGE; tests make a throwaway one).
        cache: where a fetched debootstrap is kept (default hookcage's cache).
        search_path: where to look for an installed debootstrap (default ``$PATH`` and the sbin folders).

    Returns:
        The base image's id (``sha256:...``).

    Raises:
        ImageBuildError: debootstrap is missing, we are not root, or a build step failed.
        SandboxUnavailable: the engine cannot be reached.
    """
    if not force:
        found = _image_labels(client, tag)
        if found is not None:
            existing, labels = found
            if labels.get(PACKAGES_LABEL) == base_inputs():
                log(f"reusing {tag} ({existing[:19]})")
                return existing
            log(
                f"{tag} ({existing[:19]}) was made for another package list: "
                "making it again with debootstrap"
            )
    context = context or runner_context()
    mirror_url = resolve_mirror(mirror)
    with _require_debootstrap(search_path=search_path, cache=cache, log=log) as debootstrap:
        rootfs = Path(tempfile.mkdtemp(prefix="hookcage-rootfs-"))
        try:
            _run_debootstrap(debootstrap, rootfs, mirror_url, log)
            _apt_in_chroot(
                rootfs, [p for p in RUNNER_PACKAGES if p in APT_AFTER_DEBOOTSTRAP], mirror_url, log
            )
            _slim_rootfs(rootfs, context, log)
            return _import_rootfs(client, rootfs, log, tag)
        finally:
            _remove_tree(rootfs, log)


# --------------------------------------------------------------------------- runner


_PULL_SILENCE = 20.0
"""Seconds the automatic choice waits for the engine to say anything while it pulls SLIM_IMAGE."""


def _pull_within(client: Any, silence: float) -> None:
    """Pull SLIM_IMAGE, giving up when the engine stays silent ``silence`` seconds (no registry answers).

    docker-py's ``pull`` waits without a limit, so the request is made with
    its lower layer and a read timeout; closing the response cancels the
    engine's pull.

    Raises:
        ImageBuildError: the pull failed or timed out (the message is the reason only).
    """
    api = _api(client)
    repository, tag = SLIM_IMAGE.split(":", 1)
    try:
        response = api._post(
            api._url("/images/create"),
            params={"fromImage": repository, "tag": tag},
            stream=True,
            timeout=silence,
        )
        try:
            api._raise_for_status(response)
            for message in api._stream_helper(response, decode=True):
                if isinstance(message, dict) and message.get("error"):
                    raise ImageBuildError(_one_line(message["error"]))
        finally:
            response.close()
    except BACKEND_ERRORS as exc:
        text = _one_line(getattr(exc, "explanation", None) or exc)
        if "timed out" in text.lower() or "timeout" in type(exc).__name__.lower():
            text = f"the engine got no answer from a registry in {silence:.0f} s"
        raise ImageBuildError(text) from exc
    if not image_exists(client, SLIM_IMAGE):
        raise ImageBuildError(f"the pull ended without {SLIM_IMAGE} in the engine")


def _pull_slim(client: Any, log: Log) -> None:
    """Pull SLIM_IMAGE (``offline=False``: waits as long as the engine works on it).

    Raises:
        ImageBuildError: the pull failed (no registry, no such image, ...).
        SandboxUnavailable: the engine cannot be reached.
    """
    log(f"pulling {SLIM_IMAGE}")
    repository, tag = SLIM_IMAGE.split(":", 1)
    try:
        with _engine_errors(f"pulling {SLIM_IMAGE}"):
            _api(client).pull(repository, tag=tag)
    except ImageBuildError as exc:
        raise ImageBuildError(
            f"{exc}; without a registry, build offline instead (offline=True / --offline, "
            "needs root; debootstrap is fetched with apt when not installed) or `docker load` the image"
        ) from exc.__cause__


def _choose_online(client: Any, log: Log, silence: float = _PULL_SILENCE) -> bool:
    """The automatic choice: online when SLIM_IMAGE is in the engine or a registry gives it, else offline.

    The pull is bounded by ``silence``: with no registry the choice takes
    seconds (an error from the engine) or ``silence`` at most (no answer).
    Says which path it took and why.

    Raises:
        SandboxUnavailable: the engine cannot be reached.
    """
    if image_exists(client, SLIM_IMAGE):
        log(f"building online: FROM {SLIM_IMAGE}, already in the engine")
        return True
    log(f"pulling {SLIM_IMAGE} (giving up after {silence:.0f} s without an answer)")
    try:
        _pull_within(client, silence)
    except ImageBuildError as exc:
        log(f"building offline (debootstrap, no registry needed): no {SLIM_IMAGE} ({exc})")
        return False
    log(f"building online: FROM {SLIM_IMAGE}, pulled from the registry")
    return True


def _docker_build(
    client: Any,
    context: Path,
    base: str,
    *,
    offline: bool,
    nocache: bool,
    mirror: str | None,
    inputs: str,
    log: Log,
) -> str:
    """``docker build`` the runner context FROM ``base``, label it with ``inputs``, tag RUNNER_IMAGE.

    The image's STATX_SHIM_LABEL says whether the context has the compiled shim.

    Raises:
        ImageBuildError: a build step failed (the last lines of output are logged).
        SandboxUnavailable: the engine cannot be reached.
    """
    buildargs = {"BASE": base, "VERSION": __version__, "PACKAGES": " ".join(RUNNER_PACKAGES)}
    if mirror and mirror.startswith(("http://", "https://")):
        buildargs["DEBIAN_MIRROR"] = mirror
    log(f"docker build {context} FROM {base} -> {RUNNER_IMAGE}")
    return docker_build(
        client,
        context,
        tag=RUNNER_IMAGE,
        buildargs=buildargs,
        labels={
            INPUTS_LABEL: inputs,
            STATX_SHIM_LABEL: "1" if (context / STATX_SHIM_DIR / STATX_SHIM_LIBRARY).is_file() else "0",
        },
        offline=offline,
        nocache=nocache,
        log=log,
    )


def docker_build(
    client: Client,
    context: Path,
    *,
    tag: str,
    buildargs: Mapping[str, str],
    labels: Mapping[str, str],
    offline: bool,
    nocache: bool = False,
    log: Log = _log_stderr,
) -> str:
    """``docker build`` the folder ``context`` (classic builder), tag it ``tag``, return its id.

    Args:
        offline: run the build's steps with no network (``--network none``).

    Raises:
        ImageBuildError: a build step failed (the last lines of output are logged).
        SandboxUnavailable: the engine cannot be reached.
    """
    tail: collections.deque[str] = collections.deque(maxlen=30)
    built: str | None = None
    with _engine_errors(f"building {tag}"):
        stream = _api(client).build(
            path=str(context),
            tag=tag,
            buildargs=dict(buildargs),
            rm=True,
            forcerm=True,
            pull=False,
            nocache=nocache,
            decode=True,
            timeout=_BUILD_TIMEOUT,
            network_mode="none" if offline else None,
            labels=dict(labels),
        )
        for chunk in stream:
            if "error" in chunk:
                for text in tail:
                    log("  " + text)
                raise ImageBuildError(f"building {tag} failed: {_one_line(chunk['error'])}")
            aux = chunk.get("aux")
            if isinstance(aux, dict) and "ID" in aux:
                built = str(aux["ID"])
            for text in str(chunk.get("stream", "")).splitlines():
                text = text.rstrip()
                if text:
                    tail.append(text)
                    if text.startswith(("Step ", "Successfully", "hookcage:")):
                        log("  " + (text if len(text) <= 100 else text[:97] + "..."))
    image_id = _image_id(client, tag)
    if image_id is None or (built is not None and built != image_id):
        raise ImageBuildError(f"the build finished but {tag} is not the built image")
    return image_id


def remove_superseded(
    client: Client, previous: Sequence[str | None], *, keep: set[str | None], log: Log
) -> None:
    """Remove the images (ids) a rebuild replaced, unless kept or still in use (logged, never raised)."""
    for image_id in previous:
        if image_id is None or image_id in keep:
            continue
        try:
            with _engine_errors(f"removing the superseded image {image_id[:19]}"):
                try:
                    _api(client).remove_image(image_id)
                except NotFound:
                    continue
        except ImageBuildError as exc:
            log(f"kept the superseded image {image_id[:19]} ({exc})")
        else:
            log(f"removed the superseded image {image_id[:19]}")


def runner_image_current(client: Client, context: Path | None = None) -> bool:
    """Whether RUNNER_IMAGE is present and was built from the current inputs.

    One inspect call (never builds, never pulls): callers that build only
    when needed (``hookcage demo``, the test fixtures) ask this, and then
    :func:`build_runner_image`, which rebuilds a stale image.

    Raises:
        SandboxUnavailable: the engine cannot be reached.
        ImageBuildError: the engine answered with an error, or the build context is missing.
    """
    found = _image_labels(client, RUNNER_IMAGE)
    if found is None:
        return False
    return found[1].get(INPUTS_LABEL) == runner_inputs(context or runner_context())


BUILD_TURN_WAIT = 3600.0
"""Seconds a build waits for another build of the same images on this machine before it fails."""


@contextlib.contextmanager
def build_turn(name: str, log: Log) -> Iterator[None]:
    """One build of ``name``'s images at a time on this machine, per user (a lock file).

    Two builds at once (two CI jobs on one runner, ``hookcage demo`` beside ``hookcage image
    build``) would both find the image missing or stale and both build it: the second tag wins,
    and the first caller goes on with an id that is no longer the tag's. Under the turn, the
    second finds the image the first built current and builds nothing. The lock lives in
    ``$TMPDIR/hookcage-builds-UID/`` (0700, this user's; the builds of one user share it
    whatever their ``HOME`` or ``HOOKCAGE_HOME``); a folder there that is not this user's own
    directory is not used (the build then goes on without a turn).
    """
    from filelock import FileLock, Timeout

    folder = Path(tempfile.gettempdir()) / f"hookcage-builds-{os.getuid()}"
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        info = folder.lstat()
        usable = os.path.isdir(folder) and not folder.is_symlink() and info.st_uid == os.getuid()
    except OSError:
        usable = False
    if not usable:
        log(f"warning: {folder} is not this user's own folder: building without waiting for other builds")
        yield
        return
    lock = FileLock(str(folder / f"{name}.lock"), mode=0o600)
    try:
        lock.acquire(timeout=1)
    except Timeout:
        log(f"another build of the {name} image runs on this machine: waiting for it to end")
        try:
            lock.acquire(timeout=BUILD_TURN_WAIT)
        except Timeout:
            raise ImageBuildError(
                f"another build of the {name} image on this machine has held {folder / (name + '.lock')} "
                f"for over {BUILD_TURN_WAIT / 60:.0f} minutes: wait for it, or end it and run the build again"
            ) from None
    try:
        yield
    finally:
        lock.release()


def build_runner_image(
    client: Client | None = None,
    *,
    offline: bool | None = None,
    log: Log = _log_stderr,
    mirror: str | None = None,
    force: bool = False,
    rebuild: bool = False,
    context: Path | None = None,
) -> str:
    """Make sure a current RUNNER_IMAGE exists, building it if needed, and return its id.

    Idempotent: when RUNNER_IMAGE exists with the current inputs (its
    ``hookcage.inputs`` label is :func:`runner_inputs`) and neither
    ``rebuild`` nor ``force`` is set, its id is returned at once (one
    inspect call, nothing built). An image built from other inputs (another
    package list, wheel pin, Dockerfile or ``slim.sh``; or by hand, with no
    label) is rebuilt, and so is the offline base when its package list is
    not the current one.

    Args:
        client: a docker-py client; default one from the environment (closed after).
        offline: True builds FROM a debootstrapped BASE_IMAGE (reused when
            current); False builds FROM SLIM_IMAGE, pulling it when absent;
            None (default) builds FROM SLIM_IMAGE when the engine has it or
            pulls it (giving up after 20 s without an answer), else offline.
        log: where progress lines go (default: stderr).
        mirror: the Debian mirror (default :func:`resolve_mirror`).
        force: rebuild everything: debootstrap a new base (offline) and build
            the runner without the layer cache.
        rebuild: run ``docker build`` again even if RUNNER_IMAGE is current,
            reusing the base and the layer cache (quick, and the same id,
            when nothing changed). Whenever an image is built, the images
            it replaced are removed when no container uses them.
        context: the build context (default :func:`runner_context`); only
            read: the build runs on a temporary copy with the wheels' binaries.

    Returns:
        The runner image's id (``sha256:...``).

    Raises:
        SandboxUnavailable: the Docker engine cannot be reached.
        ImageBuildError: the image could not be built; the message says what to do.
    """
    own_client = client is None
    engine: Any = _connect() if client is None else client
    started = time.monotonic()
    try:
        with build_turn("runner", log):
            context = context or runner_context()
            inputs = runner_inputs(context)
            found = _image_labels(engine, RUNNER_IMAGE)
            if found is not None and not (force or rebuild):
                existing, labels = found
                if labels.get(INPUTS_LABEL) == inputs:
                    log(f"{RUNNER_IMAGE} is present ({existing[:19]}); nothing to build")
                    return existing
                log(
                    f"{RUNNER_IMAGE} ({existing[:19]}) was built from other inputs "
                    "(package list, tool pins or Dockerfile): building it again"
                )
            previous: list[str | None] = [None if found is None else found[0]]
            use_offline = offline
            if use_offline is None:
                use_offline = not _choose_online(engine, log)
            machine = engine_machine(engine)
            with tempfile.TemporaryDirectory(prefix="hookcage-context-") as scratch:
                # The wheels first: a missing one fails in seconds, before any debootstrap.
                build_context = prepare_context(context, Path(scratch) / "runner", machine, log=log)
                if use_offline:
                    previous.append(_image_id(engine, BASE_IMAGE))
                    base_id = build_base_image(
                        engine, mirror=mirror, force=force, context=context, log=log
                    )
                    base = BASE_IMAGE
                    explicit_mirror = None  # nothing is installed during the build: no network
                else:
                    if not image_exists(engine, SLIM_IMAGE):
                        _pull_slim(engine, log)
                    base, base_id = SLIM_IMAGE, None
                    explicit_mirror = mirror or os.environ.get(MIRROR_ENV)
                image_id = _docker_build(
                    engine,
                    build_context,
                    base,
                    offline=use_offline,
                    nocache=force,
                    mirror=explicit_mirror,
                    inputs=inputs,
                    log=log,
                )
            remove_superseded(engine, previous, keep={image_id, base_id}, log=log)
            with _engine_errors(f"inspecting {RUNNER_IMAGE}"):
                size = int(_api(engine).inspect_image(image_id).get("Size", 0))
            log(
                f"built {RUNNER_IMAGE} ({image_id[:19]}, {size / 1e6:.1f} MB) "
                f"in {time.monotonic() - started:.0f} s"
            )
            return image_id
    finally:
        if own_client:
            engine.close()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m executor.sandbox.images``: build the runner image, print its id.

    Returns:
        The process exit code (0 built or present, 1 error).
    """
    parser = argparse.ArgumentParser(
        prog="python -m executor.sandbox.images", description=f"Build {RUNNER_IMAGE}."
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--offline",
        dest="offline",
        action="store_true",
        default=None,
        help="debootstrap the base (no registry needed)",
    )
    mode.add_argument(
        "--online",
        dest="offline",
        action="store_false",
        help=f"build FROM {SLIM_IMAGE}, pulling it if needed",
    )
    parser.add_argument(
        "--mirror", help=f"Debian mirror (default ${MIRROR_ENV}, apt's, or {DEFAULT_MIRROR})"
    )
    parser.add_argument(
        "--rebuild", action="store_true", help="docker build again (reuses the base)"
    )
    parser.add_argument(
        "--force", action="store_true", help="rebuild the base and the runner from scratch"
    )
    parser.add_argument(
        "--prepare",
        metavar="DIR",
        type=Path,
        help="only write a ready build context (with the wheels' binaries) to DIR, for a "
        "docker build by hand; needs no engine",
    )
    parser.add_argument(
        "--machine",
        help="with --prepare: the engine's machine (default this one's, "
        f"{normalize_machine(platform.machine())})",
    )
    args = parser.parse_args(argv)
    if args.prepare is not None:
        return _prepare_main(args.prepare, args.machine)
    try:
        image_id = build_runner_image(
            offline=args.offline, mirror=args.mirror, force=args.force, rebuild=args.rebuild
        )
    except HookcageError as exc:
        print(f"hookcage: error: {exc}", file=sys.stderr)
        return 1
    print(image_id)
    return 0


def _prepare_main(dest: Path, machine: str | None) -> int:
    """``--prepare DIR``: write the build context and print the build command."""
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        print(
            f"hookcage: error: {dest} exists and is not an empty folder: give a new one",
            file=sys.stderr,
        )
        return 1
    try:
        if dest.exists():
            dest.rmdir()
        prepare_context(runner_context(), dest, normalize_machine(machine or platform.machine()))
    except (HookcageError, OSError) as exc:
        shutil.rmtree(dest, ignore_errors=True)  # ours: it was absent or empty
        print(f"hookcage: error: {_one_line(exc)}", file=sys.stderr)
        return 1
    packages = " ".join(RUNNER_PACKAGES)
    print(
        f"docker build --build-arg BASE={SLIM_IMAGE} --build-arg VERSION={__version__} "
        f"--build-arg PACKAGES='{packages}' "
        f"--label {INPUTS_LABEL}={runner_inputs(dest)} -t {RUNNER_IMAGE} {dest}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
