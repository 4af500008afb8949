"""Drift injection for ``sidecar demo``: feature values whose distribution shifts after a start delay.

The demo's traffic generator calls ``features_for(model, t_since_start)`` per request and sends the values both
to Triton (as the input tensor) and to /v1/events; ``DEMO_DRIFT_CONFIG`` is the ``checks.drift`` section the
demo runs with (the default method, so the shift is flagged within minutes).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

__all__ = [
    "DEMO_DRIFT_CONFIG",
    "DEMO_FEATURES",
    "FEATURE_MEANS",
    "FEATURE_SDS",
    "SHIFT_AFTER_SECS",
    "SHIFT_SD",
    "features_for",
]

SHIFT_AFTER_SECS = 180.0  # the demo runs clean this long, then ctr's `clicks_7d` mean moves
SHIFT_SD = 1.0  # by this many standard deviations
DEMO_FEATURES: dict[str, list[str]] = {
    "ctr": ["age", "income", "clicks_7d", "dwell_secs"],
    "fraud": ["amount", "hour", "risk"],
}
# The demo features' distributions before the shift, public so the demo traffic can standardise inputs
# (read-only views: module state must not be mutable).
FEATURE_MEANS: Mapping[str, float] = MappingProxyType(
    {
        "age": 40.0,
        "income": 3.0,
        "clicks_7d": 5.0,
        "dwell_secs": 30.0,
        "amount": 50.0,
        "hour": 12.0,
        "risk": 0.2,
    }
)
FEATURE_SDS: Mapping[str, float] = MappingProxyType(
    {
        "age": 12.0,
        "income": 1.0,
        "clicks_7d": 2.0,
        "dwell_secs": 10.0,
        "amount": 20.0,
        "hour": 5.0,
        "risk": 0.1,
    }
)


def features_for(model: str, t_since_start: float, rng: random.Random | None = None) -> dict[str, float]:
    """One request's feature values; ``ctr``'s ``clicks_7d`` shifts by SHIFT_SD sd after SHIFT_AFTER_SECS."""
    r = rng or random.Random()
    out: dict[str, float] = {}
    for name in DEMO_FEATURES.get(model, []):
        mean, sd = FEATURE_MEANS[name], FEATURE_SDS[name]
        if model == "ctr" and name == "clicks_7d" and t_since_start >= SHIFT_AFTER_SECS:
            mean += SHIFT_SD * sd
        out[name] = r.gauss(mean, sd)
    return out


# The checks.drift section for the demo: the default method (multiscale, active at 2 of the last 3 drifting
# blocks) on one scale, 60 s blocks, so the injected shift is flagged ~2 minutes after it starts. One scale
# only: a 300 s block that straddles the 3-minute income shift (+6 to +9 min) completes minutes after the
# shift ended and would fire the income alert again long after the inputs recovered, which in a 12-minute demo
# reads as a fault. The first 300 events of each version are the reference (at the demo's rate a version has
# them well before the shift at +3 min).
DEMO_DRIFT_CONFIG: dict[str, Any] = {
    "enabled": True,
    "scales_secs": [60.0],
    "min_samples": 100,
    "reference": {"mode": "pinned", "pinned_events": 300},
    "models": {m: {"features": dict.fromkeys(f, "numeric")} for m, f in DEMO_FEATURES.items()},
}
