"""Properties of the OTLP decoders over generated input: whatever the body, decoding either gives records that the
trace hub stores and that materialise as spans, or refuses with ``ParseError`` (a 400); through the receiver the
answer is never a 5xx and every refusal and rejection is counted; valid spans round-trip through both
encodings unchanged."""

from __future__ import annotations

import json
import string
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from prometheus_client import CollectorRegistry
from traces_helpers import DATA, make_service, sample

from sidecar.app import create_app
from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.errors import ParseError
from sidecar.model import Span
from sidecar.records import EVENTS, to_span
from sidecar.sources.otlp.decode import DecodeResult, decode_json, decode_json_doc, decode_protobuf
from sidecar.sources.otlp.json_fast import decode_fast
from sidecar.sources.otlp.limits import SpanLimits
from sidecar.state.trace_hub import TraceHub

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LIMITS = SpanLimits(name_chars=24, value_chars=64)  # small, so that generated text crosses them


def _hub() -> TraceHub:
    return TraceHub(parse_config({"traces": {"enabled": True}}).traces, registry=CollectorRegistry(), clock=FakeClock())


def _usable(result: DecodeResult) -> None:
    """What the receiver does next with a result must not fail: store it, show it, bound it."""
    _hub().ingest_records(result.records, "otlp")
    for s in result.spans:
        assert len(s.name) <= LIMITS.name_chars
        for k, v in s.attributes.items():
            assert len(k) <= LIMITS.name_chars
            if isinstance(v, str):
                assert len(v) <= LIMITS.value_chars
        for e in s.events:
            assert len(e.name) <= LIMITS.name_chars
        assert len(s.status_message) <= LIMITS.value_chars
        assert 0 <= s.start_unix_nano < 1 << 64 and 0 <= s.end_unix_nano < 1 << 64


# ---------------------------------------------------------------- arbitrary and wrong-typed structures

_json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(1 << 70), max_value=1 << 70),
    st.floats(allow_nan=False),
    st.text(max_size=40),
    st.sampled_from(
        [
            "5b8efff798038103d269b633813fc60c",
            "eee19b7ec3c1b174",
            "00000000000000000000000000000000",
            "-1",
            "18446744073709551616",
            "9" * 30,
            "1000",
            "zz",
            "STATUS_CODE_ERROR",
            "SPAN_KIND_SERVER",
        ]
    ),
)
_json_any = st.recursive(
    _json_leaf,
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=12), kids, max_size=4),
    max_leaves=20,
)


