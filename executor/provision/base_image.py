"""The offline base, ``hookcage/base:bookworm-<version>``: mmdebstrap's tarball streamed into the engine's import.

No registry is touched. ``mmdebstrap --variant=minbase`` (the system's, or
hookcage's own copy: :mod:`executor.provision.mmdebstrap`) resolves every
package of RUNNER_PACKAGES with apt from a Debian mirror, runs the context's
``slim.sh`` in the tree, and writes the tree as a tar to its stdout, which
streams straight into the engine's image import: no chroot, mount or tar of
ours. Its own hooks merge ``/usr`` as debootstrap does (``merged-usr``: the
``usr-is-merged`` package, not ``usrmerge`` and its Perl modules) and show a
``file:`` mirror (a local copy: no network at all) read-only inside the tree
(``file-mirror-automount``). The import is untagged until mmdebstrap has
exited 0: the image of a failed run is removed, and the tag keeps the base it
had. Needs root. mmdebstrap says one line per phase; a long, quiet phase says
it is still at it every :data:`HEARTBEAT` seconds.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import selectors
import shlex
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from executor import __version__
from executor.errors import SandboxUnavailable
from executor.provision.mirror import MIRROR_ENV, resolve_mirror
from executor.provision.mmdebstrap import Mmdebstrap, MmdebstrapFetchError, find_mmdebstrap, too_old
from executor.provision.recipe import (
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

__all__ = ["DEBIAN_KEYRING", "HEARTBEAT", "build_base_image", "imported_id", "mmdebstrap_command"]

DEBIAN_KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")
HEARTBEAT = 15.0
"""Seconds: a phase of mmdebstrap that says nothing for this long gets a line saying it is still at it."""
_IMAGE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_STOP_WAIT = 30.0
"""Seconds mmdebstrap gets to clean up after SIGTERM (the import failed) before SIGKILL."""
_HOST_LEFTOVERS = (
    'for f in etc/resolv.conf etc/hostname; do if [ -f "$1/$f" ] && [ ! -L "$1/$f" ]; then : > "$1/$f"; fi; done; '
    'rm -f "$1/etc/dpkg/dpkg.cfg.d/99mmdebstrap"'
)
"""A customize hook: mmdebstrap copies the host's resolver and hostname (the engine gives both at run
time), and keeps ``--dpkgopt`` in the tree (``force-unsafe-io`` is for this build only)."""


@contextlib.contextmanager
def _require_mmdebstrap(
    *, search_path: str | None = None, cache: Path | None = None, log: Log = log_stderr
) -> Iterator[Mmdebstrap]:
    """An mmdebstrap to run (the system's, else hookcage's copy, fetched once), after checking root and keyring.

    Args:
        search_path: where to look for an installed mmdebstrap (default ``$PATH`` and the sbin folders).
        cache: where a fetched copy is kept (default :func:`executor.cachedir.cache_dir`).
        log: where progress lines go.

    Raises:
        ImageBuildError: we are not root, the keyring is missing, or no mmdebstrap (recent enough) could be had.
    """
    if os.geteuid() != 0:
        raise ImageBuildError(
            "mmdebstrap needs root to build the offline base image: run the build as root "
            "(e.g. sudo), or load debian:bookworm-slim into the engine and build online"
        )
    if not DEBIAN_KEYRING.is_file():
        raise ImageBuildError(
            f"{DEBIAN_KEYRING} is missing, so Debian's signatures cannot be checked: "
            "install debian-archive-keyring (apt-get install debian-archive-keyring)"
        )
    try:
        with find_mmdebstrap(search_path=search_path, cache=cache, log=log) as tool:
            reason = too_old(tool)
            if reason:
                raise ImageBuildError(
                    f"{reason}: install mmdebstrap 1.1 or later (Debian 12, Ubuntu 24.04; backports), "
                    "or load debian:bookworm-slim into the engine and build online"
                )
            yield tool
    except MmdebstrapFetchError as exc:
        raise ImageBuildError(str(exc)) from exc


def mmdebstrap_command(
    tool: Mmdebstrap, mirror: str, slim: Path, packages: Sequence[str] = RUNNER_PACKAGES
) -> list[str]:
    """The mmdebstrap command that writes the base's tar to stdout.

    Args:
        tool: the mmdebstrap to run (its argv and hook folders).
        mirror: the Debian mirror (http(s), or ``file:`` for a local one).
        slim: the context's ``slim.sh``, run in the tree before it is written.
        packages: what the base holds besides minbase.
    """
    hooks = Path(tool.hooks)
    command = [
        *tool.argv,
        "--mode=root",
        "--variant=minbase",
        "--components=main",
        f"--include={','.join(packages)}",
        f"--keyring={DEBIAN_KEYRING}",
        "--dpkgopt=force-unsafe-io",  # the tree is written to a tar, never booted: no fsync per file
        "--skip=output/dev",  # the engine gives /dev; device nodes would need mknod at the import
        f"--hook-dir={hooks / 'merged-usr'}",
    ]
    if mirror.startswith("file:"):
        command.append(f"--hook-dir={hooks / 'file-mirror-automount'}")  # unmounted before slim.sh runs
    return [
        *command,
        f'--customize-hook=chroot "$1" /bin/sh -s < {shlex.quote(str(slim))}',
        f"--customize-hook={_HOST_LEFTOVERS}",
        DEBIAN_SUITE,
        "-",
        mirror,
    ]


def _relay(stream: IO[bytes], log: Log, said: list[str], clock: Callable[[], float] = time.monotonic) -> None:
    """mmdebstrap's stderr, every line kept in ``said``; its own (``I:``) lines and warnings and errors to ``log``.

    A phase (``I: installing remaining packages inside the chroot...``) that
    says nothing for HEARTBEAT seconds gets ``mmdebstrap: ... still <phase> (N s)``.
    """
    selector = selectors.DefaultSelector()
    selector.register(stream, selectors.EVENT_READ)
    phase, started, pending = "", clock(), b""
    try:
        while True:
            if not selector.select(HEARTBEAT):
                log(f"mmdebstrap: ... still {phase or 'working'} ({clock() - started:.0f} s)")
                continue
            chunk = os.read(stream.fileno(), 1 << 16)
            *lines, pending = (pending + chunk).split(b"\n") if chunk else [pending, b""]
            for raw in lines:
                text = raw.decode("utf-8", "replace").rstrip()
                if not text:
                    continue
                said.append(text)
                if text.startswith("I: "):
                    text = text[3:]
                    if text.endswith("..."):
                        phase, started = text.rstrip("."), clock()
                elif not text.startswith(("W:", "E:")):
                    continue  # apt's and dpkg's per-package chatter (in hooks): kept for the error only
                log(f"mmdebstrap: {text}")
            if not chunk:
                return
    finally:
        selector.close()


def _reason(said: Sequence[str]) -> str:
    """The line that says why mmdebstrap failed: its last ``E:`` line, else its last line."""
    errors = [line[2:].strip() for line in said if line.startswith("E:")]
    return (errors or list(said) or ["no output"])[-1][:300]


def _messages(answer: Any) -> Iterator[dict[str, Any]]:
    """The JSON objects of an import's answer, one per line."""
    for text in str(answer).splitlines():
        with contextlib.suppress(ValueError):
            message = json.loads(text)
            if isinstance(message, dict):
                yield message


