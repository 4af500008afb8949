"""A connection flood against a real ``sidecar run``: /healthz latency and the refusal counts, the figure in
docs/security.md ("Connections").

Starts ``sidecar run`` (Triton off, the events endpoint on, the server section at its defaults but
``max_inflight_requests``, raised so held pushes stay in flight), then two floods, one after the other:

- idle: ``--conns`` sockets that connect and send nothing;
- busy: ``--conns`` sockets that each send a push's head (``POST /v1/events``, Content-Length 100) and never
  its body, so each holds a request in flight.

With no flood, then while each flood is held, it times ``--probes`` sequential ``GET /healthz`` (a fresh
connection each, as a kubelet does) and one ordinary ``GET /metrics``; after the flood is closed it reads
``sidecar_http_connections_refused_total`` from /metrics.

    .venv/bin/python bench/bench_connections.py [--conns 2000] [--probes 200]
"""

from __future__ import annotations

import argparse
import http.client
import re
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sidecar.demo.tritonserver import free_port  # noqa: E402

BUSY_HEAD = b"POST /v1/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"


def _get(port: int, path: str) -> tuple[int, float]:
    t0 = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path, headers={"Connection": "close"})
        resp = conn.getresponse()
        resp.read()
        return resp.status, time.perf_counter() - t0
    finally:
        conn.close()


def _refused(port: int) -> dict[str, int]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    pat = r'^sidecar_http_connections_refused_total\{reason="(\w+)"\} ([0-9.e+]+)$'
    return {m[1]: int(float(m[2])) for m in re.finditer(pat, text, re.M)}


def _flood(port: int, conns: int, busy: bool, probes: int) -> None:
    held = []
    t0 = time.perf_counter()
    for _ in range(conns):
        s = socket.create_connection(("127.0.0.1", port), timeout=30)
        if busy:
            s.sendall(BUSY_HEAD)
        held.append(s)
    opened = time.perf_counter() - t0
    time.sleep(0.5)  # a benchmark, not a test: let the server take in the last connections
    lat = []
    codes: dict[int, int] = {}
    for _ in range(probes):
        status, secs = _get(port, "/healthz")
        codes[status] = codes.get(status, 0) + 1
        lat.append(secs * 1000)
    other, _ = _get(port, "/metrics")
    worst = max(range(len(lat)), key=lat.__getitem__)
    lat.sort()
    kind = "no" if not conns else f"{conns} {'busy' if busy else 'idle'}"
    print(
        f"  {kind} connections held (opened in {opened:.2f}s); /healthz x{probes}: status {codes}, "
        f"p50 {statistics.median(lat):.2f} ms, p99 {lat[int(0.99 * (len(lat) - 1))]:.2f} ms, max {lat[-1]:.2f} ms "
        f"(probe #{worst + 1}); GET /metrics during the flood: {other}"
    )
    for s in held:
        s.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--conns", type=int, default=2000)
    ap.add_argument("--probes", type=int, default=200)
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = args.conns + 256
    if soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(need, hard), hard))
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / "sidecar.yaml"
        cfg.write_text(
            yaml.safe_dump(
                {
                    "server": {"host": "127.0.0.1", "port": port, "max_inflight_requests": 4 * args.conns},
                    "store": {"path": str(Path(tmp) / "s.sqlite")},
                    "triton": {"enabled": False},
                    "gpu": {"enabled": False},
                    "events": {"enabled": True},
                }
            )
        )
        log = Path(tmp) / "sidecar.log"
        with log.open("w") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "sidecar.cli", "run", "--config", str(cfg)], stdout=out, stderr=out, cwd=ROOT
            )
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if _get(port, "/healthz")[0] == 200:
                        break
                except OSError:
                    pass
                if time.monotonic() > deadline or proc.poll() is not None:
                    print(log.read_text())
                    return 1
                time.sleep(0.1)
            print(f"sidecar run on port {port}, defaults but max_inflight_requests={4 * args.conns}")
            _flood(port, 0, False, args.probes)
            for busy in (False, True):
                _flood(port, args.conns, busy, args.probes)
                print(f"  refused so far: {_refused(port)}")
        finally:
            proc.terminate()
            proc.wait(30)
        lines = [ln for ln in log.read_text().splitlines() if "connections:" in ln or "closed" in ln]
        print("log:", *lines[:6], sep="\n  ")
    return 0


if __name__ == "__main__":
    sys.exit(main())
