"""Build the service image ``hookcage/service:<version>`` (and the example agent's) offline.

``compose.yaml`` runs ``hookcage serve --listen`` in ``hookcage/service`` and,
in its ``agent`` profile, an example headless agent in
``hookcage/compose-agent``. Both are built ``FROM`` the runner image
(:mod:`executor.provision.images`: it has python3 3.11 and uv), with nothing
downloaded inside the build (``--network none``, no registry):

1. the runner image is built first when it is missing or out of date
   (:func:`executor.provision.images.build_runner_image`);
2. on the host, this checkout's sources are copied to a temporary folder and
   ``pip wheel`` makes hookcage's wheel from the copy; ``pip download
   --only-binary=:all:`` fetches the wheel of every dependency for the
   runner's interpreter (CPython 3.11, glibc 2.36, the engine's machine),
   each pinned to the version installed on the host (the versions the
   tests ran with: :func:`dependency_pins`). ``$HOOKCAGE_WHEELHOUSE``, when
   set, is the only place pip looks (air-gapped sites);
3. ``images/service`` gets ``deps/`` (the dependencies' wheels and their
   ``requirements.txt``) and ``hookcage/`` (its wheel), and the image
   installs them into ``/opt/hookcage`` with ``uv pip install --no-index``;
   ``examples/compose-agent`` gets ``wheel/`` (hookcage's only) and the image
   installs it with ``--no-deps``: the client side needs the standard
   library only.

Both images carry ``hookcage.inputs``: a hash of the version, the runner
image's id, the engine's machine, the two build contexts, the sources and
the dependency pins (:func:`service_inputs`). :func:`build_service_images`
returns present images whose label matches at once and rebuilds them when
it differs (a changed source file, pin, Dockerfile or runner), so a stale
service image is never used.

Usable as ``hookcage image build --service`` or ``python -m executor.provision.service_image``.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from executor import __version__
from executor.errors import HookcageError
from executor.provision.build_context import WHEELHOUSE_ENV, engine_machine
from executor.provision.images import (
    build_runner_image,
    build_turn,
    docker_build,
    remove_superseded,
)
from executor.provision.recipe import INPUTS_LABEL, RUNNER_IMAGE
from executor.sandbox.docker import default_client
from executor.sandbox.docker.imagefacts import Client, ImageBuildError, inspect_image

__all__ = [
    "AGENT_IMAGE",
    "SERVICE_IMAGE",
    "TARGET_GLIBC",
    "TARGET_PYTHON",
    "build_service_images",
    "dependency_pins",
    "platform_tags",
    "prepare_contexts",
    "service_image_current",
    "service_inputs",
    "source_checkout",
    "source_digest",
]

SERVICE_IMAGE = f"hookcage/service:{__version__}"
"""``hookcage serve`` in a container: compose.yaml's service ``hookcage``."""
AGENT_IMAGE = f"hookcage/compose-agent:{__version__}"
"""compose.yaml's example headless agent (profile ``agent``)."""
TARGET_PYTHON = "3.11"
"""The runner's python3 (Debian bookworm): the dependency wheels are for it."""
TARGET_GLIBC = (2, 36)
"""The runner's glibc (Debian bookworm): the newest manylinux tag a wheel may carry."""
SOURCE_PARTS = ("pyproject.toml", "README.md", "executor", "images/runner")
"""What of a checkout the hookcage wheel is made from (pyproject.toml's wheel target and its readme)."""
SERVICE_CONTEXT = "images/service"
AGENT_CONTEXT = "examples/compose-agent"
AGENT_CONTEXT_SKIP = ("workspace", "config")
"""Folders of the agent's example that stay out of its image (they are mounted)."""
_SKIPPED_DIRS = frozenset({"__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache", "_images"})
_PIP_TIMEOUT = 900  # seconds for one pip run

Log = Callable[[str], None]
Runner = Callable[..., "subprocess.CompletedProcess[str]"]


