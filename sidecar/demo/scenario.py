"""What the demo's traffic looks like over time, so every capability has something real to find.

Feature values are drawn per request (means and spreads from ``drift_demo``) and sent to Triton standardised,
so the models' scores are real model outputs, not invented numbers:

* from ``SHIFT_AFTER_SECS`` (3 min) ``ctr``'s ``clicks_7d`` moves up by one standard deviation: input drift the
  drift check flags;
* from ``REGRESSION_START_SECS`` to ``REGRESSION_END_SECS`` (6 to 9 min) ``income`` moves up by 1.5 standard
  deviations; the CTR models weigh income negatively, so the predicted CTR mean falls by roughly 40%: the
  business check fires and, once the inputs return, resolves;
* about 8% of ``fraud`` requests carry a negative amount, which the model rejects: failure SLIs and traces.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from sidecar.demo.business_demo import REGRESSION_END_SECS, REGRESSION_START_SECS
from sidecar.demo.drift_demo import DEMO_FEATURES, FEATURE_MEANS, FEATURE_SDS, SHIFT_AFTER_SECS, SHIFT_SD

__all__ = ["DemoRequest", "DemoScenario"]

INCOME_SHIFT_SD = 1.5


@dataclass(frozen=True)
class DemoRequest:
    model: str
    version: str
    inputs: list[float]  # what Triton receives
    features: dict[str, float]  # what the caller reports to /v1/events (raw units)


class DemoScenario:
    def __init__(self, seed: int = 7, fraud_failure_ratio: float = 0.08) -> None:
        self.rng = random.Random(seed)
        self.fraud_failure_ratio = fraud_failure_ratio

    def _feature(self, name: str, shift_sd: float = 0.0) -> tuple[float, float]:
        mean, sd = FEATURE_MEANS[name], FEATURE_SDS[name]
        raw = self.rng.gauss(mean + shift_sd * sd, sd)
        return raw, (raw - mean) / sd

    def request(self, t_since_start: float) -> DemoRequest:
        r = self.rng.random()
        if r < 0.7:
            version = "1" if r < 0.35 else "2"
            feats: dict[str, float] = {}
            z: list[float] = []
            for name in DEMO_FEATURES["ctr"]:
                shift = 0.0
                if name == "clicks_7d" and t_since_start >= SHIFT_AFTER_SECS:
                    shift = SHIFT_SD
                if name == "income" and REGRESSION_START_SECS <= t_since_start < REGRESSION_END_SECS:
                    shift = INCOME_SHIFT_SD
                raw, zv = self._feature(name, shift)
                feats[name] = raw
                z.append(zv)
            return DemoRequest("ctr", version, z, feats)
        amount, _ = self._feature("amount")
        amount = abs(amount)
        if self.rng.random() < self.fraud_failure_ratio:
            amount = -amount
        hour_raw, hour_z = self._feature("hour")
        risk_raw, risk_z = self._feature("risk")
        return DemoRequest(
            "fraud", "1", [amount, hour_z, risk_z], {"amount": amount, "hour": hour_raw, "risk": risk_raw}
        )

    @staticmethod
    def changes() -> list[tuple[float, dict[str, Any]]]:
        """Changes the demo's "CI" records, by time: the one that causes the CTR regression."""
        return [
            (
                REGRESSION_START_SECS - 5.0,
                {
                    "what": "feature pipeline: income no longer log-scaled (PR#221)",
                    "who": "demo-ci",
                    "model": "ctr",
                    "link": "https://github.com/example/feature-pipeline/pull/221",
                },
            )
        ]

    @staticmethod
    def timeline() -> list[tuple[float, str]]:
        return [
            (SHIFT_AFTER_SECS, "ctr input 'clicks_7d' shifts up by 1 sd, for good"),
            (REGRESSION_START_SECS - 5.0, "a feature-pipeline change is posted to /v1/changes"),
            (REGRESSION_START_SECS, "ctr input 'income' shifts up by 1.5 sd: predicted CTR falls by more than 15%"),
            (REGRESSION_END_SECS, "'income' returns to normal"),
        ]
