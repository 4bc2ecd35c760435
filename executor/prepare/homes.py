"""What hookcage prepares on the host for one run: a persistent home, the agent's env file.

How this works:

1. **Persistent homes** (``"sandbox": {"home": "persistent"}``, reviewed like
   every sandbox option). The hook gets a writable directory kept across runs
   under ``$HOOKCAGE_HOME/homes/<project key>/<hook id>/`` (the project key is
   a short hash of the project root: never the user's own home), bound
   read-write at :data:`HOME_TARGET` with ``HOME`` pointing there. It is
   created 0700 and owned by the uid the container runs as (chowned when
   hookcage runs as root), with ``.claude/``, ``.codebuddy/`` and ``.gemini/``
   inside, so loggers such as ``>> ~/.claude/bash-command-log.txt`` work as
   their authors wrote them. A bind mount cannot be size-limited, so its size
   is measured before each run (a bounded walk that never follows symlinks);
   at or past the ``home_cap`` setting it is bound read-only for that run and
   the user is told, in one line, where it is and how to clear it. Its source
   is the same for every run of a hook, so a warm pool serves it.
2. **The agent's environment file** (``CLAUDE_ENV_FILE``, set by Claude Code
   for SessionStart hooks, which append ``export NAME=value`` lines that
   Claude applies to its later Bash commands). When hookcage's own caller set
   it, every run gets an empty file of its own (in the run's staging folder),
   bound read-write at :data:`ENV_FILE_TARGET` with ``CLAUDE_ENV_FILE``
   pointing there; such a run is never served warm (the bind is per run).
   After the run, what the hook wrote (up to :data:`ENV_FILE_CAP`, whole
   lines) is appended to the real file when the hook holds the ``env_file``
   capability, else dropped and reported; the run log records it either way.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import stat
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from executor.core.protocol import HookOutcome
from executor.core.text import cap_text, decode, redact, sanitize
from executor.errors import SandboxError
from executor.prepare import staging as staging_folders
from executor.sandbox import backends
from executor.sandbox.base import Bind, RunRequest

if TYPE_CHECKING:
    from executor.settings import Settings

HOME_TARGET = "/home/hookcage"
"""Where a persistent home is bound in the container (``HOME``)."""
HOME_SUBDIRS = (".claude", ".codebuddy", ".gemini")
"""Made in every persistent home, so the agents' usual loggers work as written."""
ENV_FILE_VAR = "CLAUDE_ENV_FILE"
ENV_FILE_TARGET = "/hookcage/claude-env"
"""Where the run's own environment file is bound in the container."""
ENV_FILE_CAP = 64 * 1024
"""Bytes of a hook's environment file that are read; the rest is cut (at a line end)."""
ENV_LOG_CAP = 4000
"""Characters of the environment file kept in the run log."""
MAX_ENTRIES = 10_000
"""Files and directories a size check walks; a home holding more counts as over its cap."""
PROJECT_FILE = "project"
"""In ``homes/<project key>/``: the project root the key stands for (for ``hookcage home list``)."""

_SIZE = re.compile(r"^([1-9][0-9]*)([bkmgBKMG]?)\Z")
_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3}
_HOOK_ID = re.compile(r"^h[0-9a-f]{11}\Z")
_append_lock = threading.Lock()


def parse_size(text: str) -> int:
    """Bytes in a size such as ``64m`` (``b``, ``k``, ``m``, ``g``; 1024-based).

    Raises:
        ValueError: not such a size.
    """
    match = _SIZE.match(text)
    if not match:
        raise ValueError(f"not a size: {text!r} (use e.g. 64m)")
    return int(match.group(1)) * _UNITS[match.group(2).lower()]


def human(size: int) -> str:
    """``size`` bytes for people: ``12.3 MiB``."""
    value = float(size)
    for unit in ("B", "KiB", "MiB"):
        if value < 1024:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


# -- where homes live -----------------------------------------------------------------


def homes_root(hookcage_home: Path) -> Path:
    """``$HOOKCAGE_HOME/homes``."""
    return hookcage_home / "homes"


def project_key(root: str) -> str:
    """The short hash a project's homes are kept under."""
    return hashlib.sha256(os.path.realpath(root).encode("utf-8", "surrogateescape")).hexdigest()[:16]


def home_dir(hookcage_home: Path, root: str, hook_id: str) -> Path:
    """Where the persistent home of ``hook_id`` in project ``root`` lives."""
    if not _HOOK_ID.match(hook_id):
        raise ValueError(f"not a hook id: {hook_id!r}")
    return homes_root(hookcage_home) / project_key(root) / hook_id


