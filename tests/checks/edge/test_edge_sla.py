"""The hit-ratio SLA: burn-rate pairs, the projection, a missed day (the issue's 91.4% against 92%), the words."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from sidecar.alerting.render import finding_text
from sidecar.checks.edge.config import HitRatioSlaConfig
from sidecar.checks.edge.sla import HitRatioSla
from sidecar.clock import FakeClock
from sidecar.processors.edge import EdgeProcessor
from sidecar.processors.edge_config import EdgeSeriesConfig
from sidecar.processors.edge_record import EdgeRecord

DAY0 = 1_764_892_800.0  # 2025-12-05 00:00 UTC


def _traffic(p: EdgeProcessor, start: float, minutes: int, per_minute: int, hits: int, every: int = 1) -> None:
    for m in range(0, minutes, every):
        at = start + m * 60 + 1
        p.observe(
            [EdgeRecord(at, "/p", "HIT" if i < hits else "MISS", 0.01, None, 200, "n1") for i in range(per_minute)]
        )


def _setup(**cfg: Any) -> tuple[EdgeProcessor, HitRatioSla, CollectorRegistry]:
    reg = CollectorRegistry()
    p = EdgeProcessor(EdgeSeriesConfig(), registry=reg, clock=FakeClock(DAY0))
    return p, HitRatioSla(HitRatioSlaConfig.model_validate(cfg), series=p, registry=reg), reg


def test_a_day_that_ended_at_914_percent_is_a_missed_sla() -> None:
    p, sla, reg = _setup()
    _traffic(p, DAY0, 24 * 60, 500, 457, every=60)  # 91.4% all day (one minute an hour)
    _burn, period = sla.evaluate(DAY0 + 86_400 + 120)
    assert period.check == "edge_hit_ratio_period" and period.active
    assert period.value == pytest.approx(0.914)
    summary, _ = finding_text(period)
    assert summary == "cache hit ratio all missed the SLA: 91.4% over the day of 2025-12-05 (target 92%)"
    assert (
        reg.get_sample_value(
            "sidecar_edge_hit_ratio_condition", {"check": "edge_hit_ratio_period", "route_group": "all"}
        )
        == 1
    )


def test_a_day_at_target_is_met() -> None:
    p, sla, _ = _setup()
    _traffic(p, DAY0, 24 * 60, 100, 93, every=60)
    _, period = sla.evaluate(DAY0 + 86_400 + 60)
    assert not period.active


def test_a_fast_burn_fires_the_first_pair_and_projects_the_day() -> None:
    p, sla, reg = _setup()
    _traffic(p, DAY0, 600, 100, 95)  # ten good hours at 95%
    _traffic(p, DAY0 + 600 * 60, 60, 100, 40)  # one hour at 40%: 60% misses = 7.5x the 8% budget
    now = DAY0 + 660 * 60 - 30
    burn, _ = sla.evaluate(now)
    assert burn.active and burn.severity == "critical"
    assert burn.facts["burn_long"] == pytest.approx(7.5)
    assert burn.facts["burn_short"] == pytest.approx(7.5)
    # so far: (600*95 + 60*40) / 66000; the rest of the day at the last hour's 40%
    so_far = (600 * 95 + 60 * 40) / 66_000
    assert burn.value == pytest.approx(so_far)
    rest = (86_400 - (now - DAY0)) / 3600
    assert burn.facts["projected"] == pytest.approx((59_400 + 2400 * rest) / (66_000 + 6000 * rest))
    assert reg.get_sample_value(
        "sidecar_edge_hit_ratio_burn_rate", {"route_group": "all", "window_secs": "3600"}
    ) == pytest.approx(7.5)
    summary, description = finding_text(burn)
    assert summary.startswith("cache hit ratio all burning its SLA: 7.5x over 1h, 7.5x over 5m")
    assert "recent changes" in description


def test_a_short_blip_alone_does_not_fire() -> None:
    p, sla, _ = _setup()
    _traffic(p, DAY0, 115, 100, 96)
    _traffic(p, DAY0 + 115 * 60, 5, 100, 10)  # 5 bad minutes: 5m window burns, 1h does not exceed 6x
    burn, _ = sla.evaluate(DAY0 + 120 * 60 - 30)
    assert burn.facts["burn_short"] is None  # no pair fired
    assert not burn.active


def test_too_few_requests_is_insufficient_not_a_finding() -> None:
    p, sla, _ = _setup(min_requests=1000)
    _traffic(p, DAY0, 10, 10, 0)
    burn, _period = sla.evaluate(DAY0 + 600)
    assert not burn.active and burn.insufficient_data
    assert finding_text(burn)[0] == "cache hit ratio all: not enough requests yet"