def _maybe(
    valid: st.SearchStrategy[Any], odds: int = 4, bad: st.SearchStrategy[Any] | None = None
) -> st.SearchStrategy[Any]:
    """The right shape, but one time in about ``odds`` a wrong one (anything at all by default)."""
    # Not one_of(valid, ..., junk): hypothesis does not pick its branches evenly.
    junk = _json_any if bad is None else bad
    return st.integers(min_value=1, max_value=odds).flatmap(lambda i: junk if i == odds // 2 else valid)


_any_value = _maybe(
    st.one_of(
        st.builds(lambda s: {"stringValue": s}, st.text(max_size=100)),
        st.builds(lambda i: {"intValue": str(i)}, st.integers(min_value=-(1 << 66), max_value=1 << 66)),
        st.builds(lambda b: {"boolValue": b}, st.booleans()),
        st.builds(lambda f: {"doubleValue": f}, st.floats(allow_nan=False, allow_infinity=False)),
        st.builds(
            lambda v: {"arrayValue": {"values": v}},
            st.lists(st.builds(lambda s: {"stringValue": s}, st.text(max_size=100)), max_size=3),
        ),
        st.builds(
            lambda k, s: {"kvlistValue": {"values": [{"key": k, "value": {"stringValue": s}}]}},
            st.text(max_size=30),
            st.text(max_size=100),
        ),
        st.just({"bytesValue": "not base64!"}),
        st.just({"intValue": "x"}),
    )
)
_key = st.one_of(st.sampled_from(["triton.model_name", "triton.model_version", "a", "b"]), st.text(max_size=30))
_kv = _maybe(st.fixed_dictionaries({"key": _key, "value": _any_value}))
_time = _maybe(
    odds=8,
    valid=_maybe(
        st.integers(min_value=0, max_value=1 << 63).map(str),
        6,
        st.one_of(
            st.integers(min_value=0, max_value=1 << 63), st.integers(min_value=-5, max_value=(1 << 64) + 5).map(str)
        ),
    ),
)
_tid = st.binary(min_size=16, max_size=16).filter(any).map(bytes.hex)
_sid = st.binary(min_size=8, max_size=8).filter(any).map(bytes.hex)
_bad_id = st.one_of(_tid, _sid, st.text(alphabet="0123456789abcdefXY", max_size=33), st.just("0" * 32))
_event = _maybe(
    st.fixed_dictionaries(
        {"name": _maybe(st.text(max_size=30)), "timeUnixNano": _time},
        optional={"attributes": _maybe(st.lists(_kv, max_size=3))},
    )
)
_span = _maybe(
    odds=8,
    valid=st.fixed_dictionaries(
        {
            "traceId": _maybe(_tid, 6, _bad_id),
            "spanId": _maybe(_sid, 6, _bad_id),
            "startTimeUnixNano": _time,
            "endTimeUnixNano": _time,
        },
        optional={
            "parentSpanId": st.one_of(_sid, _bad_id),
            "name": _maybe(st.text(max_size=30)),
            "kind": _maybe(st.sampled_from([0, 2, "SPAN_KIND_SERVER", "9", "nope"])),
            "attributes": _maybe(st.lists(_kv, max_size=4)),
            "events": _maybe(st.lists(_event, max_size=4)),
            "status": _maybe(
                st.fixed_dictionaries(
                    {},
                    optional={
                        "code": _maybe(st.sampled_from([0, 1, 2, "2", "STATUS_CODE_ERROR", "STATUS_CODE_BOGUS"]), 8),
                        "message": _maybe(st.text(max_size=100), 8),
                    },
                )
            ),
        },
    ),
)
_scope = _maybe(st.fixed_dictionaries({"spans": _maybe(st.lists(_span, min_size=1, max_size=4), 12)}), 12)
_resource = _maybe(st.fixed_dictionaries({"attributes": _maybe(st.lists(_kv, max_size=2), 12)}), 12)
_resource_spans = _maybe(
    st.fixed_dictionaries(
        {"scopeSpans": _maybe(st.lists(_scope, min_size=1, max_size=2), 12)}, optional={"resource": _resource}
    ),
    12,
)
_doc = _maybe(
    st.fixed_dictionaries({"resourceSpans": _maybe(st.lists(_resource_spans, min_size=1, max_size=2), 12)}), 12
)


@SETTINGS
@given(_doc)
def test_any_json_document_decodes_to_usable_records_or_a_parse_error(doc: Any) -> None:
    try:
        result = decode_json_doc(doc, LIMITS)
    except ParseError:
        return
    _usable(result)


@SETTINGS
@given(st.binary(max_size=300))
def test_any_bytes_decode_as_protobuf_to_usable_records_or_a_parse_error(body: bytes) -> None:
    try:
        result = decode_protobuf(body, LIMITS)
    except ParseError:
        return
    _usable(result)


# ---------------------------------------------------------------- valid spans, both encodings


_name = st.text(alphabet=string.ascii_letters + "._-é", min_size=1, max_size=24)
_attr_value = st.one_of(
    st.text(max_size=64),
    st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1),
    st.booleans(),
    st.floats(allow_nan=False, allow_infinity=False),
)
_ns = st.integers(min_value=0, max_value=(1 << 64) - 1)


@st.composite
def _spans(draw: st.DrawFn) -> Span:
    from sidecar.model import SpanEvent

    events = draw(
        st.lists(
            st.builds(
                lambda n, t, a: SpanEvent(n, t, a), _name, _ns, st.dictionaries(_name, st.text(max_size=64), max_size=2)
            ),
            max_size=4,
        )
    )
    return Span(
        trace_id=draw(st.binary(min_size=16, max_size=16).filter(any)).hex(),
        span_id=draw(st.binary(min_size=8, max_size=8).filter(any)).hex(),
        parent_span_id=draw(st.one_of(st.none(), st.binary(min_size=8, max_size=8).filter(any).map(bytes.hex))),
        name=draw(_name),
        start_unix_nano=draw(_ns),
        end_unix_nano=draw(_ns),
        service_name=draw(st.one_of(st.just(""), _name)),
        attributes=draw(st.dictionaries(_name, _attr_value, max_size=4)),
        events=tuple(events),
        status_code=draw(st.sampled_from([0, 1, 2])),
        status_message=draw(st.text(max_size=64)),
        kind=draw(st.integers(min_value=0, max_value=5)),
    )


