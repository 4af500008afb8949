"""Forwarding through the OpenTelemetry OTLP exporter to a real loopback HTTP endpoint that misbehaves on
cue."""

from __future__ import annotations

import gzip
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from fastapi.testclient import TestClient
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from prometheus_client import CollectorRegistry
from traces_helpers import DATA, make_service, sample
from waiting import wait_until

from exporters.otlp_forward import OtlpForwarder
from sidecar.app import create_app
from sidecar.config import parse_config
from sidecar.sources.otlp.decode import decode_json


class FakeCollector:
    """Answers with the scripted statuses in order (then 200), records the span ids it accepted."""

    def __init__(self) -> None:
        self.script: list[int] = []
        self.accepted: list[tuple[str, str]] = []
        self.calls = 0
        self.gate = threading.Event()
        self.gate.set()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"]))
                fake.gate.wait(10)
                fake.calls += 1
                status = fake.script.pop(0) if fake.script else 200
                if status == 200:
                    if self.headers.get("content-encoding") == "gzip":
                        body = gzip.decompress(body)
                    req = ExportTraceServiceRequest()
                    req.ParseFromString(body)
                    fake.accepted += [
                        (s.trace_id.hex(), s.span_id.hex())
                        for rs in req.resource_spans
                        for ss in rs.scope_spans
                        for s in ss.spans
                    ]
                self.send_response(status)
                if status in (429, 503):
                    self.send_header("Retry-After", "0")
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1/traces"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.gate.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def collector() -> Iterator[FakeCollector]:
    c = FakeCollector()
    try:
        yield c
    finally:
        c.close()


def _spans():
    return decode_json((DATA / "otlp-traces-triton.json").read_bytes()).spans


def _wait(cond, secs: float = 10.0) -> bool:
    return bool(wait_until(cond, secs, interval_s=0.01))


def _fwd(url: str, registry: CollectorRegistry, **kw: object) -> OtlpForwarder:
    cfg = parse_config({"traces": {"forward": {"endpoint": url, "timeout_secs": 5, **kw}}}).traces.forward
    return OtlpForwarder(cfg, registry)


async def test_retries_503_then_delivers_every_span_with_ids_intact(collector):
    reg = CollectorRegistry()
    collector.script = [503]
    fwd = _fwd(collector.url, reg, batch_max_spans=1000)
    await fwd.start()
    spans = _spans()
    fwd.offer(spans)
    assert _wait(lambda: len(collector.accepted) == len(spans))
    await fwd.shutdown()
    assert sorted(collector.accepted) == sorted((s.trace_id, s.span_id) for s in spans)
    assert sample(reg, "sidecar_otlp_forward_requests_total", {"outcome": "retryable"}) == 1
    assert sample(reg, "sidecar_otlp_forward_requests_total", {"outcome": "ok"}) == 1
    assert sample(reg, "sidecar_otlp_forward_spans_sent_total") == len(spans)


async def test_500_is_not_retried_and_drops_are_counted(collector):
    reg = CollectorRegistry()
    collector.script = [500]
    fwd = _fwd(collector.url, reg, batch_max_spans=1000)
    await fwd.start()
    fwd.offer(_spans()[:10])
    assert _wait(
        lambda: sample(reg, "sidecar_otlp_forward_spans_dropped_total", {"reason": "export_failed"}) == 10
    )
    await fwd.shutdown()
    assert collector.calls == 1
    assert sample(reg, "sidecar_otlp_forward_requests_total", {"outcome": "permanent"}) == 1


async def test_queue_is_bounded_and_shutdown_counts_what_is_left(collector):
    reg = CollectorRegistry()
    fwd = _fwd(collector.url, reg, queue_max_spans=10, shutdown_flush_secs=0)
    fwd.offer(_spans()[:25])  # not started: nothing drains
    assert sample(reg, "sidecar_otlp_forward_spans_dropped_total", {"reason": "queue_full"}) == 15
    assert sample(reg, "sidecar_otlp_forward_queue_spans") == 10
    await fwd.shutdown()
    assert sample(reg, "sidecar_otlp_forward_spans_dropped_total", {"reason": "shutdown"}) == 10


def test_a_stuck_downstream_never_slows_the_receiver(collector):
    reg = CollectorRegistry()
    collector.gate.clear()  # the downstream accepts the connection and then hangs
    svc = make_service(
        {"forward": {"endpoint": collector.url, "timeout_secs": 5, "batch_max_spans": 100}}, registry=reg
    )
    body = (DATA / "otlp-traces-triton.json").read_bytes()
    with TestClient(create_app(svc)) as c:
        for _ in range(5):
            r = c.post("/v1/traces", content=body, headers={"content-type": "application/json"})
            assert r.status_code == 200
        # All five were answered while the first export is still hanging.
        assert not collector.gate.is_set() and len(collector.accepted) == 0
        assert sample(reg, "sidecar_otlp_spans_received_total", {"encoding": "json"}) == 1800
        collector.gate.set()
        assert _wait(lambda: sample(reg, "sidecar_otlp_forward_spans_sent_total") == 1800)
    assert len(collector.accepted) == 1800