def _log_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def _digest(data: object) -> str:
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def canonical_name(name: str) -> str:
    """A distribution name as PyPI compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


# --------------------------------------------------------------------------- sources


def source_checkout() -> Path:
    """The hookcage source checkout this code runs from (it holds pyproject.toml and images/service).

    Raises:
        ImageBuildError: hookcage is installed from a wheel, not run from a checkout.
    """
    root = Path(__file__).resolve().parents[2]
    try:
        name = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]["name"]
    except (OSError, ValueError, KeyError, TypeError):
        name = None
    if name != "hookcage" or not (root / SERVICE_CONTEXT / "Dockerfile").is_file():
        raise ImageBuildError(
            f"the service image is built from a hookcage source checkout, and {root} is not one "
            "(no pyproject.toml of hookcage or no images/service): run `hookcage image build "
            "--service` with the hookcage of a clone (pip install -e CLONE)"
        )
    return root


def _files(root: Path, parts: Sequence[str], skip: Sequence[str] = ()) -> Iterator[Path]:
    """The files under ``root/part`` for each part, relative to ``root``, in a stable order."""
    for part in parts:
        top = root / part
        if top.is_file():
            yield Path(part)
            continue
        for folder, dirs, names in os.walk(top):
            here = Path(folder)
            dirs[:] = sorted(
                d for d in dirs
                if d not in _SKIPPED_DIRS and (here / d).relative_to(top).as_posix() not in skip
            )
            for name in sorted(names):
                if not name.endswith((".pyc", ".pyo")):
                    yield (here / name).relative_to(root)


def _tree_digest(root: Path, parts: Sequence[str], skip: Sequence[str] = ()) -> str:
    """``sha256:`` over the relative paths and bytes of the files :func:`_files` lists.

    Raises:
        ImageBuildError: a file cannot be read.
    """
    digest = hashlib.sha256()
    for relative in _files(root, parts, skip):
        try:
            data = (root / relative).read_bytes()
        except OSError as exc:
            raise ImageBuildError(f"cannot read {root / relative}: {_one_line(exc)}") from exc
        digest.update(relative.as_posix().encode() + b"\0" + hashlib.sha256(data).digest())
    return "sha256:" + digest.hexdigest()


def source_digest(root: Path) -> str:
    """What hookcage's wheel is made of (SOURCE_PARTS of ``root``), hashed."""
    return _tree_digest(root, SOURCE_PARTS)


# --------------------------------------------------------------------------- dependencies

_REQUIREMENT = re.compile(r"\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)\s*(?:\[([^\]]*)\])?")
_EXTRA_MARKER = re.compile(r"""\bextra\s*==\s*['"]([^'"]+)['"]""")


def dependency_pins(
    requirements: Sequence[str],
    version_of: Callable[[str], tuple[str, Sequence[str]] | None] | None = None,
) -> dict[str, str]:
    """The version installed here of every distribution ``requirements`` need, transitively.

    A dependency behind an environment marker (``; python_version < "3.11"``)
    that is not installed here is not needed here, and is left out; one
    behind an ``extra`` marker counts only when that extra was asked for.

    Args:
        requirements: PEP 508 requirement strings (hookcage's ``dependencies``).
        version_of: name -> (installed version, its requirement strings), or
            None when not installed; default: this interpreter's
            ``importlib.metadata``.

    Returns:
        Canonical name -> installed version, sorted by name.

    Raises:
        ImageBuildError: an unconditional dependency is not installed here.
    """
    lookup = version_of or _installed
    pins: dict[str, str] = {}
    extras: dict[str, set[str]] = {}
    todo: list[tuple[str, frozenset[str]]] = [(r, frozenset()) for r in requirements]
    while todo:
        requirement, wanted_by = todo.pop()
        head, _, marker = requirement.partition(";")
        marker_extras = set(_EXTRA_MARKER.findall(marker))
        if marker_extras and not marker_extras & wanted_by:
            continue
        match = _REQUIREMENT.match(head)
        if match is None:
            raise ImageBuildError(f"cannot read the requirement {requirement!r}")
        name = canonical_name(match.group(1))
        asked = {e.strip() for e in (match.group(2) or "").split(",") if e.strip()}
        known = extras.setdefault(name, set())
        if name in pins and asked <= known:
            continue
        known |= asked
        found = lookup(name)
        if found is None:
            if marker.strip() and not marker_extras:
                continue  # a conditional dependency this interpreter does not need
            raise ImageBuildError(
                f"{name}, which hookcage needs, is not installed in {sys.executable}: install "
                "hookcage with its dependencies first (pip install -e .), the service image "
                "gets the versions installed here"
            )
        version, needs = found
        pins[name] = version
        todo += [(need, frozenset(known)) for need in needs]
    return dict(sorted(pins.items()))


def _installed(name: str) -> tuple[str, Sequence[str]] | None:
    try:
        dist = importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        return None
    return dist.version, list(dist.requires or [])


