"""``hookcage install`` / ``uninstall``: the edge that reads, shows and writes an agent's plan.

The plan itself is pure (:meth:`executor.dialects.base.Dialect.install`
returns a :class:`~executor.core.install.Plan`: the whole new content of
every file). This module:

- reads the files the plan looks at (:func:`read_current`) and asks the
  agent's dialect for its plan (:func:`make_plan`);
- shows it as one unified diff per file and writes nothing (:func:`diff`,
  ``--dry-run``);
- applies it (:func:`apply`): every file that changes is backed up first into
  ``$HOOKCAGE_HOME/installs/<agent>-<mode>/`` with a manifest (path, whether
  it existed, its mode or symlink, sha256 before and after, the backup), then
  written atomically (a temporary file in the same directory, fsync, rename,
  fsync of the directory). A file whose content is already the plan's is not
  touched, so a second install changes nothing and says so. The first
  install's backup is kept across later installs: uninstall goes back to what
  was there before hookcage;
- undoes it (:func:`uninstall`): each file is put back byte for byte (its mode
  and symlink too), or removed when install created it, and directories
  install created are removed when empty; a file that changed since install
  wrote it is left alone and named (it would lose someone's edit).

``root`` prefixes every path of the plan on disk (a test writes a managed
plan, ``/etc/claude-code/...``, under its temporary directory); the plan and
the manifest keep the real paths.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import json
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from executor.core.install import FileEdit, InstallMode, NotInstallable, Plan
from executor.errors import HookcageError
from executor.places import outside_cwd

READ_CAP = 4 << 20
"""Files past this size are shown to a plan by their first :data:`PREFIX` bytes only (an agent's
binary where a wrapper would go is not a settings file; its head tells it apart)."""
PREFIX = 64 << 10
MANIFEST = "manifest.json"


class InstallError(HookcageError):
    """Install or uninstall could not do what was asked (one line for the user)."""


def hookcage_command() -> str:
    """The absolute command that runs this hookcage (what routes call).

    The console script beside this interpreter when there is one (not a
    version manager's shim, which re-resolves on every event), else the one on
    PATH, resolved.
    """
    beside = Path(sys.executable).parent / "hookcage"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("hookcage", path=outside_cwd(os.environ.get("PATH", os.defpath)))  # never ./hookcage
    return os.path.realpath(found) if found else "hookcage"


def install_launcher(home: Path) -> tuple[str, str]:
    """Write (or rewrite) ``$HOOKCAGE_HOME/bin/hookcage`` for this interpreter and package.

    Returns:
        The launcher's path and one line saying what was done.

    Raises:
        InstallError: no launcher can be written for this interpreter.
    """
    from executor import __version__, launcher

    path = launcher.launcher_path(home)
    try:
        content = launcher.script(sys.executable, launcher.package_parent(), __version__)
    except ValueError as exc:
        raise InstallError(str(exc)) from None
    try:
        before = Path(path).read_bytes()
    except OSError:
        before = None
    if before == content and os.access(path, os.X_OK):
        return path, f"unchanged {path}"
    if before is not None and not launcher.is_launcher(before):
        raise InstallError(f"{path} exists and is not hookcage's launcher: move it away first")
    os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
    write_atomic(path, content, 0o755)
    return path, f"{'wrote' if before is None else 'rewrote'} {path}: the program the routes run " \
                 f"({sys.executable} -IS, executor from {launcher.package_parent()})"


def remove_unused_launcher(home: Path) -> str | None:
    """Remove the launcher once no ``--user`` install of this home routes to it; the line saying so."""
    from executor import launcher

    if any(home.glob("installs/*-user/" + MANIFEST)):
        return None
    path = launcher.launcher_path(home)
    try:
        content = Path(path).read_bytes()
    except OSError:
        return None
    if not launcher.is_launcher(content):
        return None
    _remove(path)
    with contextlib.suppress(OSError):
        os.rmdir(os.path.dirname(path))
    return f"removed {path} (no agent routes to it any more)"


def on_disk(path: str, root: str = "") -> str:
    """Where the plan's ``path`` is on disk (under ``root`` when given)."""
    return root.rstrip("/") + path if root else path


def read_current(path: str, root: str = "") -> bytes | None:
    """A file's content for a plan (``None``: absent or not a regular file).

    A file bigger than :data:`READ_CAP` reads as its first :data:`PREFIX` bytes.
    """
    from executor import safeio

    real = on_disk(path, root)
    try:
        fd = safeio.open_regular(real)  # a FIFO or a device in a checkout never blocks install
    except safeio.Unreadable as exc:
        if exc.missing or exc.reason.startswith("is a directory"):
            return None
        raise InstallError(f"cannot read {path}: it {exc.reason}") from None
    try:
        size = os.fstat(fd).st_size
        return safeio.read_fd(fd, READ_CAP) if size <= READ_CAP else os.read(fd, PREFIX)
    except (safeio.Unreadable, OSError) as exc:
        raise InstallError(f"cannot read {path}: {exc}") from None
    finally:
        os.close(fd)


def make_plan(agent: str, mode: InstallMode, *, home: str, environ: Mapping[str, str], hookcage: str,
              root: str = "") -> Plan:
    """The agent's plan, from the files as they are now.

    Raises:
        NotInstallable: the agent (or this mode) cannot be taken over.
        InstallError: unknown agent.
    """
    from executor.dialects import DIALECTS, agent_names
    from executor.dialects.base import Where

    dialect = DIALECTS.get(agent)
    if dialect is None:
        raise InstallError(f"unknown agent {agent!r}; known agents: {agent_names()}")
    env = dict(environ)
    if "PATH" in env:
        env["PATH"] = outside_cwd(env["PATH"])  # the real agent is never the repository's (see the wrapper)
    where = Where(None, home, env)
    return dialect.install(mode, where, lambda path: read_current(path, root), hookcage)


# -- what changes -------------------------------------------------------------


@dataclass(frozen=True)
class Change:
    """One file of the plan against what is there."""

    edit: FileEdit
    before: bytes | None

    @property
    def changed(self) -> bool:
        return self.before != self.edit.content


def changes(plan: Plan, root: str = "") -> list[Change]:
    """Each edit of the plan with the file's whole current content (``None``: absent)."""
    out = []
    for edit in plan.edits:
        real = on_disk(edit.path, root)
        from executor import safeio

        try:
            before: bytes | None = safeio.read_regular(real, 1 << 30)
        except safeio.Unreadable as exc:
            if not exc.missing:
                raise InstallError(f"cannot read {edit.path}: it {exc.reason}") from None
            before = None
        out.append(Change(edit, before))
    return out


def _lines(data: bytes | None) -> list[str] | None:
    if data is None:
        return []
    try:
        return data.decode("utf-8").splitlines(keepends=True)
    except UnicodeDecodeError:
        return None


def diff(plan: Plan, root: str = "") -> str:
    """``--dry-run``: one unified diff per file that would change (writes nothing)."""
    parts = []
    for change in changes(plan, root):
        path = change.edit.path
        if not change.changed:
            parts.append(f"# {path}: unchanged\n")
            continue
        old, new = _lines(change.before), _lines(change.edit.content)
        why = f"# {path}: {change.edit.why}\n" if change.edit.why else ""
        if old is None or new is None:
            parts.append(f"{why}Binary file {path} would change\n")
            continue
        lines = difflib.unified_diff(
            old, new, fromfile="/dev/null" if change.before is None else f"a{path}",
            tofile="/dev/null" if change.edit.content is None else f"b{path}")
        parts.append(why + "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
                                   for line in lines))
    return "".join(parts)


