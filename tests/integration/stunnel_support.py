"""A TLS endpoint of this machine's engine made by Debian's ``stunnel4``, as a remote
``dockerd --tlsverify`` (GitLab's ``docker:dind``, a Docker host on the network) offers one.

``StunnelEngine`` starts ``stunnel`` (foreground, its own process group) with a
throwaway CA from ``trustme``: the server certificate names ``127.0.0.1`` and
``localhost``; a client certificate signed by that CA is REQUIRED
(``verifyChain`` + ``requireCert``); every accepted connection is forwarded to
the engine's unix socket (``/var/run/docker.sock``). ``client_env`` gives the
variables a user sets for such an engine: ``DOCKER_HOST=tcp://127.0.0.1:PORT``,
``DOCKER_TLS_VERIFY=1``, ``DOCKER_CERT_PATH`` (``ca.pem``, ``cert.pem``,
``key.pem``). ``close()`` stops stunnel (SIGTERM to its pid, then SIGKILL) and
removes its folder.

Unlike ``tls_proxy.TlsEngineProxy`` (a Python proxy that reads a TCP end of
stream under TLS as the end of input, as Go's ``crypto/tls`` does), stunnel is
a TLS terminator of the kind users put in front of an engine: what hookcage
sends has to work through it as it is.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import trustme

ENGINE_SOCKET = "/var/run/docker.sock"
SERVER_NAMES = ("127.0.0.1", "localhost")


def stunnel_binary() -> str | None:
    """Debian's ``stunnel4`` package installs ``stunnel4`` (and ``stunnel``)."""
    return shutil.which("stunnel4") or shutil.which("stunnel")


def write_cert_folder(folder: Path, ca: trustme.CA, signer: trustme.CA | None = None,
                      name: str = "hookcage-test") -> Path:
    """A ``DOCKER_CERT_PATH``: ``ca.pem`` (the CA checked for the engine) and a client
    certificate (``cert.pem``, ``key.pem``) signed by ``signer`` (default: ``ca``)."""
    folder.mkdir(parents=True, exist_ok=True)
    ca.cert_pem.write_to_path(str(folder / "ca.pem"))
    issued = (signer or ca).issue_cert(name)
    issued.cert_chain_pems[0].write_to_path(str(folder / "cert.pem"))
    issued.private_key_pem.write_to_path(str(folder / "key.pem"))
    (folder / "key.pem").chmod(0o600)
    return folder


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class StunnelEngine:
    """``tcp://127.0.0.1:PORT`` (TLS, client certificate required) in front of the engine's socket."""

    upstream: str = ENGINE_SOCKET
    ca: trustme.CA = field(default_factory=trustme.CA)
    port: int = 0
    folder: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="hookcage-stunnel-")))
    process: subprocess.Popen[bytes] | None = None

    @property
    def docker_host(self) -> str:
        return f"tcp://127.0.0.1:{self.port}"

    def client_env(self, name: str = "client", signer: trustme.CA | None = None) -> dict[str, str]:
        """The variables a user sets for this engine, with a fresh client certificate
        (signed by ``signer``: another CA makes a certificate the engine must refuse)."""
        certs = write_cert_folder(self.folder / f"{name}-{secrets.token_hex(3)}", self.ca, signer)
        return {"DOCKER_HOST": self.docker_host, "DOCKER_TLS_VERIFY": "1", "DOCKER_CERT_PATH": str(certs)}

    def start(self, attempts: int = 5) -> StunnelEngine:
        binary = stunnel_binary()
        if binary is None:
            raise RuntimeError("stunnel is not installed (Debian: apt-get install stunnel4)")
        server = self.ca.issue_cert(*SERVER_NAMES)
        server.private_key_and_cert_chain_pem.write_to_path(str(self.folder / "server.pem"))
        (self.folder / "server.pem").chmod(0o600)
        self.ca.cert_pem.write_to_path(str(self.folder / "ca.pem"))
        log = self.folder / "stunnel.log"
        for _ in range(attempts):  # another process may take the free port first
            self.port = _free_port()
            conf = self.folder / "stunnel.conf"
            conf.write_text(
                "foreground = yes\n"
                f"output = {log}\n"
                "debug = 5\n"
                "[engine]\n"
                f"accept = 127.0.0.1:{self.port}\n"
                f"connect = {self.upstream}\n"
                f"cert = {self.folder / 'server.pem'}\n"
                f"CAfile = {self.folder / 'ca.pem'}\n"
                "verifyChain = yes\n"
                "requireCert = yes\n"
                "sslVersionMin = TLSv1.2\n"
            )
            self.process = subprocess.Popen(
                [binary, str(conf)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, start_new_session=True,
            )
            if self._listening(deadline=time.monotonic() + 20):
                return self
            self._stop()
        text = log.read_text(errors="replace") if log.exists() else "(no log)"
        raise RuntimeError(f"stunnel did not start listening:\n{text[-2000:]}")

    def _listening(self, deadline: float) -> bool:
        assert self.process is not None
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return True
            time.sleep(0.05)
        return False

    def log(self) -> str:
        path = self.folder / "stunnel.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def _stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)

    def close(self) -> None:
        self._stop()
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> StunnelEngine:
        return self.start() if self.process is None else self

    def __exit__(self, *exc: object) -> None:
        self.close()


def stunnel_pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
