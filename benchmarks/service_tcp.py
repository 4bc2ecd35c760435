"""What the TCP listener of ``hookcage serve --listen`` costs per event, beside the unix socket.

Usage:  python benchmarks/service_tcp.py [--rounds 300]

Starts two ``hookcage serve --listen 127.0.0.1:0`` in a temporary home (plain
HTTP, and HTTPS with a trustme CA) and times one event with no matching hook
(so no container: only the transport, the gate and the daemon's answer),
interleaved so that noise lands on every path alike:

- through the unix socket, as ``executor.service.client`` sends it (local mode);
- over TCP and over TLS, one new connection per event with the bearer token,
  as the remote client (``HOOKCAGE_URL``) sends it;
- over TCP with a wrong token (the 401 path: nothing is judged).

Prints a Markdown table (p50/p90/p99 ms). Nothing is asserted; it exits 1 only
when an answer is wrong.
"""

from __future__ import annotations

import argparse
import base64
import http.client
import json
import os
import re
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import trustme

from executor import __version__
from executor.service import client

TOKEN = "benchmark-token-0123456789abcdef"


def start(home: Path, *args: str) -> tuple[subprocess.Popen[bytes], int]:
    """``hookcage serve --listen 127.0.0.1:0 ARGS`` in ``home``; the process and its TCP port."""
    home.mkdir()
    log = home.parent / f"{home.name}.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKCAGE_")}
    env.update(HOOKCAGE_HOME=str(home), HOOKCAGE_MANAGED_DIR=str(home.parent / "managed"), HOOKCAGE_TOKEN=TOKEN)
    with log.open("wb") as out:
        proc = subprocess.Popen(["hookcage", "serve", "--listen", "127.0.0.1:0", *args], env=env,
                                stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while not (found := re.search(rb"answering on https?://127\.0\.0\.1:(\d+)", log.read_bytes())):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"hookcage serve did not start: {log.read_text()}")
        time.sleep(0.1)
    return proc, int(found.group(1))


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=300)
    rounds = parser.parse_args().rounds
    tmp = Path(tempfile.mkdtemp(prefix="hookcage-bench-tcp-"))
    project = tmp / "project"
    project.mkdir()
    ca = trustme.CA()
    issued = ca.issue_cert("127.0.0.1")
    (tmp / "cert.pem").write_bytes(b"".join(blob.bytes() for blob in issued.cert_chain_pems))
    issued.private_key_pem.write_to_path(str(tmp / "key.pem"))
    context = ssl.create_default_context()
    ca.configure_trust(context)
    plain, port = start(tmp / "plain")
    tls, tls_port = start(tmp / "tls", "--tls-cert", str(tmp / "cert.pem"), "--tls-key", str(tmp / "key.pem"))
    stdin = json.dumps({"session_id": "bench", "prompt": "x", "cwd": str(project)}).encode()
    body = json.dumps({"version": __version__, "protocol": 1, "event": "UserPromptSubmit", "agent": None,
                       "payload_b64": base64.b64encode(stdin).decode(), "env": {}, "cwd": str(project)}).encode()
    socket_env = {**os.environ, "HOOKCAGE_HOME": str(tmp / "plain"), "HOOKCAGE_MANAGED_DIR": str(tmp / "managed")}
    local_body = client.encode_request("UserPromptSubmit", stdin, socket_env, str(project))

    def unix() -> None:
        status, data = client.exchange(str(tmp / "plain" / client.SOCKET_NAME), "POST", "/dispatch", local_body,
                                       connect_timeout=1, timeout=30)
        assert (status, json.loads(data)["stdout"]) == (200, "{}\n"), data

    def tcp(port: int = port, ctx: ssl.SSLContext | None = None, token: str = TOKEN, expect: int = 200) -> None:
        conn = (http.client.HTTPSConnection("127.0.0.1", port, context=ctx) if ctx
                else http.client.HTTPConnection("127.0.0.1", port))
        try:
            conn.request("POST", "/dispatch", body=body,
                         headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
            response = conn.getresponse()
            data = response.read()
        finally:
            conn.close()
        assert response.status == expect, data

    paths: dict[str, Callable[[], None]] = {
        "unix socket (local mode)": unix,
        "TCP, a new connection per event": tcp,
        "TLS, a new connection per event": lambda: tcp(tls_port, context),
        "TCP, wrong token (401, nothing judged)": lambda: tcp(token="wrong-token-wrong-token", expect=401),
    }
    samples: dict[str, list[float]] = {name: [] for name in paths}
    try:
        for fn in paths.values():
            for _ in range(20):
                fn()
        for _ in range(rounds):
            for name, fn in paths.items():
                started = time.perf_counter()
                fn()
                samples[name].append((time.perf_counter() - started) * 1000)
    except AssertionError as exc:
        print(f"wrong answer: {exc}", file=sys.stderr)
        return 1
    finally:
        for proc in (plain, tls):
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
    print(f"| one event, no matching hook ({rounds} interleaved rounds) | p50 ms | p90 ms | p99 ms |")
    print("|---|---|---|---|")
    for name, taken in samples.items():
        print(f"| {name} | {statistics.median(taken):.2f} | {pct(taken, 0.9):.2f} | {pct(taken, 0.99):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
