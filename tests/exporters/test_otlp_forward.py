"""Forwarding through the OpenTelemetry OTLP exporter to a real loopback HTTP endpoint that misbehaves on
cue."""

from __future__ import annotations

import asyncio
import gzip
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from fastapi.testclient import TestClient
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from prometheus_client import CollectorRegistry
from traces_helpers import DATA, make_service, sample
from waiting import wait_until

from exporters.otlp_forward import OtlpForwarder
from sidecar.app import create_app
from sidecar.clock import SystemClock
from sidecar.config import parse_config
from sidecar.sources.otlp.decode import decode_json

FWD = {"exporter": "otlp_forward"}


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


async def _await(cond, secs: float = 10.0) -> bool:
    """``_wait`` for tests on the event loop: the forwarder delivers on that loop, so it must keep turning."""
    async with asyncio.timeout(secs):
        while not cond():
            await asyncio.sleep(0.01)
    return True


def _fwd(url: str, registry: CollectorRegistry, **kw: object) -> OtlpForwarder:
    cfg = parse_config({"traces": {"forward": {"endpoint": url, "timeout_secs": 5, **kw}}}).traces.forward
    return OtlpForwarder(cfg, registry=registry, http=httpx.AsyncClient(), clock=SystemClock())


async def test_retries_503_then_delivers_every_span_with_ids_intact(collector):
    reg = CollectorRegistry()
    collector.script = [503]
    fwd = _fwd(collector.url, reg, batch_max_spans=1000)
    await fwd.start()
    spans = _spans()
    fwd.offer(spans)
    assert await _await(lambda: len(collector.accepted) == len(spans))
    await fwd.shutdown()
    assert sorted(collector.accepted) == sorted((s.trace_id, s.span_id) for s in spans)
    assert sample(reg, "sidecar_export_failed_total", {**FWD, "reason": "http_5xx"}) == 1
    assert collector.calls == 2
    assert sample(reg, "sidecar_export_sent_total", FWD) == len(spans)


async def test_500_is_not_retried_and_drops_are_counted(collector):
    reg = CollectorRegistry()
    collector.script = [500]
    fwd = _fwd(collector.url, reg, batch_max_spans=1000)
    await fwd.start()
    fwd.offer(_spans()[:10])
    assert await _await(lambda: sample(reg, "sidecar_export_dropped_total", {**FWD, "reason": "permanent"}) == 10)
    await fwd.shutdown()
    assert collector.calls == 1
    assert sample(reg, "sidecar_export_failed_total", {**FWD, "reason": "http_5xx"}) == 1


async def test_queue_is_bounded_and_shutdown_counts_what_is_left(collector):
    reg = CollectorRegistry()
    fwd = _fwd(collector.url, reg, queue_max_spans=10, shutdown_flush_secs=0)
    fwd.offer(_spans()[:25])  # not started: nothing drains
    assert sample(reg, "sidecar_export_dropped_total", {**FWD, "reason": "queue_full"}) == 15
    assert sample(reg, "sidecar_export_queue_items", FWD) == 10
    await fwd.shutdown()
    assert sample(reg, "sidecar_export_dropped_total", {**FWD, "reason": "shutdown"}) == 10


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
        assert _wait(lambda: sample(reg, "sidecar_export_sent_total", FWD) == 1800)
    assert len(collector.accepted) == 1800


def test_forwarded_spans_keep_every_field_they_came_with() -> None:
    from exporters.otlp_encode import encode_spans
    from sidecar.model import Span, SpanEvent
    from sidecar.sources.otlp.decode import decode_protobuf

    spans = list(_spans())
    odd = Span(
        "0af7651916cd43dd8448eb211c80319c",
        "b7ad6b7169203331",
        None,
        "odd",
        1,
        2,
        "svc",
        {"n": 3, "b": True, "f": 0.5, "arr": ("a", "b"), "big": 2**70},
        (SpanEvent("e", 1, {"k": "v"}),),
        status_code=2,
        status_message="boom",
        kind=0,
    )
    back = list(decode_protobuf(encode_spans([*spans, odd])).spans)
    assert back[:-1] == spans
    # Kind UNSPECIFIED stays UNSPECIFIED; an int beyond 64 bits goes as its text rather than failing the batch.
    assert back[-1] == Span(
        odd.trace_id,
        odd.span_id,
        None,
        "odd",
        1,
        2,
        "svc",
        {"n": 3, "b": True, "f": 0.5, "arr": ("a", "b"), "big": str(2**70)},
        (SpanEvent("e", 1, {"k": "v"}),),
        status_code=2,
        status_message="boom",
        kind=0,
    )


async def test_a_password_in_the_forward_endpoint_goes_as_basic_auth_and_never_into_logs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import base64
    import logging

    caplog.set_level(logging.DEBUG)
    seen: list[httpx.Request] = []
    answers = [httpx.Response(503), httpx.Response(200)]

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append(req)
        return answers.pop(0)

    async def no_wait(s: float) -> None:
        pass

    reg = CollectorRegistry()
    cfg = parse_config({"traces": {"forward": {"endpoint": "http://tempo:s3cr3t-pw@tempo:4318/v1/traces"}}})
    fwd = OtlpForwarder(
        cfg.traces.forward,
        registry=reg,
        http=httpx.AsyncClient(transport=httpx.MockTransport(handler)),
        clock=SystemClock(),
        sleep=no_wait,
    )
    fwd.offer(_spans()[:3])
    await fwd.sender.flush()
    assert [str(r.url) for r in seen] == ["http://tempo:4318/v1/traces"] * 2
    assert seen[0].headers["authorization"] == "Basic " + base64.b64encode(b"tempo:s3cr3t-pw").decode()
    assert "s3cr3t-pw" not in caplog.text and "tempo:***@tempo:4318" in caplog.text