def _project_requirements(root: Path) -> list[str]:
    """``[project] dependencies`` of ``root/pyproject.toml``.

    Raises:
        ImageBuildError: the file cannot be read.
    """
    try:
        data = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
        return [str(r) for r in data["project"].get("dependencies", [])]
    except (OSError, ValueError, KeyError, AttributeError) as exc:
        raise ImageBuildError(f"cannot read the dependencies in {root / 'pyproject.toml'}: {_one_line(exc)}") from exc


def platform_tags(machine: str, glibc: tuple[int, int] = TARGET_GLIBC) -> list[str]:
    """The wheel platform tags the runner's interpreter takes, newest first (for ``pip --platform``).

    pip does not widen an explicit ``--platform`` to older manylinux tags, so
    every one is listed (``manylinux_2_36`` ... ``manylinux_2_5`` and the
    legacy aliases).
    """
    major, minor = glibc
    tags = [f"manylinux_{major}_{m}_{machine}" for m in range(minor, 4, -1)]
    legacy = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
    return tags + [f"{alias}_{machine}" for m, alias in legacy.items() if m <= minor]


# --------------------------------------------------------------------------- inputs


def service_inputs(root: Path, runner_id: str, machine: str, pins: Mapping[str, str]) -> str:
    """Everything the service and agent images are built from, hashed (their ``hookcage.inputs``).

    Raises:
        ImageBuildError: a file cannot be read.
    """
    return _digest(
        {
            "version": __version__,
            "runner": runner_id,
            "machine": machine,
            "python": TARGET_PYTHON,
            "glibc": list(TARGET_GLIBC),
            "service": _tree_digest(root, [SERVICE_CONTEXT]),
            "agent": _tree_digest(root, [AGENT_CONTEXT], AGENT_CONTEXT_SKIP),
            "source": source_digest(root),
            "pins": dict(pins),
        }
    )


def _current_ids(client: Client, inputs: str) -> tuple[str, str] | None:
    """The ids of both images when both are present and built from ``inputs``."""
    ids = []
    for tag in (SERVICE_IMAGE, AGENT_IMAGE):
        info = inspect_image(client, tag)
        labels = ((info or {}).get("Config") or {}).get("Labels") or {}
        if info is None or labels.get(INPUTS_LABEL) != inputs:
            return None
        ids.append(str(info["Id"]))
    return ids[0], ids[1]


def service_image_current(client: Client) -> bool:
    """Whether both images are present and built from this checkout, its pins and the present runner.

    Never builds. False when the runner image is missing, or hookcage is not
    run from a checkout.

    Raises:
        SandboxUnavailable: the engine cannot be reached.
    """
    try:
        root = source_checkout()
        runner = inspect_image(client, RUNNER_IMAGE)
        if runner is None:
            return False
        pins = dependency_pins(_project_requirements(root))
        inputs = service_inputs(root, str(runner["Id"]), engine_machine(client), pins)
    except ImageBuildError:
        return False
    return _current_ids(client, inputs) is not None


# --------------------------------------------------------------------------- wheels


def _pip(args: Sequence[str], what: str, fix: str, run: Runner, log: Log) -> None:
    """Run ``python -m pip ARGS``.

    Raises:
        ImageBuildError: pip could not be run or failed; the message has pip's error and ``fix``.
    """
    cmd = [sys.executable, "-m", "pip", *args, "--disable-pip-version-check", "--no-input",
           "--progress-bar=off"]
    log(f"{what} with pip")
    try:
        done = run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, errors="replace",
                   timeout=_PIP_TIMEOUT, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise ImageBuildError(f"{what} failed ({_one_line(exc)}); {fix}") from exc
    if done.returncode != 0:
        lines = [line.strip() for line in (done.stderr or "").splitlines() if line.strip()]
        errors = [line for line in lines if line.startswith("ERROR:")]
        reason = (errors or lines or ["no output"])[-1]
        raise ImageBuildError(f"{what} failed: {_one_line(reason)}; {fix}")


def _index_args(environ: Mapping[str, str]) -> list[str]:
    """pip's index options: only ``$HOOKCAGE_WHEELHOUSE`` when it is set, else pip's own configuration.

    Raises:
        ImageBuildError: ``$HOOKCAGE_WHEELHOUSE`` is set but is not a folder.
    """
    house = environ.get(WHEELHOUSE_ENV)
    if not house:
        return []
    folder = Path(house).expanduser()
    if not folder.is_dir():
        raise ImageBuildError(f"{WHEELHOUSE_ENV}={house} is not a folder: point it at a folder of "
                              "wheels, or unset it to let pip use its index")
    return ["--no-index", "--find-links", str(folder)]