def _ids(user: str) -> tuple[int, int]:
    uid, _, gid = user.partition(":")
    return int(uid), int(gid or uid)


def ensure_home(path: Path, root: str, user: str) -> None:
    """Create ``path`` (0700, owned by ``user``'s uid) and its agent folders, if missing.

    Never follows a symlink the hook may have left inside: the folders are
    made relative to the home's own descriptor, and one that exists in any
    form is left as it is.

    Raises:
        OSError: the home cannot be made.
    """
    uid, gid = _ids(user)
    as_root = os.geteuid() == 0
    project = path.parent
    project.mkdir(parents=True, exist_ok=True, mode=0o700)
    marker = project / PROJECT_FILE
    if not marker.exists():
        fd, tmp = tempfile.mkstemp(prefix=".project.", dir=project)
        with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape") as handle:
            handle.write(os.path.realpath(root) + "\n")
        os.replace(tmp, marker)
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if as_root and (st.st_uid, st.st_gid) != (uid, gid):
            os.fchown(fd, uid, gid)
        if stat.S_IMODE(st.st_mode) != 0o700 and (as_root or st.st_uid == os.geteuid()):
            os.fchmod(fd, 0o700)
        for name in HOME_SUBDIRS:
            try:
                os.mkdir(name, 0o700, dir_fd=fd)
            except FileExistsError:
                continue  # a folder, a file or a symlink the hook made: its own business
            if as_root:
                os.chown(name, uid, gid, dir_fd=fd, follow_symlinks=False)
    finally:
        os.close(fd)


@dataclass(frozen=True)
class Usage:
    """What a home holds: bytes on disk and entries, as far as the walk went."""

    size: int
    entries: int
    complete: bool = True

    def over(self, cap: int) -> bool:
        """At or past the cap (a walk that stopped early counts as past it)."""
        return not self.complete or self.size >= cap

    def describe(self) -> str:
        """``12.3 MiB`` or ``more than 10000 files``."""
        if not self.complete:
            return f"more than {MAX_ENTRIES} files, or a folder that cannot be read"
        return human(self.size)


def measure(path: Path, max_entries: int = MAX_ENTRIES) -> Usage:
    """The disk usage under ``path`` (blocks, like ``du``), never following symlinks.

    Stops after ``max_entries`` entries (then ``complete`` is False). A folder
    the hook made unreadable is opened up (its owner may) or counts as incomplete.
    """
    size, entries = 0, 0
    stack = [str(path)]
    while stack:
        folder = stack.pop()
        try:
            listing = _scan(folder)
        except OSError:
            return Usage(size, entries, complete=False)
        for entry in listing:
            entries += 1
            if entries > max_entries:
                return Usage(size, entries, complete=False)
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            size += st.st_blocks * 512
            if stat.S_ISDIR(st.st_mode):
                stack.append(entry.path)
    return Usage(size, entries)


def _scan(folder: str) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(folder) as it:
            return list(it)
    except PermissionError:
        _open_up(folder)  # a folder the hook made unreadable: its owner may open it again
        with os.scandir(folder) as it:
            return list(it)


def _open_up(folder: str) -> None:
    """chmod 0700 the folder itself, never what a symlink swapped in for it points to."""
    fd = os.open(folder, os.O_PATH | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.chmod(f"/proc/self/fd/{fd}", 0o700)  # the inode opened above, whatever the path is now
    finally:
        os.close(fd)


# -- listing and clearing (hookcage home) ---------------------------------------------


@dataclass(frozen=True)
class HomeInfo:
    """One persistent home, for ``hookcage home list``."""

    path: Path
    project: str | None
    hook_id: str
    usage: Usage


def list_homes(hookcage_home: Path) -> list[HomeInfo]:
    """Every persistent home under ``$HOOKCAGE_HOME/homes``."""
    root = homes_root(hookcage_home)
    found: list[HomeInfo] = []
    if not root.is_dir():
        return found
    for project_dir in sorted(p for p in root.iterdir() if p.is_dir() and not p.is_symlink()):
        project: str | None = None
        with contextlib.suppress(OSError):
            project = (project_dir / PROJECT_FILE).read_text(encoding="utf-8", errors="replace").strip() or None
        for hook_dir in sorted(p for p in project_dir.iterdir() if _HOOK_ID.match(p.name)):
            if hook_dir.is_dir() and not hook_dir.is_symlink():
                found.append(HomeInfo(hook_dir, project, hook_dir.name, measure(hook_dir)))
    return found


def select_homes(
    hookcage_home: Path, *, hook_ids: tuple[str, ...] = (), project: str | None = None
) -> list[HomeInfo]:
    """The homes of these hooks and/or this project (all when neither is given)."""
    key = project_key(project) if project else None
    return [
        info for info in list_homes(hookcage_home)
        if (not hook_ids or info.hook_id in hook_ids) and (key is None or info.path.parent.name == key)
    ]


def clear_home(path: Path) -> None:
    """Empty a home (the folder itself stays, so a container already made for it still binds it).

    Nothing is followed out of it: symlinks are removed as links; folders the
    hook made unreadable or read-only are opened up by their owner first.

    Raises:
        OSError: something could not be removed.
    """

    if os.geteuid() != 0:  # root may remove anything; an owner first opens up what the hook closed
        stack = [str(path)]
        while stack:
            for entry in _scan(stack.pop()):
                if entry.is_dir(follow_symlinks=False):
                    _open_up(entry.path)
                    stack.append(entry.path)
    for entry in _scan(str(path)):
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path)  # fd-based: never follows a symlink out
        else:
            os.unlink(entry.path)


