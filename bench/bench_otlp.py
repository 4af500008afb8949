"""How many spans per second POST /v1/traces accepts on one core, JSON and protobuf, beside decoding alone.

The sidecar runs in its own process (uvicorn, one worker) pinned to CPU 0; load comes from separate generator
processes pinned to the other CPU, over loopback keep-alive connections, with bodies of 100 Triton-shaped
spans (each request gets trace ids of its own: the generator rewrites a marker in the first four bytes of every trace
id, so the store's duplicate-span check never makes a re-sent body cheaper). After each run, sent (requests
answered 200 x 100) must equal the sidecar's ``sidecar_otlp_spans_received_total`` AND
``sidecar_traces_spans_ingested_total`` (ingest is done before the 200 is sent), no span may have been dropped as
a duplicate, and the stage histogram must hold one ``request`` observation per model span sent. The baseline is
decoding alone in this process: ``orjson.loads`` for JSON and ``ExportTraceServiceRequest.ParseFromString``
for protobuf, on the same bodies.

    .venv/bin/python bench/bench_otlp.py [--quick]
"""

from __future__ import annotations

import argparse
import http.client
import multiprocessing as mp
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import orjson
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
MARKER = b"\xfe\xed\xf0\x0d"  # first four bytes of every trace id, rewritten per request
MODEL_SPANS_PER_BODY = 33
JSON_MARK = b'"traceId":"' + MARKER.hex().encode()
PB_MARK = b"\x0a\x10" + MARKER  # trace_id: field 1, 16 bytes


def _bodies(n: int, seed: int) -> tuple[list[bytes], list[bytes]]:
    """n JSON and n protobuf bodies of 100 spans each, shaped like Triton's (3 spans per request, events)."""
    import random

    rnd = random.Random(seed)
    json_bodies, pb_bodies = [], []
    for _ in range(n):
        spans = []
        t = 1_800_000_000_000_000_000 + rnd.randrange(10**12)
        for _ in range(33):
            tid = MARKER.hex() + rnd.randbytes(12).hex()
            r, m, c = (rnd.randbytes(8).hex() for _ in range(3))

            def ev(*names: str, base: int = t) -> list[dict[str, str]]:
                return [{"name": nm, "timeUnixNano": str(base + i * 1000)} for i, nm in enumerate(names)]

            spans.append(
                {
                    "traceId": tid,
                    "spanId": r,
                    "name": "InferRequest",
                    "kind": 2,
                    "startTimeUnixNano": str(t),
                    "endTimeUnixNano": str(t + 9000),
                    "events": ev(
                        "HTTP_RECV_START",
                        "HTTP_RECV_END",
                        "INFER_RESPONSE_COMPLETE",
                        "HTTP_SEND_START",
                        "HTTP_SEND_END",
                    ),
                }
            )
            spans.append(
                {
                    "traceId": tid,
                    "spanId": m,
                    "parentSpanId": r,
                    "name": "ctr",
                    "kind": 2,
                    "startTimeUnixNano": str(t + 1000),
                    "endTimeUnixNano": str(t + 8000),
                    "attributes": [
                        {"key": "triton.model_name", "value": {"stringValue": "ctr"}},
                        {"key": "triton.model_version", "value": {"intValue": "1"}},
                    ],
                    "events": ev("REQUEST_START", "QUEUE_START", "REQUEST_END", base=t + 1000),
                }
            )
            spans.append(
                {
                    "traceId": tid,
                    "spanId": c,
                    "parentSpanId": m,
                    "name": "compute",
                    "kind": 2,
                    "startTimeUnixNano": str(t + 2000),
                    "endTimeUnixNano": str(t + 6000),
                    "events": ev(
                        "COMPUTE_START",
                        "COMPUTE_INPUT_END",
                        "COMPUTE_OUTPUT_START",
                        "COMPUTE_END",
                        base=t + 2000,
                    ),
                }
            )
            t += 10_000
        spans.append(
            {
                "traceId": MARKER.hex() + rnd.randbytes(12).hex(),
                "spanId": rnd.randbytes(8).hex(),
                "name": "caller",
                "kind": 3,
                "startTimeUnixNano": str(t),
                "endTimeUnixNano": str(t + 5000),
                "status": {"code": 2, "message": "x"},
            }
        )
        doc = {
            "resourceSpans": [
                {
                    "resource": {
                        "attributes": [{"key": "service.name", "value": {"stringValue": "triton-inference-server"}}]
                    },
                    "scopeSpans": [{"scope": {"name": "triton-server"}, "spans": spans}],
                }
            ]
        }
        json_bodies.append(orjson.dumps(doc))
        pb_bodies.append(_to_pb(doc))
    return json_bodies, pb_bodies


