"""The request join against a frozen copy of it as it was before it stopped building a ``Span`` per span
(tests/helpers/request_records_before.py): the same records (every field), in the same order, and the same
counts, on the recorded OTLP exports of a real Triton (JSON) and of a Python SDK (protobuf), on trace-file
span records, with callers' spans and events joined by trace id and by request id, failures, evictions,
the join window and flushes."""

from __future__ import annotations

import random
from typing import Any

import orjson
import pytest
from prometheus_client import CollectorRegistry
from request_records_before import RequestRecordsBefore
from trace_files_before import replicated, templates_of
from traces_helpers import DATA

from sidecar.clock import FakeClock
from sidecar.model import Batch, Event, Span, SpanEvent
from sidecar.processors.request_records import RequestRecords
from sidecar.processors.request_records_config import RequestRecordsConfig
from sidecar.records import Record, from_span
from sidecar.sources.otlp.json_decode import decode_json
from sidecar.sources.otlp.json_fast import decode_fast
from sidecar.sources.otlp.limits import DEFAULT_LIMITS
from sidecar.sources.otlp.pb_decode import decode_protobuf
from sidecar.sources.trace_files.requests import Assembler, Request
from sidecar.sources.trace_files.spans import span_records

Op = tuple[str, Any]


def _caller_json(tid: str, i: int) -> dict[str, Any]:
    attrs: list[dict[str, Any]] = []
    if i % 5 != 4:
        code = (200, 200, 404, 503)[i % 4]
        attrs.append({"key": "http.response.status_code", "value": {"intValue": str(code)}})
    if i % 3 == 0:
        attrs.append({"key": "sidecar.routing_rule", "value": {"stringValue": "r" * 300}})
        attrs.append({"key": "canary.bucket", "value": {"intValue": "7"}})
        attrs.append({"key": "unrelated", "value": {"stringValue": "x" * 500}})
    span: dict[str, Any] = {
        "traceId": tid,
        "spanId": f"{i + 1:016x}",
        "name": "POST /predict",
        "kind": 3,
        "startTimeUnixNano": str(1_796_218_366_000_000_000 + i),
        "endTimeUnixNano": str(1_796_218_366_005_000_000 + i * 1000),
        "attributes": attrs,
    }
    if i % 7 == 0:
        span["status"] = {"code": 2, "message": "boom " * 300}
    if i % 11 == 0:
        span["events"] = [{"name": "exception", "timeUnixNano": "1", "attributes": [{"key": "a", "value": {}}]}]
    return span


def _decode(body: dict[str, Any]) -> list[Record]:
    """Records as the OTLP receiver makes them: its fast path, else the full walk."""
    raw = orjson.dumps(body)
    got = decode_fast(raw, DEFAULT_LIMITS) or decode_json(raw)
    assert got.records
    return list(got.records)