def imported_id(answer: Any) -> str | None:
    """The image id an import's answer names (``{"status": "sha256:..."}``, Podman's ``{"id": ...}``), if any."""
    for message in _messages(answer):
        for key in ("id", "status"):
            value = message.get(key)
            if isinstance(value, str) and re.fullmatch(r"sha256:[0-9a-f]{64}", value):
                return value
    return None


def _chunks(stream: IO[bytes], counter: list[int], size: int = 1 << 20) -> Iterator[bytes]:
    """What ``stream`` gives, as it comes (at most ``size`` bytes a chunk), adding their length to ``counter[0]``."""
    while chunk := os.read(stream.fileno(), size):
        counter[0] += len(chunk)
        yield chunk


def _import_changes() -> list[str]:
    """The image config the import gives the base (what a Dockerfile's ENV, CMD and LABEL would)."""
    return [
        f"ENV PATH={_IMAGE_PATH}",
        "ENV LANG=C.UTF-8",
        'CMD ["bash"]',
        f"LABEL hookcage.image=base hookcage.version={__version__} "
        f"{PACKAGES_LABEL}={base_inputs()} "
        f'org.opencontainers.image.title="hookcage base ({DEBIAN_SUITE}, mmdebstrap minbase)"',
    ]


def _build(client: Any, tool: Mmdebstrap, mirror: str, context: Path, scratch: Path, tag: str, log: Log) -> str:
    """Run mmdebstrap (temporary files in ``scratch``) into an untagged import; tag it once it succeeded.

    Raises:
        ImageBuildError: mmdebstrap or the import failed.
        SandboxUnavailable: the engine went away.
    """
    command = mmdebstrap_command(tool, mirror, context / "slim.sh")
    env = {**os.environ, "LC_ALL": "C", "DEBIAN_FRONTEND": "noninteractive", "TMPDIR": str(scratch)}
    env["PATH"] = env.get("PATH", "") + ":/usr/local/sbin:/usr/sbin:/sbin:/usr/bin:/bin"
    log("running " + shlex.join(command))
    said: list[str] = []
    sent = [0]
    answer: Any = None
    refused: ImageBuildError | None = None
    try:
        proc = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
        )
    except OSError as exc:
        raise ImageBuildError(f"cannot run {command[0]}: {squashed(exc)}") from exc
    assert proc.stdout is not None and proc.stderr is not None
    relay = threading.Thread(target=_relay, args=(proc.stderr, log, said), daemon=True)
    relay.start()
    try:
        with engine_errors(f"importing {tag}"):
            answer = api_of(client).import_image_from_stream(
                _chunks(proc.stdout, sent), changes=_import_changes()
            )
        refused = next((ImageBuildError(f"importing {tag} failed: {squashed(m['error'])}")
                        for m in _messages(answer) if m.get("error")), None)
    except ImageBuildError as exc:
        refused = exc
    finally:
        code, stopped = _await(proc, stop=answer is None)
        proc.stdout.close()
        relay.join()
    image_id = imported_id(answer)
    if code != 0 or refused is not None:
        if image_id is not None:  # an image of nothing, or of half a tar: never tagged
            with contextlib.suppress(ImageBuildError, SandboxUnavailable), engine_errors("removing it"):
                api_of(client).remove_image(image_id, force=True)
        if refused is None or (code != 0 and not stopped):  # mmdebstrap's own failure comes first
            raise ImageBuildError(
                f"mmdebstrap {DEBIAN_SUITE} from {mirror} failed (exit {code}): {_reason(said)}; "
                f"check the mirror (set {MIRROR_ENV}) and that {scratch.parent} allows exec and device files"
            ) from refused
        raise refused
    if image_id is None:
        raise ImageBuildError(f"the engine accepted the import of {tag} but named no image: {answer!r}")
    repository, version = tag.rsplit(":", 1)
    with engine_errors(f"tagging {tag}"):
        api_of(client).tag(image_id, repository, version)
    if local_image_id(client, tag) is None:
        raise ImageBuildError(f"the engine tagged {image_id[:19]} as {tag} but has no {tag}")
    log(f"imported {tag} ({image_id[:19]}, {sent[0] / 1e6:.0f} MB of tar)")
    return image_id


