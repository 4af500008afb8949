"""What the drift check exports: a series' numbers appear once there is a value, never as NaN."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from drift_testutil import built_check, ctx_of, feed, make_ctx, metric, normal_rows
from prometheus_client import generate_latest

from sidecar.checks.drift.check import DriftCheck
from sidecar.clock import FakeClock

_NUMBERS = (
    "sidecar_drift_statistic",
    "sidecar_drift_p_value",
    "sidecar_drift_p_value_raw",
    "sidecar_drift_effect_size",
)


def _drift_nan_lines(check: DriftCheck) -> list[str]:
    text = generate_latest(ctx_of(check).registry).decode()
    return [ln for ln in text.splitlines() if ln.startswith("sidecar_drift_") and ln.endswith(" NaN")]


def test_nothing_is_exported_as_nan_while_the_reference_is_collected(tmp_path: Path, clock: FakeClock) -> None:
    ctx = make_ctx(
        tmp_path / "s.sqlite",
        clock,
        {
            "checks": {
                "drift": {
                    "enabled": True,
                    "method": "window",
                    "window_secs": 600,
                    "sustained_secs": 0,
                    "min_samples": 100,
                    "reference": {"mode": "pinned", "pinned_events": 500},
                }
            }
        },
    )
    check = built_check(ctx)
    rng = np.random.default_rng(0)
    feed(check, clock, "m", "1", normal_rows(rng, 200, ["a"]), per_sec=20)
    assert all(f.insufficient_data for f in check.evaluate(clock.now()))
    assert _drift_nan_lines(check) == []
    lab = {"model": "m", "version": "1", "feature": "a", "test": "ks"}
    assert all(metric(ctx.registry, name, **lab) is None for name in _NUMBERS)
    assert metric(ctx.registry, "sidecar_drift_psi", model="m", version="1", feature="a") is None
    assert (
        metric(ctx.registry, "sidecar_drift_missing_ratio", model="m", version="1", feature="a", window="reference")
        is None
    )
    # What is known is exported: the condition is 0, the current window's missing ratio 0.
    assert metric(ctx.registry, "sidecar_drift_condition", **lab) == 0.0
    assert (
        metric(ctx.registry, "sidecar_drift_missing_ratio", model="m", version="1", feature="a", window="current")
        == 0.0
    )
    feed(check, clock, "m", "1", normal_rows(rng, 400, ["a"]), per_sec=20)
    check.evaluate(clock.now())
    assert all(metric(ctx.registry, name, **lab) is not None for name in _NUMBERS)
    # A new reference drops the old numbers again instead of leaving stale ones behind.
    check.set_reference("m", check.spec_for("m").model_copy(update={"pinned_events": 1000}))
    check.evaluate(clock.now())
    assert all(metric(ctx.registry, name, **lab) is None for name in _NUMBERS)
    assert _drift_nan_lines(check) == []
