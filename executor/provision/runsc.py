"""``hookcage setup runsc``: register an installed gVisor with this machine's Docker engine.

What it does, in order, stopping at the first refusal (one line each):

1. ``runsc`` must be on PATH (hookcage installs nothing: ``apt-get install runsc``).
2. The engine must be a ``dockerd`` on this machine (not Podman, not a remote
   engine: their runtimes are registered elsewhere).
3. ``daemon.json`` (``dockerd --config-file``, else ``/etc/docker/daemon.json``)
   must parse as a JSON object; a file it cannot parse is never rewritten.
4. The pure merge (:func:`executor.sandbox.runtimes.merge_runtime`) decides
   what ``runtimes.runsc = {"path": <which runsc>, "runtimeArgs":
   ["--network=none"]}`` changes: nothing (already there), a conflict (an
   entry with other settings: refused unless ``force``), or an addition.
5. As root only: a backup ``daemon.json.hookcage-<UTC>.bak``; gVisor's own
   ``runsc install --runtime=runsc -- --network=none`` writes the entry into a
   copy of the file in a private folder beside it (:func:`install_staged`:
   runsc install rewrites its file in place and leaves a world-readable
   ``~`` copy, so it never touches the real one); the copy must hold what the
   merge said and nothing else, then replaces the file in one rename. Then
   ``SIGHUP`` to dockerd (a reload: running containers and other clients are
   not touched), and a wait until the engine lists ``runsc``. When it does
   not, the old text is put back (and dockerd reloaded again): the file is
   never left in a state the engine refused.
6. A tiny network-less container under runsc answers ``uname -r`` (gVisor's
   kernel, not the host's).

Running it again changes nothing. The engine side is a :class:`Engine` and the
write an :data:`Installer` (the real one: :func:`runsc_install`), so the file
handling is tested without a dockerd.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from executor.errors import HookcageError
from executor.sandbox.docker.probe import STATX_BUG, lists_files, probe_run
from executor.sandbox.runtimes import (
    GVISOR_RUNTIME,
    RUNSC_ARGS,
    DaemonJsonError,
    merge_runtime,
    parse_daemon_json,
    runtime_entry,
    unexpected_keys,
)

DEFAULT_DAEMON_JSON = Path("/etc/docker/daemon.json")
PID_FILE = Path("/var/run/docker.pid")
RELOAD_WAIT = 30.0
"""Seconds to wait for the engine to list runsc after SIGHUP."""
INSTALL_TIMEOUT = 60.0
"""Seconds ``runsc install`` may take (it reads and writes one small file)."""

Installer = Callable[[str, Path], None]
"""Writes the runsc entry into the ``daemon.json`` at the path (the real one: :func:`runsc_install`)."""


class SetupError(HookcageError):
    """``hookcage setup`` refused or failed; the message says what and how to fix it."""


class Engine(Protocol):
    """The engine side of the set-up (the real one: :class:`LocalDockerd`)."""

    def refusal(self) -> str:
        """Why runtimes cannot be registered here (Podman, remote engine, no dockerd), or ``""``."""

    def config_file(self) -> Path:
        """The ``daemon.json`` dockerd reads."""

    def runtimes(self) -> list[str]:
        """The runtimes the engine lists now."""

    def reload(self) -> None:
        """Make the engine read its ``daemon.json`` again (SIGHUP)."""

    def kernel(self, runtime: str | None) -> str:
        """``uname -r`` in a tiny network-less container under ``runtime`` (the engine's default: None)."""

    def lists(self, runtime: str) -> str:
        """``""`` when coreutils' ``ls -l /`` works in a container under ``runtime``, else what it said."""


@dataclass
class Outcome:
    """What :func:`setup_runsc` did, as lines for the user."""

    lines: list[str] = field(default_factory=list)
    changed: bool = False
    backup: Path | None = None

    def say(self, line: str) -> None:
        self.lines.append(line)


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:
        raise SetupError(f"{path}: not valid JSON (not UTF-8 text): left untouched; fix it first") from None
    except OSError as exc:
        raise SetupError(f"{path}: cannot be read: {exc.strerror}") from None


def write_atomically(path: Path, text: str, mode: int = 0o644) -> None:
    """Replace ``path`` with ``text`` in one step: temp file in the same directory, fsync, rename, fsync dir.

    A reader (dockerd) sees the old file or the new one, never half of one.
    """
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
        replace_durably(Path(tmp), path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def replace_durably(staged: Path, path: Path) -> None:
    """Rename ``staged`` (in ``path``'s file system) over ``path``: fsync of the file, rename, fsync of the folder."""
    fd = os.open(staged, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(staged, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def runsc_install(runsc: str, path: Path) -> None:
    """gVisor's ``runsc install --config_file=PATH --runtime=runsc -- --network=none`` (the runsc at ``runsc``).

    It adds ``runtimes.runsc = {"path": <that runsc, resolved>, "runtimeArgs": [...]}``
    and keeps the other keys (sorted, four-space indent); it rewrites the file
    in place and leaves the old text in ``PATH~``: :func:`install_staged` runs
    it on a copy. A runsc that also turns the engine's userland proxy off
    unless told (newer than 20221219, whose ``install --help`` names
    ``-userland-proxy``) is told to leave it.

    Raises:
        SetupError: runsc install failed (its last line in the message).
    """
    words = [runsc, "install", f"--config_file={path}", f"--runtime={GVISOR_RUNTIME}"]
    usage = _run(runsc, [runsc, "install", "--help"])
    if "-userland-proxy" in usage.stdout + usage.stderr:
        words.append("--userland-proxy=true")  # without it: "userland-proxy": false for every container
    done = _run(runsc, [*words, "--", *RUNSC_ARGS])
    if done.returncode != 0:
        said = [line.strip() for line in f"{done.stdout}\n{done.stderr}".splitlines() if line.strip()]
        raise SetupError(f"{runsc} install failed (exit {done.returncode}): "
                         + (said[-1][:300] if said else "no output"))


def _run(runsc: str, words: list[str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(words, stdin=subprocess.DEVNULL, capture_output=True, text=True, errors="replace",
                              timeout=INSTALL_TIMEOUT, check=False, env={**os.environ, "LC_ALL": "C"})
    except (OSError, subprocess.SubprocessError) as exc:
        raise SetupError(f"{runsc} install could not run: {' '.join(str(exc).split())}") from None


def install_staged(path: Path, old_text: str | None, expected: dict[str, Any], *, runsc: str,
                   install: Installer, mode: int = 0o644) -> str:
    """Let ``install`` write into a copy of ``path``, check the copy, rename it over ``path``; its new text.

    The copy is ``old_text`` (an absent file: empty) in a private folder
    (0700) beside ``path``, so the rename is atomic and runsc install's
    ``~`` file (mode 0644 whatever the original's) is never readable by
    others; the folder is removed whatever happens.

    Raises:
        SetupError: the installer failed, or the copy is not ``expected``
            (unparseable, or other keys changed): ``path`` is left untouched.
    """
    stage = Path(tempfile.mkdtemp(prefix=f".{path.name}.hookcage-", dir=path.parent))
    try:
        copy = stage / path.name
        copy.write_text(old_text or "", encoding="utf-8")
        copy.chmod(mode)
        install(runsc, copy)
        new_text = _read(copy) or ""
        try:
            written = parse_daemon_json(new_text)
        except DaemonJsonError as exc:
            raise SetupError(f"runsc install wrote a copy of {path} that is {exc}: {path} left untouched") from None
        changed = unexpected_keys(expected, written)
        if changed:
            raise SetupError(f"runsc install changed more than runtimes.runsc in a copy of {path} "
                             f"({', '.join(changed)}): {path} left untouched")
        copy.chmod(mode)
        replace_durably(copy, path)
        return new_text
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def backup_path(path: Path, now: datetime | None = None) -> Path:
    """``daemon.json.hookcage-20261124T073000Z.bak`` next to ``path`` (a new name if that exists)."""
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    candidate = path.with_name(f"{path.name}.hookcage-{stamp}.bak")
    n = 1
    while candidate.exists():
        n += 1
        candidate = path.with_name(f"{path.name}.hookcage-{stamp}-{n}.bak")
    return candidate


def diff(path: Path, old: str, new: str) -> str:
    """A unified diff of the file's text, as ``--dry-run`` shows it."""
    lines = difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                 fromfile=str(path), tofile=f"{path} (after hookcage setup runsc)")
    text = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    return text


def setup_runsc(
    engine: Engine,
    *,
    runsc: str | None,
    daemon_json: Path | None = None,
    force: bool = False,
    dry_run: bool = False,
    is_root: bool | None = None,
    wait: float = RELOAD_WAIT,
    sleep: Callable[[float], None] = time.sleep,
    install: Installer = runsc_install,
) -> Outcome:
    """Register ``runsc`` with ``engine`` (see the module's docstring for the steps).

    Args:
        engine: the engine (:class:`LocalDockerd` for this machine's dockerd).
        runsc: the path of the installed runsc (``shutil.which("runsc")``); None: not installed.
        daemon_json: the file to edit; the engine's own when None.
        force: replace a ``runsc`` entry with other settings.
        dry_run: only show the diff.
        is_root: whether this process may write the file and signal dockerd
            (``os.geteuid() == 0`` when None).
        install: what writes the entry (:func:`runsc_install`; tests pass a fake).

    Raises:
        SetupError: a refusal or a failed reload (one line, what and how to fix).
    """
    if not runsc:
        raise SetupError("runsc (gVisor) is not installed: apt-get install runsc, then hookcage setup runsc")
    runsc = os.path.realpath(runsc) if os.path.isabs(runsc) else runsc
    why_not = engine.refusal()
    if why_not:
        raise SetupError(why_not)
    path = daemon_json or engine.config_file()
    old_text = _read(path)
    try:
        config = parse_daemon_json(old_text or "")
        merge = merge_runtime(config, GVISOR_RUNTIME, runtime_entry(runsc), force=force)
    except DaemonJsonError as exc:
        raise SetupError(f"{path}: {exc}: left untouched; fix it first") from None
    if merge.conflict:
        raise SetupError(f"{path} already registers runsc with other settings ({merge.conflict}): "
                         "left as it is; hookcage setup runsc --force replaces that entry")
    listed = GVISOR_RUNTIME in engine.runtimes()
    out = Outcome()
    if not merge.changed and listed:
        out.say(f"runsc ({runsc}) is already registered in {path} and the engine lists it: nothing changed")
        if not dry_run:
            _verify(engine, out)
        return out
    if merge.changed and listed and GVISOR_RUNTIME not in config.get("runtimes", {}):
        # dockerd --add-runtime runsc=...: the same name in daemon.json too would make the reload fail.
        raise SetupError(f"the engine already has a runtime named runsc, registered outside {path} "
                         "(dockerd --add-runtime?): left as it is")
    if dry_run:
        if merge.changed:
            with tempfile.TemporaryDirectory(prefix="hookcage-setup-runsc-") as scratch:
                new_text = install_staged(Path(scratch) / path.name, old_text, merge.config, runsc=runsc,
                                          install=install)
            out.say(diff(path, old_text or "", new_text).rstrip("\n"))
            out.say(f"dry run: {path} not changed, dockerd not reloaded")
        else:
            out.say(f"dry run: {path} already registers runsc; dockerd would be reloaded (the engine does not "
                    "list runsc yet)")
        return out
    if not (os.geteuid() == 0 if is_root is None else is_root):
        raise SetupError(f"registering runsc writes {path} and reloads dockerd: run it as root "
                         "(sudo hookcage setup runsc), or --dry-run to see the change")
    if merge.changed:
        mode = 0o644
        if old_text is not None:
            mode = path.stat().st_mode & 0o7777
            out.backup = backup_path(path)
            shutil.copy2(path, out.backup)
            out.say(f"backed up {path} to {out.backup}")
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
        try:
            install_staged(path, old_text, merge.config, runsc=runsc, install=install, mode=mode)
        except SetupError:
            if out.backup is not None:  # of a file left as it was
                out.backup.unlink(missing_ok=True)
            raise
        out.changed = True
        replaced = " (replacing the entry that was there)" if merge.replaced else ""
        out.say(f"runsc install added runtimes.runsc = {{path: {runsc}, runtimeArgs: [--network=none]}} to {path}"
                f"{replaced}; every other key kept")
    engine.reload()
    deadline = time.monotonic() + wait
    while GVISOR_RUNTIME not in engine.runtimes():
        if time.monotonic() >= deadline:
            what = "put back as it was" if out.changed else "left as it is"
            _put_back(engine, path, old_text, out)
            raise SetupError(f"dockerd was reloaded but does not list runsc after {wait:g} s (see its log: "
                             f"journalctl -u docker); {path} {what}")
        sleep(0.2)
    out.say("reloaded dockerd (SIGHUP; running containers untouched): the engine lists runsc")
    _verify(engine, out)
    return out


def _put_back(engine: Engine, path: Path, old_text: str | None, out: Outcome) -> None:
    """Undo this run's write after a reload that did not take (dockerd refused the file)."""
    if not out.changed:
        return
    if old_text is None:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    else:
        write_atomically(path, old_text, path.stat().st_mode & 0o7777)
    out.changed = False
    with contextlib.suppress(HookcageError, OSError):
        engine.reload()


def _verify(engine: Engine, out: Outcome) -> None:
    try:
        host = engine.kernel(None)
        gvisor = engine.kernel(GVISOR_RUNTIME)
    except HookcageError as exc:
        raise SetupError(f"runsc is registered, but a container under it did not answer: {exc}") from None
    if gvisor == host:
        raise SetupError(f"runsc is registered, but a container under it reports the host's kernel {host}: "
                         "it is not gVisor")
    out.say(f"checked: a network-less container under runsc answers uname -r = {gvisor} "
            f"(gVisor's kernel; the host's is {host})")
    with contextlib.suppress(HookcageError):
        said = engine.lists(GVISOR_RUNTIME)
        if said:
            out.say(f"warning: {STATX_BUG}: {said}")


# --------------------------------------------------------------------------
# This machine's dockerd
# --------------------------------------------------------------------------


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def dockerd_pid(pid_file: Path = PID_FILE) -> int | None:
    """dockerd's pid: from its pid file when that names a live dockerd, else the one process named dockerd."""
    with contextlib.suppress(OSError, ValueError):
        pid = int(pid_file.read_text().strip())
        if _comm(pid) == "dockerd":
            return pid
    found = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and _comm(int(p.name)) == "dockerd"]
    return found[0] if len(found) == 1 else None


def config_file_of(pid: int) -> Path | None:
    """The ``--config-file`` dockerd was started with, if any."""
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().decode("utf-8", "replace").split("\0")
    except OSError:
        return None
    for i, arg in enumerate(args):
        if arg == "--config-file" and i + 1 < len(args):
            return Path(args[i + 1])
        if arg.startswith("--config-file="):
            return Path(arg.split("=", 1)[1])
    return None


class LocalDockerd:
    """This machine's dockerd, reached through ``DOCKER_HOST`` (a local unix socket)."""

    def __init__(self, client: Any | None = None) -> None:
        from executor.sandbox.docker import default_client

        self.client = client or default_client()
        self.pid = dockerd_pid()

    def refusal(self) -> str:
        from executor.sandbox.docker import BACKEND_ERRORS, engine_url

        url = engine_url(self.client)
        try:
            version = self.client.version()
        except BACKEND_ERRORS as exc:
            return f"the engine at {url} did not answer: {exc}"
        components = " ".join(str(c.get("Name", "")) for c in version.get("Components") or [])
        platform = str((version.get("Platform") or {}).get("Name", ""))
        if "podman" in (components + " " + platform).lower():
            return (f"the engine at {url} is Podman: hookcage cannot register runsc there "
                    "(add it to containers.conf's [engine.runtimes] yourself)")
        if not url.startswith("unix://"):
            return (f"the engine at {url} is not on this machine: register runsc on its host "
                    "(hookcage setup runsc there)")
        if self.pid is None:
            return (f"no dockerd process found on this machine for {url} (rootless or in another namespace?): "
                    "register runsc in that dockerd's daemon.json yourself")
        return ""

    def config_file(self) -> Path:
        return (config_file_of(self.pid) if self.pid else None) or DEFAULT_DAEMON_JSON

    def runtimes(self) -> list[str]:
        from executor.sandbox.docker import engine_info

        return engine_info(self.client)["runtimes"]

    def reload(self) -> None:
        if self.pid is None:
            raise SetupError("no dockerd process to reload")
        try:
            os.kill(self.pid, signal.SIGHUP)
        except OSError as exc:
            raise SetupError(f"cannot signal dockerd (pid {self.pid}): {exc.strerror}") from None

    def kernel(self, runtime: str | None) -> str:
        from executor.sandbox.docker import engine_info

        if runtime is None:
            return engine_info(self.client)["kernel"]
        result = probe_run(self.client, runtime, "uname -r")
        said = result.stdout.decode("utf-8", "replace").strip()
        if result.exit_code != 0 or not said:
            err = result.stderr.decode("utf-8", "replace").strip().splitlines()
            raise SetupError(f"exit {result.exit_code}" + (f": {err[-1][:200]}" if err else ""))
        return said

    def lists(self, runtime: str) -> str:
        return lists_files(self.client, runtime)
