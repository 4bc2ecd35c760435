"""Podman services for the tests: rootful and rootless ``podman system service`` on private sockets.

:class:`PodmanService` starts one Docker-compatible API service with its
own storage, run directory and ``containers.conf`` under a fresh directory
(nothing of the machine's own Podman is used or touched), loads the runner
image into it from the Docker engine (``docker save | podman load`` through
both APIs), and on :meth:`PodmanService.stop` removes every container it
holds, stops the service and its helper processes, and deletes the
directory. A rootless service runs as the user ``hookcage-podman`` (made with
subordinate uid/gid ranges when missing, and deleted again by the session
that made it); without root, the calling user is the rootless one and no
rootful service can be had.

``containers.conf`` for both: cgroupfs and file events (no systemd here),
and the ``runc`` runtime where ``crun`` cannot run (a hybrid cgroup v1/v2
host, as this project's machines are: crun refuses it).
"""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from executor.sandbox.docker import default_client

PODMAN = shutil.which("podman")
ROOTLESS_USER = "hookcage-podman"
SUBID_RANGE = "300000-365535"
"""Subordinate uids/gids of the rootless user (65536: a full container range)."""
START_TIMEOUT = 30.0


def hybrid_cgroups() -> bool:
    """Whether cgroup v1 controllers and a cgroup v2 tree are both mounted (crun refuses such a host)."""
    with open("/proc/self/mounts") as mounts:
        kinds = {line.split()[2] for line in mounts}
    return {"cgroup", "cgroup2"} <= kinds


def containers_conf(path: Path) -> None:
    lines = ["[engine]", 'cgroup_manager = "cgroupfs"', 'events_logger = "file"']
    if hybrid_cgroups() or shutil.which("crun") is None:
        lines.append('runtime = "runc"')
    path.write_text("\n".join(lines) + "\n")
    path.chmod(0o644)


def ensure_rootless_user() -> tuple[pwd.struct_passwd, bool]:
    """The rootless user (made with subordinate ranges when missing); whether this call made it."""
    made = False
    try:
        user = pwd.getpwnam(ROOTLESS_USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent",
                        "--shell", "/usr/sbin/nologin", ROOTLESS_USER], check=True, capture_output=True)
        user, made = pwd.getpwnam(ROOTLESS_USER), True
    for table in ("/etc/subuid", "/etc/subgid"):
        if not any(line.startswith(f"{ROOTLESS_USER}:") for line in Path(table).read_text().splitlines()):
            flag = "--add-subuids" if table.endswith("uid") else "--add-subgids"
            subprocess.run(["usermod", flag, SUBID_RANGE, ROOTLESS_USER], check=True, capture_output=True)
    return user, made


def remove_rootless_user() -> None:
    subprocess.run(["userdel", ROOTLESS_USER], check=False, capture_output=True)
    with contextlib.suppress(KeyError):
        grp.getgrnam(ROOTLESS_USER)
        subprocess.run(["groupdel", ROOTLESS_USER], check=False, capture_output=True)