def _wheel_name(path: Path) -> str:
    """The canonical distribution name of a wheel file (its name's first field)."""
    return canonical_name(path.name.split("-", 1)[0])


def fetch_service_wheels(
    source: Path,
    dest: Path,
    machine: str,
    pins: Mapping[str, str],
    *,
    environ: Mapping[str, str] | None = None,
    run: Runner = subprocess.run,
    log: Log = _log_stderr,
) -> Path:
    """Make hookcage's wheel from ``source`` into ``dest/hookcage`` and download its dependencies' into ``dest/deps``.

    ``dest/deps/requirements.txt`` lists every dependency wheel as ``name==version``.

    Returns:
        hookcage's wheel.

    Raises:
        ImageBuildError: a wheel could not be made or had, or pip brought a
            distribution that is not pinned (its version would not be in the label).
    """
    env = os.environ if environ is None else environ
    index = _index_args(env)
    house = f"{WHEELHOUSE_ENV} ({env.get(WHEELHOUSE_ENV)})" if index else "pip's index"
    own, deps = dest / "hookcage", dest / "deps"
    own.mkdir(parents=True, exist_ok=True)
    deps.mkdir(parents=True, exist_ok=True)
    _pip(["wheel", "--no-deps", "--wheel-dir", str(own), *index, str(source)],
         "making hookcage's wheel",
         f"pip builds it with hatchling, from {house}: check that it can be had there", run, log)
    made = sorted(own.glob("hookcage-*.whl"))
    if len(made) != 1:
        raise ImageBuildError(f"pip wheel left {len(made)} hookcage wheels instead of one")
    platforms = [arg for tag in platform_tags(machine) for arg in ("--platform", tag)]
    with tempfile.TemporaryDirectory(prefix="hookcage-pins-") as scratch:
        constraints = Path(scratch) / "constraints.txt"
        constraints.write_text("".join(f"{name}=={version}\n" for name, version in pins.items()))
        _pip(["download", "--only-binary=:all:", *platforms, "--python-version", TARGET_PYTHON,
              "--implementation", "cp", "--abi", "cp" + TARGET_PYTHON.replace(".", ""),
              "--dest", str(deps), "--constraint", str(constraints), *index, str(made[0])],
             f"downloading the wheels of hookcage's dependencies (CPython {TARGET_PYTHON}, {machine})",
             f"every dependency must be had as a wheel for CPython {TARGET_PYTHON} on manylinux "
             f"{machine} at the version installed here, from {house}", run, log)
    for copy in deps.glob("hookcage-*.whl"):
        copy.unlink()  # pip download puts the requirement itself there too
    wheels = {_wheel_name(p): p.name.split("-")[1] for p in deps.glob("*.whl")}
    unpinned = sorted(set(wheels) - set(pins))
    if unpinned:
        raise ImageBuildError(
            f"pip brought {', '.join(unpinned)}, which is not installed here, so its version "
            f"cannot be pinned: install it here (pip install {' '.join(unpinned)}) and build again"
        )
    (deps / "requirements.txt").write_text("".join(f"{n}=={v}\n" for n, v in sorted(wheels.items())))
    missing = sorted(set(pins) - set(wheels))
    if missing:
        log(f"not needed by CPython {TARGET_PYTHON} on Linux, so not in the image: {', '.join(missing)}")
    return made[0]


def prepare_contexts(
    root: Path,
    dest: Path,
    machine: str,
    pins: Mapping[str, str],
    *,
    environ: Mapping[str, str] | None = None,
    run: Runner = subprocess.run,
    log: Log = _log_stderr,
) -> tuple[Path, Path, Path]:
    """Write the service's and the agent's build contexts, with their wheels, under ``dest``.

    The sources are copied first and the wheel and :func:`service_inputs`
    come from that copy, so the label says exactly what was built even if
    the checkout changes meanwhile.

    Returns:
        (service context, agent context, the copy of the sources: what
        :func:`service_inputs` is computed from for the label).

    Raises:
        ImageBuildError: a file cannot be copied, or a wheel cannot be had.
    """
    snapshot = dest / "source"
    for parts, skip in (
        (SOURCE_PARTS, ()),
        ((SERVICE_CONTEXT,), ()),
        ((AGENT_CONTEXT,), AGENT_CONTEXT_SKIP),
    ):
        for relative in _files(root, parts, skip):
            target = snapshot / relative
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(root / relative, target)
            except OSError as exc:
                raise ImageBuildError(f"cannot copy {root / relative}: {_one_line(exc)}") from exc
    service = dest / "service"
    agent = dest / "agent"
    shutil.copytree(snapshot / SERVICE_CONTEXT, service)
    shutil.copytree(snapshot / AGENT_CONTEXT, agent)
    wheel = fetch_service_wheels(snapshot, service, machine, pins, environ=environ, run=run, log=log)
    (agent / "wheel").mkdir()
    shutil.copy2(wheel, agent / "wheel" / wheel.name)
    count = len(list((service / "deps").glob("*.whl")))
    log(f"prepared hookcage's wheel ({wheel.name}) and {count} of its dependencies")
    return service, agent, snapshot


