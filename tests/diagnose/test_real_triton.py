"""Diagnoses made to happen on a real Triton 2.51: metrics asked on the HTTP port (a real 404), a server
started without summary latencies, and a one-instance Python model with callers queueing behind it; and
``sidecar doctor`` against both servers."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry
from waiting import wait_until

from sidecar.alerting.render import finding_text
from sidecar.cli import main
from sidecar.clock import SystemClock
from sidecar.demo.tritonserver import TritonServer, free_port
from sidecar.diagnose.config import DiagnoseConfig
from sidecar.diagnose.runner import Diagnoser
from sidecar.promtext import parse_exposition

pytestmark = pytest.mark.triton

SLOW_REPO = Path(__file__).parent / "slow_repo"


@pytest.fixture(scope="module")
def plain_triton(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    """Triton as many run it: no summary latencies, no tracing; serving the one-instance 'slow' model."""
    server = TritonServer(SLOW_REPO, tmp_path_factory.mktemp("triton-plain"), summary_latencies=False)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def infer(server: TritonServer, n: int = 1) -> None:
    body = {"inputs": [{"name": "x", "shape": [1], "datatype": "FP32", "data": [1.0]}]}
    with httpx.Client(timeout=60) as c:
        for _ in range(n):
            assert c.post(f"{server.http_url}/v2/models/slow/infer", json=body).status_code == 200


def _total(server: TritonServer, family: str) -> float:
    expo = parse_exposition(httpx.get(server.metrics_url, timeout=10).text)
    return sum(v for name, _, v in expo.samples if name == family)


def pending(server: TritonServer) -> float:
    return _total(server, "nv_inference_pending_request_count")


def served(server: TritonServer) -> float:
    return _total(server, "nv_inference_request_success")


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    """Closed after each test: a client left open keeps a keep-alive connection to Triton, and Triton's SIGTERM
    path waits for its HTTP connections to close (up to --exit-timeout-secs, 30) before it exits."""
    async with httpx.AsyncClient() as client:
        yield client


def diagnoser(metrics_url: str, http_url: str, http: httpx.AsyncClient) -> tuple[Diagnoser, CollectorRegistry]:
    registry = CollectorRegistry()
    return Diagnoser(
        DiagnoseConfig(timeout_secs=10),
        metrics_url=metrics_url,
        http_url=http_url,
        spans_expected=False,
        registry=registry,
        clock=SystemClock(),
        http=http,
    ), registry


async def test_metrics_url_on_the_http_port_is_a_404_diagnosis(
    demo_triton: TritonServer, http: httpx.AsyncClient
) -> None:
    diag, registry = diagnoser(f"{demo_triton.http_url}/metrics", demo_triton.http_url, http)
    probe = await diag.probe_once()
    assert probe.status == 404
    (f,) = diag.evaluate(0.0)
    assert f.active and f.kind == "diagnosis" and f.labels == {"alertname": "Diagnosis", "diagnosis": "metrics_404"}
    assert (
        "answers 404: Triton started without --allow-metrics or with a different --metrics-port" in finding_text(f)[0]
    )
    assert registry.get_sample_value("sidecar_diagnose_probes_total", {"result": "http_status"}) == 1


async def test_triton_without_summaries_is_diagnosed(plain_triton: TritonServer, http: httpx.AsyncClient) -> None:
    infer(plain_triton)
    diag, _ = diagnoser(plain_triton.metrics_url, plain_triton.http_url, http)
    await diag.probe_once()
    codes = [f.labels["diagnosis"] for f in diag.evaluate(0.0)]
    assert codes == ["summaries_off"]


async def test_one_busy_python_instance_with_a_growing_queue(
    plain_triton: TritonServer, http: httpx.AsyncClient
) -> None:
    diag, _ = diagnoser(plain_triton.metrics_url, plain_triton.http_url, http)
    callers = [threading.Thread(target=infer, args=(plain_triton, 4)) for _ in range(12)]
    for t in callers:
        t.start()
    try:
        assert wait_until(lambda: pending(plain_triton) >= 5, timeout_s=30)
        first = await diag.probe_once()
        assert first.configs["slow"].backend == "python" and first.configs["slow"].instances == 1
        # Fifteen more serialized 100 ms requests served under the probe (about 1.5 s).
        done = served(plain_triton)
        assert wait_until(lambda: served(plain_triton) >= done + 15, timeout_s=30)
        await diag.probe_once()
        found = [f for f in diag.evaluate(0.0) if f.labels["diagnosis"] == "python_single_instance_busy"]
    finally:
        for t in callers:
            t.join()
    assert [(f.labels["model"], f.labels["version"]) for f in found] == [("slow", "1")]
    assert found[0].facts["busy_ratio"] >= 0.9
    assert "raise instance_group count" in finding_text(found[0])[1]


def _config(tmp_path: Path, server: TritonServer, traces: bool) -> str:
    path = tmp_path / "sidecar.yaml"
    path.write_text(
        f"triton:\n  metrics_url: {server.metrics_url}\n  http_url: {server.http_url}\n"
        f"traces:\n  enabled: {'true' if traces else 'false'}\n"
    )
    return str(path)


def test_doctor_exit_codes(
    tmp_path: Path, demo_triton: TritonServer, plain_triton: TritonServer, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["doctor", "--config", _config(tmp_path, demo_triton, traces=False), "--wait-secs", "0"]) == 0
    assert capsys.readouterr().out.strip() == "no problems found"

    infer(plain_triton)
    assert main(["doctor", "--config", _config(tmp_path, plain_triton, traces=True), "--wait-secs", "0"]) == 1
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("summaries_off: Triton summaries off: latency quantiles unavailable")
    assert "summary_latencies=true" in lines[0]
    assert lines[1].startswith("no_spans: Triton's trace level is OFF")
    assert len(lines) == 2

    closed = tmp_path / "closed.yaml"
    closed.write_text(f"triton:\n  metrics_url: http://127.0.0.1:{free_port()}/metrics\n")
    assert main(["doctor", "--config", str(closed), "--wait-secs", "0"]) == 2
    assert "cannot run: cannot reach Triton's metrics endpoint" in capsys.readouterr().err
