"""An mmdebstrap to build the offline base with: the system's, else hookcage's own copy.

The offline runner build (:mod:`executor.provision.base_image`) makes its
Debian base with mmdebstrap. A machine without it installed gets one without
any system-wide change:

1. apt, with private state (a temporary folder holding its package lists,
   cache and an empty dpkg status; no ``apt.conf.d`` hook runs), reads the
   host's own sources and keyrings (``/etc/apt/sources.list{,.d}``, their
   ``Signed-By``): ``apt-get update`` checks the indexes' signatures,
   ``apt-get download mmdebstrap`` checks the package against the sha256 of
   the signed index (and this module checks it again against
   ``--print-uris``);
2. ``dpkg-deb -x`` unpacks the package (a Perl program and its hooks,
   architecture ``all``) into ``<cache>/mmdebstrap-<version>/``, written under
   a temporary name and renamed when complete;
3. it runs as ``perl <dir>/usr/bin/mmdebstrap``, its hooks taken from
   ``<dir>/usr/share/mmdebstrap/hooks``. It needs the host's perl and an apt
   of 2.3.14 or later (Debian 12, Ubuntu 22.04), which it checks itself.

The unpacked copy stays in the cache (``$HOOKCAGE_HOME/cache`` when
``HOOKCAGE_HOME`` is set, else ``~/.cache/hookcage``), so the next build
fetches nothing; delete ``<cache>/mmdebstrap-*`` to fetch a newer one. As
mmdebstrap runs as root, a copy is run from the cache only when no other
user can change it (the cache and each folder above it owned by root or by
us, none writable by others unless sticky); otherwise it is fetched into a
temporary folder for this build, and the log says why.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pwd
import re
import shutil
import stat
import subprocess
import tempfile
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from executor.cachedir import cache_dir
from executor.errors import SandboxError
from executor.places import outside_cwd

__all__ = [
    "MIN_VERSION",
    "PACKAGE",
    "SBIN_DIRS",
    "DownloadURI",
    "Mmdebstrap",
    "MmdebstrapFetchError",
    "apt_config",
    "apt_options",
    "cached_mmdebstrap",
    "deb_fields",
    "fetch_mmdebstrap",
    "find_mmdebstrap",
    "offline_build_tool",
    "parse_print_uris",
    "shown",
    "system_mmdebstrap",
    "too_old",
    "unsafe_for_root",
    "upstream_version",
    "version_dir",
]

PACKAGE = "mmdebstrap"
SBIN_DIRS = "/usr/local/sbin:/usr/sbin:/sbin"
"""Added to ``PATH`` when looking for a system mmdebstrap (root's tools, for a non-root user's PATH)."""
HOOKS = Path("share") / PACKAGE / "hooks"
"""mmdebstrap's own hook folders (``merged-usr``, ``file-mirror-automount``), under its ``usr``."""
MIN_VERSION = (1, 1)
"""The oldest mmdebstrap the build runs: 1.0 takes ``file:`` mirrors (``file-mirror-automount``), 1.1
merges ``/usr`` as debootstrap does. Debian 12 has 1.3.5, Ubuntu 24.04 1.4.3; Ubuntu 22.04's 0.8.4
and Debian 11's 0.7.5 are too old."""
STAMP = ".hookcage-fetched.json"
"""The file, in an unpacked copy, that says where it came from (written last, before the rename)."""
_APT_TIMEOUT = 600  # seconds for one apt-get call
_DPKG_TIMEOUT = 120
_APT_HOOKS = (
    "APT::Update::Pre-Invoke",
    "APT::Update::Post-Invoke",
    "APT::Update::Post-Invoke-Success",
    "DPkg::Pre-Invoke",
    "DPkg::Pre-Install-Pkgs",
    "DPkg::Post-Invoke",
)
"""The host's apt.conf.d commands apt would run around an update (cache cleaners, PackageKit...)."""
_SKIPPED_INDEXES = ("DEP-11", "DEP-11-icons", "DEP-11-icons-small", "Contents-deb")
"""Index targets other apt.conf.d files add (appstream, apt-file): not needed to find one package."""