# -- one run ----------------------------------------------------------------------------


@dataclass
class RunExtras:
    """What :func:`prepare` set up for one run, and what came of it."""

    notes: list[str] = field(default_factory=list)
    staged_env: str | None = None
    """The run's own environment file on the host (``None``: ``CLAUDE_ENV_FILE`` was unset)."""
    target_env: str | None = None
    """The agent's real ``CLAUDE_ENV_FILE``."""
    written: bytes = b""
    size: int = 0
    cut: bool = False
    applied: bool = False


def env_file_target(environ: Mapping[str, str]) -> str | None:
    """The agent's ``CLAUDE_ENV_FILE``, when set to an absolute path."""
    value = environ.get(ENV_FILE_VAR) or ""
    return value if os.path.isabs(value) else None


def container_user(sandbox: Any, project_dir: str) -> str:
    """The ``uid:gid`` a docker backend runs this project's hooks as."""
    profile = getattr(getattr(sandbox, "inner", sandbox), "profile", None)
    user = getattr(profile, "user", None)
    if isinstance(user, str) and user:
        return user
    from executor.sandbox.docker import default_user

    return default_user(project_dir)


def prepare(
    request: RunRequest,
    *,
    hook_id: str,
    sandbox: Any,
    settings: Settings,
    environ: Mapping[str, str] | None,
) -> tuple[RunRequest, RunExtras]:
    """Add the persistent home and the environment file a run should get.

    Args:
        request: the run as the executor built it.
        hook_id: the hook's id (names its home).
        sandbox: the backend that will run it (whose uid the files must suit).
        settings: the settings (``home``, ``home_cap``).
        environ: hookcage's caller's environment (``CLAUDE_ENV_FILE``);
            ``None``: this process's.

    Raises:
        SandboxError: the home or the environment file cannot be made.
    """
    extras = RunExtras()
    environ = os.environ if environ is None else environ
    target = env_file_target(environ)
    docker = backends.on_engine(request.options.backend)  # its runs are containers (binds, their uid)
    persistent = docker and request.options.home == "persistent"
    if not persistent and target is None:
        return request, extras
    user = container_user(sandbox, request.project_dir) if docker else None
    hookcage_home, home_cap = settings.home, settings.home_cap
    binds = list(request.binds)
    env = dict(request.env)
    warm = request.warm
    if persistent:
        binds.append(_persistent_home(request, hook_id, hookcage_home, home_cap, user or "65534:65534", extras))
        env["HOME"] = HOME_TARGET
    if target is not None:
        extras.target_env = target
        extras.staged_env = _stage_env_file(hookcage_home, user if docker else None)
        if docker:
            binds.append(Bind(extras.staged_env, ENV_FILE_TARGET, read_only=False))
            env[ENV_FILE_VAR] = ENV_FILE_TARGET
            warm = False
        else:
            env[ENV_FILE_VAR] = extras.staged_env
    return replace(request, binds=tuple(binds), env=env, warm=warm), extras


def _persistent_home(
    request: RunRequest, hook_id: str, hookcage_home: Path, home_cap: str, user: str, extras: RunExtras
) -> Bind:
    path = home_dir(hookcage_home, request.project_dir, hook_id)
    try:
        ensure_home(path, request.project_dir, user)
    except (OSError, ValueError) as exc:
        raise SandboxError(f"cannot prepare the hook's persistent home {path}: {exc}") from exc
    cap = parse_size(home_cap)
    usage = measure(path)
    read_only = usage.over(cap)
    if read_only:
        extras.notes.append(
            f"its persistent home {path} holds {usage.describe()}, at or past the {home_cap} cap "
            f"(home_cap): mounted read-only for this run; clear it with `hookcage home clear --hook {hook_id}`"
        )
    return Bind(str(path), HOME_TARGET, read_only=read_only)


