"""The single lean protobuf parse and the fast JSON event form: what they still reject, what they now accept and
how, and that stage derivation counts each stage once whatever the arrival order."""

from __future__ import annotations

import orjson
import pytest
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan
from prometheus_client import CollectorRegistry
from traces_helpers import DATA, sample

from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.errors import ParseError
from sidecar.records import FMT_JSON, event_times
from sidecar.sources.otlp.decode import decode_json, decode_protobuf
from sidecar.state.trace_hub import TraceHub


def _hub(reg: CollectorRegistry) -> TraceHub:
    return TraceHub(parse_config({"traces": {"enabled": True}}).traces, registry=reg, clock=FakeClock())


def _stage(reg: CollectorRegistry, stage: str, what: str = "count") -> float:
    return sample(reg, f"sidecar_triton_stage_duration_seconds_{what}", {"model": "m", "version": "3", "stage": stage})


def _triton_request(tid: bytes, version: object = 3) -> list[PbSpan]:
    """Triton's three spans of one request, in the order Triton exports them (compute, model, request)."""

    def span(sid: int, parent: int | None, name: str, events: list[tuple[str, int]]) -> PbSpan:
        s = PbSpan(
            trace_id=tid, span_id=sid.to_bytes(8, "big"), name=name, start_time_unix_nano=1, end_time_unix_nano=99
        )
        if parent is not None:
            s.parent_span_id = parent.to_bytes(8, "big")
        for n, t in events:
            s.events.add(name=n, time_unix_nano=t)
        return s

    compute = span(
        3,
        2,
        "compute",
        [("COMPUTE_START", 20), ("COMPUTE_INPUT_END", 30), ("COMPUTE_OUTPUT_START", 70), ("COMPUTE_END", 80)],
    )
    model = span(2, 1, "m", [("REQUEST_START", 10), ("QUEUE_START", 15), ("REQUEST_END", 90)])
    a = model.attributes.add(key="triton.model_name")
    a.value.string_value = "m"
    a = model.attributes.add(key="triton.model_version")
    if isinstance(version, int):
        a.value.int_value = version
    else:
        a.value.string_value = str(version)
    request = span(
        1,
        None,
        "InferRequest",
        [("HTTP_RECV_START", 0), ("HTTP_RECV_END", 5), ("HTTP_SEND_START", 91), ("HTTP_SEND_END", 95)],
    )
    return [compute, model, request]


def _body(spans: list[PbSpan]) -> bytes:
    req = ExportTraceServiceRequest()
    req.resource_spans.add().scope_spans.add().spans.extend(spans)
    return req.SerializeToString()


def test_every_truncation_of_a_valid_body_is_refused_as_a_whole():
    body = (DATA / "otlp-traces-python.pb").read_bytes()
    for n in range(1, len(body), 97):
        with pytest.raises(ParseError):
            decode_protobuf(body[:n])
    assert len(decode_protobuf(body).records) == 240


@pytest.mark.parametrize("version, want", [(3, "3"), ("3", "3"), (300, "300"), ("v\u00e9", "v\u00e9")])
def test_model_attribute_read_by_hand_or_by_the_generated_class(version, want):
    spans = _triton_request(b"\x01" * 16, version)
    rec = decode_protobuf(_body(spans)).records[1]
    assert rec[7] == ("m", want)  # MODEL slot


def test_stages_in_tritons_order_and_a_second_compute_span_counted_once():
    reg = CollectorRegistry()
    hub = _hub(reg)
    tid = b"\x02" * 16
    recs = decode_protobuf(_body(_triton_request(tid))).records
    for r in recs:  # one span per batch: compute before its model, model before its parent
        hub.ingest_records([r], "otlp")
    for stage in ("request", "queue", "compute_input", "compute_infer", "compute_output", "network_receive", "send"):
        assert _stage(reg, stage) == 1, stage
    assert _stage(reg, "compute_infer", "sum") == pytest.approx(40e-9)
    assert _stage(reg, "queue", "sum") == pytest.approx(5e-9)
    # Another compute span under the same model span (not something Triton sends) does not count again.
    extra = _triton_request(tid)[0]
    extra.span_id = (9).to_bytes(8, "big")
    hub.ingest_records(decode_protobuf(_body([extra])).records, "otlp")
    assert _stage(reg, "compute_infer") == 1
    assert sample(reg, "sidecar_traces_spans_ingested_total", {"source": "otlp"}) == 4