Log = Callable[[str], None]
Runner = Callable[..., "subprocess.CompletedProcess[str]"]


class MmdebstrapFetchError(SandboxError):
    """No mmdebstrap could be had; the one-line message says what to do."""


@dataclass(frozen=True)
class Mmdebstrap:
    """An mmdebstrap ready to run.

    Attributes:
        argv: the command's first words (the program, or ``perl`` and the script).
        hooks: the folder of its hook folders (``<hooks>/merged-usr``...).
        version: the package version, when known.
        origin: ``system`` or the folder the copy was unpacked into.
    """

    argv: tuple[str, ...]
    hooks: str = f"/usr/{HOOKS}"
    version: str | None = None
    origin: str = "system"


@dataclass(frozen=True)
class DownloadURI:
    """One line of ``apt-get download --print-uris``: where apt fetches a package and its checked hash."""

    uri: str
    filename: str
    size: int
    sha256: str

    @property
    def version(self) -> str:
        """The version in the file name (``mmdebstrap_1.3.5-7_all.deb``), epoch decoded."""
        parts = self.filename.removesuffix(".deb").split("_")
        if len(parts) != 3:
            raise MmdebstrapFetchError(f"apt names the package file {self.filename!r}: expected NAME_VERSION_ARCH.deb")
        return urllib.parse.unquote(parts[1])


# --------------------------------------------------------------------------- pure parts


def shown(path: Path | str, home: str | None = None) -> str:
    """``path`` with the user's home folder written ``~``."""
    text = str(path)
    home = home if home is not None else os.path.expanduser("~")
    if home not in ("", "/") and (text == home or text.startswith(home.rstrip("/") + "/")):
        return "~" + text[len(home.rstrip("/")) :]
    return text


def version_dir(version: str) -> str:
    """The cache folder name of a version: ``mmdebstrap-<version>``, an epoch's colon written ``%3a`` as apt does."""
    if not re.fullmatch(r"[0-9A-Za-z.+~:-]+", version):
        raise MmdebstrapFetchError(f"{version!r} is not a Debian version")
    return f"{PACKAGE}-{version.replace(':', '%3a')}"


def apt_config() -> str:
    """apt configuration (``-c FILE``) that drops the host's hook commands for our private runs."""
    return "".join(f"#clear {name};\n" for name in _APT_HOOKS)


def apt_options(work: Path) -> list[str]:
    """The ``apt-get`` options that keep every file it writes in ``work`` (sources and keys stay the host's).

    Args:
        work: a private folder holding ``apt.conf`` (:func:`apt_config`), an empty ``status``,
            and ``state``, ``lists`` and ``cache`` folders.
    """
    options = [
        "-c", str(work / "apt.conf"),
        "-o", f"Dir::State={work / 'state'}",
        "-o", f"Dir::State::Lists={work / 'lists'}",
        "-o", f"Dir::State::Status={work / 'status'}",
        "-o", f"Dir::Cache={work / 'cache'}",
        "-o", "Dir::Cache::pkgcache=",
        "-o", "Dir::Cache::srcpkgcache=",
        "-o", "Acquire::Languages=none",
        "-o", "Acquire::AllowInsecureRepositories=false",
        "-o", "Acquire::AllowDowngradeToInsecureRepositories=false",
        "-o", "APT::Get::AllowUnauthenticated=false",
    ]
    for target in _SKIPPED_INDEXES:
        options += ["-o", f"Acquire::IndexTargets::deb::{target}::DefaultEnabled=false"]
    return options


