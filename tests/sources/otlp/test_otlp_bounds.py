"""Every span string that becomes a label, a key or stored text is bounded before anything is stored: names over
``traces.limits.max_name_chars`` refuse the request (400 naming the field, counted), stored text over
``traces.limits.max_value_chars`` is kept truncated with a marker (counted)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from fastapi.testclient import TestClient
from google.rpc import status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from prometheus_client import CollectorRegistry
from traces_helpers import DATA, make_service, sample

from sidecar.app import create_app
from sidecar.model import Span, SpanEvent
from sidecar.sources.otlp.limits import TRUNCATED, SpanLimitError, SpanLimits, bound_span

PB = "application/x-protobuf"
JS = "application/json"
MB = 1 << 20
TID = "5b8efff798038103d269b633813fc60c"


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


def _client(registry: CollectorRegistry, limits: dict[str, Any] | None = None) -> Any:
    traces: dict[str, Any] = {"limits": limits} if limits else {}
    svc = make_service(traces, server={"max_body_bytes": 8 * MB}, registry=registry)
    c = TestClient(create_app(svc))
    c.service = svc  # type: ignore[attr-defined]
    return c


def _span(
    name: str = "m",
    model: object = "m",
    attrs: dict[str, object] | None = None,
    events: list[tuple[str, dict[str, str]]] | None = None,
    message: str = "",
    sid: str = "eee19b7ec3c1b174",
) -> dict[str, Any]:
    kv = [
        {"key": "triton.model_name", "value": {"stringValue": model}},
        {"key": "triton.model_version", "value": {"intValue": "1"}},
    ]
    kv += [{"key": k, "value": {"stringValue": v}} for k, v in (attrs or {}).items()]
    evs = [("REQUEST_START", {}), ("REQUEST_END", {})] if events is None else events
    return {
        "traceId": TID,
        "spanId": sid,
        "name": name,
        "startTimeUnixNano": "1000",
        "endTimeUnixNano": "9000",
        "attributes": kv,
        "events": [
            {
                "name": n,
                "timeUnixNano": str(1000 + 1000 * i),
                **({"attributes": [{"key": k, "value": {"stringValue": v}} for k, v in a.items()]} if a else {}),
            }
            for i, (n, a) in enumerate(evs)
        ],
        "status": {"code": 2, "message": message} if message else {},
    }


def _json_doc(spans: list[dict[str, Any]], service: str = "triton") -> dict[str, Any]:
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]},
                "scopeSpans": [{"spans": spans}],
            }
        ]
    }


def _pb_body(doc: dict[str, Any]) -> bytes:
    """The same request as protobuf (ids from hex, times and enums as numbers)."""
    req = ExportTraceServiceRequest()
    for rs in doc["resourceSpans"]:
        out_rs = req.resource_spans.add()
        for kv in rs["resource"]["attributes"]:
            out_rs.resource.attributes.add(key=kv["key"]).value.string_value = kv["value"]["stringValue"]
        ss = out_rs.scope_spans.add()
        for s in rs["scopeSpans"][0]["spans"]:
            p = ss.spans.add(
                trace_id=bytes.fromhex(s["traceId"]),
                span_id=bytes.fromhex(s["spanId"]),
                name=s["name"],
                start_time_unix_nano=int(s["startTimeUnixNano"]),
                end_time_unix_nano=int(s["endTimeUnixNano"]),
            )
            for kv in s["attributes"]:
                v = p.attributes.add(key=kv["key"]).value
                if "intValue" in kv["value"]:
                    v.int_value = int(kv["value"]["intValue"])
                else:
                    v.string_value = kv["value"]["stringValue"]
            for e in s["events"]:
                pe = p.events.add(name=e["name"], time_unix_nano=int(e["timeUnixNano"]))
                for kv in e.get("attributes", ()):
                    pe.attributes.add(key=kv["key"]).value.string_value = kv["value"]["stringValue"]
            if s["status"]:
                p.status.code = s["status"]["code"]
                p.status.message = s["status"]["message"]
    return req.SerializeToString()


def _post(c: Any, doc: dict[str, Any], encoding: str) -> Any:
    if encoding == "json":
        return c.post("/v1/traces", content=orjson.dumps(doc), headers={"content-type": JS})
    return c.post("/v1/traces", content=_pb_body(doc), headers={"content-type": PB})


def _message(r: Any, encoding: str) -> str:
    if encoding == "json":
        return str(r.json()["message"])
    return status_pb2.Status.FromString(r.content).message


def _stored(c: Any) -> Span:
    e = c.service.component("traces").store.get(TID)
    assert e is not None, "the span was not stored"
    (s,) = e.spans
    return s


ENCODINGS = ["json", "protobuf"]


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_a_1mb_model_name_is_refused_naming_the_field_and_leaves_metrics_unchanged(registry, encoding):
    with _client(registry) as c:
        # A normal Triton trace first, so the stage series (one per model) already exist.
        assert (
            c.post(
                "/v1/traces", content=(DATA / "otlp-traces-triton.json").read_bytes(), headers={"content-type": JS}
            ).status_code
            == 200
        )
        before = len(c.get("/metrics").content)
        r = _post(c, _json_doc([_span(model="x" * MB)]), encoding)
        assert r.status_code == 400
        msg = _message(r, encoding)
        assert "triton.model_name" in msg and "traces.limits.max_name_chars" in msg and str(MB) in msg
        assert "spans[0]" in msg
        assert len(msg) < 1000
        after = len(c.get("/metrics").content)
        assert abs(after - before) < 4096, (before, after)
        assert c.service.component("traces").store.get(TID) is None
        assert sample(registry, "sidecar_otlp_refused_total", {"reason": "model_too_long"}) == 1


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize(
    ("span", "reason", "named"),
    [
        (_span(name="n" * 200), "span_name_too_long", "name"),
        (_span(attrs={"k" * 200: "v"}), "attribute_key_too_long", "attributes"),
        (_span(model="m", attrs={"triton.model_version": "9" * 200}), "version_too_long", "triton.model_version"),
        (_span(events=[("E" * 200, {})]), "event_name_too_long", "events[0].name"),
        (_span(events=[("E", {"k" * 200: "v"})]), "attribute_key_too_long", "events[0].attributes"),
    ],
    ids=["span_name", "attribute_key", "version", "event_name", "event_attribute_key"],
)
def test_a_name_over_the_limit_refuses_the_request_and_stores_nothing(registry, encoding, span, reason, named):
    with _client(registry) as c:
        # A good span first in the same request: nothing of a refused request is stored.
        good = _span(sid="0000000000000001")
        r = _post(c, _json_doc([good, span]), encoding)
        assert r.status_code == 400
        msg = _message(r, encoding)
        assert named in msg and "spans[1]" in msg, msg
        assert c.service.component("traces").store.get(TID) is None
        assert sample(registry, "sidecar_otlp_refused_total", {"reason": reason}) == 1
        assert sample(registry, "sidecar_otlp_spans_received_total", {"encoding": encoding}) == 0


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_a_service_name_over_the_limit_is_refused(registry, encoding):
    with _client(registry) as c:
        r = _post(c, _json_doc([_span()], service="s" * 500), encoding)
        assert r.status_code == 400
        assert "service.name" in _message(r, encoding)
        assert sample(registry, "sidecar_otlp_refused_total", {"reason": "service_name_too_long"}) == 1


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_a_1mb_attribute_value_is_stored_truncated_with_a_marker(registry, encoding):
    with _client(registry) as c:
        r = _post(c, _json_doc([_span(attrs={"big": "v" * MB, "small": "ok"})]), encoding)
        assert r.status_code == 200
        s = _stored(c)
        big = s.attributes["big"]
        assert isinstance(big, str) and len(big) == 4096 and big.endswith(TRUNCATED)
        assert big.startswith("v" * 4000)
        assert s.attributes["small"] == "ok"
        assert s.attributes["triton.model_name"] == "m"
        assert sample(registry, "sidecar_otlp_truncated_total", {"field": "attribute_value"}) == 1


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_a_long_status_message_and_event_attribute_are_stored_truncated(registry, encoding):
    with _client(registry) as c:
        span = _span(message="e" * 10_000, events=[("REQUEST_START", {"why": "w" * 10_000}), ("REQUEST_END", {})])
        r = _post(c, _json_doc([span]), encoding)
        assert r.status_code == 200
        s = _stored(c)
        assert len(s.status_message) == 4096 and s.status_message.endswith(TRUNCATED)
        why = s.events[0].attributes["why"]
        assert isinstance(why, str) and len(why) == 4096 and why.endswith(TRUNCATED)
        assert sample(registry, "sidecar_otlp_truncated_total", {"field": "status_message"}) == 1
        assert sample(registry, "sidecar_otlp_truncated_total", {"field": "event_attribute_value"}) == 1


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_the_limits_are_configurable(registry, encoding):
    with _client(registry, {"max_name_chars": 20, "max_value_chars": 100}) as c:
        r = _post(c, _json_doc([_span(name="n" * 21)]), encoding)
        assert r.status_code == 400 and "max_name_chars" in _message(r, encoding)
        r = _post(c, _json_doc([_span(name="n" * 20, attrs={"a": "v" * 101})]), encoding)
        assert r.status_code == 200
        assert len(str(_stored(c).attributes["a"])) == 100


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_spans_within_the_limits_are_stored_unchanged(registry, encoding):
    with _client(registry) as c:
        span = _span(name="n" * 128, attrs={"k" * 128: "v" * 4096}, message="e" * 4096)
        r = _post(c, _json_doc([span]), encoding)
        assert r.status_code == 200
        s = _stored(c)
        assert s.name == "n" * 128 and s.attributes["k" * 128] == "v" * 4096 and s.status_message == "e" * 4096
        assert sample(registry, "sidecar_otlp_truncated_total", {"field": "attribute_value"}) == 0


def test_the_limits_config_refuses_a_value_limit_below_the_name_limit():
    from sidecar.config import parse_config
    from sidecar.errors import ConfigError

    with pytest.raises(ConfigError, match="max_value_chars"):
        parse_config({"traces": {"limits": {"max_name_chars": 500, "max_value_chars": 200}}})


# ---------------------------------------------------------------- Span objects (Triton trace files)


def _file_span(**kw: Any) -> Span:
    base: dict[str, Any] = {
        "trace_id": TID,
        "span_id": "eee19b7ec3c1b174",
        "parent_span_id": None,
        "name": "m",
        "start_unix_nano": 1,
        "end_unix_nano": 2,
        "attributes": {"triton.model_name": "m", "triton.model_version": "1"},
    }
    base.update(kw)
    return Span(**base)


def test_bound_span_truncates_stored_text_of_a_span_object():
    s = _file_span(
        attributes={"triton.model_name": "m", "big": "b" * 5000},
        events=(SpanEvent("E", 1, {"why": "w" * 5000}),),
        status_message="s" * 5000,
    )
    out, truncated = bound_span(s, SpanLimits())
    assert len(str(out.attributes["big"])) == 4096 and str(out.attributes["big"]).endswith(TRUNCATED)
    assert len(str(out.events[0].attributes["why"])) == 4096
    assert len(out.status_message) == 4096
    assert truncated == {"attribute_value": 1, "event_attribute_value": 1, "status_message": 1}
    same, none = bound_span(_file_span(), SpanLimits())
    assert same == _file_span() and none == {}


@pytest.mark.parametrize(
    ("kw", "reason"),
    [
        ({"attributes": {"triton.model_name": "m" * 129}}, "model_too_long"),
        ({"name": "n" * 129}, "span_name_too_long"),
        ({"events": (SpanEvent("E" * 129, 1, {}),)}, "event_name_too_long"),
        ({"service_name": "s" * 129}, "service_name_too_long"),
    ],
)
def test_bound_span_refuses_a_span_object_whose_names_are_over_the_limit(kw, reason):
    with pytest.raises(SpanLimitError) as ei:
        bound_span(_file_span(**kw), SpanLimits())
    assert ei.value.reason == reason


@pytest.mark.parametrize(
    ("where", "value"),
    [("start", "-1"), ("end", str(1 << 64)), ("event", "9" * 400), ("event", "-5")],
)
def test_a_time_outside_fixed64_rejects_the_span_not_the_sidecar(registry, where, value):
    span = _span()
    if where == "event":
        span["events"][1]["timeUnixNano"] = value
    else:
        span[f"{where}TimeUnixNano"] = value
    with _client(registry) as c:
        r = _post(c, _json_doc([span, _span(sid="0000000000000002")]), "json")
        assert r.status_code == 200, r.text
        assert r.json()["partialSuccess"]["rejectedSpans"] == "1"
        assert "2^64" in r.json()["partialSuccess"]["errorMessage"]
        assert sample(registry, "sidecar_otlp_spans_rejected_total", {"encoding": "json"}) == 1
        assert sample(registry, "sidecar_otlp_spans_received_total", {"encoding": "json"}) == 1
