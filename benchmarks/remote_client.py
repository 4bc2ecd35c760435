"""What one ``hookcage dispatch`` with ``HOOKCAGE_URL`` costs its agent, beside what ``http.client`` would add.

Usage:  python benchmarks/remote_client.py [--runs 200]

A fake service on loopback (plain HTTP, and TLS with a trustme CA; its own
process) answers every ``POST /dispatch`` at once with a fixed verdict, so
what is timed is the client: the launcher ``hookcage install`` writes
(``python -IS``), started per event as an agent starts it, with only the
URL and the token (and the CA file for TLS) in its environment. Beside it,
the interpreter's start-up and what importing the alternatives costs:

- the floor: ``python -I -S -c pass``;
- ``import ssl, socket``: what an ``https://`` URL already imports;
- ``import http.client``: what speaking the exchange with the standard
  library's client would add to every event (over the floor for
  ``http://``, over ``ssl`` for ``https://``);
- ``hookcage dispatch`` over TCP and over TLS.

One run, every row interleaved round by round (a busy machine slows them
all alike), milliseconds; the minimum is printed too: on a shared machine it
is the closest to what a quiet one measures. Nothing is asserted but the
answers; the service is stopped and the temporary folder removed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socketserver
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from executor import __version__, launcher  # noqa: E402

TOKEN = "benchmark-token-0123456789abcdef"
PAYLOAD = json.dumps({"session_id": "bench", "tool_name": "Bash", "tool_input": {"command": "ls"}}).encode()
VERDICT = json.dumps({"exit_code": 0, "stdout": "{}\n", "stderr": "", "agent": "claude"}).encode()


class _Answer(socketserver.BaseRequestHandler):
    """Reads one request (head and ``Content-Length`` body) and answers the verdict."""

    def handle(self) -> None:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = self.request.recv(65536)
            if not chunk:
                return
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = next((int(line.partition(b":")[2]) for line in head.split(b"\r\n")[1:]
                       if line.partition(b":")[0].strip().lower() == b"content-length"), 0)
        while len(body) < length and (chunk := self.request.recv(65536)):
            body += chunk
        self.request.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
                             b"connection: close\r\n\r\n%s" % (len(VERDICT), VERDICT))


class _Service(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    context: ssl.SSLContext | None = None

    def get_request(self) -> tuple[object, object]:
        sock, address = super().get_request()
        if self.context is not None:
            sock = self.context.wrap_socket(sock, server_side=True)
        return sock, address


def serve(cert_dir: str | None, port_file: str) -> None:
    """The fake service (``--serve``): listens on a free port, writes it to ``port_file``, answers until killed."""
    server = _Service(("127.0.0.1", 0), _Answer)
    if cert_dir:
        server.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        server.context.load_cert_chain(os.path.join(cert_dir, "cert.pem"), os.path.join(cert_dir, "key.pem"))
    Path(port_file + ".tmp").write_text(str(server.server_address[1]))
    os.rename(port_file + ".tmp", port_file)
    server.serve_forever()


def start_service(tmp: Path, cert_dir: Path | None) -> tuple[subprocess.Popen[bytes], str]:
    """The fake service in its own process; it and its URL."""
    port_file = tmp / ("tls.port" if cert_dir else "tcp.port")
    args = ["--serve", str(port_file)] + (["--certs", str(cert_dir)] if cert_dir else [])
    proc = subprocess.Popen([sys.executable, __file__, *args])
    deadline = time.monotonic() + 30
    while not port_file.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("the fake service did not start")
        time.sleep(0.05)
    return proc, f"{'https' if cert_dir else 'http'}://127.0.0.1:{port_file.read_text()}"


def interleaved(paths: dict[str, Callable[[], None]], runs: int, warmup: int = 2) -> dict[str, list[float]]:
    for one in paths.values():
        for _ in range(warmup):
            one()
    samples: dict[str, list[float]] = {name: [] for name in paths}
    for _ in range(runs):
        for name, one in paths.items():
            started = time.perf_counter()
            one()
            samples[name].append((time.perf_counter() - started) * 1000)
    return samples


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    parser.add_argument("--certs", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.certs, args.serve)
        return 0
    import trustme

    tmp = Path(tempfile.mkdtemp(prefix="hookcage-bench-remote-"))
    services: list[subprocess.Popen[bytes]] = []
    try:
        ca = trustme.CA()
        issued = ca.issue_cert("127.0.0.1")
        certs = tmp / "certs"
        certs.mkdir()
        (certs / "cert.pem").write_bytes(b"".join(blob.bytes() for blob in issued.cert_chain_pems))
        issued.private_key_pem.write_to_path(str(certs / "key.pem"))
        ca.cert_pem.write_to_path(str(certs / "ca.pem"))
        program = tmp / "bin" / launcher.NAME
        program.parent.mkdir()
        program.write_bytes(launcher.script(sys.executable, str(REPO), __version__))
        program.chmod(0o755)
        base = {"PATH": os.environ["PATH"], "HOME": str(tmp), "LANG": "C.UTF-8", "HOOKCAGE_TOKEN": TOKEN}
        envs = {}
        for kind, cert_dir in (("TCP", None), ("TLS", certs)):
            proc, url = start_service(tmp, cert_dir)
            services.append(proc)
            envs[kind] = {**base, "HOOKCAGE_URL": url, **({"HOOKCAGE_CA_FILE": str(certs / "ca.pem")} if cert_dir else {})}

        def python(code: str) -> Callable[[], None]:
            return lambda: subprocess.run([sys.executable, "-I", "-S", "-c", code], check=True)

        def dispatch(env: dict[str, str]) -> Callable[[], None]:
            def one() -> None:
                done = subprocess.run([str(program), "dispatch", "PreToolUse"], input=PAYLOAD,
                                      capture_output=True, env=env, cwd=tmp)
                if (done.returncode, done.stdout, done.stderr) != (0, b"{}\n", b""):
                    raise SystemExit(f"a wrong answer: {done}")
            return one

        paths = {
            "`python -I -S -c pass` (the floor)": python("pass"),
            "`python -I -S -c 'import ssl, socket'` (what https:// imports anyway)": python("import ssl, socket"),
            "`python -I -S -c 'import http.client'` (what an http.client exchange imports)": python("import http.client"),
            "launcher, `dispatch` via HOOKCAGE_URL over TCP": dispatch(envs["TCP"]),
            "launcher, `dispatch` via HOOKCAGE_URL over TLS": dispatch(envs["TLS"]),
        }
        samples = interleaved(paths, args.runs)
    finally:
        for proc in services:
            proc.kill()
            proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    floor = statistics.median(next(iter(samples.values())))
    print(f"`hookcage dispatch` with HOOKCAGE_URL against a fake service on loopback, {args.runs} runs each, "
          f"interleaved (ms; load average {os.getloadavg()[0]:.1f} at the end)\n")
    print("| path | p50 | p90 | min | + over floor (p50) |\n|---|---|---|---|---|")
    for name, values in samples.items():
        median = statistics.median(values)
        print(f"| {name} | {median:.1f} | {pct(values, 0.9):.1f} | {min(values):.1f} | {median - floor:+.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