def _ld(field: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field, framed by hand so the payload can be anything."""
    n, head = len(payload), bytes([field << 3 | 2])
    while n >= 0x80:
        head += bytes([n & 0x7F | 0x80])
        n >>= 7
    return head + bytes([n]) + payload


def _raw_body(span_bytes: list[bytes]) -> bytes:
    scope = b"".join(_ld(2, b) for b in span_bytes)  # ScopeSpans.spans
    return _ld(1, _ld(2, scope))  # ExportTraceServiceRequest.resource_spans[0].scope_spans[0]


def test_undecodable_inner_bytes_do_not_fail_the_body():
    spans = [s.SerializeToString() for s in _triton_request(b"\x03" * 16)]
    # A well-framed attribute (field 9: key "k", then a value longer than what is left) and event (field 11)
    # whose insides are not protobuf.
    spans[1] += _ld(9, b"\x0a\x01k\x12\x05\xff") + _ld(11, b"\xff\xff")
    body = _raw_body(spans)
    assert len(ExportTraceServiceRequest.FromString(_raw_body(spans[:1])).resource_spans) == 1
    with pytest.raises(DecodeError):  # what the generated class says: the whole body is refused
        ExportTraceServiceRequest.FromString(body)
    result = decode_protobuf(body)
    assert result.rejected == 0 and len(result.records) == 3
    reg = CollectorRegistry()
    _hub(reg).ingest_records(result.records, "otlp")
    for stage in ("request", "queue", "compute_infer", "send"):
        assert _stage(reg, stage) == 1, stage  # the good events still give their stages
    span = next(s for s in result.spans if s.name == "m")
    assert span.attributes["sidecar.undecodable"] == 2
    assert span.attributes["triton.model_name"] == "m"
    assert [e.name for e in span.events] == ["REQUEST_START", "QUEUE_START", "REQUEST_END"]


def test_a_span_whose_status_or_possible_model_attribute_does_not_decode_is_rejected_alone():
    spans = [s.SerializeToString() for s in _triton_request(b"\x04" * 16)]
    spans[2] += _ld(15, b"\xff\xff")  # status with garbage inside
    spans[1] += _ld(9, b"\xff\xff")  # an attribute that does not even start with its key: may be the model's
    result = decode_protobuf(_raw_body(spans))
    assert [r[3] for r in result.records] == ["compute"] and result.rejected == 2
    assert "status or model attributes" in result.first_error


def test_a_resource_that_does_not_decode_refuses_the_body():
    span = _triton_request(b"\x05" * 16)[0].SerializeToString()
    body = _ld(1, _ld(1, b"\xff\xff") + _ld(2, _ld(2, span)))
    with pytest.raises(ParseError):
        decode_protobuf(body)


def test_json_events_keep_attributes_and_repeated_names():
    doc = orjson.loads((DATA / "otlp-traces-triton.json").read_bytes())
    spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans[0]["events"].append({"name": "COMPUTE_END", "timeUnixNano": "1"})  # a repeated name
    spans[1]["events"][0]["attributes"] = [{"key": "k", "value": {"stringValue": "v"}}]
    result = decode_json(orjson.dumps(doc))
    recs = {r[1].hex(): r for r in result.records}
    s0, s1, s2 = (next(s for s in result.spans if s.span_id == spans[i]["spanId"]) for i in range(3))
    assert [e.name for e in s0.events][-2:] == ["COMPUTE_END", "COMPUTE_END"]
    assert event_times(recs[spans[0]["spanId"]])["COMPUTE_END"] == 1  # the last of a name wins
    assert s1.events[0].attributes == {"k": "v"}
    # Plain Triton events are kept as the name -> ns dict that stage derivation reads.
    plain = recs[spans[2]["spanId"]]
    assert plain[10] == FMT_JSON and isinstance(plain[8], dict)
    assert [(e.name, e.time_unix_nano) for e in s2.events] == [
        (e["name"], int(e["timeUnixNano"])) for e in spans[2]["events"]
    ]
