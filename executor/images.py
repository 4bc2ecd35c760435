"""Build the default runner image, ``hookcage/runner:<version>``, with or without a registry.

The runner image (``images/runner/Dockerfile``) is Debian bookworm plus sh,
bash, coreutils, python3, jq, git, ca-certificates, procps and iproute2. It
is built ``FROM`` one of two bases:

- **online**: ``debian:bookworm-slim`` from the engine (pulled only when
  ``offline=False``); the Dockerfile ``apt-get install``s what is missing, so
  the build needs a Debian mirror.
- **offline**: ``hookcage/base:bookworm-<version>``, made on this machine by
  ``debootstrap --variant=minbase`` from a Debian mirror, slimmed, and
  streamed as a tar into the engine's image import. No registry is touched
  and the ``docker build`` runs with no network at all. Needs root and
  debootstrap.

``build_runner_image`` is idempotent: an existing runner image is returned as
is (``rebuild=True`` runs ``docker build`` again, which the layer cache makes
quick; ``force=True`` also re-creates the base). The base image is reused
whenever present, so debootstrap runs once per version and machine.

Usable as ``python -m executor.images [--offline|--online] [--rebuild] [--force]``.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, TypeAlias

import docker  # type: ignore[import-untyped, unused-ignore]
import docker.errors  # type: ignore[import-untyped, unused-ignore]

from executor import __version__
from executor.errors import HookcageError, SandboxError, SandboxUnavailable
from executor.sandbox.docker import BACKEND_ERRORS, DEFAULT_IMAGE, default_client, map_engine_error

__all__ = [
    "BASE_IMAGE",
    "DEFAULT_MIRROR",
    "MIRROR_ENV",
    "RUNNER_IMAGE",
    "RUNNER_PACKAGES",
    "SLIM_IMAGE",
    "ImageBuildError",
    "build_base_image",
    "build_runner_image",
    "image_exists",
    "mirror_from_apt_sources",
    "resolve_mirror",
    "runner_context",
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
    "jq",
    "git",
    "ca-certificates",
    "procps",
    "iproute2",
)
"""Debian packages the runner image carries on top of a minimal base."""

DEBIAN_KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")
_IMAGE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_BUILD_TIMEOUT = 1800  # seconds without a byte from the engine before a build read gives up

Log = Callable[[str], None]
Client: TypeAlias = "docker.DockerClient | docker.APIClient"
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
        if isinstance(mapped, SandboxUnavailable) and not isinstance(exc, docker.errors.NotFound):
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


def _image_id(client: Any, tag: str) -> str | None:
    """The id (``sha256:...``) of the local image ``tag``, or None when absent."""
    with _engine_errors(f"inspecting image {tag}"):
        try:
            info = _api(client).inspect_image(tag)
        except docker.errors.NotFound:
            return None
    return str(info["Id"])


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


# --------------------------------------------------------------------------- offline base


def runner_context() -> Path:
    """The runner's build context: ``images/runner`` of a checkout, or its copy in the wheel.

    Raises:
        ImageBuildError: the directory or its Dockerfile is missing.
    """
    here = Path(__file__).resolve().parent
    candidates = (here.parent / "images" / "runner", here / "_images" / "runner")
    context = next((c for c in candidates if (c / "Dockerfile").is_file()), candidates[0])
    if not (context / "Dockerfile").is_file():
        raise ImageBuildError(
            f"the runner build context {context} is missing: "
            "build from a hookcage source checkout, or pass context= a copy of images/runner"
        )
    return context


def _require_debootstrap() -> str:
    """Path of a usable debootstrap, after checking root and the Debian keyring.

    Raises:
        ImageBuildError: debootstrap is not installed, we are not root, or the keyring is missing.
    """
    found = shutil.which("debootstrap") or shutil.which(
        "debootstrap", path="/usr/sbin:/sbin:/usr/local/sbin"
    )
    if found is None:
        raise ImageBuildError(
            "building the runner image offline needs debootstrap: install debootstrap "
            "(apt-get install debootstrap) or load debian:bookworm-slim into the engine "
            "(docker load) and build online"
        )
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
    return found


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


class _DebootstrapLog:
    """Fold debootstrap's per-package chatter into one line per phase."""

    def __init__(self, log: Log) -> None:
        self._log = log
        self._phase: str | None = None
        self._count = 0
        self.tail: collections.deque[str] = collections.deque(maxlen=20)
        self.last_error: str | None = None

    def line(self, raw: str) -> None:
        """Take one output line of debootstrap."""
        text = raw.rstrip()
        if not text:
            return
        self.tail.append(text)
        verb = _package_verb(text.split())
        if verb is not None:
            if _PHASES[verb] != self._phase:
                self.flush()
                self._phase = _PHASES[verb]
            if verb != "Validating":
                self._count += 1
            return
        self.flush()
        if text.startswith("E:"):
            self.last_error = text[2:].strip()
        self._log("debootstrap: " + text.removeprefix("I: "))

    def flush(self) -> None:
        """Emit the pending ``<phase> N packages`` line, if any."""
        if self._phase is not None:
            self._log(f"debootstrap: ... {self._phase} {self._count} packages")
        self._phase, self._count = None, 0