def _to_pb(doc: dict) -> bytes:
    from opentelemetry.proto.common.v1.common_pb2 import KeyValue
    from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, Span, Status

    req = ExportTraceServiceRequest()
    for rs in doc["resourceSpans"]:
        out = req.resource_spans.add()
        out.resource.attributes.append(KeyValue(key="service.name"))
        out.resource.attributes[0].value.string_value = "triton-inference-server"
        ss = out.scope_spans.add()
        for s in rs["scopeSpans"][0]["spans"]:
            p = ss.spans.add()
            p.trace_id = bytes.fromhex(s["traceId"])
            p.span_id = bytes.fromhex(s["spanId"])
            if "parentSpanId" in s:
                p.parent_span_id = bytes.fromhex(s["parentSpanId"])
            p.name = s["name"]
            p.kind = Span.SpanKind.Value("SPAN_KIND_SERVER") if s["kind"] == 2 else 3
            p.start_time_unix_nano = int(s["startTimeUnixNano"])
            p.end_time_unix_nano = int(s["endTimeUnixNano"])
            for a in s.get("attributes", []):
                kv = p.attributes.add()
                kv.key = a["key"]
                v = a["value"]
                if "stringValue" in v:
                    kv.value.string_value = v["stringValue"]
                else:
                    kv.value.int_value = int(v["intValue"])
            for e in s.get("events", []):
                pe = p.events.add()
                pe.name = e["name"]
                pe.time_unix_nano = int(e["timeUnixNano"])
            if "status" in s:
                p.status.CopyFrom(Status(code=2, message="x"))
    _ = ResourceSpans
    return req.SerializeToString()


def _serve(port: int) -> None:
    """The sidecar's server as ``sidecar run`` builds it (protocol, limits, event loop), with the traces area
    only."""
    os.sched_setaffinity(0, {0})
    from prometheus_client import CollectorRegistry

    from sidecar.app import create_app
    from sidecar.config import parse_config
    from sidecar.httpserver import uvicorn_server
    from sidecar.instance import bind_listener
    from sidecar.runtime import run, tune_gc
    from sidecar.service import Service
    from sidecar.wiring.traces import build

    cfg = parse_config(
        {
            "store": {"path": ":memory:"},
            "server": {"port": port, "max_inflight_requests": 1024, "max_body_bytes": 8 * 1024 * 1024},
            "traces": {
                "enabled": True,
            },
            # SIDECAR_BENCH_GC_THRESHOLD=A,B,C sets runtime.gc_threshold (tune_gc, as `sidecar run` applies it).
            "runtime": {"gc_threshold": [int(x) for x in os.environ["SIDECAR_BENCH_GC_THRESHOLD"].split(",")]}
            if os.environ.get("SIDECAR_BENCH_GC_THRESHOLD")
            else {},
        }
    )
    svc = Service(cfg, registry=CollectorRegistry(), factories=[build])
    sock = bind_listener("127.0.0.1", port)
    server = uvicorn_server(create_app(svc), cfg.server, registry=svc.registry)
    if os.environ.get("SIDECAR_BENCH_DEFAULT_GC") != "1":
        tune_gc(cfg.runtime)  # as `sidecar run` does
    if os.environ.get("SIDECAR_BENCH_LOOP") == "asyncio":
        import asyncio

        asyncio.run(server.serve(sockets=[sock]))
    else:
        run(server.serve(sockets=[sock]))


def _generate(port: int, bodies: list[bytes], ctype: str, secs: float, q: mp.Queue, gen: int) -> None:
    os.sched_setaffinity(0, {1})
    conn = http.client.HTTPConnection("127.0.0.1", port)
    conn.connect()
    # Nagle off, as libcurl (Triton's OTLP exporter) has it: http.client sends a large body apart from its
    # headers, and the load should look like the exporter's.
    conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    ok = bad = 0
    end = time.perf_counter() + secs
    i = 0
    js = ctype == "application/json"
    while time.perf_counter() < end:
        # Trace ids unique to this request: generator number and request counter in the marker's place.
        prefix = bytes([gen]) + i.to_bytes(3, "big")
        if js:
            body = bodies[i % len(bodies)].replace(JSON_MARK, b'"traceId":"' + prefix.hex().encode())
        else:
            body = bodies[i % len(bodies)].replace(PB_MARK, b"\x0a\x10" + prefix)
        conn.request("POST", "/v1/traces", body=body, headers={"Content-Type": ctype})
        r = conn.getresponse()
        r.read()
        if r.status == 200:
            ok += 1
        else:
            bad += 1
        i += 1
    conn.close()
    q.put((ok, bad))


def _metrics(port: int) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", port)
    conn.request("GET", "/metrics")
    return conn.getresponse().read().decode()


