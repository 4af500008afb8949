"""Bounds found in review: feature kinds past the series limit are neither kept nor persisted."""

from __future__ import annotations

from pathlib import Path

from drift_testutil import events, make_ctx, metric

from sidecar.clock import FakeClock
from sidecar.wiring.drift import drift_check


def test_features_refused_by_the_series_limit_leave_no_kind_behind(tmp_path: Path, clock: FakeClock) -> None:
    ctx = make_ctx(tmp_path / "s.sqlite", clock, {"checks": {"drift": {"enabled": True, "max_series": 3}}})
    check = drift_check(ctx)
    # A client sending a new feature name in every event (an id leaked into the feature map, say).
    check.observe(events("m", "1", clock.now(), [{f"f{i}": float(i)} for i in range(500)]))
    assert metric(ctx.registry, "sidecar_drift_values_dropped_total", reason="series_limit") == 497
    assert len(ctx.store.keys("drift.kinds")) == 3
    assert len(check.registry.kinds) == 3
    # The series that were admitted keep their kinds, persisted and in memory.
    check.observe(events("m", "1", clock.now(), [{"f0": 1.0, "f1": 2.0, "f2": 3.0}]))
    assert sorted(ctx.store.keys("drift.kinds")) == ["m\x1ff0", "m\x1ff1", "m\x1ff2"]
