"""The runner's build context, ready for a ``docker build`` with no network.

A temporary copy of ``images/runner`` gets the pinned wheels' binaries (uv,
uvx, ruff) under ``tools/``, each wheel fetched with pip (or taken from
``$HOOKCAGE_WHEELHOUSE``) and checked against its pinned sha256, and the
statx shim compiled with the host's cc under ``shim/``.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from executor.provision.recipe import (
    RUNNER_WHEELS,
    STATX_SHIM_DIR,
    STATX_SHIM_LIBRARY,
    STATX_SHIM_SOURCE,
    TOOLS_DIR,
    Log,
    WheelTool,
    log_stderr,
    shim_compiler,
)
from executor.sandbox.docker.imagefacts import (
    Client,
    ImageBuildError,
    api_of,
    engine_errors,
    squashed,
)

__all__ = [
    "WHEELHOUSE_ENV",
    "Runner",
    "build_statx_shim",
    "engine_machine",
    "extract_binaries",
    "fetch_wheels",
    "normalize_machine",
    "prepare_context",
]

WHEELHOUSE_ENV = "HOOKCAGE_WHEELHOUSE"
"""A folder holding the pinned wheels: when set, they are taken from there and pip is not run."""
_PIP_TIMEOUT = 900  # seconds for the whole pip download
_MACHINES = {"amd64": "x86_64", "x86-64": "x86_64", "arm64": "aarch64", "armv8": "aarch64"}

Runner = Callable[..., "subprocess.CompletedProcess[str]"]


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
    log: Log = log_stderr,
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
        failure = squashed(exc)
    else:
        if done.returncode == 0 and output.is_file():
            output.chmod(0o644)
            log(f"compiled the statx shim ({STATX_SHIM_LIBRARY}) with {compiler}")
            return True
        failure = squashed((done.stderr or "").strip() or f"exit status {done.returncode}")
    output.unlink(missing_ok=True)
    log(f"{compiler} could not compile {STATX_SHIM_SOURCE} ({failure}): building without the statx shim; {_NO_SHIM}")
    return False


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
    with engine_errors("asking the engine for its architecture"):
        info = api_of(client).info()
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
            "RUNNER_WHEELS in executor/provision/recipe.py"
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


def fetch_wheels(
    dest: Path,
    machine: str,
    *,
    tools: Sequence[WheelTool] = RUNNER_WHEELS,
    environ: Mapping[str, str] | None = None,
    run: Runner = subprocess.run,
    log: Log = log_stderr,
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
            f"downloading the {names} wheels failed ({squashed(exc)}); {fix}"
        ) from exc
    if done.returncode != 0:
        raise ImageBuildError(
            f"downloading the {names} wheels failed: {squashed(_pip_error(done.stderr or ''))}; {fix}"
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
            f"cannot extract {tool.project} from {wheel}: {squashed(exc)}"
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
    log: Log = log_stderr,
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
            f"cannot copy the build context {source} to {dest}: {squashed(exc)}"
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

