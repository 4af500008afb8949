"""A real sidecar process (``sidecar run``) while Triton misbehaves: slow, 500, an HTML error page (a stand-in
that serves Triton 2.51's real exposition between faults), and a real Triton 2.51 killed and restarted.

Survived means: the process stays up and keeps answering, each failed scrape is counted under its reason,
Triton is marked down and the derived series are withdrawn (never a stale or negative value), no alert is
raised, and the first good scrape after the fault brings everything back.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from faultkit import Behaviour, SidecarProcess, StandIn, negative_sidecar_values, triton_exposition
from waiting import wait_until

from sidecar.demo.tritonserver import TritonServer, demo_model_repository

WAIT_S = 20.0


def _config(metrics_url: str, http_url: str) -> dict[str, Any]:
    return {
        "triton": {
            "metrics_url": metrics_url,
            "http_url": http_url,
            "interval_secs": 0.2,
            "timeout_secs": 0.5,
            "stale_after_secs": 2.0,
        },
        "alerting": {"enabled": True, "alertmanager": {"urls": []}},
        "checks": {"eval_interval_secs": 0.5},
    }


def _reached(sc: SidecarProcess, name: str, at_least: float, **labels: str) -> float:
    seen: list[float] = []

    def reached() -> bool:
        v = sc.value(name, **labels)
        if v is not None and v >= at_least:
            seen.append(v)
            return True
        return False

    assert wait_until(reached, WAIT_S, interval_s=0.05, ignore=(httpx.HTTPError,)), (
        f"{name}{labels} never reached {at_least}; log:\n{sc.log_tail()}"
    )
    return seen[-1]


def _survived(sc: SidecarProcess) -> None:
    assert sc.alive(), f"the sidecar exited; log:\n{sc.log_tail()}"
    t0 = time.monotonic()
    assert httpx.get(f"{sc.url}/healthz", timeout=5).status_code == 200
    assert time.monotonic() - t0 < 2.0, "the event loop was blocked"
    text = sc.metrics()
    assert negative_sidecar_values(text) == []
    assert httpx.get(f"{sc.url}/v1/alerts", timeout=5).json() == []


def _failures(sc: SidecarProcess, reason: str) -> float:
    return sc.value("sidecar_triton_scrape_failures_total", reason=reason) or 0.0


def test_triton_slow_then_500_then_html_then_healthy_again(stand_in: StandIn, sidecar_factory: Any) -> None:
    stand_in.set(Behaviour(body=triton_exposition(80)))
    sc = sidecar_factory(_config(f"{stand_in.url}/metrics", stand_in.url))
    _reached(sc, "sidecar_triton_up", 1)
    _reached(sc, "sidecar_model_requests_per_second", 0, model="ctr", version="1")

    # Slow: answers after 30 s while the scrape times out after 0.5 s.
    stand_in.set(Behaviour(body=triton_exposition(90), delay_s=30.0))
    _reached(sc, "sidecar_triton_scrape_failures_total", 1, reason="timeout")
    assert sc.value("sidecar_triton_up") == 0
    _survived(sc)
    # Withdrawn rather than left looking fresh.
    assert wait_until(lambda: sc.value("sidecar_model_requests_per_second") is None, WAIT_S)

    stand_in.set(Behaviour(status=500, body=b"internal error", content_type="text/plain"))
    _reached(sc, "sidecar_triton_scrape_failures_total", 1, reason="http_status")
    _survived(sc)

    html = b"<!DOCTYPE html><html><body><h1>502 Bad Gateway</h1></body></html>"
    stand_in.set(Behaviour(body=html, content_type="text/html"))
    assert wait_until(lambda: _failures(sc, "content_type") + _failures(sc, "parse") >= 1, WAIT_S)
    _survived(sc)

    failed = sc.value("sidecar_triton_scrapes_total", result="failure") or 0
    assert failed >= 3
    stand_in.set(Behaviour(body=triton_exposition(100)))
    _reached(sc, "sidecar_triton_up", 1)
    _reached(sc, "sidecar_model_requests_per_second", 0, model="ctr", version="1")
    _survived(sc)
    assert httpx.get(f"{sc.url}/readyz", timeout=5).status_code == 200


@pytest.mark.triton
def test_real_triton_killed_then_restarted(tmp_path: Path, sidecar_factory: Any) -> None:
    triton = TritonServer(demo_model_repository(), tmp_path / "triton")
    triton.start()
    try:
        sc = sidecar_factory(_config(triton.metrics_url, triton.http_url))
        body = {"inputs": [{"name": "x", "shape": [1, 3], "datatype": "FP32", "data": [5.0, 0.1, 0.1]}]}

        def infer(n: int) -> None:
            for _ in range(n):
                assert (
                    httpx.post(f"{triton.http_url}/v2/models/fraud/versions/1/infer", json=body, timeout=30).status_code
                    == 200
                )

        _reached(sc, "sidecar_triton_up", 1)
        infer(5)
        _reached(sc, "sidecar_model_request_success_total", 5, model="fraud", version="1")

        triton.kill()  # SIGKILL to the whole group, as the OOM killer would
        _reached(sc, "sidecar_triton_scrape_failures_total", 1, reason="connect")
        assert sc.value("sidecar_triton_up") == 0
        assert httpx.get(f"{sc.url}/readyz", timeout=5).status_code == 503
        _survived(sc)

        triton.start()  # same ports; its counters start from zero again
        _reached(sc, "sidecar_triton_up", 1)
        infer(3)
        _reached(sc, "sidecar_model_request_success_total", 8, model="fraud", version="1")
        assert (sc.value("sidecar_triton_series_resets_total") or 0) >= 1
        _survived(sc)
    finally:
        triton.stop()