def _stage_env_file(hookcage_home: Path, user: str | None) -> str:
    staging = hookcage_home / "staging"
    try:
        staging.mkdir(parents=True, exist_ok=True, mode=0o700)
        folder = str(staging_folders.new_folder(staging, "env"))  # owned: swept if this process dies
        path = os.path.join(folder, "claude-env")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            if user is not None and os.geteuid() == 0:
                os.fchown(fd, *_ids(user))
            elif user is not None and _ids(user)[0] != os.geteuid():
                os.fchmod(fd, 0o666)  # another uid writes it; its folder (0700) keeps the host out
        finally:
            os.close(fd)
    except OSError as exc:
        raise SandboxError(f"cannot stage the run's environment file: {exc}") from exc
    return path


def collect_env_file(extras: RunExtras | None) -> bool:
    """Read what the hook wrote to its environment file; True when it wrote anything."""
    if extras is None or extras.staged_env is None:
        return False
    try:
        fd = os.open(extras.staged_env, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        extras.size = os.fstat(fd).st_size
        chunks: list[bytes] = []
        left = ENV_FILE_CAP + 1
        while left > 0:
            chunk = os.read(fd, min(left, 65536))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > ENV_FILE_CAP:
        extras.cut = True
        data = data[: data.rfind(b"\n", 0, ENV_FILE_CAP) + 1]  # whole lines only
    extras.written = data
    return extras.size > 0


def apply_env_file(extras: RunExtras, *, allowed: bool) -> None:
    """Append what the hook wrote to the agent's ``CLAUDE_ENV_FILE`` when ``allowed``."""
    if not extras.written or extras.target_env is None or not allowed:
        return
    data = extras.written if extras.written.endswith(b"\n") else extras.written + b"\n"
    try:
        with _append_lock:
            fd = os.open(extras.target_env, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
    except OSError as exc:
        extras.notes.append(f"could not append to {ENV_FILE_VAR} {extras.target_env}: {exc.strerror}")
        return
    extras.applied = True
    if extras.cut:
        extras.notes.append(
            f"wrote {human(extras.size)} to {ENV_FILE_VAR}; only the first {len(extras.written)} bytes "
            f"(whole lines, at most {ENV_FILE_CAP // 1024} KiB) were kept"
        )


def finish(extras: RunExtras | None, outcome: HookOutcome, *, allowed: bool) -> HookOutcome:
    """Apply the environment file (when ``allowed``) and add this run's notes to its outcome."""
    if extras is None:
        return outcome
    apply_env_file(extras, allowed=allowed)
    if not extras.notes:
        return outcome
    return replace(outcome, notes=outcome.notes + tuple(extras.notes))


def log_entry(extras: RunExtras | None) -> dict[str, Any] | None:
    """The run log's ``env_file`` field: what the hook wrote (redacted, capped) and what became of it."""
    if extras is None or extras.target_env is None:
        return None
    return {
        "bytes": extras.size,
        "applied": extras.applied,
        "cut": extras.cut,
        "text": cap_text(redact(sanitize(decode(extras.written), cap=ENV_LOG_CAP * 2)), ENV_LOG_CAP),
    }


def unstage(extras: RunExtras | None) -> None:
    """Remove the run's staged environment file (its folder is the run's own)."""
    if extras is not None and extras.staged_env is not None:
        shutil.rmtree(os.path.dirname(extras.staged_env), ignore_errors=True)


ENV_FILE_WARNING = (
    "env_file: lines it writes to CLAUDE_ENV_FILE are sourced by the agent's shell before every "
    "later Bash command, on your machine, outside any sandbox: `export PATH=/tmp/x:$PATH` redirects "
    "every command, and `$(...)` in a line runs as you. Grant it only to code you would run yourself."
)


def review_notes(home: str, capabilities: tuple[str, ...] | frozenset[str]) -> list[str]:
    """What ``hookcage trust`` says, beyond the profile line, about a home or the env-file capability."""
    notes = []
    if home == "persistent":
        notes.append("home: persistent (a writable HOME kept across runs under $HOOKCAGE_HOME/homes; "
                     "what it keeps there, it reads next time)")
    if "env_file" in capabilities:
        notes.append("WARNING " + ENV_FILE_WARNING)
    return notes
