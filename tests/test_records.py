"""Span records: lazy Span building matches the wire, stages are order-independent, re-sent spans are dropped."""

from __future__ import annotations

import random

import orjson
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from prometheus_client import CollectorRegistry
from traces_helpers import DATA, sample

from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.sources.otlp.decode import decode_json, decode_protobuf
from sidecar.state.trace_hub import TraceHub


def _hub(reg: CollectorRegistry) -> TraceHub:
    return TraceHub(parse_config({"traces": {"enabled": True}}).traces, registry=reg, clock=FakeClock())


def _stage_counts(reg: CollectorRegistry) -> dict[tuple[str, str, str], float]:
    return {
        (s.labels["model"], s.labels["version"], s.labels["stage"]): s.value
        for m in reg.collect()
        if m.name == "sidecar_triton_stage_duration_seconds"
        for s in m.samples
        if s.name.endswith("_count")
    }


def test_stages_do_not_depend_on_span_order_or_batching():
    records = decode_json((DATA / "otlp-traces-triton.json").read_bytes()).records
    reg_a = CollectorRegistry()
    _hub(reg_a).ingest_records(records, "otlp")
    want = _stage_counts(reg_a)
    # 120 requests x 7 stages, each observed once.
    assert sum(want.values()) == 120 * 7
    shuffled = list(records)
    random.Random(11).shuffle(shuffled)
    reg_b = CollectorRegistry()
    hub = _hub(reg_b)
    for i in range(0, len(shuffled), 7):
        hub.ingest_records(shuffled[i : i + 7], "otlp")
    assert _stage_counts(reg_b) == want


def test_a_resent_span_is_stored_once_and_counted_as_duplicate():
    reg = CollectorRegistry()
    hub = _hub(reg)
    records = decode_json((DATA / "otlp-traces-triton.json").read_bytes()).records
    hub.ingest_records(records, "otlp")
    hub.ingest_records(records[:10], "otlp")
    assert sample(reg, "sidecar_traces_spans_dropped_total", {"reason": "duplicate"}) == 10
    assert sum(t.span_count for t in hub.store.summaries(limit=1000)) == 360


def test_protobuf_records_become_the_spans_on_the_wire():
    body = (DATA / "otlp-traces-python.pb").read_bytes()
    req = ExportTraceServiceRequest.FromString(body)
    wire = [s for rs in req.resource_spans for ss in rs.scope_spans for s in ss.spans]
    spans = decode_protobuf(body).spans
    assert len(spans) == len(wire) == 240
    for w, s in zip(wire, spans, strict=True):
        assert (s.trace_id, s.span_id) == (w.trace_id.hex(), w.span_id.hex())
        assert s.parent_span_id == (w.parent_span_id.hex() if w.parent_span_id else None)
        assert (s.name, s.start_unix_nano, s.end_unix_nano, s.kind) == (
            w.name,
            w.start_time_unix_nano,
            w.end_time_unix_nano,
            w.kind,
        )
        assert (s.status_code, s.status_message) == (w.status.code, w.status.message)
        assert [(e.name, e.time_unix_nano) for e in s.events] == [(e.name, e.time_unix_nano) for e in w.events]
        assert set(s.attributes) == {kv.key for kv in w.attributes}


def test_json_records_become_the_spans_in_the_document():
    body = (DATA / "otlp-traces-triton.json").read_bytes()
    doc = orjson.loads(body)["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans = decode_json(body).spans
    for d, s in zip(doc, spans, strict=True):
        assert s.trace_id == d["traceId"].lower() and s.span_id == d["spanId"].lower()
        assert [(e.name, e.time_unix_nano) for e in s.events] == [
            (e["name"], int(e["timeUnixNano"])) for e in d.get("events", [])
        ]
        assert {k: str(v) for k, v in s.attributes.items()} == {
            a["key"]: next(iter(a["value"].values())) for a in d.get("attributes", [])
        }
        assert s.service_name == "triton-inference-server"


def test_malformed_attribute_value_is_kept_as_text_not_fatal():
    doc = orjson.loads((DATA / "otlp-traces-triton.json").read_bytes())
    span = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][1]
    span["attributes"].append({"key": "odd", "value": {"intValue": "not a number"}})
    result = decode_json(orjson.dumps(doc))
    assert result.rejected == 0
    got = next(s for s in result.spans if s.span_id == span["spanId"])
    assert "not a number" in str(got.attributes["odd"])