def _json_value(v: object) -> dict[str, object]:
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    return {"stringValue": v}


def _to_json(spans: list[Span]) -> bytes:
    by_service: dict[str, list[dict[str, Any]]] = {}
    for s in spans:
        d: dict[str, Any] = {
            "traceId": s.trace_id,
            "spanId": s.span_id,
            "name": s.name,
            "kind": s.kind,
            "startTimeUnixNano": str(s.start_unix_nano),
            "endTimeUnixNano": str(s.end_unix_nano),
            "attributes": [{"key": k, "value": _json_value(v)} for k, v in s.attributes.items()],
            "events": [
                {
                    "name": e.name,
                    "timeUnixNano": str(e.time_unix_nano),
                    **(
                        {"attributes": [{"key": k, "value": _json_value(v)} for k, v in e.attributes.items()]}
                        if e.attributes
                        else {}
                    ),
                }
                for e in s.events
            ],
            "status": {"code": s.status_code, "message": s.status_message},
        }
        if s.parent_span_id:
            d["parentSpanId"] = s.parent_span_id
        by_service.setdefault(s.service_name, []).append(d)
    return orjson.dumps(
        {
            "resourceSpans": [
                {
                    "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": svc}}] if svc else []},
                    "scopeSpans": [{"spans": ds}],
                }
                for svc, ds in by_service.items()
            ]
        }
    )


def _set_value(pv: Any, v: object) -> None:
    if isinstance(v, bool):
        pv.bool_value = v
    elif isinstance(v, int):
        pv.int_value = v
    elif isinstance(v, float):
        pv.double_value = v
    else:
        pv.string_value = str(v)


def _to_pb(spans: list[Span]) -> bytes:
    req = ExportTraceServiceRequest()
    by_service: dict[str, Any] = {}
    for s in spans:
        ss = by_service.get(s.service_name)
        if ss is None:
            rs = req.resource_spans.add()
            if s.service_name:
                rs.resource.attributes.add(key="service.name").value.string_value = s.service_name
            ss = by_service[s.service_name] = rs.scope_spans.add()
        p = ss.spans.add(
            trace_id=bytes.fromhex(s.trace_id),
            span_id=bytes.fromhex(s.span_id),
            name=s.name,
            kind=s.kind,
            start_time_unix_nano=s.start_unix_nano,
            end_time_unix_nano=s.end_unix_nano,
        )
        if s.parent_span_id:
            p.parent_span_id = bytes.fromhex(s.parent_span_id)
        for k, v in s.attributes.items():
            _set_value(p.attributes.add(key=k).value, v)
        for e in s.events:
            pe = p.events.add(name=e.name, time_unix_nano=e.time_unix_nano)
            for k, v in e.attributes.items():
                _set_value(pe.attributes.add(key=k).value, v)
        p.status.code = s.status_code
        p.status.message = s.status_message
    return req.SerializeToString()


def _comparable(s: Span) -> tuple[Any, ...]:
    return (
        s.trace_id,
        s.span_id,
        s.parent_span_id,
        s.name,
        s.start_unix_nano,
        s.end_unix_nano,
        s.service_name,
        dict(s.attributes),
        [(e.name, e.time_unix_nano, dict(e.attributes)) for e in s.events],
        s.status_code,
        s.status_message,
        s.kind,
    )


@SETTINGS
@given(st.lists(_spans(), min_size=1, max_size=5))
def test_valid_spans_round_trip_through_json_and_protobuf(spans: list[Span]) -> None:
    for decoded in (decode_json_doc(orjson.loads(_to_json(spans)), LIMITS), decode_protobuf(_to_pb(spans), LIMITS)):
        assert decoded.rejected == 0, decoded.first_error
        assert decoded.truncations == {}
        # Grouped by service on the wire: compare as multisets in the wire's order.
        want = sorted((_comparable(s) for s in spans), key=repr)
        got = sorted((_comparable(to_span(r)) for r in decoded.records), key=repr)
        assert got == want
        _hub().ingest_records(decoded.records, "otlp")


# ---------------------------------------------------------------- through the receiver


