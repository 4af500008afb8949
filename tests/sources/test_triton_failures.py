"""The failure join reads label values as the exposition format defines them (escapes undone, any character)."""

from __future__ import annotations

import logging

import httpx
import pytest
from prometheus_client import CollectorRegistry

from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.sources.triton_failures import FailureJoin, failure_counts
from sidecar.state.trace_hub import TraceHub


def test_failure_counts_unescapes_label_values():
    text = (
        'nv_inference_request_failure{model="a\\\\b",reason="BACKEND",version="1"} 2\n'
        'nv_inference_request_failure{model="say \\"hi\\"",reason="OTHER",version="2"} 1\n'
    )
    assert failure_counts(text) == {("a\\b", "1"): 2.0, ('say "hi"', "2"): 1.0}


def test_failure_counts_reads_a_brace_inside_a_label_value():
    text = 'nv_inference_request_failure{model="x}y",reason="BACKEND",version="1"} 4\n'
    assert failure_counts(text) == {("x}y", "1"): 4.0}


def test_failure_counts_skips_malformed_lines_and_keeps_the_rest():
    text = (
        'nv_inference_request_failure{model="m",version="1" reason="BACKEND"} 5\n'
        'nv_inference_request_failure{model="m",reason="BACKEND",version="1"} nope\n'
        'nv_inference_request_failure{model="m",reason="OTHER",version="1"} 1\n'
    )
    assert failure_counts(text) == {("m", "1"): 1.0}


async def test_failure_join_logs_once_while_triton_is_down_and_once_on_recovery(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock, reg = FakeClock(), CollectorRegistry()
    hub = TraceHub(parse_config({"traces": {"enabled": True}}).traces, registry=reg, clock=clock)
    up = [False] * 5 + [True, True] + [False, False]

    def handler(request: httpx.Request) -> httpx.Response:
        if not up.pop(0):
            raise httpx.ConnectError("connection refused")
        return httpx.Response(200, text='nv_inference_request_failure{model="m",reason="BACKEND",version="1"} 0\n')

    cfg = parse_config({"traces": {"failure_join": {"metrics_url": "http://triton:8002/metrics"}}})
    caplog.set_level(logging.INFO, logger="sidecar.traces.failures")
    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
        join = FailureJoin(cfg.traces.failure_join, hub=hub, http=http, registry=reg, clock=clock)
        for _ in range(9):
            await join.poll_once()
            clock.advance(15)
    lines = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "sidecar.traces.failures"]
    assert [lvl for lvl, _ in lines] == ["WARNING", "INFO", "WARNING"], lines
    assert "cannot reach Triton" in lines[0][1]
    assert "recovered after 75 s (5 failed reads)" in lines[1][1]
    # Every failed read is still counted, logged or not.
    assert reg.get_sample_value("sidecar_trace_failure_join_errors_total", {"reason": "http"}) == 7
