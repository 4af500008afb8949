"""A pending request join holds only what its record needs: a caller's span with megabytes of attributes, or an
event with hundreds of features, waits as a few hundred bytes (``max_pending`` of them wait at once), and the
record is the same as from the whole span or event."""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from prometheus_client import CollectorRegistry

from sidecar.clock import FakeClock
from sidecar.model import Batch, Event, Span, SpanEvent
from sidecar.processors.request_records import RequestRecords
from sidecar.processors.request_records_config import RequestRecordsConfig
from sidecar.records import from_span
from sidecar.sources.otlp.json_fast import decode_fast
from sidecar.sources.otlp.limits import DEFAULT_LIMITS

Rec = tuple[str, str, float, dict[str, Any]]
DATA = Path(__file__).resolve().parents[1] / "data" / "traces"
T0 = 1_700_000_000 * 10**9


def _caller(i: int, payload_chars: int) -> Span:
    return Span(
        trace_id=f"{i:032x}",
        span_id="ab" * 8,
        parent_span_id=None,
        name="POST /predict",
        start_unix_nano=T0,
        end_unix_nano=T0 + 5_000_000,
        service_name="ranker",
        attributes={
            "http.response.status_code": 503,
            "sidecar.routing_rule": "canary",
            "request.id": f"req-{i}-" + "r" * 250,
            **{f"payload.{j}": f"{i}" + "x" * payload_chars for j in range(8)},
        },
        events=(SpanEvent("exception", T0 + 1, {"exception.stacktrace": "s" * payload_chars}),),
        status_code=2,
        status_message="m" * payload_chars,
    )


def _held(rr: RequestRecords, make: Callable[[], list[Batch]]) -> int:
    """Bytes still allocated once the batches ``make`` builds were taken and dropped: what the joins keep."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        batches = make()
        for b in batches:
            (rr.on_spans if b.kind == "spans" else rr.on_events)(b)
        del batches
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


def _rr(got: list[Rec]) -> RequestRecords:
    cfg = RequestRecordsConfig(enabled=True, sample_rate=1.0)
    return RequestRecords(cfg, sink=got.extend, registry=CollectorRegistry(), clock=FakeClock())


def test_a_caller_span_with_large_attributes_waits_slim_and_its_record_is_unchanged() -> None:
    got: list[Rec] = []
    rr = _rr(got)
    held = _held(
        rr, lambda: [Batch(kind="spans", source="otlp", items=(from_span(_caller(i, 4000)),)) for i in range(200)]
    )
    assert len(rr._pending) == 200
    assert held / 200 < 4_000, held / 200  # each whole span held ~43 KB
    rr.flush()
    doc = {r[3]["trace_id"]: r[3] for r in got}[f"{7:032x}"]
    assert doc["code"] == "http_503" and doc["outcome"] == "error" and doc["rule"] == "canary"
    # A request id is a join key: kept whole while pending (a record shows 200 characters of it, as before).
    assert doc["request_id"] == ("req-7-" + "r" * 250)[:200]


def _events() -> list[Batch]:
    return [
        Batch(
            kind="events",
            source="http",
            items=(
                Event(
                    model="ctr",
                    version="2",
                    timestamp=1_700_000_000.0 + i,
                    features={f"f{j}": "c" * 200 for j in range(200)},
                    request_id=f"r{i}",
                    fields={"http_status": 404.0, **{f"x{j}": float(j) for j in range(50)}},
                ),
            ),
        )
        for i in range(100)
    ]


def test_an_event_waits_without_its_features_and_keeps_what_the_record_reads() -> None:
    got: list[Rec] = []
    rr = _rr(got)
    held = _held(rr, _events)
    assert len(rr._pending) == 100
    assert held / 100 < 3_000, held / 100  # each whole event held ~23 KB
    rr.flush()
    doc = next(r[3] for r in got if r[3].get("request_id") == "r3")
    assert doc["model"] == "ctr" and doc["version"] == "2" and doc["code"] == "http_404"
    assert doc["outcome"] == "client_error"


def _triton_only(n: int) -> list[Batch]:
    """Triton's spans of ``n`` requests (the recorded OTLP export, fresh trace ids), decoded as the receiver does."""
    doc = orjson.loads((DATA / "otlp-traces-triton.json").read_bytes())
    rs = doc["resourceSpans"][0]
    spans = [s for ss in rs["scopeSpans"] for s in ss["spans"]]
    first = spans[0]["traceId"]
    one = [s for s in spans if s["traceId"] == first]  # one request: InferRequest, model and compute spans
    out = []
    for b in range(0, n, 100):
        body = [dict(s, traceId=f"{i + 1:032x}") for i in range(b, min(n, b + 100)) for s in one]
        raw = orjson.dumps({"resourceSpans": [{"resource": rs["resource"], "scopeSpans": [{"spans": body}]}]})
        got = decode_fast(raw, DEFAULT_LIMITS)
        assert got is not None
        out.append(Batch(kind="spans", source="otlp", items=tuple(got.records)))
    return out


def test_a_request_with_triton_spans_alone_waits_in_about_two_kilobytes() -> None:
    """With no caller's side a request waits out the whole window: up to max_pending of them at once (50,000
    by default). Its event times are kept as values under event-name tuples shared between requests, not as the
    spans' own dicts and name strings (~3.1 KB a request before)."""
    got: list[Rec] = []
    rr = _rr(got)
    held = _held(rr, lambda: _triton_only(2000))
    assert len(rr._pending) == 2000
    assert held / 2000 < 2_400, held / 2000
    rr.flush()
    docs = [r[3] for r in got]
    assert len(docs) == 2000 and all(d["model"] == docs[0]["model"] and not d["joined"] for d in docs)
    assert {"request", "queue", "compute_infer", "network_receive"} <= set(docs[0]["stages_ms"])