_REASONS = (
    "undecodable",
    "span_name_too_long",
    "model_too_long",
    "version_too_long",
    "attribute_key_too_long",
    "event_name_too_long",
    "service_name_too_long",
)


@pytest.fixture(scope="module")
def receiver() -> Iterator[tuple[TestClient, CollectorRegistry]]:
    """One sidecar for every example (starting one per example costs a second); the test reads counter deltas."""
    reg = CollectorRegistry()
    svc = make_service({"limits": {"max_name_chars": 24, "max_value_chars": 64}}, registry=reg)
    with TestClient(create_app(svc)) as c:
        yield c, reg


def _counts(reg: CollectorRegistry, enc: str) -> tuple[float, float, float, float]:
    return (
        sum(sample(reg, "sidecar_otlp_refused_total", {"reason": why}) for why in _REASONS),
        sample(reg, "sidecar_otlp_spans_received_total", {"encoding": enc}),
        sample(reg, "sidecar_otlp_spans_rejected_total", {"encoding": enc}),
        sample(reg, "sidecar_traces_spans_ingested_total", {"source": "otlp"}),
    )


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(doc=_doc, as_pb=st.booleans(), junk=st.binary(max_size=64))
def test_the_receiver_never_answers_5xx_and_counts_every_refusal(receiver, doc: Any, as_pb: bool, junk: bytes) -> None:
    c, reg = receiver
    enc = "protobuf" if as_pb else "json"
    if as_pb:
        body, ctype = junk, "application/x-protobuf"
    else:
        # The standard library writes any integer (orjson stops at 64 bits), so the body can hold bigger ones.
        body, ctype = json.dumps(doc).encode(), "application/json"
    before = _counts(reg, enc)
    r = c.post("/v1/traces", content=body, headers={"content-type": ctype})
    assert r.status_code in (200, 400), (r.status_code, r.content[:300])
    refused, received, rejected, stored = (b - a for a, b in zip(before, _counts(reg, enc), strict=True))
    if r.status_code == 400:
        assert refused == 1 and received == 0 and stored == 0
    else:
        assert refused == 0
        assert received == stored  # every accepted span reached the trace hub
        if not as_pb:
            partial = r.json().get("partialSuccess", {})
            assert int(partial.get("rejectedSpans", 0)) == rejected


@SETTINGS
@given(
    st.lists(_spans(), min_size=1, max_size=3),
    st.lists(
        st.tuples(st.integers(min_value=0, max_value=1 << 16), st.integers(min_value=0, max_value=255)),
        min_size=1,
        max_size=6,
    ),
)
def test_a_valid_protobuf_body_with_bytes_changed_decodes_to_usable_records_or_a_parse_error(
    spans: list[Span], changes: list[tuple[int, int]]
) -> None:
    body = bytearray(_to_pb(spans))
    for pos, byte in changes:
        body[pos % len(body)] = byte
    try:
        result = decode_protobuf(bytes(body), LIMITS)
    except ParseError:
        return
    _usable(result)


# ---------------------------------------------------------------- the msgspec fast path against the walk


def _same(fast: DecodeResult, slow: DecodeResult) -> None:
    assert fast.records == slow.records
    assert (fast.rejected, fast.truncations) == (slow.rejected, slow.truncations) == (0, {})


@SETTINGS
@given(_doc)
def test_the_fast_json_path_gives_what_the_walk_gives_wherever_it_answers(doc: Any) -> None:
    body = json.dumps(doc).encode()
    fast = decode_fast(body, LIMITS)
    if fast is None:
        return
    try:
        slow = decode_json_doc(orjson.loads(body), LIMITS)
    except (ParseError, orjson.JSONDecodeError) as exc:
        raise AssertionError(f"the fast path accepted what the walk refuses: {exc}") from None
    _same(fast, slow)


@SETTINGS
@given(st.lists(_spans(), min_size=1, max_size=5))
def test_the_fast_json_path_takes_clean_spans(spans: list[Span]) -> None:
    body = _to_json(spans)
    wide = SpanLimits(name_chars=64, value_chars=64)
    fast = decode_fast(body, wide)
    assert fast is not None
    _same(fast, decode_json_doc(orjson.loads(body), wide))


def test_the_fast_json_path_takes_tritons_export() -> None:
    body = (DATA / "otlp-traces-triton.json").read_bytes()
    fast = decode_fast(body, SpanLimits())
    assert fast is not None and len(fast.records) == 360
    _same(fast, decode_json_doc(orjson.loads(body), SpanLimits()))