def _metric(text: str, name: str, *labels: str) -> float:
    """The sum of the samples of ``name`` whose label set contains every one of ``labels``."""
    total = 0.0
    for m in re.finditer(rf"^{name}(?:\{{([^}}]*)\}})? (\S+)$", text, re.MULTILINE):
        if all(lb in (m.group(1) or "") for lb in labels):
            total += float(m.group(2))
    return total


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _cpu_secs(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _decode_rate(bodies: list[bytes], kind: str, secs: float) -> float:
    n = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < secs:
        for b in bodies:
            if kind == "json":
                doc = orjson.loads(b)
                n += sum(len(ss["spans"]) for rs in doc["resourceSpans"] for ss in rs["scopeSpans"])
            else:
                req = ExportTraceServiceRequest()
                req.ParseFromString(b)
                n += sum(len(ss.spans) for rs in req.resource_spans for ss in rs.scope_spans)
    return n / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="5 s per encoding instead of 15")
    ap.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--generators", type=int, default=3, help="load generator processes (on CPU 1)")
    args = ap.parse_args()
    if args.serve:
        _serve(args.serve)
        return
    secs = 5.0 if args.quick else 15.0
    json_bodies, pb_bodies = _bodies(300, seed=7)
    per_body = 100
    assert len(orjson.loads(json_bodies[0])["resourceSpans"][0]["scopeSpans"][0]["spans"]) == per_body
    # Every span's trace id carries the marker once, and nothing else looks like it.
    assert all(b.count(JSON_MARK) == per_body for b in json_bodies)
    assert all(b.count(PB_MARK) == per_body for b in pb_bodies)
    from sidecar.demo.tritonserver import free_port

    port = free_port()
    server = subprocess.Popen([sys.executable, __file__, "--serve", str(port)], cwd=ROOT)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                http.client.HTTPConnection("127.0.0.1", port, timeout=1).request("GET", "/healthz")
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        print(
            f"sidecar pid {server.pid} pinned to CPU 0; {args.generators} generator processes on CPU 1; "
            f"{secs:g} s per encoding; bodies of {per_body} spans"
        )
        results = {}
        for kind, bodies, ctype in (
            ("json", json_bodies, "application/json"),
            ("protobuf", pb_bodies, "application/x-protobuf"),
        ):
            q: mp.Queue = mp.Queue()
            m0 = _metrics(port)
            cpu0 = _cpu_secs(server.pid)
            t0 = time.perf_counter()
            gen_base = 0 if kind == "json" else 128  # the two runs never share a trace id either
            procs = [
                mp.Process(target=_generate, args=(port, bodies[i :: args.generators], ctype, secs, q, gen_base + i))
                for i in range(args.generators)
            ]
            for p in procs:
                p.start()
            got = [q.get() for _ in procs]
            for p in procs:
                p.join()
            wall = time.perf_counter() - t0
            cpu = _cpu_secs(server.pid) - cpu0
            ok = sum(g[0] for g in got)
            bad = sum(g[1] for g in got)
            m1 = _metrics(port)

            def delta(name: str, *labels: str) -> float:
                return _metric(m1, name, *labels) - _metric(m0, name, *labels)  # noqa: B023

            received = delta("sidecar_otlp_spans_received_total", f'encoding="{kind}"')
            ingested = delta("sidecar_traces_spans_ingested_total", 'source="otlp"')
            dups = delta("sidecar_traces_spans_dropped_total", 'reason="duplicate"')
            stage_obs = delta("sidecar_triton_stage_duration_seconds_count", 'stage="request"')
            sent = ok * per_body
            honest = received == sent and ingested == sent and dups == 0 and stage_obs == ok * MODEL_SPANS_PER_BODY
            rate = sent / wall
            dec = _decode_rate(bodies[:100], kind, 2.0)
            results[kind] = rate
            print(
                f"{kind:8s}: sent {sent} spans ({ok} requests, {bad} non-200), received {received:.0f}, "
                f"ingested {ingested:.0f}, duplicates {dups:.0f}, request-stage observations {stage_obs:.0f} "
                f"(expected {ok * MODEL_SPANS_PER_BODY}) -> {'OK' if honest else 'MISMATCH'}"
            )
            print(
                f"{kind:8s}: receiver {rate:,.0f} spans/s using {cpu / wall:.0%} of one core; decoding alone "
                f"{dec:,.0f} spans/s; receiver/decode ratio {rate / dec:.2f}"
            )
            per10k = 10_000 / (rate / max(cpu / wall, 1e-9))
            print(f"{kind:8s}: CPU for 10k spans/s = {per10k:.0%} of a core (OpenTelemetry Collector load test: 20%)")
        print(f"sidecar RSS after the run: {_rss_mib(server.pid):.0f} MiB")
        print(
            f"targets (issue 11): json >= 60,000 spans/s ({results['json'] / 60_000:.2f}x), "
            f"protobuf >= 60,000 spans/s ({results['protobuf'] / 60_000:.2f}x), at most 15% of a core per 10k"
        )
    finally:
        server.terminate()
        server.wait(10)


if __name__ == "__main__":
    main()
