"""What ``sidecar demo`` needs for its business-metric regression: event values whose CTR score drops after
a delay and recovers later (so an alert fires, then resolves), and the checks/alerting config to watch them.

The demo runs minutes, not days, so its check is the classic CTR check scaled down: the last 60 s against the
10 minutes before, down more than 15%, held 20 s.
"""

from __future__ import annotations

import random
from typing import Any

from sidecar.model import Event

__all__ = [
    "DEMO_ALERTING",
    "DEMO_BUSINESS_CHECKS",
    "REGRESSION_END_SECS",
    "REGRESSION_START_SECS",
    "RegressionSchedule",
    "demo_events",
    "score_for",
]

REGRESSION_START_SECS = 360.0  # once the baseline holds 5 of its 10 minutes (min coverage 30%)
REGRESSION_END_SECS = 540.0

DEMO_BUSINESS_CHECKS: dict[str, Any] = {
    "enabled": True,
    "checks": {
        "ctr_mean_down": {
            "display_name": "CTR mean",
            "model": "ctr",
            "field": "score",
            "aggregate": "mean",
            "window_secs": 60,
            "bucket_secs": 5,
            "baseline_secs": 600,
            "baseline_bucket_secs": 10,
            "compare": "relative",
            "direction": "down",
            "threshold": 0.15,
            "for_secs": 20,
            "severity": "high",
            "team": "growth",
            "min_events": 20,
            "min_baseline_events": 50,
            "min_baseline_coverage": 0.3,
            "runbook": "ctr-mean-down.md",
        },
    },
}

DEMO_ALERTING: dict[str, Any] = {
    "enabled": True,
    "resend_delay_secs": 10,
    "resolved_retention_secs": 120,
    "alertmanager": {"urls": []},  # the demo fills in the Alertmanager it starts
}


class RegressionSchedule:
    """CTR scores around ``base``, lower by ``drop`` from ``start_after_secs`` to ``end_after_secs``."""

    def __init__(
        self,
        *,
        base: float = 0.042,
        drop: float = 0.2,
        start_after_secs: float = REGRESSION_START_SECS,
        end_after_secs: float = REGRESSION_END_SECS,
        seed: int = 7,
    ) -> None:
        self.base = base
        self.drop = drop
        self.start_after = start_after_secs
        self.end_after = end_after_secs
        self.rng = random.Random(seed)

    def in_regression(self, elapsed_secs: float) -> bool:
        return self.start_after <= elapsed_secs < self.end_after

    def score(self, elapsed_secs: float) -> float:
        mean = self.base * (1 - self.drop) if self.in_regression(elapsed_secs) else self.base
        return max(0.0, self.rng.gauss(mean, mean * 0.1))


def demo_events(
    schedule: RegressionSchedule, t0: float, now: float, n: int, *, model: str = "ctr", version: str = "2"
) -> list[Event]:
    """``n`` events stamped ``now``, scores following the schedule (``now - t0`` s into the demo)."""
    return [
        Event(
            model=model,
            version=version,
            timestamp=now,
            score=schedule.score(now - t0),
            request_id=f"demo-{int(now)}-{i}",
        )
        for i in range(n)
    ]


def score_for(model: str, t_since_start: float, rng: random.Random | None = None) -> float | None:
    """The CTR score to report for one ``ctr`` request (None for other models): 0.042 on average, 20% lower
    between REGRESSION_START_SECS and REGRESSION_END_SECS. The demo's traffic generator sends it as the event's
    ``score`` to /v1/events, the way a caller reports what the model served."""
    if model != "ctr":
        return None
    r = rng or random.Random()
    mean = 0.042 * (0.8 if REGRESSION_START_SECS <= t_since_start < REGRESSION_END_SECS else 1.0)
    return max(0.0, r.gauss(mean, mean * 0.1))