def parse_print_uris(text: str, package: str = PACKAGE) -> DownloadURI:
    """The line of ``apt-get download --print-uris`` output for ``package``.

    A line reads ``'URI' FILENAME SIZE SHA256:HEX``.

    Raises:
        MmdebstrapFetchError: no such line, or it carries no sha256.
    """
    for line in text.splitlines():
        words = line.split()
        if len(words) != 4 or not words[1].startswith(f"{package}_"):
            continue
        uri, filename, size, digest = words
        algorithm, _, value = digest.partition(":")
        if algorithm.upper() != "SHA256" or not re.fullmatch(r"[0-9a-f]{64}", value):
            raise MmdebstrapFetchError(f"apt gives no sha256 for {filename} ({digest}): not fetching it")
        if not size.isdigit():
            raise MmdebstrapFetchError(f"apt gives the size {size!r} for {filename}")
        return DownloadURI(uri.strip("'"), filename, int(size), value)
    raise MmdebstrapFetchError(f"apt printed no download for {package}: {' '.join(text.split())[:200] or 'no output'}")


def deb_fields(text: str) -> dict[str, str]:
    """``dpkg-deb --field DEB ...`` output (``Name: value`` lines) as a dict."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        name, sep, value = line.partition(":")
        if sep and name and not name[0].isspace():
            found[name.strip()] = value.strip()
    return found


def upstream_version(text: str) -> tuple[int, ...] | None:
    """``(1, 3, 5)`` from ``mmdebstrap 1.3.5`` (its ``--version``) or a package version (``1:1.3.5-7``), else None."""
    found = re.search(r"(?:^|[\s:])(\d+(?:\.\d+)+)", text)
    return tuple(int(part) for part in found.group(1).split(".")) if found else None


def unsafe_for_root(path: Path, euid: int | None = None) -> str | None:
    """Why root should not run programs from ``path``, or None when no other user can change it.

    ``path`` and each folder above it must be owned by root or ``euid`` and not
    writable by group or others (a sticky folder, like ``/tmp``, may be);
    ``path`` itself never sticky-writable.
    """
    uid = os.geteuid() if euid is None else euid
    current = Path(os.path.abspath(path))
    for folder in (current, *current.parents):
        try:
            info = folder.lstat()
        except OSError as exc:
            return f"cannot check {folder}: {exc.strerror or exc}"
        if stat.S_ISLNK(info.st_mode):
            return f"{folder} is a symbolic link"
        if info.st_uid not in (0, uid):
            return f"{folder} belongs to uid {info.st_uid}"
        writable = info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
        if writable and (folder == current or not info.st_mode & stat.S_ISVTX):
            return f"{folder} is writable by {'others' if info.st_mode & stat.S_IWOTH else 'its group'}"
    return None


def _tree_unsafe(root: Path, euid: int | None = None) -> str | None:
    """:func:`unsafe_for_root` for ``root``, and no file below it writable or owned by another user."""
    reason = unsafe_for_root(root, euid)
    if reason is not None:
        return reason
    uid = os.geteuid() if euid is None else euid
    for folder, dirs, files in os.walk(root):
        for name in (*dirs, *files):
            info = os.lstat(os.path.join(folder, name))
            if info.st_uid not in (0, uid):
                return f"{os.path.join(folder, name)} belongs to uid {info.st_uid}"
            if not stat.S_ISLNK(info.st_mode) and info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
                return f"{os.path.join(folder, name)} is writable by others"
    return None


# --------------------------------------------------------------------------- finding one


def system_mmdebstrap(search_path: str | None = None) -> str | None:
    """The installed mmdebstrap: on ``search_path`` (default ``$PATH`` plus the sbin folders), or None."""
    path = search_path if search_path is not None else f"{os.environ.get('PATH', '')}:{SBIN_DIRS}"
    return shutil.which(PACKAGE, path=outside_cwd(path))  # never a checkout's ./mmdebstrap


def _system_tool(program: str) -> Mmdebstrap:
    """The installed ``program``, its hooks in ``<prefix>/share/mmdebstrap/hooks`` (``/usr/bin`` -> ``/usr``)."""
    prefix = Path(os.path.realpath(program)).parent.parent
    return Mmdebstrap(argv=(program,), hooks=str(prefix / HOOKS))


def _copy_in(folder: Path) -> Mmdebstrap | None:
    """The unpacked copy in ``folder`` when it is complete (stamp and program present)."""
    program = folder / "usr" / "bin" / PACKAGE
    try:
        stamp = json.loads((folder / STAMP).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(stamp, dict) or not program.is_file():
        return None
    return Mmdebstrap(
        argv=(_perl(), str(program)),
        hooks=str(folder / "usr" / HOOKS),
        version=str(stamp.get("version") or "") or None,
        origin=str(folder),
    )


def _perl() -> str:
    """The host's perl, which runs a fetched copy (``perl`` when none is found: the run then says so)."""
    return shutil.which("perl", path=outside_cwd(f"{os.environ.get('PATH', '')}:{SBIN_DIRS}")) or "perl"


