"""Alert delivery while Alertmanager is down (a real Alertmanager 0.25 started only later, on the port the
sidecar was given), slow (a stand-in answering after the timeout), or refusing with a 4xx (a stand-in
answering what Alertmanager 0.25 answers to a bad alert).

Survived means: the service keeps evaluating, each failed POST is counted under its reason, the notice stays
in the persisted outbox while a retry can help, no other alert appears, and the notice arrives once the fault
ends. A 4xx is the documented exception: the batch is dropped (counted and logged) and the alert reaches
Alertmanager again at its next resend.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from alerting_helpers import make_service
from faultkit import AM_BIN, Behaviour, RealAlertmanager, StandIn
from waiting import wait_until

from sidecar.clock import FakeClock
from sidecar.demo.tritonserver import free_port
from sidecar.model import Batch, Event
from sidecar.service import Service

RESEND_SECS = 600


def _cfg(am_url: str, timeout_secs: float = 2.0) -> dict[str, Any]:
    wer = {
        "field": "fields.wer",
        "aggregate": "mean",
        "window_secs": 300,
        "bucket_secs": 10,
        "compare": "absolute",
        "direction": "up",
        "threshold": 0.08,
        "for_secs": 60,
        "min_events": 5,
    }
    return {
        "alerting": {
            "enabled": True,
            "resend_delay_secs": RESEND_SECS,
            "alertmanager": {"urls": [am_url], "timeout_secs": timeout_secs},
        },
        "checks": {"business": {"enabled": True, "checks": {"wer_high": wer}}},
    }


def _fire(svc: Service, clock: FakeClock, model: str = "asr") -> None:
    """Two evaluation rounds a hold apart with a high WER: the alert fires."""
    for _ in range(2):
        svc.bus.publish(
            Batch(
                kind="events",
                source="t",
                items=tuple(
                    Event(model=model, version="1", timestamp=clock.now(), fields={"wer": 0.2}) for _ in range(10)
                ),
            )
        )
        svc.evaluate_once(clock.now())
        clock.advance(60)
    assert _firing(svc) == [model]


def _firing(svc: Service) -> list[str]:
    book = svc.component("alert_book")
    return sorted(a.labels["model"] for a in book.alerts.values() if a.state == "firing")


def _value(svc: Service, name: str, **labels: str) -> float:
    return svc.registry.get_sample_value(name, labels) or 0.0


@pytest.fixture
def clock() -> FakeClock:
    # Five minutes in the past, as the fake clock moves ahead of real time; a firing notice's endsAt
    # (now + 4 x resend delay) stays in the real Alertmanager's future.
    return FakeClock(time.time() - 300)


@pytest.fixture
def am_later(tmp_path: Path) -> Iterator[RealAlertmanager]:
    if not Path(AM_BIN).exists():
        pytest.fail("prometheus-alertmanager is not installed (Debian package prometheus-alertmanager)")
    am = RealAlertmanager(tmp_path / "am", port=free_port())
    try:
        yield am
    finally:
        am.stop()


@pytest.mark.alertmanager
async def test_alertmanager_down_then_started_gets_the_notice(
    tmp_path: Path, clock: FakeClock, am_later: RealAlertmanager
) -> None:
    svc = make_service(tmp_path, _cfg(am_later.url), clock=clock, transport=httpx.AsyncHTTPTransport())
    exporter: Any = svc.component("alertmanager")
    try:
        _fire(svc, clock)
        for _ in range(3):  # nobody listens on the port
            assert await exporter.flush_all() == {am_later.url: "retry"}
        assert (
            _value(svc, "sidecar_alertmanager_request_failures_total", alertmanager=am_later.url, reason="connect") == 3
        )
        assert len(exporter.pending(am_later.url)) == 1
        svc.evaluate_once(clock.now())  # evaluation goes on while delivery fails
        assert _firing(svc) == ["asr"]

        am_later.start()
        assert await exporter.flush_all() == {am_later.url: "empty"}
        got = wait_until(lambda: am_later.alerts(model="asr"), 10)
        assert got and got[0]["labels"]["alertname"] == "WerHigh"
        assert exporter.pending(am_later.url) == []
        assert _value(svc, "sidecar_alertmanager_notices_sent_total", alertmanager=am_later.url) == 1
        assert [a["labels"]["model"] for a in am_later.alerts()] == ["asr"]  # nothing false
    finally:
        await svc.shutdown()


async def test_alertmanager_slow_times_out_keeps_the_notice_then_delivers(
    tmp_path: Path, clock: FakeClock, stand_in: StandIn
) -> None:
    stand_in.set(Behaviour(status=200, body=b"", content_type="application/json", delay_s=30.0))
    svc = make_service(
        tmp_path, _cfg(stand_in.url, timeout_secs=0.3), clock=clock, transport=httpx.AsyncHTTPTransport()
    )
    exporter: Any = svc.component("alertmanager")
    try:
        _fire(svc, clock)
        t0 = time.monotonic()
        assert await exporter.flush_all() == {stand_in.url: "retry"}
        assert time.monotonic() - t0 < 5, "one flush must be bounded by the timeout"
        assert (
            _value(svc, "sidecar_alertmanager_request_failures_total", alertmanager=stand_in.url, reason="timeout") == 1
        )
        assert len(exporter.pending(stand_in.url)) == 1

        ok = stand_in.set(Behaviour(status=200, body=b"", content_type="application/json"))
        assert await exporter.flush_all() == {stand_in.url: "empty"}
        (body,) = ok.bodies
        assert [n["labels"]["model"] for n in orjson.loads(body)] == ["asr"]
        assert exporter.pending(stand_in.url) == []
        assert _firing(svc) == ["asr"]
    finally:
        await svc.shutdown()


async def test_alertmanager_4xx_drops_the_batch_counted_and_the_next_resend_arrives(
    tmp_path: Path, clock: FakeClock, stand_in: StandIn
) -> None:
    refusal = (Path(__file__).resolve().parents[1] / "data" / "alerting" / "am-400.json").read_bytes()
    stand_in.set(Behaviour(status=400, body=refusal, content_type="application/json"))
    svc = make_service(tmp_path, _cfg(stand_in.url), clock=clock, transport=httpx.AsyncHTTPTransport())
    exporter: Any = svc.component("alertmanager")
    try:
        _fire(svc, clock)
        assert await exporter.flush_all() == {stand_in.url: "empty"}  # refused, then nothing left to send
        assert _value(svc, "sidecar_alertmanager_notices_rejected_total", alertmanager=stand_in.url) == 1
        assert exporter.pending(stand_in.url) == []

        ok = stand_in.set(Behaviour(status=200, body=b"", content_type="application/json"))
        svc.evaluate_once(clock.now())
        assert await exporter.flush_all() == {stand_in.url: "empty"}
        assert ok.bodies == []  # not re-sent before the resend delay: the refused notice is gone
        clock.advance(RESEND_SECS)
        svc.evaluate_once(clock.now())
        assert await exporter.flush_all() == {stand_in.url: "empty"}
        (body,) = ok.bodies
        assert [n["labels"]["model"] for n in orjson.loads(body)] == ["asr"]
        assert _value(svc, "sidecar_alertmanager_notices_sent_total", alertmanager=stand_in.url) == 1
    finally:
        await svc.shutdown()
