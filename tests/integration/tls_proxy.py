"""A TLS endpoint of the real engine, as ``dockerd --tlsverify`` (GitLab's ``docker:dind``) offers one.

``docker:dind`` listens on ``tcp://docker:2376`` with TLS and verifies the
client's certificate against its CA; the job container gets ``ca.pem``,
``cert.pem`` and ``key.pem`` in ``$DOCKER_TLS_CERTDIR/client``. This machine has
one engine, on ``/var/run/docker.sock``; :class:`TlsEngineProxy` puts the same
kind of endpoint in front of it on 127.0.0.1: TLS terminated here (certificates
from ``trustme``), a client certificate REQUIRED and checked against the CA, and
every byte forwarded both ways to the engine's unix socket, so the Engine API,
its hijacked attach streams and their half-close all go through TLS exactly as
they would to dind.

The proxy half-closes as dockerd does: a client that shuts down the write
side of the TCP connection under TLS (what the ``docker`` CLI does for
``docker run -i``, and hookcage for a hook's stdin) ends the engine side's
input (``shutdown(SHUT_WR)`` on the unix socket) while the answer keeps
flowing back (Go's ``crypto/tls`` reads that end of stream as ``io.EOF``;
OpenSSL is told to do the same, ``OP_IGNORE_UNEXPECTED_EOF``, instead of
answering with a fatal alert); the engine's end of stream closes the client's
connection with a TLS ``close_notify``, as Go's ``tls.Conn.Close`` does.

``handshakes`` counts the TLS handshakes that succeeded (a client certificate
signed by the CA); ``refused`` keeps the reason of each one that failed, so a
test can prove a wrong certificate never reached the engine.
"""

from __future__ import annotations

import contextlib
import select
import socket
import ssl
import threading
from dataclasses import dataclass, field
from pathlib import Path

import trustme

ENGINE_SOCKET = "/var/run/docker.sock"
SERVER_NAMES = ("docker", "localhost", "127.0.0.1")
"""What dind's server certificate is issued for (its service alias, plus loopback here)."""
_CHUNK = 65536
_MAX_PENDING = 4 * _CHUNK
"""Input bytes held for an engine that is not reading; past it the client waits (TCP back-pressure)."""


@dataclass
class ClientCerts:
    """A ``DOCKER_CERT_PATH`` folder: ``ca.pem``, ``cert.pem``, ``key.pem``."""

    path: Path


def write_client_certs(folder: Path, ca: trustme.CA, client_ca: trustme.CA | None = None,
                       name: str = "hookcage-ci") -> ClientCerts:
    """Write dind's client folder: ``ca`` is the CA the client trusts (the server's), and
    ``client_ca`` (default: ``ca``) signs the client's own certificate."""
    folder.mkdir(parents=True, exist_ok=True)
    ca.cert_pem.write_to_path(str(folder / "ca.pem"))
    issued = (client_ca or ca).issue_cert(name)
    issued.cert_chain_pems[0].write_to_path(str(folder / "cert.pem"))
    issued.private_key_pem.write_to_path(str(folder / "key.pem"))
    (folder / "key.pem").chmod(0o600)
    return ClientCerts(folder)