class PodmanService:
    """One ``podman system service`` on a private socket; :meth:`start`, then :meth:`stop`."""

    def __init__(self, *, rootless: bool) -> None:
        self.rootless = rootless
        self.base = Path(tempfile.mkdtemp(prefix=f"hookcage-podman-{'rootless' if rootless else 'rootful'}-"))
        self.base.chmod(0o755)  # the rootless user reaches its directories through it
        self.socket = self.base / "sock" / "podman.sock"  # in a directory the service's user owns
        self.url = f"unix://{self.socket}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.made_user = False
        self.user: pwd.struct_passwd | None = None
        self.client: Any = None

    # -- the service ---------------------------------------------------------------

    def _env_and_prefix(self) -> tuple[dict[str, str], list[str]]:
        env = {"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"),
               "CONTAINERS_CONF": str(self.base / "containers.conf"), "HOME": str(self.base / "home"),
               "XDG_RUNTIME_DIR": str(self.base / "xdg"), "XDG_CONFIG_HOME": str(self.base / "home" / ".config"),
               "XDG_DATA_HOME": str(self.base / "home" / ".local")}
        prefix: list[str] = []
        if self.rootless and os.geteuid() == 0:
            assert self.user is not None
            prefix = ["setpriv", f"--reuid={self.user.pw_uid}", f"--regid={self.user.pw_gid}", "--init-groups"]
        return env, prefix

    def podman(self, *args: str) -> list[str]:
        """A podman command line on this service's storage."""
        assert PODMAN is not None
        return [PODMAN, "--root", str(self.base / "storage"), "--runroot", str(self.base / "run"),
                "--storage-driver", "overlay", *args]

    def start(self) -> PodmanService:
        if self.rootless and os.geteuid() == 0:
            self.user, self.made_user = ensure_rootless_user()
        for name in ("home", "xdg", "storage", "run", "sock"):
            (self.base / name).mkdir(mode=0o700)
            if self.user is not None:
                os.chown(self.base / name, self.user.pw_uid, self.user.pw_gid)
        containers_conf(self.base / "containers.conf")
        env, prefix = self._env_and_prefix()
        with (self.base / "service.log").open("ab") as log:
            self.proc = subprocess.Popen(
                [*prefix, *self.podman("system", "service", "--time=0", self.url)],
                env=env, stdout=log, stderr=log, cwd=self.base, start_new_session=True,
            )
        deadline = time.monotonic() + START_TIMEOUT
        while not self.socket.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"podman system service did not start: {self.log()}")
            time.sleep(0.05)
        self.client = default_client(timeout=60, engine=self.url)
        return self

    def log(self) -> str:
        with contextlib.suppress(OSError):
            return (self.base / "service.log").read_text()[-2000:]
        return ""

    def load_image(self, docker_api: Any, image: str) -> None:
        """``docker save IMAGE | podman load``, through both engines' APIs (streamed)."""
        if self.client.images(name=image):
            return
        self.client.load_image(docker_api.get_image(image, chunk_size=1 << 20))
        assert self.client.images(name=image), f"{image} did not load into Podman: {self.log()}"

    def containers(self) -> list[dict[str, Any]]:
        return list(self.client.containers(all=True))

    def stop(self) -> list[str]:
        """Remove every container, stop the service and what it started, delete its directory.

        Returns:
            The containers that were still there (``name (state)``).
        """
        left: list[str] = []
        if self.client is not None:
            with contextlib.suppress(Exception):
                for entry in self.containers():
                    left.append(f"{entry['Names'][0].lstrip('/')} ({entry['State']})")
                    with contextlib.suppress(Exception):
                        self.client.remove_container(entry["Id"], force=True, v=True)
            self.client.close()
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._kill_pause_process()
        self._wait_for_helpers()
        self._unmount_under_base()
        shutil.rmtree(self.base, ignore_errors=True)
        if self.made_user:
            remove_rootless_user()
        return left

    def _kill_pause_process(self) -> None:
        """A rootless Podman keeps its user namespace open with a pause process (pid in its run dir)."""
        for pid_file in self.base.glob("xdg/libpod/tmp/pause.pid"):
            with contextlib.suppress(ValueError, OSError):
                os.kill(int(pid_file.read_text().strip()), signal.SIGKILL)

    def _wait_for_helpers(self, timeout: float = 15.0) -> None:
        """Wait for what still works on this storage (conmon's ``podman container cleanup``, which
        mounts it again), then kill what is left of it: no process may hold a mount under the base."""
        deadline = time.monotonic() + timeout
        while pids := self._helpers():
            if time.monotonic() > deadline:
                for pid in pids:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                break
            time.sleep(0.1)

    def _helpers(self) -> list[int]:
        found = []
        marker = str(self.base).encode()
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                with contextlib.suppress(OSError):
                    if marker in (entry / "cmdline").read_bytes():
                        found.append(int(entry.name))
        return found

    def _unmount_under_base(self) -> None:
        with open("/proc/self/mounts") as mounts:
            points = [line.split()[1] for line in mounts]
        for point in sorted((p for p in points if p.startswith(str(self.base) + "/")), reverse=True):
            subprocess.run(["umount", "-l", point], check=False, capture_output=True)
