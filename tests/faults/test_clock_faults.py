"""The wall clock steps (NTP correcting a drifted host, a VM resumed) while the monotonic clock runs on:
``FakeClock.set_wall`` injected into a Service moves wall time alone.

Survived means: no evaluation raises, no alert appears that the data does not call for, derived rates never go
negative, and a real regression after the step is still caught.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import httpx
import pytest
from alerting_helpers import make_service
from faultkit import Behaviour, StandIn, triton_exposition
from prometheus_client import CollectorRegistry

from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.model import Batch, Event
from sidecar.service import Service
from sidecar.store import Store
from sidecar.wiring.triton import build as triton_build

HOLD = 60


def _cfg() -> dict[str, Any]:
    wer = {
        "field": "fields.wer",
        "aggregate": "mean",
        "window_secs": 300,
        "bucket_secs": 10,
        "compare": "absolute",
        "direction": "up",
        "threshold": 0.08,
        "for_secs": HOLD,
        "min_events": 5,
    }
    return {
        "alerting": {"enabled": True, "resend_delay_secs": 600, "alertmanager": {"urls": []}},
        "checks": {"eval_interval_secs": 10, "business": {"enabled": True, "checks": {"wer_high": wer}}},
    }


def _feed(svc: Service, clock: FakeClock, wer: float, n: int = 10) -> None:
    svc.bus.publish(
        Batch(
            kind="events",
            source="t",
            items=tuple(Event(model="asr", version="1", timestamp=clock.now(), fields={"wer": wer}) for _ in range(n)),
        )
    )


def _states(svc: Service) -> list[str]:
    return sorted(a.state for a in svc.component("alert_book").alerts.values())


def _run(svc: Service, clock: FakeClock, wer: float, secs: int) -> None:
    for _ in range(secs // 10):
        clock.advance(10)
        _feed(svc, clock, wer)
        svc.evaluate_once(clock.now())


def _eval_errors(svc: Service) -> float:
    return sum(
        s.value
        for m in svc.registry.collect()
        if m.name == "sidecar_check_evaluation_errors"
        for s in m.samples
        if s.name.endswith("_total")
    )


@pytest.mark.parametrize("step", [-3600, +86_400], ids=["back_1h", "forward_1d"])
def test_a_wall_clock_step_raises_no_false_alert_and_a_real_regression_is_still_caught(
    tmp_path: Path, step: int
) -> None:
    clock = FakeClock()
    svc = make_service(tmp_path, _cfg(), clock=clock)
    _run(svc, clock, 0.03, 300)  # a healthy window
    assert _states(svc) == []

    clock.set_wall(clock.now() + step)
    _run(svc, clock, 0.03, 300)
    assert _states(svc) == [] and _eval_errors(svc) == 0

    _run(svc, clock, 0.3, 300 + HOLD)  # WER ten times the threshold for a whole window and the hold
    assert _states(svc) == ["firing"]
    assert _eval_errors(svc) == 0


def test_a_forward_step_does_not_cut_a_pending_alerts_hold_short(tmp_path: Path) -> None:
    clock = FakeClock()
    svc = make_service(tmp_path, _cfg(), clock=clock)
    _run(svc, clock, 0.3, 30)
    assert _states(svc) == ["pending"]
    clock.set_wall(clock.now() + 3600)
    _feed(svc, clock, 0.3)
    svc.evaluate_once(clock.now())  # 30 s of the 60 s hold have passed on the monotonic clock
    assert _states(svc) == ["pending"]


def _triton_service(stand_in: StandIn, clock: FakeClock) -> Service:
    cfg = parse_config(copy.deepcopy({"triton": {"metrics_url": f"{stand_in.url}/metrics", "http_url": stand_in.url}}))
    return Service(
        cfg,
        clock=clock,
        http=httpx.AsyncClient(),
        registry=CollectorRegistry(),
        store=Store(":memory:"),
        factories=[triton_build],
    )


def _rate(svc: Service) -> float | None:
    return svc.registry.get_sample_value("sidecar_model_requests_per_second", {"model": "ctr", "version": "1"})


def _negative(svc: Service) -> list[str]:
    return [
        f"{s.name}{s.labels}={s.value}"
        for m in svc.registry.collect()
        for s in m.samples
        if s.name.startswith("sidecar_model_") and s.value < 0
    ]


async def test_triton_rates_survive_a_backward_step(stand_in: StandIn) -> None:
    clock = FakeClock()
    svc = _triton_service(stand_in, clock)
    src = svc.component("triton_metrics")
    try:
        for i, success in enumerate((80, 130, 180)):
            stand_in.set(Behaviour(body=triton_exposition(success)))
            if i == 2:
                clock.set_wall(clock.now() - 3600)
            clock.advance(5)
            assert await src.scrape_once()
            assert _negative(svc) == []
        # Rates divide by monotonic time: the hour the wall clock lost changes nothing.
        assert _rate(svc) == pytest.approx(50 / 5)
        stand_in.set(Behaviour(body=triton_exposition(230)))
        clock.advance(5)
        assert await src.scrape_once()
        assert _rate(svc) == pytest.approx(50 / 5)
    finally:
        await svc.shutdown()
        svc.store.close()


async def test_triton_rates_survive_a_forward_step(stand_in: StandIn) -> None:
    clock = FakeClock()
    svc = _triton_service(stand_in, clock)
    src = svc.component("triton_metrics")
    try:
        for i, success in enumerate((80, 130, 180)):
            stand_in.set(Behaviour(body=triton_exposition(success)))
            if i == 2:
                clock.set_wall(clock.now() + 3600)
            clock.advance(5)
            assert await src.scrape_once()
        assert _rate(svc) == pytest.approx(50 / 5)
    finally:
        await svc.shutdown()
        svc.store.close()


def test_a_backward_step_does_not_stop_resends_of_a_firing_alert(tmp_path: Path) -> None:
    cfg = _cfg()
    cfg["alerting"]["resend_delay_secs"] = 60
    clock = FakeClock()
    svc = make_service(tmp_path, cfg, clock=clock)

    def sent() -> float:
        return svc.registry.get_sample_value("sidecar_alert_notices_total", {"state": "firing"}) or 0.0

    _run(svc, clock, 0.3, 300 + HOLD)
    assert _states(svc) == ["firing"]
    before = sent()
    clock.set_wall(clock.now() - 3600)  # an hour back: a wall-clock resend timer would wait an hour
    _run(svc, clock, 0.3, 180)
    assert sent() - before >= 2  # resent every 60 s of real time (Alertmanager would resolve it otherwise)
