"""The dependency cache: fetched when a hook is reviewed, mounted read-only when it runs.

How this works (see :mod:`executor.core.deps` for what a hook needs):

- **At review** (``hookcage trust``, the only moment network is used),
  :meth:`DepCache.fetch` fills ``$HOOKCAGE_HOME/deps/<key>/``, one folder per
  script (uv) or package (Node), whichever hooks cover it
  (:func:`executor.core.deps.need_key`):

  - *uv scripts*: the image is asked which Python, platform and glibc it has;
    ``pip download --only-binary=:all:`` on this machine fetches wheels for
    exactly that (with your own pip configuration: index, proxy, certificates).
    Only requirements by name reach pip (:func:`executor.core.deps.requirement_problem`
    refuses URLs, paths and archives at review), and pip runs under a guard
    (:data:`PIP_GUARD`) that lets it start no process: pip builds a source
    distribution, even with ``--only-binary``, when a wheel's own metadata
    names one by URL (``Requires-Dist: x @ https://.../x.tar.gz``), and
    building runs the package's code; under the guard that build fails before
    any of it runs. A downloaded wheel whose metadata names a URL is refused
    too (:func:`url_requirements`). Then ``uv sync --script`` runs in a
    network-less sandbox container, with the reviewed copy of the script at
    its own path, and installs the script's environment from those wheels
    into the cache.
  - *Node packages*: the reviewed ``package.json``, lock file and local
    ``file:`` packages are copied into the cache, and ``npm install
    --ignore-scripts`` (``npm ci`` with a lock) runs in a sandbox container
    with no workspace: network-less when every dependency is local, with
    network only when the package names registry dependencies.

  A ``ready.json`` written last marks a complete cache; a failure writes
  ``failed.json`` naming what could not be resolved.
- **At run**, :func:`run_setup` binds each ready cache of the hook
  read-only at ``/hookcage/deps/<key>`` (the path it was installed at) and
  points the tools at them: ``UV_CACHE_DIR`` is a fresh folder in ``/tmp``
  linking to the caches' environments (uv needs a writable cache root for its
  lock; the environments stay read-only), ``UV_OFFLINE=1``; ``NODE_PATH``
  names the packages' ``node_modules``. The run stays network-less. A script
  whose cache is not ready is not bound: it fails if the hook runs it, as on a
  machine without network.
"""

from __future__ import annotations

import contextlib
import json
import os
import posixpath
import re
import shlex
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from email.parser import HeaderParser
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement

from executor.core.deps import NODE_LOCKS, NODE_SUFFIXES, Need, need_key, own_need
from executor.core.files import FileState
from executor.core.options import SandboxOptions
from executor.core.text import decode, first_line, sanitize
from executor.errors import HookcageError
from executor.prepare import staging as staging_folders
from executor.sandbox.base import Bind, RunRequest, RunResult

DEPS_MOUNT = "/hookcage/deps"
"""Where dependency caches are bound, each at ``DEPS_MOUNT/<key>`` (read-only at run, read-write while fetched)."""
WHEELS_MOUNT = "/hookcage/wheels"
RUN_UV_CACHE = "/tmp/.hookcage-uv"
"""uv's cache root at run: writable (uv locks it), its environments linked from the cache."""
READY = "ready.json"
FAILED = "failed.json"
FETCH_TIMEOUT = 600.0
"""Seconds one fetch step (download, install) may take."""
_UV_SHARED = ("archive-v0", "environments-v2")
_PROBE = (
    "python3 -c 'import json, os, sys, sysconfig; print(json.dumps({"
    "\"python\": \"%d.%d\" % sys.version_info[:2], \"platform\": sysconfig.get_platform(), "
    "\"libc\": os.confstr(\"CS_GNU_LIBC_VERSION\") or \"\"}))'"
)
_LIBC = re.compile(r"glibc (\d+)\.(\d+)")
PIP_REFUSED = "hookcage let pip start no process"
PIP_GUARD = f"""\
import os, runpy, subprocess, sys
def _refused(args, *rest, **options):
    argv = [args] if isinstance(args, (str, bytes, os.PathLike)) else list(args)
    program = os.path.basename(os.fsdecode(argv[0])) if argv else ""
    if program == "keyring":  # pip's keyring-provider=subprocess: the user's own credential helper
        return _popen(args, *rest, **options)
    raise PermissionError({PIP_REFUSED!r} + " (it would have run " + program + ": a build or a checkout)")
_popen = subprocess.Popen
subprocess.Popen = _refused
for _name in ("system", "posix_spawn", "posix_spawnp", "fork", "forkpty", "execv", "execve"):
    if hasattr(os, _name):
        setattr(os, _name, lambda *a, _name=_name, **k: _refused(["os." + _name]))
sys.argv[0] = "pip"
runpy.run_module("pip", run_name="__main__", alter_sys=True)
"""
"""Runs pip with no way to start a process (``python -c PIP_GUARD download ...``).

Fetching wheels needs none; building a source distribution (its backend runs
in a child Python), installing build requirements and checking out version
control all do, so each fails, with :data:`PIP_REFUSED` in pip's output,
before any package code runs. pip's own probes (``rustc --version`` for its
user agent) already tolerate failing. A ``keyring`` helper is let through.
"""