def _await(proc: subprocess.Popen[bytes], *, stop: bool) -> tuple[int, bool]:
    """mmdebstrap's exit status, and whether we stopped it (``stop``: the import failed, so its tar
    has nowhere to go; it gets a moment to end by itself, then SIGTERM, on which it cleans up)."""
    if not stop:
        return proc.wait(), False
    try:
        return proc.wait(timeout=2), False
    except subprocess.TimeoutExpired:
        proc.terminate()
    try:
        return proc.wait(timeout=_STOP_WAIT), True
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait(), True


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
    """Delete mmdebstrap's temporary folder (empty unless it was killed), never through a mount left inside it."""
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
    """Make BASE_IMAGE offline (mmdebstrap, slim, import), or reuse it when it is current.

    A present BASE_IMAGE is reused when its ``hookcage.packages`` label is
    :func:`base_inputs` (it holds every package of RUNNER_PACKAGES); one made
    for another package list is made again (and replaced under the same tag).

    Args:
        client: a connected docker-py client.
        mirror: the Debian mirror; default :func:`resolve_mirror`.
        force: run mmdebstrap again even when a current BASE_IMAGE exists.
        context: the runner build context holding ``slim.sh``; default :func:`runner_context`.
        log: where progress lines go.
        tag: the image to make (default BASE_IMAGE; tests make a throwaway one).
        cache: where a fetched mmdebstrap is kept (default hookcage's cache).
        search_path: where to look for an installed mmdebstrap (default ``$PATH`` and the sbin folders).

    Returns:
        The base image's id (``sha256:...``).

    Raises:
        ImageBuildError: mmdebstrap is missing, we are not root, or a build step failed.
        SandboxUnavailable: the engine cannot be reached.
    """
    if not force:
        found = image_labels(client, tag)
        if found is not None:
            existing, labels = found
            if labels.get(PACKAGES_LABEL) == base_inputs():
                log(f"reusing {tag} ({existing[:19]})")
                return existing
            log(f"{tag} ({existing[:19]}) was made for another package list: making it again with mmdebstrap")
    context = context or runner_context()
    mirror_url = resolve_mirror(mirror)
    with _require_mmdebstrap(search_path=search_path, cache=cache, log=log) as tool:
        scratch = Path(tempfile.mkdtemp(prefix="hookcage-mmdebstrap-"))
        try:
            return _build(client, tool, mirror_url, context, scratch, tag, log)
        finally:
            _remove_tree(scratch, log)