def _run_debootstrap(debootstrap: str, rootfs: Path, mirror: str, log: Log) -> None:
    """Run debootstrap into ``rootfs``, logging a summary.

    Raises:
        ImageBuildError: debootstrap failed (its last error is in the message).
    """
    cmd = [
        debootstrap,
        "--variant=minbase",
        "--components=main",
        f"--include={','.join(RUNNER_PACKAGES)}",
        f"--keyring={DEBIAN_KEYRING}",
        DEBIAN_SUITE,
        str(rootfs),
        mirror,
    ]
    env = dict(os.environ)
    env.update(LC_ALL="C", DEBIAN_FRONTEND="noninteractive")
    env["PATH"] = env.get("PATH", "") + ":/usr/local/sbin:/usr/sbin:/sbin:/usr/bin:/bin"
    log("running " + " ".join(cmd))
    summary = _DebootstrapLog(log)
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


def _chunks(stream: IO[bytes], counter: list[int], size: int = 1 << 20) -> Iterator[bytes]:
    """Read ``stream`` in ``size`` chunks, adding their length to ``counter[0]``."""
    while chunk := stream.read(size):
        counter[0] += len(chunk)
        yield chunk


def _import_rootfs(client: Any, rootfs: Path, log: Log) -> str:
    """Stream ``tar -C rootfs -c .`` into the engine's image import as BASE_IMAGE.

    Raises:
        ImageBuildError: tar or the import failed.
        SandboxUnavailable: the engine went away.
    """
    repository, tag = BASE_IMAGE.rsplit(":", 1)
    changes = [
        f"ENV PATH={_IMAGE_PATH}",
        "ENV LANG=C.UTF-8",
        'CMD ["bash"]',
        f"LABEL hookcage.image=base hookcage.version={__version__} "
        f'org.opencontainers.image.title="hookcage base ({DEBIAN_SUITE}, debootstrap minbase)"',
    ]
    log(f"importing the root filesystem as {BASE_IMAGE}")
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
            with _engine_errors(f"importing {BASE_IMAGE}"):
                answer = _api(client).import_image_from_stream(
                    _chunks(tar.stdout, sent), repository=repository, tag=tag, changes=changes
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
                raise ImageBuildError(f"importing {BASE_IMAGE} failed: {message['error']}")
    image_id = _image_id(client, BASE_IMAGE)
    if image_id is None:
        raise ImageBuildError(f"the engine accepted the import but has no {BASE_IMAGE}: {answer!r}")
    log(f"imported {BASE_IMAGE} ({image_id[:19]}, {sent[0] / 1e6:.0f} MB of tar)")
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
) -> str:
    """Make BASE_IMAGE offline (debootstrap, slim, import), or reuse it when present.

    Args:
        client: a connected docker-py client.
        mirror: the Debian mirror; default :func:`resolve_mirror`.
        force: debootstrap again even when BASE_IMAGE exists.
        context: the runner build context holding ``slim.sh``; default :func:`runner_context`.
        log: where progress lines go.

    Returns:
        The base image's id (``sha256:...``).

    Raises:
        ImageBuildError: debootstrap is missing, we are not root, or a build step failed.
        SandboxUnavailable: the engine cannot be reached.
    """
    if not force:
        existing = _image_id(client, BASE_IMAGE)
        if existing is not None:
            log(f"reusing {BASE_IMAGE} ({existing[:19]})")
            return existing
    debootstrap = _require_debootstrap()
    context = context or runner_context()
    mirror_url = resolve_mirror(mirror)
    rootfs = Path(tempfile.mkdtemp(prefix="hookcage-rootfs-"))
    try:
        _run_debootstrap(debootstrap, rootfs, mirror_url, log)
        _slim_rootfs(rootfs, context, log)
        return _import_rootfs(client, rootfs, log)
    finally:
        _remove_tree(rootfs, log)


# --------------------------------------------------------------------------- runner