Runner = Callable[[RunRequest], RunResult]
"""Runs one request in the hook's sandbox (the executor's docker backend)."""
Log = Callable[[str], None]


@dataclass(frozen=True)
class Target:
    """The interpreter and platform wheels are fetched for (asked of the image)."""

    python: str
    platforms: tuple[str, ...]

    @classmethod
    def from_probe(cls, data: Mapping[str, Any]) -> Target:
        """From the image's answer to the probe.

        Raises:
            HookcageError: the image's Python or platform is not one wheels can be fetched for.
        """
        python = str(data.get("python", ""))
        platform = str(data.get("platform", ""))
        libc = _LIBC.match(str(data.get("libc", "")))
        if not re.fullmatch(r"3\.\d+", python):
            raise HookcageError(f"the image's python3 is {python or 'unknown'}: uv scripts need Python 3")
        if not platform.startswith("linux-") or libc is None:
            raise HookcageError(f"the image's platform is {platform or 'unknown'} "
                                f"({data.get('libc') or 'no glibc'}): only glibc Linux images are supported")
        arch = platform.removeprefix("linux-")
        major, minor = int(libc.group(1)), int(libc.group(2))
        tags = [f"manylinux_{major}_{m}_{arch}" for m in range(minor, 4, -1)]
        legacy = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
        tags += [f"{name}_{arch}" for m, name in legacy.items() if m <= minor]
        return cls(python, tuple(tags))

    def pip_args(self) -> list[str]:
        """``pip download`` options that select wheels for this target."""
        abi = "cp" + self.python.replace(".", "")
        args = ["--python-version", self.python, "--implementation", "cp",
                "--abi", abi, "--abi", "abi3", "--abi", "none"]
        for tag in self.platforms:
            args += ["--platform", tag]
        return args


@dataclass(frozen=True)
class RunSetup:
    """What a run of a hook with dependencies gets: mounts, environment, a prelude."""

    binds: tuple[Bind, ...] = ()
    env: Mapping[str, str] | None = None
    prelude: str = ""

    def command(self, command: str) -> str:
        """The hook's command behind the prelude (run as its own ``sh -c``, unchanged)."""
        if not self.prelude:
            return command
        return f"{self.prelude} && exec /bin/sh -c {shlex.quote(command)}"