# --------------------------------------------------------------------------- build


def build_service_images(
    client: Client | None = None,
    *,
    offline: bool | None = None,
    mirror: str | None = None,
    rebuild: bool = False,
    force: bool = False,
    log: Log = _log_stderr,
    environ: Mapping[str, str] | None = None,
) -> tuple[str, str]:
    """Make sure current SERVICE_IMAGE and AGENT_IMAGE exist, building what is needed.

    Idempotent: when both carry the current :func:`service_inputs` and
    neither ``rebuild`` nor ``force`` is set, their ids come back at once.
    The runner image is built first when missing or out of date (``offline``
    and ``mirror`` are for that build; it is never forced from here).

    Args:
        rebuild: ``docker build`` both images again (quick with the layer cache).
        force: build both images again without the layer cache.

    Returns:
        (service image id, agent image id).

    Raises:
        SandboxUnavailable: the engine cannot be reached.
        ImageBuildError: an image could not be built; the message says what to do.
    """
    root = source_checkout()
    own_client = client is None
    engine: Any = default_client(timeout=1800) if client is None else client
    started = time.monotonic()
    try:
        with build_turn("service", log):
            runner_id = build_runner_image(engine, offline=offline, mirror=mirror, log=log)
            machine = engine_machine(engine)
            pins = dependency_pins(_project_requirements(root))
            present = _current_ids(engine, service_inputs(root, runner_id, machine, pins))
            if present is not None and not (rebuild or force):
                log(f"{SERVICE_IMAGE} and {AGENT_IMAGE} are present and current; nothing to build")
                return present
            previous = [(inspect_image(engine, tag) or {}).get("Id") for tag in (SERVICE_IMAGE, AGENT_IMAGE)]
            if present is None and any(previous):
                log("the service images were built from other inputs (sources, dependencies, "
                    "Dockerfiles or runner): building them again")
            with tempfile.TemporaryDirectory(prefix="hookcage-service-") as scratch:
                service, agent, snapshot = prepare_contexts(root, Path(scratch), machine, pins,
                                                            environ=environ, log=log)
                inputs = service_inputs(snapshot, runner_id, machine, pins)
                buildargs = {"RUNNER": RUNNER_IMAGE, "VERSION": __version__}
                ids = []
                for tag, context in ((SERVICE_IMAGE, service), (AGENT_IMAGE, agent)):
                    log(f"docker build {context.name} FROM {RUNNER_IMAGE} -> {tag} (no network)")
                    ids.append(docker_build(engine, context, tag=tag, buildargs=buildargs,
                                            labels={INPUTS_LABEL: inputs}, offline=True,
                                            nocache=force, log=log))
            remove_superseded(engine, previous, keep={*ids, None}, log=log)
            sizes = [int((inspect_image(engine, image_id) or {}).get("Size", 0)) for image_id in ids]
            log(f"built {SERVICE_IMAGE} ({ids[0][:19]}, {sizes[0] / 1e6:.1f} MB) and {AGENT_IMAGE} "
                f"({ids[1][:19]}, {sizes[1] / 1e6:.1f} MB) in {time.monotonic() - started:.0f} s")
            return ids[0], ids[1]
    finally:
        if own_client:
            engine.close()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m executor.provision.service_image [--rebuild] [--force]``: build, print both ids."""
    args = list(sys.argv[1:] if argv is None else argv)
    unknown = [a for a in args if a not in ("--rebuild", "--force")]
    if unknown:
        print(f"hookcage: error: unknown argument {unknown[0]!r} (use --rebuild or --force)", file=sys.stderr)
        return 2
    try:
        ids = build_service_images(rebuild="--rebuild" in args, force="--force" in args)
    except HookcageError as exc:
        print(f"hookcage: error: {exc}", file=sys.stderr)
        return 1
    print(f"{SERVICE_IMAGE} {ids[0]}\n{AGENT_IMAGE} {ids[1]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