# -- the manifest -------------------------------------------------------------


def _sha(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()


def state_dir(home: Path, agent: str, mode: InstallMode) -> Path:
    """``$HOOKCAGE_HOME/installs/<agent>-<mode>/``: the backups and the manifest of one install."""
    return home / "installs" / f"{agent}-{mode}"


@dataclass
class Entry:
    """What the manifest remembers of one file."""

    path: str
    existed: bool
    sha256_before: str | None
    sha256_after: str | None
    backup: str | None = None
    mode_before: int | None = None
    link: str | None = None
    created_dirs: list[str] = field(default_factory=list)

    def record(self) -> dict[str, Any]:
        return {"path": self.path, "existed": self.existed, "sha256_before": self.sha256_before,
                "sha256_after": self.sha256_after, "backup": self.backup, "mode_before": self.mode_before,
                "link": self.link, "created_dirs": self.created_dirs}


def load_manifest(folder: Path) -> dict[str, Any] | None:
    """The manifest of an install (``None``: nothing installed)."""
    try:
        data = json.loads((folder / MANIFEST).read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise InstallError(f"cannot read {folder / MANIFEST}: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("files"), list):
        raise InstallError(f"{folder / MANIFEST} is not a hookcage install manifest")
    return data


def _entries(manifest: Mapping[str, Any] | None) -> dict[str, Entry]:
    if manifest is None:
        return {}
    return {f["path"]: Entry(**f) for f in manifest["files"]}


def _save_manifest(folder: Path, plan_agent: str, mode: str, root: str, entries: Mapping[str, Entry]) -> None:
    data = {"agent": plan_agent, "mode": mode, "root": root, "files": [e.record() for e in entries.values()]}
    write_atomic(str(folder / MANIFEST), (json.dumps(data, indent=2) + "\n").encode(), 0o600)


# -- writing --------------------------------------------------------------------


def _fsync_dir(path: str) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def make_dirs(directory: str) -> list[str]:
    """Create ``directory`` and its missing parents; those created, outermost first."""
    missing = []
    current = directory
    while current and not os.path.isdir(current):
        missing.append(current)
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    for path in reversed(missing):
        os.mkdir(path, 0o755)
    return list(reversed(missing))


def write_atomic(path: str, content: bytes, mode: int) -> None:
    """Replace ``path`` with ``content``: temp file in the same directory, fsync, rename, fsync the directory."""
    directory = os.path.dirname(path) or "."
    fd, temp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".hookcage", dir=directory)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(content)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    _fsync_dir(directory)


def _remove(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    _fsync_dir(os.path.dirname(path) or ".")


@dataclass(frozen=True)
class Outcome:
    """What install or uninstall did: one line per file, and the files it refused."""

    lines: tuple[str, ...]
    refused: tuple[str, ...] = ()
    changed: int = 0


def apply(plan: Plan, *, home: Path, root: str = "") -> Outcome:
    """Write the plan: back up, record, write atomically; files already as planned are not touched."""
    folder = state_dir(home, plan.agent, plan.mode)
    manifest = load_manifest(folder)
    if manifest is not None and manifest.get("root", "") != root:
        raise InstallError(f"{folder / MANIFEST} records an install under another root "
                           f"({manifest.get('root') or '/'}): uninstall it first")
    entries = _entries(manifest)
    todo = [c for c in changes(plan, root) if c.changed]
    lines = [f"unchanged {c.edit.path}" for c in changes(plan, root) if not c.changed]
    if not todo:
        return Outcome((*lines, f"hookcage's routing for {plan.agent} ({plan.mode}) is already installed: "
                                "nothing to change"))
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    backups = folder / "backup"
    backups.mkdir(exist_ok=True, mode=0o700)
    for change in todo:
        edit, real = change.edit, on_disk(change.edit.path, root)
        entry = entries.get(edit.path)
        if entry is None:
            entry = Entry(edit.path, change.before is not None, _sha(change.before), None)
            if change.before is not None:
                info = os.lstat(real)
                entry.mode_before = stat.S_IMODE(info.st_mode)
                if stat.S_ISLNK(info.st_mode):
                    entry.link = os.readlink(real)
                else:
                    entry.backup = f"backup/{len(entries):03d}-{os.path.basename(edit.path)}"
                    write_atomic(str(folder / entry.backup), change.before, 0o600)
            entries[edit.path] = entry
        entry.sha256_after = _sha(edit.content)
        _save_manifest(folder, plan.agent, plan.mode, root, entries)  # before the file changes
        if edit.content is None:
            _remove(real)
            lines.append(f"removed {edit.path}")
        else:
            created = make_dirs(os.path.dirname(real))
            entry.created_dirs += [d for d in created if d not in entry.created_dirs]
            if os.path.islink(real):
                os.unlink(real)  # write the file itself, never through a link
            write_atomic(real, edit.content, edit.mode)
            lines.append(f"{'wrote' if change.before is None else 'changed'} {edit.path}"
                         + (f": {edit.why}" if edit.why else ""))
    _save_manifest(folder, plan.agent, plan.mode, root, entries)
    lines.append(f"backup and manifest: {folder}")
    return Outcome(tuple(lines), changed=len(todo))


def uninstall(agent: str, mode: InstallMode, *, home: Path) -> Outcome:
    """Put back what install changed, byte for byte; leave (and name) a file changed since."""
    folder = state_dir(home, agent, mode)
    manifest = load_manifest(folder)
    if manifest is None:
        raise InstallError(f"hookcage's routing for {agent} ({mode}) is not installed "
                           f"(no manifest in {folder})")
    root = str(manifest.get("root") or "")
    entries = _entries(manifest)
    lines: list[str] = []
    refused: list[str] = []
    for path, entry in list(entries.items()):
        real = on_disk(path, root)
        try:
            now: bytes | None = Path(real).read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            now = None
        if _sha(now) != entry.sha256_after:
            if _sha(now) == entry.sha256_before:
                del entries[path]
                lines.append(f"unchanged {path} (already as before install)")
                continue
            refused.append(path)
            lines.append(f"left {path} as it is: it changed since hookcage install wrote it "
                         "(take hookcage's entries out by hand, then run uninstall again)")
            continue
        if not entry.existed:
            _remove(real)
            for directory in reversed(entry.created_dirs):
                with contextlib.suppress(OSError):
                    os.rmdir(directory)
            lines.append(f"removed {path}")
        elif entry.link is not None:
            if os.path.lexists(real):
                os.unlink(real)
            os.symlink(entry.link, real)
            lines.append(f"restored {path} (a link to {entry.link})")
        else:
            assert entry.backup is not None
            content = (folder / entry.backup).read_bytes()
            if _sha(content) != entry.sha256_before:
                refused.append(path)
                lines.append(f"left {path} as it is: its backup {folder / entry.backup} does not match "
                             "the manifest")
                continue
            write_atomic(real, content, entry.mode_before if entry.mode_before is not None else 0o644)
            lines.append(f"restored {path}")
        del entries[path]
    if entries:
        _save_manifest(folder, agent, mode, root, entries)
    else:
        shutil.rmtree(folder)
        with contextlib.suppress(OSError):
            folder.parent.rmdir()
    return Outcome(tuple(lines), tuple(refused), changed=len(lines) - len(refused))


# -- doctor ---------------------------------------------------------------------


@dataclass(frozen=True)
class Check:
    """One line of ``hookcage doctor``'s agents section."""

    ok: bool
    what: str
    fix: str = ""


def _repo_files(dialect: Any, where: Any) -> list[str]:
    from glob import glob

    from executor.core.hooks import Scope

    found = []
    for source in dialect.sources(where):
        if source.scope not in (Scope.PROJECT, Scope.LOCAL):
            continue
        paths = sorted(glob(source.path)) if source.glob else [source.path]
        found += [p for p in paths if os.path.isfile(p)]
    return found


def _launcher_check(home: Path, agent: str) -> Check:
    """Whether the launcher the ``--user`` routes run can start."""
    from executor import launcher

    path = launcher.launcher_path(home)
    try:
        why = launcher.broken(Path(path).read_bytes())
    except OSError:
        why = "it is missing"
    if why is None:
        return Check(True, f"the routes' program {path} can start")
    return Check(False, f"the routes' program {path} cannot start: {why}; every event fails, and an agent "
                 "lets a failed hook through", f"hookcage install {agent}")


def agent_checks(*, home: Path, user_home: str, environ: Mapping[str, str], root: Path,
                 managed_root: str = "") -> list[Check]:
    """For each agent on PATH or configured in this repository: whether hookcage's routing is
    installed, whether the agent would still run this repository's hooks itself (naming the
    file), and for a wrapper, whether it comes first on PATH."""
    from executor.dialects import DIALECTS
    from executor.dialects.base import Where
    from executor.dialects.claude import MANAGED_DROP_IN, ClaudeDialect, is_wrapper

    out: list[Check] = []
    launcher_checked = False
    where = Where(str(root), user_home, dict(environ))
    search = environ.get("PATH", "")
    for name, dialect in DIALECTS.items():
        binary = getattr(dialect, "binary", name)
        on_path = shutil.which(binary, path=search)
        files = [os.path.relpath(f, root) for f in _repo_files(dialect, where)]
        if on_path is None and not files:
            continue
        installed = [m for m in ("user", "managed")
                     if load_manifest(state_dir(home, name, m)) is not None]
        head = f"{name}: " + (f"{binary} is {on_path}" if on_path else f"{binary} not on PATH")
        if not installed:
            runs = ("it would run this repository's hooks itself" if on_path else
                    "this repository carries its hooks; wherever it runs, it would run them itself")
            out.append(Check(not files, f"{head}; hookcage's routing not installed"
                             + (f"; {runs} ({', '.join(files)})" if files else ""),
                             f"hookcage install {name}"))
            continue
        out.append(Check(True, f"{head}; hookcage's routing installed ({', '.join(installed)})"))
        if "user" in installed and not launcher_checked:
            launcher_checked = True
            out.append(_launcher_check(home, name))
        if isinstance(dialect, ClaudeDialect) and installed == ["user"]:
            wrapper = read_current(on_path) if on_path else None
            if on_path and not is_wrapper(wrapper):
                manifest = load_manifest(state_dir(home, name, "user")) or {"files": []}
                ours = next((f["path"] for f in manifest["files"] if f["path"].endswith(f"/bin/{binary}")), None)
                folder = os.path.dirname(ours) if ours else "the wrapper's folder"
                out.append(Check(False, f"{name}: `{binary}` on PATH is {on_path}, not hookcage's wrapper: it "
                                 "runs repositories' hooks itself" + (f" ({', '.join(files)})" if files else ""),
                                 f'put {folder} ahead of {os.path.dirname(on_path)} on PATH '
                                 f'(export PATH="{folder}:$PATH" in ~/.bashrc)'))
            elif on_path:
                out.append(Check(True, f"{name}: `{binary}` on PATH is hookcage's wrapper"))
        if isinstance(dialect, ClaudeDialect) and "managed" in installed and dialect.managed_dir:
            ours_name = os.path.basename(MANAGED_DROP_IN)
            folder = on_disk(f"{dialect.managed_dir}/managed-settings.d", managed_root)
            later = sorted(n for n in (os.listdir(folder) if os.path.isdir(folder) else [])
                           if n.endswith(".json") and n > ours_name)
            outranking = []
            for n in later:
                with contextlib.suppress(OSError, ValueError):
                    data = json.loads(Path(folder, n).read_text())
                    if isinstance(data, dict) and data.get("allowManagedHooksOnly") is False:
                        outranking.append(n)
            out.append(Check(not outranking, f"{name}: no later managed-settings.d file turns "
                             "allowManagedHooksOnly off" + (f" (it is: {', '.join(outranking)})" if outranking else "")
                             + "; a server-managed or MDM policy cannot be checked from here",
                             "remove allowManagedHooksOnly: false from those files"))
    return out


__all__ = [
    "Change",
    "Check",
    "InstallError",
    "NotInstallable",
    "Outcome",
    "agent_checks",
    "apply",
    "changes",
    "diff",
    "hookcage_command",
    "install_launcher",
    "load_manifest",
    "make_plan",
    "read_current",
    "remove_unused_launcher",
    "state_dir",
    "uninstall",
]
