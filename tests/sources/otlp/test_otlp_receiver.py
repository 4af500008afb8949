"""POST /v1/traces: encodings, partial success, every refusal status, and that the sidecar keeps serving."""

from __future__ import annotations

import gzip
import zlib

import orjson
import pytest
from fastapi.testclient import TestClient
from google.rpc import status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from prometheus_client import CollectorRegistry
from traces_helpers import DATA, make_service, sample

from sidecar.app import create_app

PB = "application/x-protobuf"
JS = "application/json"


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def client(registry: CollectorRegistry):
    svc = make_service({"slow_threshold_ms": 5}, server={"max_body_bytes": 300_000}, registry=registry)
    with TestClient(create_app(svc)) as c:
        c.service = svc  # type: ignore[attr-defined]
        yield c


def _triton_json() -> bytes:
    return (DATA / "otlp-traces-triton.json").read_bytes()


def _python_pb() -> bytes:
    return (DATA / "otlp-traces-python.pb").read_bytes()


def _hub(client):
    return client.service.component("traces")


def test_json_from_triton_is_accepted_with_hex_ids_and_stages(client, registry):
    r = client.post("/v1/traces", content=_triton_json(), headers={"content-type": JS})
    assert r.status_code == 200
    assert r.headers["content-type"].startswith(JS)
    assert r.json() == {}
    assert sample(registry, "sidecar_otlp_spans_received_total", {"encoding": "json"}) == 360
    hub = _hub(client)
    e = hub.store.get("0bab5bd0e314f0235d3f705dcb58ec3c")
    assert e is not None and e.model == "ctr" and e.version == "1"
    assert {s.name for s in e.spans} >= {"InferRequest", "ctr", "compute"}
    # The compute stage of the first ctr request: COMPUTE_OUTPUT_START - COMPUTE_INPUT_END from the fixture.
    cnt = sample(
        registry,
        "sidecar_triton_stage_duration_seconds_count",
        {"model": "ctr", "version": "1", "stage": "compute_infer"},
    )
    assert cnt >= 1
    for stage in ("network_receive", "queue", "compute_input", "compute_output", "send", "request"):
        assert (
            sample(
                registry,
                "sidecar_triton_stage_duration_seconds_count",
                {"model": "ctr", "version": "1", "stage": stage},
            )
            == cnt
        )


def test_same_body_twice_does_not_double_count_stages(client, registry):
    client.post("/v1/traces", content=_triton_json(), headers={"content-type": JS})
    labels = {"model": "ctr", "version": "1", "stage": "queue"}
    before = sample(registry, "sidecar_triton_stage_duration_seconds_count", labels)
    # A retried export re-sends the same spans: the spans are stored twice but each stage is counted once.
    client.post("/v1/traces", content=_triton_json(), headers={"content-type": JS})
    assert sample(registry, "sidecar_triton_stage_duration_seconds_count", labels) == before


def test_protobuf_from_python_sdk_gzip(client, registry):
    body = gzip.compress(_python_pb())
    r = client.post("/v1/traces", content=body, headers={"content-type": PB, "content-encoding": "gzip"})
    assert r.status_code == 200
    assert r.headers["content-type"] == PB
    resp = ExportTraceServiceResponse()
    resp.ParseFromString(r.content)
    assert not resp.HasField("partial_success")
    assert sample(registry, "sidecar_otlp_spans_received_total", {"encoding": "protobuf"}) == 240


def test_partial_success_json(client, registry):
    doc = orjson.loads(_triton_json())
    spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans[0]["traceId"] = "zz" * 16  # not hex
    spans[1]["spanId"] = "00" * 8  # all-zero is invalid in OTLP
    spans[2]["startTimeUnixNano"] = {"oops": 1}  # wrong type
    spans[3]["unknownField"] = {"ignored": True}  # unknown fields are ignored
    r = client.post("/v1/traces", content=orjson.dumps(doc), headers={"content-type": JS})
    assert r.status_code == 200
    ps = r.json()["partialSuccess"]
    assert int(ps["rejectedSpans"]) == 3
    assert "traceId" in ps["errorMessage"]
    assert sample(registry, "sidecar_otlp_spans_rejected_total", {"encoding": "json"}) == 3
    assert sample(registry, "sidecar_otlp_spans_received_total", {"encoding": "json"}) == 357


def test_partial_success_protobuf(client):
    req = ExportTraceServiceRequest()
    req.ParseFromString(_python_pb())
    req.resource_spans[0].scope_spans[0].spans[0].trace_id = b"\x01\x02"
    r = client.post("/v1/traces", content=req.SerializeToString(), headers={"content-type": PB})
    assert r.status_code == 200
    resp = ExportTraceServiceResponse()
    resp.ParseFromString(r.content)
    assert resp.partial_success.rejected_spans == 1
    assert "trace_id" in resp.partial_success.error_message


