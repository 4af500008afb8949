"""The demo's drift injection is flagged by the check configured as the demo configures it."""

from __future__ import annotations

import random
from pathlib import Path

from drift_testutil import events, make_ctx

from sidecar.clock import FakeClock
from sidecar.demo.drift_demo import DEMO_DRIFT_CONFIG, SHIFT_AFTER_SECS, features_for
from sidecar.wiring.drift import drift_check


def test_demo_shift_is_flagged_within_minutes(tmp_path: Path, clock: FakeClock) -> None:
    ctx = make_ctx(tmp_path / "s.sqlite", clock, {"checks": {"drift": DEMO_DRIFT_CONFIG}})
    check = drift_check(ctx)
    rng = random.Random(11)
    start = clock.now()
    first_active: dict[str, float] = {}
    for second in range(int(SHIFT_AFTER_SECS) + 400):
        t = clock.now() - start
        check.observe(events("ctr", "2", clock.now(), [features_for("ctr", t, rng) for _ in range(10)]))
        if second % 15 == 0:
            for f in check.evaluate(clock.now()):
                if f.active:
                    first_active.setdefault(f.labels["feature"], t)
        clock.advance(1.0)
    assert set(first_active) == {"clicks_7d"}
    assert SHIFT_AFTER_SECS < first_active["clicks_7d"] <= SHIFT_AFTER_SECS + 240


def test_demo_feature_constants_describe_the_unshifted_traffic() -> None:
    from sidecar.demo.drift_demo import DEMO_FEATURES, FEATURE_MEANS, FEATURE_SDS

    rng = random.Random(5)
    for model, names in DEMO_FEATURES.items():
        rows = [features_for(model, 0.0, rng) for _ in range(4000)]
        for name in names:
            vals = [r[name] for r in rows]
            mean = sum(vals) / len(vals)
            sd = (sum((v - mean) ** 2 for v in vals) / len(vals)) ** 0.5
            assert abs(mean - FEATURE_MEANS[name]) < 0.1 * FEATURE_SDS[name]
            assert abs(sd / FEATURE_SDS[name] - 1.0) < 0.1