@pytest.mark.parametrize(
    "extra",
    [
        {"attributes": [{"key": "exception.type", "value": {"stringValue": "E"}}]},
        {"attributes": []},
        {"droppedAttributesCount": 0},
    ],
)
def test_the_fast_json_path_takes_a_body_whose_last_event_carries_more_than_a_name_and_time(extra: dict) -> None:
    """Triton's events are decoded as bare (name, time) first; one event with more, however late in the body,
    must send the body to the full event type, not to the walk, and give what the walk gives."""
    doc = orjson.loads((DATA / "otlp-traces-triton.json").read_bytes())
    spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans[-1]["events"][-1].update(extra)
    body = orjson.dumps(doc)
    fast = decode_fast(body, SpanLimits())
    assert fast is not None and len(fast.records) == 360
    slow = decode_json_doc(orjson.loads(body), SpanLimits())
    _same(fast, slow)
    last = fast.records[-1][EVENTS]
    if "attributes" in extra:
        assert type(last) is tuple and last[-1][2] == ((("exception.type", "E"),) if extra["attributes"] else None)
    else:
        assert type(last) is dict


@SETTINGS
@given(st.lists(_spans(), min_size=1, max_size=3), st.data())
def test_the_fast_json_path_agrees_with_the_walk_on_a_clean_body_with_one_part_changed(
    spans: list[Span], data: st.DataObject
) -> None:
    doc = orjson.loads(_to_json(spans))
    node: Any = doc
    # Down a random path of the document, then replace what is there with anything at all.
    while True:
        keys = list(range(len(node))) if isinstance(node, list) else list(node)
        if not keys:
            break
        key = data.draw(st.sampled_from(keys))
        child = node[key]
        if not isinstance(child, (dict, list)) or data.draw(st.booleans()):
            node[key] = data.draw(_json_any)
            break
        node = child
    body = json.dumps(doc).encode()
    wide = SpanLimits(name_chars=64, value_chars=64)
    fast = decode_fast(body, wide)
    event("fast path" if fast is not None else "walk")
    if fast is None:
        return
    try:
        slow = decode_json_doc(orjson.loads(body), wide)
    except (ParseError, orjson.JSONDecodeError) as exc:
        raise AssertionError(f"the fast path accepted what the walk refuses: {exc}") from None
    _same(fast, slow)


def test_a_body_that_is_not_utf8_is_refused_even_where_only_an_unread_key_is_broken() -> None:
    # Found by fuzz_otlp_json: msgspec skips unknown fields without checking their UTF-8, so the fast path
    # accepted a body that orjson (the walk) refuses as not JSON.
    seed = Path(__file__).parents[2] / "fuzz/corpus/otlp_json/regression-invalid-utf8-in-unknown-key.json"
    body = seed.read_bytes()
    assert decode_fast(body, SpanLimits()) is None
    with pytest.raises(ParseError, match="not JSON"):
        decode_json(body, SpanLimits())
    clean = b'{"resourceSpans":[{"scopeSpans":[{"spans":[],"unread\xff":1}]}]}'
    assert decode_fast(clean, SpanLimits()) is None
    assert decode_fast(clean.replace(b"\xff", "é".encode()), SpanLimits()) is not None


@pytest.mark.parametrize("field", ["kind", "code", "intValue"])
def test_an_integer_beyond_int64_is_read_as_the_walk_reads_it(field: str) -> None:
    # Found by fuzz_otlp_json: msgspec reads 44444444444444444444444442 exactly, orjson as a float, so the two
    # JSON paths stored different kinds.
    big = 44444444444444444444444442
    span: dict[str, Any] = {
        "traceId": "5b8efff798038103d269b633813fc60c",
        "spanId": "eee19b7ec3c1b174",
        "startTimeUnixNano": "1",
        "endTimeUnixNano": "2",
    }
    if field == "kind":
        span["kind"] = big
    elif field == "code":
        span["status"] = {"code": big}
    else:
        span["attributes"] = [{"key": "n", "value": {"intValue": big}}]
    body = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}).encode()
    assert decode_fast(body, SpanLimits()) is None
    assert decode_json(body, SpanLimits()).records == decode_json_doc(orjson.loads(body), SpanLimits()).records