def _pull_slim(client: Any, log: Log) -> None:
    """Pull SLIM_IMAGE.

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
            "needs debootstrap and root) or `docker load` the image"
        ) from exc.__cause__


def _docker_build(
    client: Any,
    context: Path,
    base: str,
    *,
    offline: bool,
    nocache: bool,
    mirror: str | None,
    log: Log,
) -> str:
    """``docker build`` the runner context FROM ``base`` and tag RUNNER_IMAGE.

    Raises:
        ImageBuildError: a build step failed (the last lines of output are logged).
        SandboxUnavailable: the engine cannot be reached.
    """
    buildargs = {"BASE": base, "VERSION": __version__, "PACKAGES": " ".join(RUNNER_PACKAGES)}
    if mirror and mirror.startswith(("http://", "https://")):
        buildargs["DEBIAN_MIRROR"] = mirror
    log(f"docker build {context} FROM {base} -> {RUNNER_IMAGE}")
    tail: collections.deque[str] = collections.deque(maxlen=30)
    built: str | None = None
    with _engine_errors(f"building {RUNNER_IMAGE}"):
        stream = _api(client).build(
            path=str(context),
            tag=RUNNER_IMAGE,
            buildargs=buildargs,
            rm=True,
            forcerm=True,
            pull=False,
            nocache=nocache,
            decode=True,
            timeout=_BUILD_TIMEOUT,
            network_mode="none" if offline else None,
        )
        for chunk in stream:
            if "error" in chunk:
                for text in tail:
                    log("  " + text)
                raise ImageBuildError(
                    f"building {RUNNER_IMAGE} failed: {_one_line(chunk['error'])}"
                )
            aux = chunk.get("aux")
            if isinstance(aux, dict) and "ID" in aux:
                built = str(aux["ID"])
            for text in str(chunk.get("stream", "")).splitlines():
                text = text.rstrip()
                if text:
                    tail.append(text)
                    if text.startswith(("Step ", "Successfully", "hookcage:")):
                        log("  " + (text if len(text) <= 100 else text[:97] + "..."))
    image_id = _image_id(client, RUNNER_IMAGE)
    if image_id is None or (built is not None and built != image_id):
        raise ImageBuildError(f"the build finished but {RUNNER_IMAGE} is not the built image")
    return image_id


def _remove_superseded(
    client: Any, previous: Sequence[str | None], *, keep: set[str | None], log: Log
) -> None:
    """Remove images a rebuild replaced (old runner, then old base), unless still in use."""
    for image_id in previous:
        if image_id is None or image_id in keep:
            continue
        try:
            with _engine_errors(f"removing the superseded image {image_id[:19]}"):
                try:
                    _api(client).remove_image(image_id)
                except docker.errors.NotFound:
                    continue
        except ImageBuildError as exc:
            log(f"kept the superseded image {image_id[:19]} ({exc})")
        else:
            log(f"removed the superseded image {image_id[:19]}")


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
    """Make sure RUNNER_IMAGE exists, building it if needed, and return its id.

    Idempotent: when RUNNER_IMAGE exists and neither ``rebuild`` nor ``force``
    is set, its id is returned at once (one inspect call, nothing built).

    Args:
        client: a docker-py client; default one from the environment (closed after).
        offline: True builds FROM a debootstrapped BASE_IMAGE (reused when
            present); False builds FROM SLIM_IMAGE, pulling it when absent;
            None (default) uses SLIM_IMAGE when the engine already has it,
            else the offline path. Never pulls unless False.
        log: where progress lines go (default: stderr).
        mirror: the Debian mirror (default :func:`resolve_mirror`).
        force: rebuild everything: debootstrap a new base (offline) and build
            the runner without the layer cache.
        rebuild: run ``docker build`` again even if RUNNER_IMAGE exists,
            reusing the base and the layer cache (quick, and the same id,
            when nothing changed). With ``force`` or ``rebuild``, the images
            replaced are removed when no container uses them.
        context: the build context (default :func:`runner_context`).

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
        if not (force or rebuild):
            existing = _image_id(engine, RUNNER_IMAGE)
            if existing is not None:
                log(f"{RUNNER_IMAGE} is present ({existing[:19]}); nothing to build")
                return existing
        context = context or runner_context()
        previous = [_image_id(engine, RUNNER_IMAGE)]
        use_offline = offline
        if use_offline is None:
            use_offline = not image_exists(engine, SLIM_IMAGE)
            log(
                f"building offline: {SLIM_IMAGE} is not in the engine"
                if use_offline
                else f"building from the local {SLIM_IMAGE}"
            )
        if use_offline:
            if force:
                previous.append(_image_id(engine, BASE_IMAGE))
            base_id = build_base_image(engine, mirror=mirror, force=force, context=context, log=log)
            base = BASE_IMAGE
            explicit_mirror = None  # nothing is installed during the build: no network
        else:
            if not image_exists(engine, SLIM_IMAGE):
                _pull_slim(engine, log)
            base, base_id = SLIM_IMAGE, None
            explicit_mirror = mirror or os.environ.get(MIRROR_ENV)
        image_id = _docker_build(
            engine,
            context,
            base,
            offline=use_offline,
            nocache=force,
            mirror=explicit_mirror,
            log=log,
        )
        _remove_superseded(engine, previous, keep={image_id, base_id}, log=log)
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
    """``python -m executor.images``: build the runner image, print its id.

    Returns:
        The process exit code (0 built or present, 1 error).
    """
    parser = argparse.ArgumentParser(
        prog="python -m executor.images", description=f"Build {RUNNER_IMAGE}."
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
    args = parser.parse_args(argv)
    try:
        image_id = build_runner_image(
            offline=args.offline, mirror=args.mirror, force=args.force, rebuild=args.rebuild
        )
    except HookcageError as exc:
        print(f"hookcage: error: {exc}", file=sys.stderr)
        return 1
    print(image_id)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