def too_old(tool: Mmdebstrap, run: Runner = subprocess.run) -> str | None:
    """Why ``tool`` cannot make the base (older than MIN_VERSION, or no version to be had), else None.

    A fetched copy's version is its package's; an installed one is asked (``--version``).
    """
    said = tool.version
    if said is None:
        try:
            said = run([*tool.argv, "--version"], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       errors="replace", timeout=60, check=False).stdout.strip()
        except (OSError, subprocess.SubprocessError) as exc:
            return f"{' '.join(tool.argv)} --version failed: {' '.join(str(exc).split())}"
    version = upstream_version(said)
    where = "installed" if tool.origin == "system" else f"in {shown(tool.origin)}"
    if version is None:
        return f"{' '.join(tool.argv)} --version says {said[:80]!r}, no version"
    if version < MIN_VERSION:
        return (f"mmdebstrap {'.'.join(map(str, version))} ({where}) is older than "
                f"{'.'.join(map(str, MIN_VERSION))}, which the offline build needs")
    return None


def cached_mmdebstrap(cache: Path) -> Mmdebstrap | None:
    """The newest complete ``<cache>/mmdebstrap-*`` copy (by when it was fetched), or None."""
    found: list[tuple[float, Mmdebstrap]] = []
    with contextlib.suppress(OSError):
        for folder in cache.glob(f"{PACKAGE}-*"):
            copy = _copy_in(folder)
            if copy is not None:
                with contextlib.suppress(OSError):
                    found.append(((folder / STAMP).stat().st_mtime, copy))
    return max(found, key=lambda pair: pair[0])[1] if found else None


def _apt_error(done: subprocess.CompletedProcess[str]) -> str:
    """The line of apt's output that says what went wrong."""
    lines = [line.strip() for line in f"{done.stdout}\n{done.stderr}".splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("E:")] or [x for x in lines if x.startswith("W:")]
    return (errors or lines or [f"exit {done.returncode}, no output"])[-1]


def _needs(tools: Sequence[str], why: str) -> None:
    """Raise when one of ``tools`` is not on PATH."""
    for tool in tools:
        if shutil.which(tool) is None:
            raise MmdebstrapFetchError(why.format(tool=tool))


_NO_APT = (
    "building the runner image offline needs mmdebstrap, and this machine has neither mmdebstrap nor "
    "{tool} to fetch it: install mmdebstrap with your package manager, or load debian:bookworm-slim into "
    "the engine (docker load) and build online"
)