@pytest.mark.parametrize(
    ("body", "ctype", "encoding", "status"),
    [
        (b"{not json", JS, None, 400),
        (b'{"resourceSpans": 5}', JS, None, 400),
        (b"[1,2]", JS, None, 400),
        (b"\xff\xff\xff\xff\x0f garbage", PB, None, 400),
        (b"x" * 400_000, JS, None, 413),  # over the limit before decompression
        (gzip.compress(b" " * 2_000_000), JS, "gzip", 413),  # a gzip bomb: small on the wire, huge inflated
        (gzip.compress(b"{}")[:-6], JS, "gzip", 400),  # truncated gzip
        (b"{}", JS, "br", 415),  # unsupported encoding
        (b"{}", "text/plain", None, 415),
        (b"{}", "", None, 415),
    ],
)
def test_refusals_get_the_right_status_and_the_sidecar_keeps_serving(client, registry, body, ctype, encoding, status):
    headers = {"content-type": ctype} if ctype else {}
    if encoding:
        headers["content-encoding"] = encoding
    r = client.post("/v1/traces", content=body, headers=headers)
    assert r.status_code == status, r.text
    if ctype == PB:
        st = status_pb2.Status()
        st.ParseFromString(r.content)
        assert st.message
    else:
        assert r.json()["message"]
    refused = sum(
        s.value
        for m in registry.collect()
        if m.name == "sidecar_http_refused"
        for s in m.samples
        if s.name.endswith("_total")
    )
    assert refused == 1
    ok = client.post("/v1/traces", content=_triton_json(), headers={"content-type": JS})
    assert ok.status_code == 200


def test_truncated_protobuf_is_400(client):
    body = _python_pb()[:1000]
    r = client.post("/v1/traces", content=body, headers={"content-type": PB})
    assert r.status_code == 400
    assert r.headers["content-type"] == PB


def test_overload_answers_429_with_retry_after(registry):
    svc = make_service(server={"max_inflight_requests": 1}, registry=registry)
    with TestClient(create_app(svc)) as c:
        svc.guard.admission._inflight["otlp_traces"] = 1  # as if one push were in flight
        r = c.post("/v1/traces", content=_triton_json(), headers={"content-type": JS})
        assert r.status_code == 429
        assert r.headers["retry-after"] == "1"
        assert r.json()["code"] == 8
        svc.guard.admission._inflight["otlp_traces"] = 0
        assert c.post("/v1/traces", content=_triton_json(), headers={"content-type": JS}).status_code == 200


def test_push_token_required(registry):
    svc = make_service(server={"push_token": "s3cret"}, registry=registry)
    with TestClient(create_app(svc)) as c:
        r = c.post("/v1/traces", content=_python_pb(), headers={"content-type": PB})
        assert r.status_code == 401
        r = c.post("/v1/traces", content=_python_pb(), headers={"content-type": PB, "authorization": "Bearer s3cret"})
        assert r.status_code == 200


def test_deflate_json(client, registry):
    r = client.post(
        "/v1/traces",
        content=zlib.compress(_triton_json()),
        headers={"content-type": "application/json; charset=utf-8", "content-encoding": "deflate"},
    )
    assert r.status_code == 200
    assert sample(registry, "sidecar_otlp_spans_received_total", {"encoding": "json"}) == 360


def test_a_hub_failure_is_a_counted_500_so_the_exporter_retries(registry, monkeypatch):
    svc = make_service({}, registry=registry)
    with TestClient(create_app(svc)) as c:
        hub = svc.component("traces")

        def broken(*a, **k):
            raise RuntimeError("store bug")

        # The failure is in storing (the decoders are not involved).
        monkeypatch.setattr(hub.store, "add", broken)
        r = c.post("/v1/traces", content=_triton_json(), headers={"content-type": JS})
        assert r.status_code == 500 and "subscriber traces failed on it" in r.json()["message"]
        assert sample(registry, "sidecar_otlp_ingest_errors_total") == 1
        assert sample(registry, "sidecar_push_subscriber_failures_total", {"endpoint": "/v1/traces"}) == 1
        assert sample(registry, "sidecar_otlp_spans_received_total", {"encoding": "json"}) in (None, 0)
        monkeypatch.undo()
        r = c.post("/v1/traces", content=_triton_json(), headers={"content-type": JS})
        assert r.status_code == 200  # the resend is taken
        assert sample(registry, "sidecar_otlp_spans_received_total", {"encoding": "json"}) == 360


@pytest.mark.parametrize(
    "doc",
    [
        {"resourceSpans": [{"scopeSpans": [5]}]},
        {"resourceSpans": [{"resource": 5}]},
        {"resourceSpans": [{"resource": {"attributes": [5]}}]},
        {"resourceSpans": [{"scopeSpans": [{"spans": 5}]}]},
        {"resourceSpans": [{"scopeSpans": [{"spans": "ab"}]}]},
        {"resourceSpans": [{"scopeSpans": {"a": 1}}]},
    ],
)
def test_a_json_body_with_a_wrong_type_at_any_level_is_refused_with_400_not_500(client, registry, doc):
    # Each of these raised AttributeError or TypeError (answered 500) before the walker checked every level.
    r = client.post("/v1/traces", content=orjson.dumps(doc), headers={"content-type": JS})
    assert r.status_code == 400, r.text
    assert "must be" in r.json()["message"]
    assert sample(registry, "sidecar_otlp_refused_total", {"reason": "undecodable"}) == 1


def test_a_service_name_value_that_is_not_an_object_is_read_as_no_service(client):
    doc = {"resourceSpans": [{"resource": {"attributes": [{"key": "service.name", "value": 5}]}}]}
    r = client.post("/v1/traces", content=orjson.dumps(doc), headers={"content-type": JS})
    assert r.status_code == 200


def test_a_scope_without_spans_is_accepted(client):
    # Found by fuzz_otlp_json's comparison of the two JSON paths: the walk refused a scope with no "spans" key.
    doc = {"resourceSpans": [{"scopeSpans": [{"scope": {"name": "s"}}, {"spans": None}, {"spans": []}]}]}
    r = client.post("/v1/traces", content=orjson.dumps(doc), headers={"content-type": JS})
    assert r.status_code == 200, r.text
    from sidecar.sources.otlp.json_decode import decode_json_doc

    assert decode_json_doc(doc).records == []
