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
  ``mmdebstrap --variant=minbase`` from a Debian mirror (or a local
  ``file:`` one), slimmed, its tar streamed into the engine's image import
  (:mod:`executor.provision.base_image`). No registry is touched and the
  ``docker build`` runs with no network at all. Needs root; an mmdebstrap
  that is not installed is fetched with apt into hookcage's cache
  (:mod:`executor.provision.mmdebstrap`), nothing system-wide.

By default the choice is automatic: online when the engine has
``debian:bookworm-slim`` or a registry gives it (the pull attempt gives up
after 20 s without an answer), offline otherwise; the log says which.

``build_runner_image`` is idempotent: an existing runner image built from the
same inputs (its ``hookcage.inputs`` label: a hash of the package list, the
wheel pins and the Dockerfile and ``slim.sh``) is returned as is; one built
from other inputs is rebuilt (``rebuild=True`` runs ``docker build`` again
anyway, which the layer cache makes quick; ``force=True`` also re-creates the
base). The base image is reused while its ``hookcage.packages`` label matches
the package list, so mmdebstrap runs once per package list and machine.

Usable as ``python -m executor.provision.images [--offline|--online] [--rebuild] [--force]``,
or ``python -m executor.provision.images --prepare DIR`` to write a ready build context
for a ``docker build`` by hand.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from executor import __version__
from executor.errors import HookcageError
from executor.provision.base_image import build_base_image
from executor.provision.build_context import engine_machine, normalize_machine, prepare_context
from executor.provision.mirror import DEFAULT_MIRROR, MIRROR_ENV
from executor.provision.recipe import (
    BASE_IMAGE,
    INPUTS_LABEL,
    RUNNER_IMAGE,
    RUNNER_PACKAGES,
    SLIM_IMAGE,
    STATX_SHIM_DIR,
    STATX_SHIM_LIBRARY,
    Log,
    log_stderr,
    runner_context,
    runner_inputs,
)
from executor.sandbox.docker import BACKEND_ERRORS, NotFound, default_client
from executor.sandbox.docker.imagefacts import (
    STATX_SHIM_LABEL,
    Client,
    ImageBuildError,
    api_of,
    engine_errors,
    image_exists,
    image_labels,
    local_image_id,
    squashed,
)

__all__ = [
    "BUILD_TURN_WAIT",
    "build_runner_image",
    "build_turn",
    "docker_build",
    "main",
    "remove_superseded",
    "runner_image_current",
]

_BUILD_TIMEOUT = 1800  # seconds without a byte from the engine before a build read gives up


def _connect() -> Any:
    """A client from the environment (``DOCKER_HOST`` etc.).

    Raises:
        SandboxUnavailable: the engine cannot be reached.
    """
    return default_client(timeout=_BUILD_TIMEOUT)


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
    api = api_of(client)
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
                    raise ImageBuildError(squashed(message["error"]))
        finally:
            response.close()
    except BACKEND_ERRORS as exc:
        text = squashed(getattr(exc, "explanation", None) or exc)
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
        with engine_errors(f"pulling {SLIM_IMAGE}"):
            api_of(client).pull(repository, tag=tag)
    except ImageBuildError as exc:
        raise ImageBuildError(
            f"{exc}; without a registry, build offline instead (offline=True / --offline, "
            "needs root; mmdebstrap is fetched with apt when not installed) or `docker load` the image"
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
        log(f"building offline (mmdebstrap, no registry needed): no {SLIM_IMAGE} ({exc})")
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
    log: Log = log_stderr,
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
    with engine_errors(f"building {tag}"):
        stream = api_of(client).build(
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
                raise ImageBuildError(f"building {tag} failed: {squashed(chunk['error'])}")
            aux = chunk.get("aux")
            if isinstance(aux, dict) and "ID" in aux:
                built = str(aux["ID"])
            for text in str(chunk.get("stream", "")).splitlines():
                text = text.rstrip()
                if text:
                    tail.append(text)
                    if text.startswith(("Step ", "Successfully", "hookcage:")):
                        log("  " + (text if len(text) <= 100 else text[:97] + "..."))
    image_id = local_image_id(client, tag)
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
            with engine_errors(f"removing the superseded image {image_id[:19]}"):
                try:
                    api_of(client).remove_image(image_id)
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
    found = image_labels(client, RUNNER_IMAGE)
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
    log: Log = log_stderr,
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
        offline: True builds FROM BASE_IMAGE, made by mmdebstrap (reused when
            current); False builds FROM SLIM_IMAGE, pulling it when absent;
            None (default) builds FROM SLIM_IMAGE when the engine has it or
            pulls it (giving up after 20 s without an answer), else offline.
        log: where progress lines go (default: stderr).
        mirror: the Debian mirror (default :func:`resolve_mirror`).
        force: rebuild everything: a new base by mmdebstrap (offline) and build
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
            found = image_labels(engine, RUNNER_IMAGE)
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
                # The wheels first: a missing one fails in seconds, before any mmdebstrap.
                build_context = prepare_context(context, Path(scratch) / "runner", machine, log=log)
                if use_offline:
                    previous.append(local_image_id(engine, BASE_IMAGE))
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
            with engine_errors(f"inspecting {RUNNER_IMAGE}"):
                size = int(api_of(engine).inspect_image(image_id).get("Size", 0))
            log(
                f"built {RUNNER_IMAGE} ({image_id[:19]}, {size / 1e6:.1f} MB) "
                f"in {time.monotonic() - started:.0f} s"
            )
            return image_id
    finally:
        if own_client:
            engine.close()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m executor.provision.images``: build the runner image, print its id.

    Returns:
        The process exit code (0 built or present, 1 error).
    """
    parser = argparse.ArgumentParser(
        prog="python -m executor.provision.images", description=f"Build {RUNNER_IMAGE}."
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--offline",
        dest="offline",
        action="store_true",
        default=None,
        help="make the base with mmdebstrap (no registry needed)",
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
        print(f"hookcage: error: {squashed(exc)}", file=sys.stderr)
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
