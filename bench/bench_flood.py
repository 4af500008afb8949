"""A span flood against a real ``sidecar run``: does it lock out the other push endpoints, and what does it do to
memory? The figures behind docs/reliability-measured.md's "Span flood" section (security review, finding 1).

Starts ``sidecar run`` (OTLP receiver, events, changes; Triton off) with ``server.memory_limit_mib`` set, then
posts ``--batches`` OTLP/JSON span batches of ~3.2 MB (100 spans, each with 8 attribute values of 4,000
characters) from ``--senders`` connections at once, while one more connection posts an event and a change every
``--probe-every`` seconds during the flood and for ``--after`` seconds after it. Prints the resident memory
(VmRSS, read from /proc) before, at its peak and after; every answer by endpoint and status; the time from the
end of the flood until events and changes are answered 200 again (0 when they never stopped); and the
sidecar's own counters (trace store bytes, evictions by reason, refusals by endpoint and reason, reliefs).

    .venv/bin/python bench/bench_flood.py [--batches 95] [--senders 4] [--memory-limit-mib 512]
"""

from __future__ import annotations

import argparse
import collections
import http.client
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import orjson
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sidecar.demo.tritonserver import free_port  # noqa: E402

MIB = 1024 * 1024


def _config(db: Path, port: int, a: argparse.Namespace) -> dict[str, object]:
    traces: dict[str, object] = {"enabled": True}
    if a.store_mib:
        traces["store"] = {"max_bytes_mib": a.store_mib, "max_trace_bytes_mib": min(4.0, a.store_mib / 4)}
    return {
        "server": {"host": "127.0.0.1", "port": port, "memory_limit_mib": a.memory_limit_mib},
        "store": {"path": str(db)},
        "triton": {"enabled": False},
        "gpu": {"enabled": False},
        "traces": traces,
        "events": {"enabled": True},
        "alerting": {"enabled": True},
    }


def _batch(rnd: random.Random) -> bytes:
    spans = []
    for i in range(100):
        spans.append(
            {
                "traceId": rnd.randbytes(16).hex(),
                "spanId": rnd.randbytes(8).hex(),
                "name": "flood",
                "startTimeUnixNano": str(1_800_000_000_000_000_000 + i),
                "endTimeUnixNano": str(1_800_000_000_000_001_000 + i),
                "attributes": [
                    {"key": f"payload.{j}", "value": {"stringValue": rnd.randbytes(2000).hex()}} for j in range(8)
                ],
            }
        )
    return orjson.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]})


def _rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _wait_ready(port: int, proc: subprocess.Popen[bytes], secs: float = 60) -> None:
    end = time.monotonic() + secs
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise SystemExit(f"sidecar exited with {proc.returncode} before it was ready")
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            c.request("GET", "/healthz")
            if c.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit("sidecar not ready in time")


def _post(conn: http.client.HTTPConnection, path: str, body: bytes) -> int:
    conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    r.read()
    return r.status


