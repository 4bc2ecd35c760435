"""The docker backend's TLS engine support, without an engine.

- what each way a TLS set-up can fail becomes (one line naming the fix);
- the engine's CA from DOCKER_CERT_PATH is not replaced by REQUESTS_CA_BUNDLE;
- the stream pump over a real TLS connection: the half-close under TLS ends
  the peer's input while its answer still arrives, whole, frame by frame.
"""

from __future__ import annotations

import socket
import ssl
import struct
import threading
import time
from pathlib import Path

import docker.errors  # type: ignore[import-untyped, unused-ignore]
import docker.tls  # type: ignore[import-untyped, unused-ignore]
import pytest
import trustme

from executor.errors import SandboxError, SandboxUnavailable
from executor.sandbox.docker import CappedBuffer, EngineClient, map_engine_error, over_tls, pump

URL = "tcp://docker:2376"


def api_version_error(cause: BaseException) -> docker.errors.DockerException:
    """What docker-py raises when its first call (``/version``) fails: the cause chained."""
    try:
        raise docker.errors.DockerException(f"Error while fetching server API version: {cause}") from cause
    except docker.errors.DockerException as exc:
        return exc


def test_the_engine_refusing_the_client_certificate_says_so() -> None:
    alert = ssl.SSLError(1, "[SSL: TLSV1_ALERT_UNKNOWN_CA] tlsv1 alert unknown ca (_ssl.c:1006)")
    error = map_engine_error(api_version_error(alert), step="connect", url=URL, tls=True)
    assert isinstance(error, SandboxUnavailable)
    assert str(error).startswith(
        "the TLS handshake with the Docker engine at tcp://docker:2376 failed: "
        "the engine refused this client's certificate (tlsv1 alert unknown ca); DOCKER_CERT_PATH must hold")


def test_the_client_refusing_the_engine_certificate_says_so() -> None:
    refused = ssl.SSLCertVerificationError(
        1, "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: unable to get local issuer certificate"
           " (_ssl.c:1006)")
    error = map_engine_error(api_version_error(refused), step="connect", url=URL, tls=True)
    assert "this client refused the engine's certificate (certificate verify failed: unable to get local" in str(error)


@pytest.mark.parametrize("cause", [ssl.SSLEOFError(8, "EOF occurred in violation of protocol"),
                                   ConnectionResetError(104, "Connection reset by peer")])
def test_a_hang_up_during_the_handshake_is_not_reported_as_an_engine_that_is_down(cause: BaseException) -> None:
    error = str(map_engine_error(api_version_error(cause), step="connect", url=URL, tls=True))
    assert "the engine closed the connection during the handshake" in error
    assert "start Docker" not in error


def test_a_reset_without_tls_is_still_an_engine_that_cannot_be_reached() -> None:
    error = map_engine_error(api_version_error(ConnectionRefusedError(111, "refused")), step="connect",
                             url="tcp://127.0.0.1:2375")
    assert str(error) == "cannot reach the Docker engine at tcp://127.0.0.1:2375: start Docker, or set DOCKER_HOST"


def test_missing_certificate_files_name_the_folder_to_fix() -> None:
    exc = docker.errors.TLSParameterError("Path to a certificate and key files must be provided")
    error = map_engine_error(exc, step="connect", url=URL, tls=True)
    assert isinstance(error, SandboxUnavailable)
    assert "the Docker TLS settings for tcp://docker:2376 are unusable" in str(error)
    assert "DOCKER_CERT_PATH must hold the engine's ca.pem and this client's cert.pem and key.pem" in str(error)


def test_a_tls_failure_after_connecting_is_a_broken_connection_not_a_handshake() -> None:
    exc = ssl.SSLError(1, "[SSL: DECRYPTION_FAILED_OR_BAD_RECORD_MAC] decryption failed (_ssl.c:2580)")
    error = map_engine_error(exc, step="attach", url="https://docker:2376")
    assert type(error) is SandboxError
    assert str(error) == ("the TLS connection to the Docker engine at https://docker:2376 failed (attach): "
                          "decryption failed")


@pytest.fixture
def cert_path(tmp_path: Path) -> Path:
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    issued = ca.issue_cert("client")
    issued.cert_chain_pems[0].write_to_path(str(tmp_path / "cert.pem"))
    issued.private_key_pem.write_to_path(str(tmp_path / "key.pem"))
    return tmp_path


def test_a_ca_bundle_variable_does_not_replace_the_engines_ca(
    cert_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt")
    monkeypatch.setenv("CURL_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt")
    tls = docker.tls.TLSConfig(client_cert=(str(cert_path / "cert.pem"), str(cert_path / "key.pem")),
                               ca_cert=str(cert_path / "ca.pem"), verify=True)
    client = EngineClient(base_url=URL, version="1.41", tls=tls)  # an explicit version: no call made
    try:
        assert over_tls(client)
        settings = client.merge_environment_settings("https://docker:2376/version", {}, None, None, None)
        assert settings["verify"] == str(cert_path / "ca.pem")
        # An explicit per-call choice still wins, as in requests.
        assert client.merge_environment_settings("https://docker:2376/x", {}, None, False, None)["verify"] is False
    finally:
        client.close()


def test_a_plain_client_is_not_over_tls() -> None:
    client = EngineClient(base_url="unix:///var/run/docker.sock", version="1.41")
    try:
        assert not over_tls(client)
    finally:
        client.close()


def frame(stream: int, payload: bytes) -> bytes:
    return struct.pack(">BxxxL", stream, len(payload)) + payload


def test_the_pump_half_closes_under_tls_and_reads_the_whole_answer(tmp_path: Path) -> None:
    """An engine stand-in that behaves as dockerd's attach: reads stdin to its end
    (a TCP end of stream under TLS, as Go's crypto/tls reports it), then answers in
    frames larger than a TLS record, then closes with close_notify."""
    ca = trustme.CA()
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("engine").configure_cert(server_ctx)
    server_ctx.options |= ssl.OP_IGNORE_UNEXPECTED_EOF
    client_ctx = ssl.create_default_context()
    ca.configure_trust(client_ctx)
    ours, theirs = socket.socketpair()
    stdin = bytes(range(256)) * 4096  # 1 MiB
    answer = b"o" * 100_000
    got: list[bytes] = []

    def engine() -> None:
        with server_ctx.wrap_socket(theirs, server_side=True) as tls:
            received = bytearray()
            while chunk := tls.recv(65536):
                received += chunk
            got.append(bytes(received))
            tls.sendall(frame(1, answer) + frame(2, b"err\n") + frame(1, str(len(received)).encode()))
            tls.unwrap()

    thread = threading.Thread(target=engine, daemon=True)
    thread.start()
    with client_ctx.wrap_socket(ours, server_hostname="engine") as tls:
        out, err = CappedBuffer(1 << 20), CappedBuffer(1 << 20)
        ended = pump(tls, stdin, time.monotonic() + 30, out, err)
    thread.join(10)
    assert ended is True
    assert got == [stdin]
    assert out.getvalue() == answer + str(len(stdin)).encode() and err.getvalue() == b"err\n"
