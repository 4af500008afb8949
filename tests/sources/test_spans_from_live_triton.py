"""A live sidecar under uvicorn: a real Triton sends OTLP JSON, the real OpenTelemetry SDK sends protobuf."""

from __future__ import annotations

import httpx
import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import StatusCode
from prometheus_client import CollectorRegistry
from traces_helpers import live_sidecar, sample, wait_for

from sidecar.demo.tritonserver import TritonServer, demo_model_repository
from sidecar.sources.triton_failures import FailureJoin


@pytest.fixture(scope="module")
def sidecar():
    reg = CollectorRegistry()
    with live_sidecar({"slow_threshold_ms": 1000}, registry=reg) as (url, svc):
        yield url, svc, reg


@pytest.fixture(scope="module")
def triton(sidecar, tmp_path_factory):
    url, _, _ = sidecar
    server = TritonServer(
        demo_model_repository(),
        tmp_path_factory.mktemp("triton-otel"),
        extra_args=[
            "--trace-config",
            "mode=opentelemetry",
            "--trace-config",
            f"opentelemetry,url={url}/v1/traces",
            "--trace-config",
            "rate=1",
            "--trace-config",
            "level=TIMESTAMPS",
        ],
    )
    try:
        server.start()
        yield server
    finally:
        server.stop()


def _infer(c: httpx.Client, base: str, model: str, version: int, data: list[float]) -> int:
    r = c.post(
        f"{base}/v2/models/{model}/versions/{version}/infer",
        json={"inputs": [{"name": "x", "shape": [1, len(data)], "datatype": "FP32", "data": data}]},
    )
    return r.status_code


@pytest.mark.triton
async def test_real_triton_otlp_json_every_span_received_and_failures_joined(sidecar, triton):
    url, svc, reg = sidecar
    hub = svc.component("traces")
    before = sample(reg, "sidecar_otlp_spans_received_total", {"encoding": "json"})
    join = FailureJoin(
        svc.config.traces.failure_join.model_copy(update={"metrics_url": triton.metrics_url}),
        hub=hub,
        http=httpx.AsyncClient(),
        registry=CollectorRegistry(),
        clock=svc.clock,
    )
    await join.poll_once()  # the counters' starting point
    with httpx.Client(timeout=10) as c:
        codes = [_infer(c, triton.http_url, "ctr", 1 + i % 2, [1, 2, 3, float(i)]) for i in range(12)]
        codes.append(_infer(c, triton.http_url, "fraud", 1, [-1.0, 2, 3]))  # fails in the model
    assert codes[:12] == [200] * 12 and codes[12] >= 400
    # Triton sends three spans per request (InferRequest, the model, compute) in batches, seconds later.
    assert wait_for(
        lambda: sample(reg, "sidecar_otlp_spans_received_total", {"encoding": "json"}) - before >= 13 * 3, 30
    ), sample(reg, "sidecar_otlp_spans_received_total", {"encoding": "json"})
    assert sample(reg, "sidecar_otlp_spans_received_total", {"encoding": "json"}) - before == 39
    assert sample(reg, "sidecar_otlp_spans_rejected_total", {"encoding": "json"}) == 0
    pairs = hub.store.models()
    assert ("ctr", "1") in pairs and ("ctr", "2") in pairs and ("fraud", "1") in pairs
    for v in ("1", "2"):
        assert (
            sample(
                reg,
                "sidecar_triton_stage_duration_seconds_count",
                {"model": "ctr", "version": v, "stage": "compute_infer"},
            )
            == 6
        )
    (fraud,) = hub.store.summaries(model="fraud")
    assert not fraud.error  # Triton's spans carry no error status ...
    assert await join.poll_once(apply_all=True) == 1  # ... the failure counter marks it
    (fraud,) = hub.store.summaries(model="fraud")
    assert fraud.error and "Triton counted a failure" in fraud.failure_note
    assert all(not t.error for t in hub.store.summaries(model="ctr"))
    page = httpx.get(f"{url}/traces?model=fraud").text
    assert fraud.trace_id in page and "failed" in page
    await join.http.aclose()


async def test_real_sdk_protobuf_exporter_every_span_received(sidecar):
    url, svc, reg = sidecar
    before = sample(reg, "sidecar_otlp_spans_received_total", {"encoding": "protobuf"})
    provider = TracerProvider(resource=Resource({"service.name": "caller"}))
    provider.add_span_processor(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{url}/v1/traces"), max_export_batch_size=100)
    )
    tracer = provider.get_tracer("test")
    sent: set[tuple[str, str]] = set()
    for i in range(100):
        with tracer.start_as_current_span(f"call-{i}") as parent:
            with tracer.start_as_current_span("triton-infer") as child:
                if i % 10 == 0:
                    child.set_status(StatusCode.ERROR, "model said no")
            for s in (parent, child):
                ctx = s.get_span_context()
                sent.add((f"{ctx.trace_id:032x}", f"{ctx.span_id:016x}"))
    assert provider.force_flush(10_000)
    provider.shutdown()
    assert sample(reg, "sidecar_otlp_spans_received_total", {"encoding": "protobuf"}) - before == 200
    hub = svc.component("traces")
    got = {(s.trace_id, s.span_id) for tid in {t for t, _ in sent} for s in (hub.store.spans_of(tid) or [])}
    assert got == sent
    failed = [t for t in hub.store.summaries(only_interesting=True) if t.root_name.startswith("call-")]
    assert len(failed) == 10 and all(t.error for t in failed)