def run_setup(caches: Sequence[tuple[Path, Need]]) -> RunSetup:
    """The mounts, environment and prelude of a run whose needs are ready in these caches.

    Args:
        caches: ``(folder, need)`` for every need whose cache is ready (the
            folder's name is its key, and its path in the sandbox).
    """
    env: dict[str, str] = {}
    prelude = ""
    uv = [folder.name for folder, need in caches if need.kind == "uv"]
    if uv:
        env.update(UV_CACHE_DIR=RUN_UV_CACHE, UV_OFFLINE="1", UV_NO_INDEX="1",
                   UV_PYTHON_DOWNLOADS="never", UV_NO_PROGRESS="1")
        # uv reads one cache root: a writable one in /tmp whose entries link to every cache's.
        folders = " ".join(shlex.quote(f"{RUN_UV_CACHE}/{name}") for name in _UV_SHARED)
        loops = []
        for name in _UV_SHARED:
            entries = " ".join(shlex.quote(f"{DEPS_MOUNT}/{key}/uv/{name}") + "/*" for key in uv)
            loops.append(f'for e in {entries}; do if [ -e "$e" ]; then '
                         f'ln -sfn "$e" {shlex.quote(f"{RUN_UV_CACHE}/{name}")}/; fi; done')
        prelude = f"mkdir -p {folders} && " + " && ".join(loops)
    node = [(folder.name, need) for folder, need in caches if need.kind == "node"]
    if node:
        env["NODE_PATH"] = ":".join(_node_modules(key, need) for key, need in node)
    binds = tuple(Bind(str(folder), f"{DEPS_MOUNT}/{folder.name}", read_only=True) for folder, _ in caches)
    return RunSetup(binds, env, prelude)


def _node_modules(key: str, need: Need) -> str:
    return posixpath.normpath(f"{DEPS_MOUNT}/{key}/node/{need.path}/node_modules")


@dataclass(frozen=True)
class NeedState:
    """One need of a hook, and where its cache stands.

    ``own``: the hook's command names the script (or a Node script of the
    package); otherwise the hook only covers it (a helper beside it, or a
    script it loads). ``failure``: why the last fetch failed (or why the need
    is refused: then it is never fetched).
    """

    need: Need
    key: str
    own: bool
    ready: bool
    failure: str | None

    def describe(self) -> str:
        """One line for people: the script, and whether its dependencies can be had."""
        role = "" if self.own else "helper "
        if self.ready:
            return f"{role}{self.need.describe()}: ready"
        if self.need.problem:
            return f"{role}{self.need.where()}: refused ({self.need.problem})"
        if self.failure:
            return f"{role}{self.need.where()}: could not be fetched ({self.failure})"
        return f"{role}{self.need.describe()}: not fetched yet"


