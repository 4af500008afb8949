"""Spans per second through the request join (``sidecar.processors.request_records``), before and after.

    .venv/bin/python bench/bench_request_join.py [--traces 40000] [--repeat 3] [--profile]

Input: the recorded OTLP export of a real Triton (tests/data/traces/otlp-traces-triton.json: 120 requests,
each an ``InferRequest``, model and ``compute`` span) replicated with fresh trace ids to ``--traces``
requests, each with a caller's span of the same trace (``POST /predict``, HTTP 200), sent as OTLP JSON bodies
of 100 requests (400 spans) and decoded by the receiver's decoder into span records.

Rows (CPU time of one thread, median of ``--repeat``; the default config but ``max_pending``, so nothing is
evicted):

- records alone: decoding the bodies into records (what the receiver does before anyone subscribes);
- floor: each record's trace id as hex, appended to its trace's list: the least any join by trace id does;
- before: the join as it was (tests/helpers/request_records_before.py: a ``Span`` built and slimmed per span),
  at the default ``sample_rate`` (0.01) and at 1 (a document for every request);
- ours, the same two;
- ours on Triton's spans alone (no caller's span: every request waits out the join window and leaves with the
  sweep that follows, timed with it), the default config's shape when callers send no spans;
- ours on a trace file's requests (the recorded ``mode=triton`` request, no request id, replicated; the spans as
  the trace-file source builds them): as a trace file's batches (they leave at once: nothing can join them), the
  same requests whole as the source publishes them (``span_requests``: finished from their event times, no spans
  built; spans/s counts the spans they stand for), and the span batches as another source's (they wait out the
  window and leave with the sweep).

Prints spans/s for each, ours/before and ours/floor. ``--profile`` prints a cProfile of ours (default sampling).
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
from trace_files_before import replicated, templates_of  # noqa: E402

from sidecar.clock import FakeClock  # noqa: E402
from sidecar.model import Batch, SpanRequests  # noqa: E402
from sidecar.processors.request_records import RequestRecords  # noqa: E402
from sidecar.processors.request_records_config import RequestRecordsConfig  # noqa: E402
from sidecar.records import TRACE, TRACE_FILE_SOURCE, Record  # noqa: E402
from sidecar.sources.otlp.json_fast import decode_fast  # noqa: E402
from sidecar.sources.otlp.limits import DEFAULT_LIMITS  # noqa: E402
from sidecar.sources.trace_files.requests import Assembler, Request  # noqa: E402
from sidecar.sources.trace_files.spans import ROOT_NAME, span_records, whole_of  # noqa: E402

DATA = ROOT / "tests" / "data" / "traces"
PER_BODY = 100


def bodies(n_traces: int, callers_too: bool = True) -> list[bytes]:
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
                    "scopeSpans": [{"spans": callers if callers_too else []}],
                },
            ]
        }
        out.append(orjson.dumps(body))
    return out


def trace_file_batches(n_traces: int) -> tuple[list[Batch], int, list[Batch]]:
    """``n_traces`` requests of the recorded ``mode=triton`` file (no request id) as their spans, 300 spans a
    batch: trace ids of the reader's own, so nothing can join them; and the same requests whole, 100 a batch, as
    the trace-file source publishes them (``span_requests``)."""
    data = replicated(templates_of((DATA / "trace-file-triton-mode.json").read_bytes()), n_traces)
    grouped: dict[int, Request] = {}
    Assembler(1 << 30, 256).add(orjson.loads(data), grouped)
    reqs, offset, path = list(grouped.values()), 1_796_000_000_000_000_000, "/t/trace.json"
    recs = span_records(reqs, offset, path)
    batches = [
        Batch(kind="spans", source=TRACE_FILE_SOURCE, items=tuple(recs[i : i + 300])) for i in range(0, len(recs), 300)
    ]
    whole = []
    for i in range(0, len(reqs), 100):
        part = reqs[i : i + 100]
        w, n = whole_of(part, offset, path)
        item = SpanRequests(tuple(part), tuple(w), offset, path, span_records, n, ROOT_NAME)
        whole.append(Batch(kind="span_requests", source=TRACE_FILE_SOURCE, items=(item,)))
    return batches, len(recs), whole


def decode(bs: list[bytes]) -> list[list[Record]]:
    out = []
    for b in bs:
        got = decode_fast(b, DEFAULT_LIMITS)
        assert got is not None, "the bench's bodies must take the receiver's fast path"
        out.append(got.records)
    return out


def join(cls: Any, batches: list[Batch], sample_rate: float = 0.01) -> tuple[float, int]:
    """CPU seconds to join the batches and sweep what is left after the window, and the records counted."""
    kept: list[Any] = []
    clock = FakeClock(start=1_800_000_000.0)
    cfg = RequestRecordsConfig(enabled=True, max_pending=1_000_000, sample_rate=sample_rate)
    rr = cls(cfg, sink=kept.extend, registry=CollectorRegistry(), clock=clock)
    t0 = time.process_time()
    for b in batches:
        if b.kind == "span_requests":
            rr.on_span_requests(b)
        else:
            rr.on_spans(b)
    clock.advance(cfg.join_window_secs + 1)
    rr.on_spans(Batch(kind="spans", source="otlp", items=()))  # the sweep: what waited out the window
    t = time.process_time() - t0
    n = int(sum(s.value for m in rr.requests.collect() for s in m.samples if s.name == "sidecar_requests_total"))
    return t, n


def floor(batches: list[Batch]) -> tuple[float, int]:
    """The least a join by trace id does: each record's trace id as hex, the record appended to its trace's list."""
    t0 = time.process_time()
    traces: dict[str, list[Record]] = {}
    for b in batches:
        for r in b.items:
            key = r[TRACE].hex()
            got = traces.get(key)
            if got is None:
                traces[key] = [r]
            else:
                got.append(r)
    return time.process_time() - t0, len(traces)


def _row(name: str, rate: float, note: str) -> None:
    print(f"{name:58s} {rate:10,.0f} {1e6 / rate:8.2f}  ({note})")


def _median_rate(n_spans: int, runs: list[tuple[float, int]]) -> tuple[float, int]:
    return n_spans / statistics.median(t for t, _ in runs), runs[-1][1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--traces", type=int, default=40_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--profile", action="store_true", help="print a cProfile of ours (default sampling)")
    args = ap.parse_args()
    bs = bodies(args.traces)
    times = []
    for _ in range(args.repeat):
        t0 = time.process_time()
        recs = decode(bs)
        times.append(time.process_time() - t0)
    n_spans = sum(len(r) for r in recs)
    batches = [Batch(kind="spans", source="otlp", items=tuple(r)) for r in recs]
    alone = [Batch(kind="spans", source="otlp", items=tuple(r)) for r in decode(bodies(args.traces, False))]
    n_alone = sum(len(b.items) for b in alone)
    files, n_files, whole = trace_file_batches(args.traces)
    print(f"{args.traces} requests, {n_spans} spans in {len(bs)} OTLP JSON bodies, python {sys.version.split()[0]}")
    print(f"{'CPU of one thread, median of ' + str(args.repeat):58s} {'spans/s':>10s} {'us/span':>8s}")
    rate: dict[str, float] = {"decode": n_spans / statistics.median(times)}
    rate["floor"], n = _median_rate(n_spans, [floor(batches) for _ in range(args.repeat)])
    _row("records alone (the receiver decoding the bodies)", rate["decode"], f"{n_spans} spans")
    _row("floor: trace id as hex, record appended to its trace", rate["floor"], f"{n} traces")
    rows = [
        ("before", RequestRecordsBefore, 0.01, batches, n_spans),
        ("ours", RequestRecords, 0.01, batches, n_spans),
        ("before, sample_rate 1", RequestRecordsBefore, 1.0, batches, n_spans),
        ("ours, sample_rate 1", RequestRecords, 1.0, batches, n_spans),
        ("ours, Triton's spans alone (out by the sweep)", RequestRecords, 0.01, alone, n_alone),
        ("ours, trace files, no request id (out at once)", RequestRecords, 0.01, files, n_files),
        ("ours, the same requests whole (span_requests)", RequestRecords, 0.01, whole, n_files),
        (
            "ours, the same as otlp's (out by the sweep)",
            RequestRecords,
            0.01,
            [Batch(kind="spans", source="otlp", items=b.items) for b in files],
            n_files,
        ),
    ]
    for name, cls, sample, bb, n_sp in rows:
        rate[name], emitted = _median_rate(n_sp, [join(cls, bb, sample) for _ in range(args.repeat)])
        _row(f"join {name}", rate[name], f"{emitted} records")
    print(
        f"ours/before {rate['ours'] / rate['before']:.2f}x at the default sample_rate (0.01), "
        f"{rate['ours, sample_rate 1'] / rate['before, sample_rate 1']:.2f}x at 1; the join's CPU per span is "
        f"{rate['decode'] / rate['ours']:.0%} of decoding's ({rate['decode'] / rate['ours, sample_rate 1']:.0%} at "
        f"sample_rate 1), {rate['floor'] / rate['ours']:.1f}x the floor's"
    )
    if args.profile:
        import cProfile
        import pstats

        prof = cProfile.Profile()
        prof.runcall(join, RequestRecords, batches)
        pstats.Stats(prof).sort_stats("tottime").print_stats(15)


if __name__ == "__main__":
    main()