@dataclass
class TlsEngineProxy:
    """``tcp://127.0.0.1:PORT`` with TLS and client-certificate verification, forwarding to the engine."""

    ca: trustme.CA
    upstream: str = ENGINE_SOCKET
    handshakes: int = 0
    refused: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._context.verify_mode = ssl.CERT_REQUIRED
        # dockerd (Go's crypto/tls) reads a TCP end of stream at a record boundary as the end
        # of input and goes on writing; OpenSSL 3 would answer it with a fatal decode_error alert.
        self._context.options |= ssl.OP_IGNORE_UNEXPECTED_EOF
        self.ca.configure_trust(self._context)
        self.ca.issue_cert(*SERVER_NAMES).configure_cert(self._context)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._open: set[socket.socket] = set()

    @property
    def docker_host(self) -> str:
        """``DOCKER_HOST`` for this endpoint."""
        return f"tcp://127.0.0.1:{self.port}"

    def __enter__(self) -> TlsEngineProxy:
        thread = threading.Thread(target=self._accept_loop, name="tls-engine-proxy", daemon=True)
        thread.start()
        self._threads.append(thread)
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop accepting, close every connection, wait for the threads."""
        self._stop.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            for sock in list(self._open):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
        for thread in list(self._threads):
            thread.join(timeout=10)

    # -- the work ------------------------------------------------------------

    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            try:
                readable, _, _ = select.select([self._listener], [], [], 0.2)
                if not readable:
                    continue
                conn, _ = self._listener.accept()
            except OSError:
                return
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            with self._lock:
                self._threads.append(thread)
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        self._track(conn)
        try:
            try:
                tls = self._context.wrap_socket(conn, server_side=True)
            except (ssl.SSLError, OSError) as exc:
                with self._lock:
                    self.refused.append(str(exc))
                return
            self._track(tls)
            with self._lock:
                self.handshakes += 1
            engine = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self._track(engine)
            try:
                engine.connect(self.upstream)
                _forward(tls, engine)
            finally:
                engine.close()
                tls.close()
        finally:
            conn.close()

    def _track(self, sock: socket.socket) -> None:
        with self._lock:
            self._open.add(sock)


def _forward(tls: ssl.SSLSocket, engine: socket.socket) -> None:
    """Copy bytes both ways until the engine ends its side (or either side breaks).

    One thread per connection, so the TLS object is never used by two threads at
    once. Decrypted bytes the TLS layer already holds (``pending()``) are read
    before waiting on the socket again. Writes to the engine never block: dockerd
    copies each direction on its own, so input the engine does not take (a hook
    that never reads its stdin) must not stop its output and its end of stream
    from reaching the client. Input waits in a bounded buffer; while the buffer
    is full, the client's bytes are left in the TCP window (back-pressure).
    """
    client_open = True
    engine_reads = True  # False once the engine stopped taking input (the hook exited with stdin unread)
    half_close = False  # the client ended its input: end the engine's once the buffer is written
    pending = bytearray()
    engine.setblocking(False)

    def end_input() -> None:
        with contextlib.suppress(OSError):
            engine.shutdown(socket.SHUT_WR)

    while True:
        take_client = client_open and len(pending) < _MAX_PENDING
        writers = [engine] if pending and engine_reads else []
        if take_client and tls.pending():
            readable, writable = [tls], writers
        else:
            readable, writable, _ = select.select([engine] + ([tls] if take_client else []), writers, [], 1.0)
        if engine in writable:
            try:
                del pending[:engine.send(pending)]
            except BlockingIOError:
                pass
            except OSError:
                # What the client still sends is dropped, as dockerd drops it.
                engine_reads = False
                pending.clear()
            if half_close and not pending:
                end_input()
        if tls in readable:
            try:
                data = tls.recv(_CHUNK)
            except ssl.SSLWantReadError:
                data = None
            except (ssl.SSLEOFError, ssl.SSLZeroReturnError, ConnectionResetError):
                data = b""  # a half-close under TLS, as the docker CLI sends one
            except (ssl.SSLError, OSError):
                return
            if data == b"":
                client_open = False
                half_close = True
                if not pending:
                    end_input()
            elif data and engine_reads:
                pending += data
        if engine in readable:
            try:
                data = engine.recv(_CHUNK)
            except BlockingIOError:
                continue
            except OSError:
                return
            if not data:  # the engine ended the stream: close_notify, then the connection closes
                with contextlib.suppress(ssl.SSLError, OSError, ValueError):  # ValueError: closed meanwhile
                    tls.unwrap()
                return
            try:
                tls.sendall(data)
            except (ssl.SSLError, OSError):
                return
