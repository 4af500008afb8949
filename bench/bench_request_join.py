"""Spans per second through the request join (``sidecar.processors.request_records``), before and after.

    .venv/bin/python bench/bench_request_join.py [--traces 40000] [--repeat 3]

Input: the recorded OTLP export of a real Triton (tests/data/traces/otlp-traces-triton.json: 120 requests,
each an ``InferRequest``, model and ``compute`` span) replicated with fresh trace ids to ``--traces``
requests, each with a caller's span of the same trace (``POST /predict``, HTTP 200), sent as OTLP JSON bodies
of 100 requests (400 spans) and decoded by the receiver's decoder into span records.

Rows (CPU time of one thread, median of ``--repeat``):

- records alone: decoding the bodies into records (what the receiver does before anyone subscribes);
- before: the join as it was (tests/helpers/request_records_before.py: a ``Span`` built and slimmed per span);
- ours: the join as it is.

Prints spans/s for each and ours/before.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import orjson
from prometheus_client import CollectorRegistry

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "helpers"))

from request_records_before import RequestRecordsBefore  # noqa: E402

from sidecar.clock import FakeClock  # noqa: E402
from sidecar.model import Batch  # noqa: E402
from sidecar.processors.request_records import RequestRecords  # noqa: E402
from sidecar.processors.request_records_config import RequestRecordsConfig  # noqa: E402
from sidecar.records import Record  # noqa: E402
from sidecar.sources.otlp.json_fast import decode_fast  # noqa: E402
from sidecar.sources.otlp.limits import DEFAULT_LIMITS  # noqa: E402

DATA = ROOT / "tests" / "data" / "traces"
PER_BODY = 100


def bodies(n_traces: int) -> list[bytes]:
    doc = orjson.loads((DATA / "otlp-traces-triton.json").read_bytes())
    rs = doc["resourceSpans"][0]
    spans = [s for ss in rs["scopeSpans"] for s in ss["spans"]]
    by_trace: dict[str, list[dict[str, Any]]] = {}
    for s in spans:
        by_trace.setdefault(s["traceId"], []).append(s)
    templates = list(by_trace.values())
    out = []
    for b in range(0, n_traces, PER_BODY):
        triton, callers = [], []
        for i in range(b, min(n_traces, b + PER_BODY)):
            tid = f"{i + 1:032x}"
            t = templates[i % len(templates)]
            triton += [dict(s, traceId=tid) for s in t]
            start = min(int(s["startTimeUnixNano"]) for s in t)
            end = max(int(s["endTimeUnixNano"]) for s in t)
            callers.append(
                {
                    "traceId": tid,
                    "spanId": "ab" * 8,
                    "name": "POST /predict",
                    "kind": 3,
                    "startTimeUnixNano": str(start - 100_000),
                    "endTimeUnixNano": str(end + 100_000),
                    "attributes": [{"key": "http.response.status_code", "value": {"intValue": "200"}}],
                }
            )
        body = {
            "resourceSpans": [
                {"resource": rs["resource"], "scopeSpans": [{"spans": triton}]},
                {
                    "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "ranker"}}]},
                    "scopeSpans": [{"spans": callers}],
                },
            ]
        }
        out.append(orjson.dumps(body))
    return out


def decode(bs: list[bytes]) -> list[list[Record]]:
    out = []
    for b in bs:
        got = decode_fast(b, DEFAULT_LIMITS)
        assert got is not None, "the bench's bodies must take the receiver's fast path"
        out.append(got.records)
    return out


def join(cls: Any, batches: list[Batch]) -> tuple[float, int]:
    kept: list[Any] = []
    rr = cls(
        RequestRecordsConfig(enabled=True, max_pending=1_000_000),
        sink=kept.extend,
        registry=CollectorRegistry(),
        clock=FakeClock(start=1_800_000_000.0),
    )
    t0 = time.process_time()
    for b in batches:
        rr.on_spans(b)
    t = time.process_time() - t0
    n = int(sum(s.value for m in rr.requests.collect() for s in m.samples if s.name == "sidecar_requests_total"))
    return t, n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--traces", type=int, default=40_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    bs = bodies(args.traces)
    times = []
    for _ in range(args.repeat):
        t0 = time.process_time()
        recs = decode(bs)
        times.append(time.process_time() - t0)
    n_spans = sum(len(r) for r in recs)
    batches = [Batch(kind="spans", source="otlp", items=tuple(r)) for r in recs]
    print(f"{args.traces} requests, {n_spans} spans in {len(bs)} OTLP JSON bodies, python {sys.version.split()[0]}")
    print(
        f"{'records alone (the receiver decoding the bodies)':52s} {n_spans / statistics.median(times):10,.0f} spans/s"
    )
    rate: dict[str, float] = {}
    for name, cls in (("before", RequestRecordsBefore), ("ours", RequestRecords)):
        ts, emitted = [], 0
        for _ in range(args.repeat):
            t, emitted = join(cls, batches)
            ts.append(t)
        rate[name] = n_spans / statistics.median(ts)
        print(f"{name + ': the request join':52s} {rate[name]:10,.0f} spans/s  ({emitted} records)")
    print(f"{'':52s} ours/before {rate['ours'] / rate['before']:5.2f}x")


if __name__ == "__main__":
    main()