def fetch_mmdebstrap(
    dest: Path,
    *,
    log: Log,
    run: Runner = subprocess.run,
) -> Mmdebstrap:
    """Fetch the mmdebstrap package with apt (host's sources and keys, private state) and unpack it in ``dest``.

    Args:
        dest: the folder to unpack into, as ``dest/mmdebstrap-<version>/`` (created 0700 if absent).
        log: where progress lines go.
        run: ``subprocess.run`` (tests pass a fake).

    Returns:
        The unpacked copy, ready to run.

    Raises:
        MmdebstrapFetchError: no apt on this machine, apt could not fetch it, or the file is not what apt promised.
    """
    _needs(("apt-get", "dpkg-deb"), _NO_APT)
    dest.mkdir(mode=0o700, parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="hookcage-apt-") as scratch:
        work = Path(scratch)
        work.chmod(0o755)  # apt downloads as its _apt user: it must reach partial/
        for name in ("state", "lists/partial", "cache/archives/partial", "download"):
            (work / name).mkdir(parents=True)
        (work / "status").write_text("")
        (work / "apt.conf").write_text(apt_config())
        with contextlib.suppress(KeyError, OSError):
            if os.geteuid() == 0:
                os.chown(work / "download", pwd.getpwnam("_apt").pw_uid, -1)
        options = apt_options(work)

        def apt(*words: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
            env = {**os.environ, "LC_ALL": "C", "DEBIAN_FRONTEND": "noninteractive"}
            try:
                return run(
                    ["apt-get", "-qq", *options, *words], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                    capture_output=True, text=True, errors="replace", timeout=_APT_TIMEOUT, check=False,
                )
            except (OSError, subprocess.SubprocessError) as exc:
                raise MmdebstrapFetchError(f"apt-get {words[0]} failed: {' '.join(str(exc).split())}") from exc

        log(f"no mmdebstrap on this machine: fetching it into {shown(dest)} with apt "
            "(this machine's sources and keys, signatures checked; nothing installed system-wide)")
        done = apt("update")
        if done.returncode != 0:
            raise MmdebstrapFetchError(
                f"apt-get update (private lists, this machine's sources) failed: {_apt_error(done)}; "
                "check /etc/apt/sources.list.d and the network"
            )
        done = apt("download", "--print-uris", PACKAGE)
        if done.returncode != 0:
            raise MmdebstrapFetchError(
                f"apt finds no {PACKAGE} package in this machine's sources ({_apt_error(done)}): "
                f"add a Debian or Ubuntu source, or install {PACKAGE}"
            )
        wanted = parse_print_uris(done.stdout)
        log(f"fetching {PACKAGE} {wanted.version} ({wanted.size / 1000:.0f} kB) from {wanted.uri}")
        done = apt("download", PACKAGE, cwd=work / "download")
        deb = work / "download" / wanted.filename
        if done.returncode != 0 or not deb.is_file():
            raise MmdebstrapFetchError(f"apt-get download {PACKAGE} failed: {_apt_error(done)}")
        digest = hashlib.sha256(deb.read_bytes()).hexdigest()
        if digest != wanted.sha256:
            raise MmdebstrapFetchError(
                f"{wanted.filename} has sha256 {digest[:16]}..., not the signed index's {wanted.sha256[:16]}...: "
                "not using it"
            )
        return _unpack(deb, wanted, dest, log=log, run=run)


def _unpack(deb: Path, wanted: DownloadURI, dest: Path, *, log: Log, run: Runner) -> Mmdebstrap:
    """``dpkg-deb -x`` the verified ``deb`` into ``dest/mmdebstrap-<version>`` (atomically)."""

    def dpkg_deb(*words: str) -> subprocess.CompletedProcess[str]:
        try:
            done = run(["dpkg-deb", *words], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       errors="replace", timeout=_DPKG_TIMEOUT, check=False)
        except (OSError, subprocess.SubprocessError) as exc:
            raise MmdebstrapFetchError(f"dpkg-deb {words[0]} {deb.name} failed: {exc}") from exc
        if done.returncode != 0:
            raise MmdebstrapFetchError(f"dpkg-deb {words[0]} {deb.name} failed: {_apt_error(done)}")
        return done

    fields = deb_fields(dpkg_deb("--field", str(deb), "Package", "Version", "Architecture").stdout)
    if fields.get("Package") != PACKAGE or fields.get("Architecture") != "all":
        raise MmdebstrapFetchError(
            f"{deb.name} holds {fields.get('Package')!r} for {fields.get('Architecture')!r}, "
            f"not {PACKAGE} for all architectures"
        )
    version = fields.get("Version") or wanted.version
    target = dest / version_dir(version)
    building = Path(tempfile.mkdtemp(prefix=f".{PACKAGE}-", dir=dest))
    try:
        dpkg_deb("-x", str(deb), str(building))
        if not (building / "usr" / "bin" / PACKAGE).is_file():
            raise MmdebstrapFetchError(f"{deb.name} has no usr/bin/{PACKAGE}")
        building.chmod(0o755)
        stamp = {
            "package": PACKAGE, "version": version, "sha256": wanted.sha256, "uri": wanted.uri,
            "fetched": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        (building / STAMP).write_text(json.dumps(stamp, indent=1) + "\n")
        try:
            building.rename(target)
        except OSError:
            if _copy_in(target) is None:  # not another build's complete copy: a leftover in the way
                raise
    except (OSError, MmdebstrapFetchError) as exc:
        shutil.rmtree(building, ignore_errors=True)
        if isinstance(exc, MmdebstrapFetchError):
            raise
        raise MmdebstrapFetchError(f"cannot unpack {deb.name} into {target}: {exc}") from exc
    shutil.rmtree(building, ignore_errors=True)  # gone after the rename; still here if another build won
    copy = _copy_in(target)
    if copy is None:
        raise MmdebstrapFetchError(f"{target} is incomplete: delete it and build again")
    log(f"{PACKAGE} {version} unpacked into {shown(target)} (sha256 {wanted.sha256[:12]}... as in the signed index)")
    return copy


@contextlib.contextmanager
def find_mmdebstrap(
    *,
    search_path: str | None = None,
    cache: Path | None = None,
    log: Log,
    run: Runner = subprocess.run,
) -> Iterator[Mmdebstrap]:
    """The mmdebstrap to run: the system's, else the cached copy, else one fetched now.

    A copy is fetched into the cache, unless the cache could be changed by
    another user (then into a temporary folder, deleted when the block ends).

    Args:
        search_path: where to look for an installed mmdebstrap (default ``$PATH`` and the sbin folders).
        cache: hookcage's cache (default :func:`cache_dir`).
        log: where progress lines go.
        run: ``subprocess.run`` (tests pass a fake).

    Raises:
        MmdebstrapFetchError: none could be had; the message says what to do.
    """
    installed = system_mmdebstrap(search_path)
    if installed is not None:
        yield _system_tool(installed)
        return
    cache = cache or cache_dir()
    copy = cached_mmdebstrap(cache)
    reason = _tree_unsafe(Path(copy.origin)) if copy is not None else None
    if copy is not None and reason is None:
        log(f"using {PACKAGE} {copy.version or ''} from {shown(copy.origin)} (fetched earlier; no download)")
        yield copy
        return
    _needs(("apt-get", "dpkg-deb"), _NO_APT)
    _needs(("perl",), f"{PACKAGE} is a Perl program and this machine has no {{tool}}: "
           "install perl (apt-get install perl), or install mmdebstrap")
    if reason is None:
        with contextlib.suppress(OSError):
            cache.mkdir(mode=0o700, parents=True, exist_ok=True)
        reason = unsafe_for_root(cache)
    if reason is None:
        yield fetch_mmdebstrap(cache, log=log, run=run)
        return
    log(f"not keeping {PACKAGE} in {shown(cache)} ({reason}; it runs as root): "
        "fetching it into a temporary folder for this build")
    with tempfile.TemporaryDirectory(prefix="hookcage-mmdebstrap-") as scratch:
        yield fetch_mmdebstrap(Path(scratch), log=log, run=run)


def offline_build_tool(search_path: str | None = None, cache: Path | None = None) -> tuple[bool, str]:
    """Whether an offline build can have an mmdebstrap, and how (for ``hookcage doctor``).

    Returns:
        (usable, one line saying which: installed, cached, fetched with apt when needed, or none).
    """
    installed = system_mmdebstrap(search_path)
    if installed is not None:
        reason = too_old(_system_tool(installed))
        return (False, reason) if reason else (True, f"mmdebstrap installed ({installed})")
    cache = cache or cache_dir()
    copy = cached_mmdebstrap(cache)
    if copy is not None:
        reason = too_old(copy)
        if reason:
            return False, reason
        return True, f"mmdebstrap {copy.version or ''} in hookcage's cache ({shown(copy.origin)})"
    if shutil.which("apt-get") is not None and shutil.which("dpkg-deb") is not None:
        return True, f"mmdebstrap not installed: fetched with apt into {shown(cache)} when needed"
    return False, "no mmdebstrap, and no apt-get to fetch it"