def _metrics(port: int) -> list[str]:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    keep = (
        "sidecar_traces_stored_bytes ",
        "sidecar_traces_stored{",
        "sidecar_traces_evicted_total",
        "sidecar_http_refused_total",
        "sidecar_memory_reliefs_total",
        "sidecar_memory_relief_freed_bytes_total",
        "sidecar_memory_pressure ",
        "sidecar_traces_spans_dropped_total",
    )
    return [ln for ln in text.splitlines() if ln.startswith(keep) and not ln.endswith(" 0.0")]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, default=95)
    ap.add_argument("--senders", type=int, default=4, help="connections posting span batches at once")
    ap.add_argument("--memory-limit-mib", type=int, default=512)
    ap.add_argument("--store-mib", type=float, default=None, help="traces.store.max_bytes_mib (default: its default)")
    ap.add_argument("--probe-every", type=float, default=0.5, help="seconds between event+change probes")
    ap.add_argument("--after", type=float, default=15.0, help="seconds to keep probing after the flood")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    print(f"batch body {len(_batch(random.Random(0))) / 1e6:.2f} MB x {a.batches}, {a.senders} senders")
    work = Path(tempfile.mkdtemp(prefix="sidecar-flood-"))
    port = free_port()
    cfg = work / "flood.yaml"
    cfg.write_text(yaml.safe_dump(_config(work / "state.sqlite", port, a)))
    exe = str(Path(sys.executable).with_name("sidecar"))
    proc = subprocess.Popen(
        [exe, "run", "--config", str(cfg)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=open(work / "sidecar.log", "wb"),  # noqa: SIM115  (closed with the process)
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    answers: collections.Counter[tuple[str, int]] = collections.Counter()
    lock = threading.Lock()
    try:
        _wait_ready(port, proc)
        time.sleep(1.0)
        rss_before = _rss_mib(proc.pid)
        peak = [rss_before]
        todo = list(range(a.batches))
        flood_done = threading.Event()
        probe_log: list[tuple[float, int, int]] = []  # (time, events status, changes status)
        pressure_log: list[tuple[float, bool]] = []  # (time, sidecar_memory_pressure == 1)
        latencies: list[tuple[float, float]] = []  # (sent at, seconds until an event push was answered)

        def sender() -> None:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            while True:
                with lock:
                    if not todo:
                        return
                    i = todo.pop()
                body = _batch(random.Random(a.seed * 100_000 + i))  # ids of its own: nothing is a duplicate
                try:
                    status = _post(conn, "/v1/traces", body)
                except (OSError, http.client.HTTPException):
                    status = 0
                    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
                with lock:
                    answers[("traces", status)] += 1

        def prober() -> None:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            n = 0
            end_at: float | None = None
            while end_at is None or time.monotonic() < end_at:
                if end_at is None and flood_done.is_set():
                    end_at = time.monotonic() + a.after
                n += 1
                t_ev = time.monotonic()
                ev = _post(conn, "/v1/events", orjson.dumps({"model": "m", "timestamp": time.time(), "score": 0.5}))
                latencies.append((t_ev, time.monotonic() - t_ev))
                ch = _post(conn, "/v1/changes", orjson.dumps({"what": f"probe {n}", "model": "m"}))
                probe_log.append((time.monotonic(), ev, ch))
                pressure_log.append((time.monotonic(), "sidecar_memory_pressure 1.0" in _metrics(port)))
                with lock:
                    answers[("events", ev)] += 1
                    answers[("changes", ch)] += 1
                    peak[0] = max(peak[0], _rss_mib(proc.pid))
                time.sleep(a.probe_every)

        t0 = time.monotonic()
        threads = [threading.Thread(target=sender) for _ in range(a.senders)]
        probe = threading.Thread(target=prober)
        probe.start()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        flood_secs = time.monotonic() - t0
        flood_end = time.monotonic()
        rss_end_of_flood = _rss_mib(proc.pid)
        flood_done.set()
        probe.join()
        rss_after = _rss_mib(proc.pid)
        refused_after = [t for t, ev, ch in probe_log if t >= flood_end and (ev != 200 or ch not in (200, 201))]
        last_bad = max(refused_after, default=None)
        recovery = 0.0 if last_bad is None else last_bad - flood_end
        print(f"flood: {flood_secs:.1f} s")
        print(
            f"RSS MiB: before {rss_before:.0f}, peak {max(peak[0], rss_end_of_flood):.0f}, "
            f"end of flood {rss_end_of_flood:.0f}, {a.after:.0f} s after {rss_after:.0f} "
            f"(limit {a.memory_limit_mib})"
        )
        print("answers:", dict(sorted(answers.items())))
        bad_during = sum(1 for t, ev, ch in probe_log if t < flood_end and (ev != 200 or ch not in (200, 201)))
        during = sum(t < flood_end for t, *_ in probe_log)
        print(f"event/change probes refused during the flood: {bad_during} of {during}")
        print(f"time from the end of the flood until events and changes succeed again: {recovery:.1f} s")
        during_lat = sorted(d for t, d in latencies if t < flood_end)
        after_lat = sorted(d for t, d in latencies if t >= flood_end)
        if during_lat and after_lat:
            print(
                f"event push answered in (median / max): during the flood {statistics.median(during_lat) * 1000:.0f}"
                f" / {during_lat[-1] * 1000:.0f} ms, after it {statistics.median(after_lat) * 1000:.0f} / "
                f"{after_lat[-1] * 1000:.0f} ms"
            )
        # The limiter lets go (the span endpoint takes concurrent pushes again) at the first probe after the flood
        # that saw sidecar_memory_pressure 0 and none after it that saw 1.
        after = [(t, p) for t, p in pressure_log if t >= flood_end]
        if after and after[-1][1]:
            print(f"memory limiter still engaged {after[-1][0] - flood_end:.1f} s after the flood (last probe)")
        else:
            last_pressed = max((t for t, p in after if p), default=None)
            let_go = 0.0 if last_pressed is None else last_pressed - flood_end + a.probe_every
            print(
                f"time from the end of the flood until the memory limiter lets go: {let_go:.1f} s (probed every "
                f"{a.probe_every:g} s)"
            )
        for line in _metrics(port):
            print(" ", line)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    main()
