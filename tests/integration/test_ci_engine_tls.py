"""The docker backend against a TLS engine, as GitLab's ``docker:dind`` offers one.

``tls_proxy.TlsEngineProxy`` is a real TLS endpoint of this machine's engine
(client certificate required, as ``dockerd --tlsverify``); the client side is
configured only by the variables a GitLab job sets: ``DOCKER_HOST``,
``DOCKER_TLS_VERIFY=1``, ``DOCKER_CERT_PATH`` (``ca.pem``, ``cert.pem``,
``key.pem``). The recipe itself (docs/ci/gitlab-ci.yml) runs over it in
test_ci_recipes.py; here the backend's own cases: stdin end-of-input and large
streams through TLS, a hook that leaves its stdin unread, a timeout, the pool
serving warm runs, and every way the TLS set-up can be wrong (one clean line each,
nothing reaching the engine).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme
from support import CLEARED_ENV
from tls_proxy import TlsEngineProxy, write_client_certs

from executor.sandbox.base import RunRequest
from executor.sandbox.docker import MANAGED_LABEL, DockerSandbox, default_client, over_tls
from executor.sandbox.pool import PooledDockerSandbox

pytestmark = pytest.mark.docker

MiB = 1024 * 1024
SESSION = os.environ["HOOKCAGE_TEST_SESSION"]
LABELS = {"hookcage.test-session": SESSION}
SYSTEM_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="module")
def engine(ca: trustme.CA, docker_api: Any) -> Iterator[TlsEngineProxy]:
    """The engine behind TLS with client-certificate verification (as dind on tcp://docker:2376)."""
    with TlsEngineProxy(ca) as proxy:
        yield proxy


@pytest.fixture
def tls_env(engine: TlsEngineProxy, ca: trustme.CA, tmp_path: Path) -> dict[str, str]:
    """What a GitLab job's ``variables`` give the client: nothing else about the engine."""
    certs = write_client_certs(tmp_path / "certs" / "client", ca)
    return {"DOCKER_HOST": engine.docker_host, "DOCKER_TLS_VERIFY": "1", "DOCKER_CERT_PATH": str(certs.path)}


def hookcage(args: list[str], env: dict[str, str], home: Path, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """The real console script, with only the engine variables given (the rest of DOCKER_* dropped)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("DOCKER_") and k not in CLEARED_ENV}
    script = shutil.which("hookcage")
    assert script is not None
    return subprocess.run([script, *args], input=stdin, capture_output=True, text=True, timeout=180,
                          env={**base, "HOOKCAGE_HOME": str(home), **env})


def request(command: str, workspace: Path, *, stdin: bytes = b"", timeout: float = 60.0) -> RunRequest:
    return RunRequest(command=command, stdin=stdin, cwd=str(workspace), project_dir=str(workspace),
                      timeout=timeout, labels=LABELS)


def session_containers(docker_api: Any) -> list[str]:
    return [c["Id"] for c in docker_api.containers(
        all=True, filters={"label": [f"{MANAGED_LABEL}=true", f"hookcage.test-session={SESSION}"]})]


def test_a_hook_runs_through_tls_with_the_end_of_its_stdin(
    tls_env: dict[str, str], engine: TlsEngineProxy, runner_image: str, tmp_path: Path
) -> None:
    before = engine.handshakes
    proc = hookcage(["run", "--", "wc -c; hostname; echo to-stderr >&2; exit 3"], tls_env, tmp_path / "home",
                    stdin="x" * 100_000)
    # `wc -c` printing its count proves the hook saw end-of-input: the half-close went through TLS.
    assert (proc.returncode, proc.stdout, proc.stderr) == (3, "100000\nhookcage\n", "to-stderr\n")
    assert engine.handshakes > before  # it went through the TLS endpoint, not the unix socket


def test_large_streams_both_ways_are_whole_and_capped(
    tls_env: dict[str, str], runner_image: str, workspace: Path, docker_api: Any
) -> None:
    data = os.urandom(3 * MiB)
    with DockerSandbox(client=default_client(environ=tls_env), image=runner_image) as backend:
        result = backend.run(request("cat; head -c 200000 /dev/zero >&2", workspace, stdin=data))
    assert result.exit_code == 0 and not result.timed_out
    assert result.stdout == data[:MiB] and result.stdout_truncated  # capped at 1 MiB, like the unix socket
    assert result.stderr == b"\0" * 200_000 and not result.stderr_truncated
    assert session_containers(docker_api) == []


def test_a_hook_that_never_reads_its_stdin_does_not_hang_the_run(
    tls_env: dict[str, str], runner_image: str, workspace: Path
) -> None:
    with DockerSandbox(client=default_client(environ=tls_env), image=runner_image) as backend:
        result = backend.run(request("echo early; exit 7", workspace, stdin=os.urandom(4 * MiB), timeout=60))
    assert (result.exit_code, result.stdout, result.timed_out) == (7, b"early\n", False)


def test_a_timeout_over_tls_kills_and_removes_the_container(
    tls_env: dict[str, str], runner_image: str, workspace: Path, docker_api: Any
) -> None:
    with DockerSandbox(client=default_client(environ=tls_env), image=runner_image) as backend:
        result = backend.run(request("echo started; sleep 60", workspace, timeout=2))
    assert result.timed_out and result.exit_code is None and result.stdout == b"started\n"
    assert session_containers(docker_api) == []


def test_the_pool_is_warm_over_tls_with_the_same_answers(
    tls_env: dict[str, str], runner_image: str, workspace: Path, docker_api: Any
) -> None:
    """The warm job counts its stdin (no half-close needed) and the pool reads TLS streams:
    over TLS the runs are warm, with the cold path's answers."""
    client = default_client(environ=tls_env)
    assert over_tls(client)
    with PooledDockerSandbox(client=client, image=runner_image, labels=LABELS, idle_timeout=60) as pool:
        req = request("cat; echo $((6*7))", workspace, stdin=b"in\n")
        assert pool.prewarm(req, wait=60)
        results = []
        for _ in range(3):
            assert pool.prewarm(req, wait=60)
            results.append(pool.run_with_path(req))
        assert [(r.exit_code, r.stdout, path) for r, path in results] == [(0, b"in\n42\n", "warm")] * 3
        assert pool.stats().warm == 3
    assert session_containers(docker_api) == []


def test_a_ca_bundle_variable_does_not_replace_the_engines_ca(
    tls_env: dict[str, str], runner_image: str, tmp_path: Path
) -> None:
    """requests lets REQUESTS_CA_BUNDLE / CURL_CA_BUNDLE replace a session's CA file (many CI
    images set them); the engine is still checked against DOCKER_CERT_PATH/ca.pem, as the docker CLI does."""
    assert Path(SYSTEM_BUNDLE).is_file()
    env = {**tls_env, "REQUESTS_CA_BUNDLE": SYSTEM_BUNDLE, "CURL_CA_BUNDLE": SYSTEM_BUNDLE}
    proc = hookcage(["run", "--", "echo through-tls"], env, tmp_path / "home")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "through-tls\n", "")


def one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 1 and proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("hookcage: error: "), proc.stderr
    assert "Traceback" not in proc.stderr
    return lines[0]


def test_a_client_certificate_the_engine_does_not_know_is_one_clean_line(
    engine: TlsEngineProxy, ca: trustme.CA, runner_image: str, tmp_path: Path, docker_api: Any
) -> None:
    before_handshakes, before_refused = engine.handshakes, len(engine.refused)
    stranger = write_client_certs(tmp_path / "client", ca, client_ca=trustme.CA())  # signed by another CA
    env = {"DOCKER_HOST": engine.docker_host, "DOCKER_TLS_VERIFY": "1", "DOCKER_CERT_PATH": str(stranger.path)}
    marker = tmp_path / "ran"
    line = one_line_error(hookcage(["run", "--workspace", "rw", "--", f"touch {marker}"], env, tmp_path / "home"))
    assert f"the TLS handshake with the Docker engine at {engine.docker_host} failed" in line
    # The engine's alert, or (when it hangs up before the alert is read) its end of the connection.
    assert ("the engine refused this client's certificate" in line
            or "the engine closed the connection during the handshake" in line), line
    assert "DOCKER_CERT_PATH must hold" in line
    assert engine.handshakes == before_handshakes  # not one request reached the engine
    assert any("certificate verify failed" in r for r in engine.refused[before_refused:])
    assert not marker.exists() and session_containers(docker_api) == []


def test_an_engine_certificate_the_client_does_not_trust_is_one_clean_line(
    engine: TlsEngineProxy, ca: trustme.CA, tmp_path: Path
) -> None:
    certs = write_client_certs(tmp_path / "client", ca)
    trustme.CA().cert_pem.write_to_path(str(certs.path / "ca.pem"))  # the job trusts another CA than the engine's
    env = {"DOCKER_HOST": engine.docker_host, "DOCKER_TLS_VERIFY": "1", "DOCKER_CERT_PATH": str(certs.path)}
    before = engine.handshakes
    line = one_line_error(hookcage(["run", "--", "true"], env, tmp_path / "home"))
    assert "this client refused the engine's certificate (certificate verify failed" in line
    assert engine.handshakes == before


def test_a_cert_path_without_the_files_is_one_clean_line(engine: TlsEngineProxy, tmp_path: Path) -> None:
    """What a job sees when dind has not written /certs/client yet (gitlab-runner#27384)."""
    empty = tmp_path / "certs" / "client"
    empty.mkdir(parents=True)
    env = {"DOCKER_HOST": engine.docker_host, "DOCKER_TLS_VERIFY": "1", "DOCKER_CERT_PATH": str(empty)}
    line = one_line_error(hookcage(["run", "--", "true"], env, tmp_path / "home"))
    assert "Docker TLS settings" in line and "DOCKER_CERT_PATH must hold" in line

