"""Probe traffic stays out of the SLI, drift and business paths: an event whose request id is a probe's and a
span whose trace is a probe's are not published on the bus, and each is counted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry

from sidecar.app import create_app
from sidecar.clock import FakeClock
from sidecar.component import Context
from sidecar.config import parse_config
from sidecar.model import Batch
from sidecar.probe_marker import PROBE_TRACE_PREFIX
from sidecar.service import Service
from sidecar.store import Store
from sidecar.wiring.events import build as events
from sidecar.wiring.traces import build as traces

DATA = Path(__file__).resolve().parents[2] / "data" / "traces"


class Taken:
    def __init__(self) -> None:
        self.items: list[Any] = []

    def factory(self, ctx: Context) -> list[Any]:
        for kind in ("events", "spans"):
            ctx.bus.subscribe(kind, f"taken_{kind}", self.take)
        return []

    def take(self, batch: Batch) -> None:
        self.items.extend(batch.items)


def _client(tmp_path: Path, taken: Taken, registry: CollectorRegistry) -> tuple[Service, TestClient]:
    cfg = parse_config({"triton": {"enabled": False}, "traces": {"enabled": True}})
    svc = Service(
        cfg,
        clock=FakeClock(1_800_000_000.0),
        registry=registry,
        store=Store(tmp_path / "s.sqlite"),
        http=httpx.AsyncClient(transport=httpx.MockTransport(lambda r: httpx.Response(200, json={}))),
        factories=[traces, events, taken.factory],
    )
    return svc, TestClient(create_app(svc))


def test_a_probe_event_is_not_published_and_is_counted(tmp_path: Path) -> None:
    taken, registry = Taken(), CollectorRegistry()
    _, client = _client(tmp_path, taken, registry)
    with client:
        probe = {"model": "ctr", "version": "1", "score": 0.4, "request_id": "sidecar-probe-ctr-7"}
        real = {"model": "ctr", "version": "1", "score": 0.4, "request_id": "req-7"}
        r = client.post("/v1/events", json=[probe, real])
    assert r.status_code == 200, r.text
    assert [e.request_id for e in taken.items] == ["req-7"]
    assert registry.get_sample_value("sidecar_events_rejected_total", {"source": "http", "reason": "probe"}) == 1


def test_a_probe_trace_is_not_published_and_is_counted(tmp_path: Path) -> None:
    taken, registry = Taken(), CollectorRegistry()
    _, client = _client(tmp_path, taken, registry)
    doc = json.loads((DATA / "otlp-traces-triton.json").read_text())
    spans = [s for rs in doc["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]
    traces_in = sorted({s["traceId"] for s in spans})
    assert len(traces_in) >= 2
    probe_trace = PROBE_TRACE_PREFIX + traces_in[0][16:]
    n_probe = sum(1 for s in spans if s["traceId"] == traces_in[0])
    for s in spans:
        if s["traceId"] == traces_in[0]:
            s["traceId"] = probe_trace
    with client:
        r = client.post("/v1/traces", content=json.dumps(doc), headers={"content-type": "application/json"})
    assert r.status_code == 200, r.text
    assert len(taken.items) == len(spans) - n_probe > 0
    assert all(rec[0].hex() != probe_trace for rec in taken.items)
    assert registry.get_sample_value("sidecar_otlp_probe_spans_total") == n_probe


def test_probe_requests_in_a_triton_tensors_trace_file_are_not_events(tmp_path: Path) -> None:
    from drift_testutil import DATA as DRIFT_DATA
    from drift_testutil import make_ctx
    from tracefile_helpers import tensor_source

    from sidecar.clock import FakeClock
    from sidecar.sources.events.metrics import EventsMetrics

    text = (DRIFT_DATA / "trace-file-tensors.json").read_text()
    assert text.count('"request_id":"req-1"') == 1
    (tmp_path / "trace.json.0").write_text(text.replace('"request_id":"req-1"', '"request_id":"sidecar-probe-ctr-1"'))
    clock = FakeClock()
    ctx = make_ctx(
        tmp_path / "state.sqlite",
        clock,
        {"events": {"triton_trace": {"enabled": True, "path": str(tmp_path / "trace.json"), "models": {"ctr": {}}}}},
    )
    got: list[Any] = []
    ctx.bus.subscribe("events", "t", lambda b: got.extend(b.items))
    source = tensor_source(
        ctx.config.events.triton_trace, ctx.bus, ctx.registry, clock, ctx.store, EventsMetrics(ctx.registry)
    )
    source.poll_once()
    assert len(got) == 8  # 5 requests x batch of 2, less the probe's 2
    assert {e.request_id for e in got} == {"req-2", "req-3", "req-4", "req-5"}
    rejected = {"source": "triton_trace", "reason": "probe"}
    assert ctx.registry.get_sample_value("sidecar_events_rejected_total", rejected) == 2
    ctx.store.close()


def _probe_request_in_an_ordinary_trace(doc: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """The first trace of ``doc`` as Triton sends it when it lost the probe's traceparent (gRPC, Triton 2.51):
    a trace id of its own, the probe's request id on the model's span."""
    spans = [s for rs in doc["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]
    trace = spans[0]["traceId"]
    assert not trace.startswith(PROBE_TRACE_PREFIX)
    mine = [s for s in spans if s["traceId"] == trace]
    for s in mine:
        for a in s.get("attributes", []):
            if a["key"] == "triton.request_id":
                a["value"] = {"stringValue": "sidecar-probe-ctr-9"}
    return trace, mine


def test_a_trace_whose_span_carries_a_probe_request_id_is_left_out_now_and_later(tmp_path: Path) -> None:
    taken, registry = Taken(), CollectorRegistry()
    _, client = _client(tmp_path, taken, registry)
    doc = json.loads((DATA / "otlp-traces-triton.json").read_text())
    spans = [s for rs in doc["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]
    trace, mine = _probe_request_in_an_ordinary_trace(doc)
    assert len(mine) == 3  # InferRequest, the model's (with the request id), compute
    late = {"resourceSpans": [{"scopeSpans": [{"spans": [dict(mine[0], spanId="ab" * 8)]}]}]}
    with client:
        r = client.post("/v1/traces", content=json.dumps(doc), headers={"content-type": "application/json"})
        assert r.status_code == 200, r.text
        # A span of the same trace in a later export (no request id on it): remembered, left out too.
        r = client.post("/v1/traces", content=json.dumps(late), headers={"content-type": "application/json"})
        assert r.status_code == 200, r.text
    assert len(taken.items) == len(spans) - 3
    assert all(rec[0].hex() != trace for rec in taken.items)
    assert registry.get_sample_value("sidecar_otlp_probe_spans_total") == 4


def test_the_probe_request_id_is_found_in_protobuf_spans_too() -> None:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    from sidecar.probe_marker import ProbeTraces
    from sidecar.sources.otlp.pb_decode import decode_protobuf

    def request(request_id: str, trace: bytes) -> bytes:
        req = ExportTraceServiceRequest()
        ss = req.resource_spans.add().scope_spans.add()
        for i, name in enumerate(("InferRequest", "ctr", "compute")):
            s = ss.spans.add(trace_id=trace, span_id=bytes([i + 1]) * 8, name=name, start_time_unix_nano=1)
            s.end_time_unix_nano = 2
            if name == "ctr":
                for k, v in (("triton.model_name", "ctr"), ("triton.request_id", request_id)):
                    kv = s.attributes.add(key=k)
                    kv.value.string_value = v
        return req.SerializeToString()

    traces = ProbeTraces(max_traces=2)
    probe = decode_protobuf(request("sidecar-probe-ctr-1", b"\x01" * 16)).records
    user = decode_protobuf(request("req-1", b"\x02" * 16)).records
    assert [r[7] is not None for r in probe] == [False, True, False]  # only the model's span has a model
    assert traces.split(probe) == ([], 3)
    assert traces.split(user) == (user, 0)
    for n in range(3, 6):  # bounded: the oldest probe trace is forgotten
        traces.split(decode_protobuf(request(f"sidecar-probe-ctr-{n}", bytes([n]) * 16)).records)
    assert traces.split(probe[:1]) == (probe[:1], 0)
