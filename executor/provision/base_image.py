"""The offline base, ``hookcage/base:bookworm-<version>``: debootstrap, slimmed, imported into the engine.

No registry is touched: ``debootstrap --variant=minbase`` (the system's, or
hookcage's own copy: :mod:`executor.provision.debootstrap`) writes a root
filesystem from a Debian mirror, apt-get adds what debootstrap cannot resolve
(:data:`~executor.provision.recipe.APT_AFTER_DEBOOTSTRAP`), the context's
``slim.sh`` slims it, and ``tar`` streams it into the engine's image import.
Needs root. The tools' per-package chatter is folded into one line per phase.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from executor import __version__
from executor.provision.debootstrap import Debootstrap, DebootstrapFetchError, find_debootstrap
from executor.provision.mirror import MIRROR_ENV, resolve_mirror
from executor.provision.recipe import (
    APT_AFTER_DEBOOTSTRAP,
    BASE_IMAGE,
    DEBIAN_SUITE,
    PACKAGES_LABEL,
    RUNNER_PACKAGES,
    Log,
    base_inputs,
    log_stderr,
    runner_context,
)
from executor.sandbox.docker.imagefacts import (
    Client,
    ImageBuildError,
    api_of,
    engine_errors,
    image_labels,
    local_image_id,
    squashed,
)

__all__ = ["DEBIAN_KEYRING", "build_base_image", "debootstrap_packages"]

DEBIAN_KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")
_IMAGE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@contextlib.contextmanager
def _require_debootstrap(
    *, search_path: str | None = None, cache: Path | None = None, log: Log = log_stderr
) -> Iterator[Debootstrap]:
    """A debootstrap to run (the system's, else hookcage's copy, fetched once), after checking root and keyring.

    Args:
        search_path: where to look for an installed debootstrap (default ``$PATH`` and the sbin folders).
        cache: where a fetched copy is kept (default :func:`executor.cachedir.cache_dir`).
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
                f"{squashed(done.stderr)})"
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
            + squashed(done.stderr.decode(errors="replace")[-500:])
        )
    # debootstrap copies the host's resolver and hostname; the engine provides both at run time.
    for name in ("etc/resolv.conf", "etc/hostname"):
        target = rootfs / name
        if target.is_file() and not target.is_symlink():
            target.write_text("")


def imported_id(answer: Any) -> str | None:
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
            with engine_errors(f"importing {tag}"):
                answer = api_of(client).import_image_from_stream(
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
                + squashed(tar_err.read().decode(errors="replace")[-500:])
            )
    for text in str(answer).splitlines():
        with contextlib.suppress(ValueError):
            message = json.loads(text)
            if isinstance(message, dict) and message.get("error"):
                raise ImageBuildError(f"importing {tag} failed: {message['error']}")
    image_id = local_image_id(client, tag)
    if image_id is None and (imported := imported_id(answer)):
        # Podman 4.3's compatible import ignores the repository it is given (the image comes out
        # untagged, its id in the answer): tag it by that id.
        with engine_errors(f"tagging {tag}"):
            api_of(client).tag(imported, repository, version)
        image_id = local_image_id(client, tag)
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
        log(f"warning: could not delete {path}: {squashed(exc)}")


def build_base_image(
    client: Client,
    *,
    mirror: str | None = None,
    force: bool = False,
    context: Path | None = None,
    log: Log = log_stderr,
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
        found = image_labels(client, tag)
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
