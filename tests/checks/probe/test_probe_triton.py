"""The probe against a real Triton 2.51 (CPU) that sends OpenTelemetry spans to a live sidecar: the probe's
request passes over HTTP and over gRPC with the official ``tritonclient``, and Triton carries the probe's
``traceparent`` onto its spans, so the sidecar's OTLP receiver leaves them out (counted) while a caller's
request's spans arrive (the traceparent travels as an HTTP header or as gRPC metadata). Over gRPC Triton 2.51
loses the traceparent of a few requests (it reads the metadata value as a C string, sidecar/probe_marker.py):
their spans carry a trace id of Triton's own and are left out by the probe's request id on the model span.

Triton exports every ``EXPORT_EVERY_MS`` here (its batch span processor's ``bsp_schedule_delay``; 5000 by default,
docs/user_guide/trace.md in triton-inference-server/server), so a wait for spans takes a fraction of a second
instead of up to 5 s. The sidecar keeps idle connections ``KEEP_ALIVE_S``: at uvicorn's default 5 s, equal to
Triton's default export interval, an export could meet the server closing its idle connection, and Triton's
OTLP/HTTP client (opentelemetry-cpp 1.8.3, body sent by a read callback with no seek callback) cannot resend the
body on a fresh connection (CURLE_SEND_FAIL_REWIND, opentelemetry-cpp issue 4549): that batch is dropped, which
would leave a test's 120 probe spans uncounted (the grpc case failed once so in CI, "left out" staying 0 for 30 s;
not reproduced here). A wait that fails prints what arrived and Triton's export errors."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry
from traces_helpers import live_sidecar, sample, wait_for

from sidecar.checks.probe.check import ModelProbe, is_probe_trace
from sidecar.checks.probe.client import TritonProbeClient
from sidecar.checks.probe.config import ProbesConfig
from sidecar.clock import SystemClock
from sidecar.demo.tritonserver import TritonServer, demo_model_repository
from sidecar.probe_marker import is_probe_request
from sidecar.records import to_span
from sidecar.wiring.span_subs import subscribe_spans

pytestmark = pytest.mark.triton

PROBE = {
    "version": "1",
    "inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [0.1, 0.2, 0.3, 0.4]}],
    "outputs": [{"name": "score", "datatype": "FP32", "shape": [1, 1], "min": 0, "max": 1}],
}


EXPORT_EVERY_MS = 300  # Triton's bsp_schedule_delay
KEEP_ALIVE_S = 120  # longer than any pause between this module's exports: the server closes no idle connection
SEEN: list[str] = []  # trace ids of every span the live sidecar published
SEEN_REQUESTS: list[str] = []  # and the request ids (triton.request_id) those spans carried


def _seen(batch: Any) -> None:
    for r in batch.items:
        SEEN.append(r[0].hex())
        rid = to_span(r).attributes.get("triton.request_id")
        if rid:
            SEEN_REQUESTS.append(str(rid))


@pytest.fixture(scope="module")
def sidecar() -> Iterator[tuple[str, Any, CollectorRegistry]]:
    reg = CollectorRegistry()
    with live_sidecar({}, registry=reg, timeout_keep_alive=KEEP_ALIVE_S) as (url, svc):
        subscribe_spans(svc.bus, "seen", _seen)
        yield url, svc, reg


@pytest.fixture(scope="module")
def triton(
    sidecar: tuple[str, Any, CollectorRegistry], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TritonServer]:
    url, _, _ = sidecar
    server = TritonServer(
        demo_model_repository(),
        tmp_path_factory.mktemp("triton-probe"),
        summary_latencies=False,
        extra_args=[
            "--trace-config",
            "mode=opentelemetry",
            "--trace-config",
            f"opentelemetry,url={url}/v1/traces",
            "--trace-config",
            "rate=1",
            "--trace-config",
            "level=TIMESTAMPS",
            "--trace-config",
            f"opentelemetry,bsp_schedule_delay={EXPORT_EVERY_MS}",
        ],
    )
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.mark.parametrize("protocol", ["http", "grpc"])
async def test_the_probe_passes_over_each_protocol(triton: TritonServer, protocol: str) -> None:
    port = triton.http_port if protocol == "http" else triton.grpc_port
    client = TritonProbeClient(f"127.0.0.1:{port}", protocol=protocol)  # type: ignore[arg-type]
    cfg = ProbesConfig.model_validate({"enabled": True, "protocol": protocol, "models": {"ctr": PROBE}})
    probe = ModelProbe(cfg, client=client, registry=CollectorRegistry(), clock=SystemClock())
    try:
        assert await probe.probe("ctr") == "ok"
        bad = ProbesConfig.model_validate(
            {"enabled": True, "models": {"ctr": {**PROBE, "outputs": [{"name": "score", "shape": [1, 2]}]}}}
        )
        wrong = ModelProbe(bad, client=client, registry=CollectorRegistry(), clock=SystemClock())
        assert await wrong.probe("ctr") == "shape"
        missing = ModelProbe(
            ProbesConfig.model_validate({"enabled": True, "models": {"nope": PROBE}}),
            client=client,
            registry=CollectorRegistry(),
            clock=SystemClock(),
        )
        assert await missing.probe("nope") == "server_error"
    finally:
        await probe.shutdown()


def _arrived(triton: TritonServer, left_out: float, received: float) -> str:
    """What a failed wait saw: the counts, and the export errors Triton's OpenTelemetry client logged."""
    errors = [line for line in triton.log_tail(400).splitlines() if "OTLP" in line or "[Error]" in line]
    return f"left out {left_out:g}, received {received:g}; Triton's export errors: {errors[-5:]}"