class DepCache:
    """``$HOOKCAGE_HOME/deps``: one folder per cache key."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._targets: dict[str | None, Target] = {}  # the image's Python, asked once per image

    def path(self, key: str) -> Path:
        """The folder of one key."""
        return self.root / key

    def ready(self, key: str) -> bool:
        """Whether the cache of ``key`` was completely fetched."""
        return (self.path(key) / READY).is_file()

    def states(self, needs: Sequence[Need], files: Sequence[FileState], *, image: str, root: str,
               direct: Sequence[str]) -> list[NeedState]:
        """Where each need of one hook stands (:func:`executor.core.deps.need_key`, :func:`own_need`)."""
        out = []
        for need in needs:
            key = need_key(need, files, image, root)
            ready = self.ready(key)
            out.append(NeedState(need, key, own_need(need, direct), ready,
                                 None if ready else (need.problem or self.failure(key))))
        return out

    def failure(self, key: str) -> str | None:
        """What went wrong when ``key`` was last fetched, if it failed."""
        try:
            data = json.loads((self.path(key) / FAILED).read_text())
        except (OSError, ValueError):
            return None
        return str(data.get("problem") or "") or None

    def fetch(
        self,
        key: str,
        need: Need,
        files: Sequence[FileState],
        *,
        root: Path,
        image: str | None,
        run: Runner,
        staging: Path,
        log: Log,
        labels: Mapping[str, str] | None = None,
    ) -> str | None:
        """Fetch and install one need (a script's or a package's) into the cache of ``key``.

        Two reviews fetching the same key take turns (a lock file beside the
        folder); the second finds it ready.

        Args:
            key: the cache key (:func:`executor.core.deps.need_key`).
            need: what one script or package needs.
            files: the reviewed files (their bytes are what gets installed from).
            root: the project root.
            image: the hook's image (None: the default).
            run: runs one request in a sandbox container.
            staging: a private folder for staged copies.
            log: one line of progress at a time, for people.
            labels: labels for the containers.

        Returns:
            None when the cache is ready, else the problem (one line, naming the
            dependencies); the problem is also kept for the run-time message.
        """
        if self.ready(key):
            return None
        if need.problem:
            return self._failed(key, f"{need.where()}: {need.problem}")
        from filelock import FileLock

        self.root.mkdir(parents=True, exist_ok=True)
        with FileLock(str(self.root / f"{key}.lock")):
            if self.ready(key):
                return None
            return self._fetch(key, need, files, root=root, image=image, run=run, staging=staging, log=log,
                               labels=labels)

    def _fetch(self, key: str, need: Need, files: Sequence[FileState], *, root: Path, image: str | None,
               run: Runner, staging: Path, log: Log, labels: Mapping[str, str] | None) -> str | None:
        folder = self.path(key)
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True, mode=0o755)
        folder.chmod(0o777)  # the sandbox's uid writes here while installing
        work = staging_folders.new_folder(staging, "deps")  # owned: swept if this process dies
        job = _Job(root=root, image=image, run=run, work=work, cache=folder, log=log,
                   labels=dict(labels or {}), files={f.path: f for f in files}, targets=self._targets)
        try:
            problem = job.uv(need) if need.kind == "uv" else job.node(need)
            if problem:
                return self._failed(key, problem)
        except HookcageError as exc:
            return self._failed(key, f"{need.where()}: {exc}")
        finally:
            shutil.rmtree(work, ignore_errors=True)
            with contextlib.suppress(OSError):
                folder.chmod(0o755)
        record = {"need": need.to_json(), "fetched_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                  "installed": job.installed}
        _write_json(folder / READY, record)
        with contextlib.suppress(OSError):
            (folder / FAILED).unlink()
        return None

    def _failed(self, key: str, problem: str) -> str:
        folder = self.path(key)
        with contextlib.suppress(OSError):
            folder.mkdir(parents=True, exist_ok=True)
            _write_json(folder / FAILED, {"problem": problem})
            (folder / READY).unlink(missing_ok=True)
        return problem


@dataclass
class _Job:
    root: Path
    image: str | None
    run: Runner
    work: Path
    cache: Path
    log: Log
    labels: dict[str, str]
    files: dict[str, FileState]
    targets: dict[str | None, Target] = field(default_factory=dict)
    installed: list[str] = field(default_factory=list)

    @property
    def mount(self) -> str:
        """Where the cache is bound while installing: where runs find it (absolute paths hold)."""
        return f"{DEPS_MOUNT}/{self.cache.name}"

    def _request(self, command: str, *, overlays: Mapping[str, str] | None = None,
                 binds: Sequence[Bind] = (), env: Mapping[str, str] | None = None,
                 network: str = "none") -> RunRequest:
        return RunRequest(
            command=command, cwd="/tmp", project_dir=str(self.root), timeout=FETCH_TIMEOUT,
            env=dict(env or {}), options=SandboxOptions(image=self.image, workspace="none", network=network,
                                                        memory="2g", pids=512),
            overlays=dict(overlays or {}), binds=tuple(binds), labels=self.labels, warm=False,
            output_cap=256 * 1024,
        )

    def _sandboxed(self, what: str, request: RunRequest) -> RunResult:
        result = self.run(request)
        if result.timed_out:
            raise HookcageError(f"{what} timed out after {request.timeout:g} s")
        return result

    # -- uv scripts ------------------------------------------------------------

    def _target(self) -> Target:
        if self.image not in self.targets:
            result = self._sandboxed("asking the image for its Python", self._request(_PROBE))
            if result.exit_code != 0:
                raise HookcageError("the image has no working python3 for uv scripts"
                                    + _said(result.stderr))
            try:
                self.targets[self.image] = Target.from_probe(json.loads(result.stdout))
            except ValueError as exc:
                raise HookcageError("the image's python3 gave an unreadable answer") from exc
        return self.targets[self.image]

    def uv(self, need: Need) -> str | None:
        target = self._target()
        wheels = self.work / "wheels"
        wheels.mkdir(exist_ok=True)
        self.log(f"fetching wheels for {need.describe()} (Python {target.python}, {target.platforms[0]})")
        empty = self.work / "pip-cwd"  # nothing relative resolves to the project's files
        empty.mkdir(exist_ok=True)
        try:
            proc = pip_download(need.dependencies, wheels, target.pip_args(), cwd=empty)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"{need.path}: pip download failed ({exc})"
        except InvalidRequirement as exc:  # refused at review already; never handed to pip
            return f"{need.path}: {exc}"
        if proc.returncode != 0:
            return (f"{need.path}: {', '.join(need.dependencies)} could not be fetched as wheels for "
                    f"Python {target.python} on {target.platforms[0]}: {pip_error(proc.stderr)}")
        urls = url_requirements(wheels)
        if urls:
            return (f"{need.path}: refused: {urls[0]} (a wheel that depends on a URL, not on a package "
                    "from an index; nothing of it was built or installed)")
        wheels.chmod(0o755)
        for wheel in wheels.iterdir():
            wheel.chmod(0o644)
        staged = self._stage(need.path)
        script = str(self.root / need.path)
        self.log(f"installing them for {need.path} in a network-less sandbox (uv sync --script)")
        result = self._sandboxed(f"installing the dependencies of {need.path}", self._request(
            f"uv sync --script {shlex.quote(script)}",
            overlays={script: staged},
            binds=(Bind(str(wheels), WHEELS_MOUNT), Bind(str(self.cache), self.mount, read_only=False)),
            env={"UV_CACHE_DIR": f"{self.mount}/uv", "UV_OFFLINE": "1", "UV_NO_INDEX": "1",
                 "UV_FIND_LINKS": WHEELS_MOUNT, "UV_PYTHON_DOWNLOADS": "never", "UV_NO_PROGRESS": "1",
                 "UV_LINK_MODE": "copy"},
        ))
        if result.exit_code != 0:
            return f"{need.path}: uv could not install {', '.join(need.dependencies)}" + _said(result.stderr)
        self.installed += sorted(w.name for w in wheels.iterdir())
        return None

    def _stage(self, path: str) -> str:
        state = self.files.get(path)
        if state is None or state.data is None:
            raise HookcageError(f"{path} was not reviewed")
        staged = self.work / f"script-{len(os.listdir(self.work))}"
        staged.write_bytes(state.data)
        staged.chmod(state.mode)
        return str(staged)

    # -- Node packages ----------------------------------------------------------

    def node(self, need: Need) -> str | None:
        package = self.cache / "node"
        prefix = "" if need.path == "." else need.path + "/"
        copied = 0
        for path, state in self.files.items():
            inside = path.startswith(prefix) or any(path == p or path.startswith(p + "/") for p in need.local)
            if not inside or state.data is None or "/node_modules/" in f"/{path}/":
                continue
            if posixpath.basename(path) == ".npmrc":
                # npm would obey it (another registry, a `git` program, proxies): reviewed, but not
                # what the review says is fetched. The install uses the image's npm configuration.
                continue
            dest = package / path
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(state.data)
            copied += 1
        for local in need.local:
            if not any(p == local or p.startswith(local + "/") for p in self.files):
                return f"{need.path}/package.json: the local package {local} does not exist"
        for folder in [package, *package.rglob("*")]:
            if folder.is_dir():
                folder.chmod(0o777)
        lock = next((name for name in NODE_LOCKS
                     if f"{prefix}{name}" in self.files), None)
        verb = "ci" if lock else "install"
        offline = not need.registry
        where = posixpath.normpath(f"{self.mount}/node/{need.path}")
        self.log(f"installing {need.describe()} with npm {verb} --ignore-scripts in a sandbox"
                 + (" (network-less: every dependency is local)" if offline else
                    f" (with network, for {', '.join(need.registry)})"))
        command = (f"cd {shlex.quote(where)} && npm {verb} --ignore-scripts --no-audit --no-fund "
                   f"--omit=dev --loglevel=error" + (" --offline" if offline else ""))
        result = self._sandboxed(f"installing {need.path}/package.json", self._request(
            command,
            binds=(Bind(str(self.cache), self.mount, read_only=False),),
            env={"npm_config_cache": "/tmp/.npm", "npm_config_update_notifier": "false", "HOME": "/tmp"},
            network="none" if offline else "bridge",
        ))
        if result.exit_code != 0:
            return (f"{need.path}/package.json: npm could not install {', '.join(need.dependencies)}"
                    + _said(result.stderr or result.stdout))
        self.installed += list(need.dependencies)
        return None


def _said(stderr: bytes) -> str:
    lines = [ln.strip() for ln in decode(stderr).splitlines() if ln.strip()]
    if not lines:
        return ""
    errors = [ln for ln in lines if ln.lower().startswith(("error", "npm err", "npm error"))]
    return ": " + sanitize(" / ".join((errors or lines)[:3]), 400)


def pip_download(
    requirements: Sequence[str], dest: Path, options: Sequence[str], *, cwd: Path,
    timeout: float = FETCH_TIMEOUT,
) -> subprocess.CompletedProcess[str]:
    """``pip download --only-binary=:all:`` of ``requirements`` into ``dest``, under :data:`PIP_GUARD`.

    Each requirement is parsed and handed to pip in its canonical PEP 508 form
    (a name, extras, versions, a marker), after ``--``, so pip takes none for a
    path or an option.

    Raises:
        InvalidRequirement: one is not a PEP 508 requirement, or names a URL.
        OSError, subprocess.TimeoutExpired: pip could not be run, or ran too long.
    """
    canonical = []
    for text in requirements:
        requirement = Requirement(text)
        if requirement.url is not None:
            raise InvalidRequirement(f"dependency {text!r} names a URL")
        canonical.append(str(requirement))
    cmd = [sys.executable, "-c", PIP_GUARD, "download", "--disable-pip-version-check", "--no-input",
           "--progress-bar", "off", "--only-binary=:all:", "--dest", str(dest), *options, "--", *canonical]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd,
                          stdin=subprocess.DEVNULL, errors="replace")


def url_requirements(wheels: Path) -> list[str]:
    """``wheel: requirement`` for each ``Requires-Dist`` with a URL among the wheels in ``wheels``
    (an index wheel may name one; pip would have fetched it, and uv would too)."""
    found = []
    for wheel in sorted(wheels.glob("*.whl")):
        try:
            with zipfile.ZipFile(wheel) as archive:
                name = next((n for n in archive.namelist()
                             if n.count("/") == 1 and n.endswith(".dist-info/METADATA")), None)
                text = archive.read(name).decode("utf-8", "replace") if name else ""
        except (OSError, zipfile.BadZipFile, KeyError) as exc:
            found.append(f"{wheel.name}: unreadable ({exc})")
            continue
        for line in HeaderParser().parsestr(text).get_all("Requires-Dist") or []:
            try:
                url = Requirement(line).url
            except InvalidRequirement:
                url = None
            if url is not None:
                found.append(f"{wheel.name}: Requires-Dist {line.strip()!r}")
    return found


def pip_error(stderr: str) -> str:
    """What pip said went wrong, on one line (its refusal to build a dependency named as such)."""
    if PIP_REFUSED in stderr:
        return ("a dependency is not a wheel from the index (pip would have built it, or checked it out, "
                "on this machine, running its code): refused, nothing was run")
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip().startswith("ERROR:")]
    text = " / ".join(ln.removeprefix("ERROR:").strip() for ln in lines[:2]) or first_line(stderr.strip())
    return sanitize(text, 400) or "pip failed"


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path)


def package_words(files: Sequence[FileState], root: Path) -> list[str]:
    """Words naming the ``package.json`` (and lock) nearest above each Node script in ``files``.

    They are collected into the trust subject like the command's own
    references: a change to the manifest or the lock needs review again.
    Only existing files are named; nothing above the project root is looked at.
    """
    words: list[str] = []
    for state in files:
        if not state.path.endswith(NODE_SUFFIXES):
            continue
        folder = posixpath.dirname(state.path)
        while True:
            manifest = posixpath.join(folder, "package.json") if folder else "package.json"
            if os.path.lexists(root / manifest):
                words.append("./" + manifest)
                for lock in NODE_LOCKS:
                    name = posixpath.join(folder, lock) if folder else lock
                    if os.path.lexists(root / name):
                        words.append("./" + name)
                break
            if not folder:
                break
            folder = posixpath.dirname(folder)
    return list(dict.fromkeys(words))