def _otlp_json_ops() -> list[Op]:
    doc = orjson.loads((DATA / "otlp-traces-triton.json").read_bytes())
    rs = doc["resourceSpans"][0]
    spans = [s for ss in rs["scopeSpans"] for s in ss["spans"]]
    traces = list(dict.fromkeys(s["traceId"] for s in spans))
    for n, s in enumerate(spans):  # some of Triton's own spans failed
        if n % 13 == 0:
            s["status"] = {"code": 2, "message": "model failed"}
    ops: list[Op] = []
    half = len(spans) // 2
    for part in (spans[:half], spans[half:]):
        body = {"resourceSpans": [{"resource": rs["resource"], "scopeSpans": [{"spans": part}]}]}
        ops.append(("spans", _decode(body)))
        callers = [_caller_json(t, i) for i, t in enumerate(traces) if i % 6 != 5]
        body = {"resourceSpans": [{"resource": {}, "scopeSpans": [{"spans": callers[: len(callers) // 2]}]}]}
        ops.append(("spans", _decode(body)))
        ops.append(("advance", 3.0))
    events = [
        Event("ctr", "1", 1.0, trace_id=t, user_id="u1", fields={"grpc_code": 0}, features={"a": 1.0})
        for i, t in enumerate(traces)
        if i % 6 == 5
    ]
    ops += [("events", events), ("advance", 100.0), ("sweep", None)]
    return ops


def _pb_ops() -> list[Op]:
    got = decode_protobuf((DATA / "otlp-traces-python.pb").read_bytes())
    return [("spans", got.records), ("flush", None)]


def _trace_file_ops() -> list[Op]:
    data = replicated(
        templates_of(
            (DATA / "trace-file-triton-mode.json").read_bytes(), (DATA / "trace-file-tensors.json").read_bytes()
        ),
        120,
    )
    grouped: dict[int, Request] = {}
    Assembler(1 << 20, 256).add(orjson.loads(data), grouped)
    recs = span_records(list(grouped.values()), 1_796_000_000_000_000_000, "/t/trace.json")
    events = [
        Event("ctr", "2", 2.0, request_id=f"req-{i}", fields={"http_status": 500 if i % 4 else 200})
        for i in range(1, 121, 2)
    ]
    # Events first for half of them (joined later by request id), spans, then the rest of the events.
    return [("events", events[:30]), ("spans", recs), ("events", events[30:]), ("flush", None)]


def _span_ops() -> list[Op]:
    """Spans built elsewhere (``from_span``), with event attributes and a repeated event name."""
    spans = []
    for i in range(40):
        tid = f"{i + 1:032x}"
        ev = (
            SpanEvent("REQUEST_START", 10),
            SpanEvent("REQUEST_END", 90 + i, {"k": "v"}),
            SpanEvent("REQUEST_END", 95 + i),
        )
        attrs: dict[str, object] = {"triton.model_name": "m", "triton.model_version": 3, "request.id": f"q{i}"}
        spans.append(
            Span(tid, "1" * 16, None, "m", 10, 95 + i, "triton", attrs, ev, 2 if i % 9 == 0 else 0, "bad" * 400)
        )
        spans.append(Span(tid, "2" * 16, "1" * 16, "compute", 20, 80, "triton", {}, (SpanEvent("COMPUTE_START", 20),)))
        spans.append(Span(tid, "3" * 16, None, "GET /", 0, 100, "app", {"rpc.grpc.status_code": i % 3}))
    return [("spans", [from_span(s) for s in spans]), ("flush", None)]


def _interleaved_ops() -> list[Op]:
    """Triton's spans, callers' spans and events by trace id and by request id, shuffled (seeded) into batches
    of random sizes with the clock moving between them: a request's sides arrive in any order, in any batch,
    some after its window, some never."""
    rng = random.Random(31)
    doc = orjson.loads((DATA / "otlp-traces-triton.json").read_bytes())
    rs = doc["resourceSpans"][0]
    spans = [s for ss in rs["scopeSpans"] for s in ss["spans"]]
    for n, s in enumerate(spans):
        if n % 17 == 0:
            s["status"] = {"code": 2, "message": "x" * 1500 if n % 2 else ""}
        for a in s.get("attributes", ()):
            if a["key"] == "triton.request_id" and n % 5 == 0:  # an id a caller's event can name
                a["value"] = {"stringValue": f"q-{n}"}
    traces = list(dict.fromkeys(s["traceId"] for s in spans))
    items: list[tuple[str, Any]] = [("span", s) for s in spans if rng.random() < 0.95]
    items += [("span", _caller_json(t, i)) for i, t in enumerate(traces) if i % 4 != 3]
    items += [
        ("event", Event("ctr", "1", 5.0, trace_id=t, user_id=f"u{i}", fields={"http_status": 200 + i % 3 * 150}))
        for i, t in enumerate(traces)
        if i % 4 == 3
    ]
    items += [
        ("event", Event("ctr", "1", 6.0, request_id=f"q-{n}", fields={"grpc_code": n % 3})) for n in range(0, 360, 10)
    ]
    rng.shuffle(items)
    ops: list[Op] = []
    while items:
        k = rng.randint(1, 40)
        part, items = items[:k], items[k:]
        got = [s for what, s in part if what == "span"]
        if got:
            body = {"resourceSpans": [{"resource": rs["resource"], "scopeSpans": [{"spans": got}]}]}
            ops.append(("spans", _decode(body)))
        evs = [e for what, e in part if what == "event"]
        if evs:
            ops.append(("events", evs))
        ops.append(("advance", rng.choice((0.0, 0.0, 0.5, 2.0, 6.0))))
        if rng.random() < 0.1:
            ops.append(("sweep", None))
    return [*ops, ("flush", None)]


SCENARIOS = {
    "otlp_json": _otlp_json_ops,
    "otlp_protobuf": _pb_ops,
    "trace_files": _trace_file_ops,
    "spans": _span_ops,
    "interleaved": _interleaved_ops,
}


def _run(cls: Any, ops: list[Op], max_pending: int, sample_rate: float = 1.0) -> tuple[list[Any], dict[Any, float]]:
    reg = CollectorRegistry()
    clock = FakeClock(start=1_800_000_000.0)
    got: list[Any] = []
    cfg = RequestRecordsConfig(
        enabled=True,
        sample_rate=sample_rate,
        max_pending=max_pending,
        join_window_secs=5.0,
        user_ids="hash",
        user_id_key_env="DIFF_USER_KEY",
    )
    rr = cls(cfg, sink=got.extend, registry=reg, clock=clock)
    for what, arg in ops:
        if what == "spans":
            recs: list[Record] = list(arg)
            for i in range(0, len(recs), 50):
                rr.on_spans(Batch(kind="spans", source="otlp", items=tuple(recs[i : i + 50])))
        elif what == "events":
            rr.on_events(Batch(kind="events", source="api", items=tuple(arg)))
        elif what == "advance":
            clock.advance(arg)
        elif what == "sweep":
            rr._sweep(got_out := [])  # the periodic tick's work, synchronously
            rr._emit(got_out)
        else:
            rr.flush()
    counts = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in reg.collect()
        for s in fam.samples
        if not s.name.endswith("_created")
    }
    return got, counts


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
@pytest.mark.parametrize("max_pending", [50_000, 7])
def test_same_records_as_before(scenario, max_pending, monkeypatch):
    monkeypatch.setenv("DIFF_USER_KEY", "k3y")
    ops = SCENARIOS[scenario]()
    old, old_counts = _run(RequestRecordsBefore, ops, max_pending)
    new, new_counts = _run(RequestRecords, ops, max_pending)
    assert len(old) >= 20, "the scenario must emit records"
    assert new == old
    assert [list(r[3]) for r in new] == [list(r[3]) for r in old], "the same fields in the same order (JSON)"
    assert new_counts == old_counts
    if scenario != "otlp_protobuf" and max_pending > 100:  # at 7 most are evicted before their other side
        assert any(r[3].get("joined") for r in old), "some records must be joins"
    if max_pending == 7:
        assert old_counts[("sidecar_request_records_evicted_total", ())] > 0
    if scenario == "interleaved" and max_pending > 100:
        docs = [r[3] for r in old]
        assert any("user" in d for d in docs) and any(d.get("reason") for d in docs)
        assert {d["outcome"] for d in docs} == {"ok", "error", "client_error"}
        by_request_id = [d for d in docs if d["joined"] and str(d.get("request_id")).startswith("q-")]
        assert by_request_id and all(d["trace_id"] for d in by_request_id)  # an event joined Triton's by request id


@pytest.mark.parametrize("scenario", ["interleaved", "otlp_json", "trace_files"])
def test_same_records_kept_and_counted_when_only_some_are_kept(scenario, monkeypatch):
    """At a sample rate below 1 only the failed, the slow and the hash-sampled ones get a document."""
    monkeypatch.setenv("DIFF_USER_KEY", "k3y")
    ops = SCENARIOS[scenario]()
    old, old_counts = _run(RequestRecordsBefore, ops, 50_000, sample_rate=0.3)
    new, new_counts = _run(RequestRecords, ops, 50_000, sample_rate=0.3)
    assert new == old and new_counts == old_counts
    sampled = old_counts[("sidecar_request_records_kept_total", (("why", "sampled"),))]
    total = sum(v for (name, _), v in old_counts.items() if name == "sidecar_requests_total")
    assert 0 < sampled < total and len(old) < total