PROBES = 40  # over gRPC about 1 in 20 loses its traceparent on Triton 2.51 (2, 1 and 3 of 40 measured)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
async def test_tritons_spans_of_a_probe_are_left_out(
    sidecar: tuple[str, Any, CollectorRegistry], triton: TritonServer, protocol: str
) -> None:
    _, _, reg = sidecar
    received = lambda: sample(reg, "sidecar_otlp_spans_received_total", {"encoding": "json"})  # noqa: E731
    left_out = lambda: sample(reg, "sidecar_otlp_probe_spans_total")  # noqa: E731
    body = {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [0.1, 0.2, 0.3, 0.4]}]}
    p1, r0 = left_out(), received()
    cfg = ProbesConfig.model_validate({"enabled": True, "protocol": protocol, "models": {"ctr": PROBE}})
    port = triton.http_port if protocol == "http" else triton.grpc_port
    client = TritonProbeClient(f"127.0.0.1:{port}", protocol=protocol)  # type: ignore[arg-type]
    probe = ModelProbe(cfg, client=client, registry=CollectorRegistry(), clock=SystemClock())
    try:
        for _ in range(PROBES):
            assert await probe.probe("ctr") == "ok"
    finally:
        await probe.shutdown()
    # Triton sends three spans per request (InferRequest, the model's, compute), each with the probe's trace id
    # (or, where Triton lost the traceparent, one of its own): all left out, none published. (Only the ids are
    # compared: on a shared machine another run's Triton may still be exporting to this port from an earlier
    # sidecar, so the received count alone proves nothing.)
    assert wait_for(lambda: left_out() - p1 >= 3 * PROBES, 30), _arrived(triton, left_out() - p1, received() - r0)
    assert not [t for t in SEEN if is_probe_trace(t)]
    assert not [r for r in SEEN_REQUESTS if is_probe_request(r)]
    # A caller's request: its spans arrive.
    r1 = received()
    assert httpx.post(f"{triton.http_url}/v2/models/ctr/versions/1/infer", json=body, timeout=30).status_code == 200
    assert wait_for(lambda: received() - r1 >= 3, 30), _arrived(triton, left_out() - p1, received() - r1)
