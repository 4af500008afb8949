"""Name slots (issue 12 item 10): junk model or feature names must not turn drift off for later models."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from drift_testutil import built_check, ctx_of, events, feed, make_ctx, metric, normal_rows

from sidecar.checks.drift.check import DriftCheck
from sidecar.clock import FakeClock


def _check(tmp_path: Path, clock: FakeClock, **drift: Any) -> DriftCheck:
    base: dict[str, Any] = {
        "enabled": True,
        "method": "window",
        "window_secs": 600,
        "sustained_secs": 0,
        "min_samples": 100,
        "reference": {"mode": "pinned", "pinned_events": 300},
    }
    ctx = make_ctx(tmp_path / "s.sqlite", clock, {"checks": {"drift": {**base, **drift}}})
    return built_check(ctx)


def _junk_models(check: DriftCheck, clock: FakeClock, n: int) -> None:
    for i in range(n):
        check.observe(events(f"junk{i}", "1", clock.now(), [{"x": 1.0}]))


def test_idle_junk_models_free_their_slots(tmp_path: Path, clock: FakeClock) -> None:
    check = _check(tmp_path, clock, max_models=50, series_idle_secs=3600)
    _junk_models(check, clock, 50)
    check.observe(events("ctr", "2", clock.now(), [{"x": 1.0}]))
    reg = ctx_of(check).registry
    assert metric(reg, "sidecar_drift_values_dropped_total", reason="model_limit") == 1.0
    clock.advance(3599)
    check.evaluate(clock.now())  # not idle long enough yet: the slots stay taken
    assert len(check.registry.models) == 50
    clock.advance(2)
    check.evaluate(clock.now())
    assert check.registry.models == set() and check.registry.windows == {}
    assert metric(reg, "sidecar_drift_series_expired_total") == 50.0
    # The expired series leave nothing behind: no gauges, no stored window or kind.
    assert metric(reg, "sidecar_drift_condition", model="junk0", version="1", feature="x", test="ks") is None
    assert ctx_of(check).store.keys("drift.window") == [] and ctx_of(check).store.keys("drift.kinds") == []
    rng = np.random.default_rng(0)
    feed(check, clock, "ctr", "2", normal_rows(rng, 300, ["x"]), per_sec=10)
    feed(check, clock, "ctr", "2", normal_rows(rng, 300, ["x"], loc={"x": 1.0}), per_sec=10)
    clock.advance(1)
    found = check.evaluate(clock.now())
    assert {f.labels["model"] for f in found if f.active} == {"ctr"}
    assert metric(reg, "sidecar_drift_values_dropped_total", reason="model_limit") == 1.0


def test_a_series_in_use_is_kept(tmp_path: Path, clock: FakeClock) -> None:
    check = _check(tmp_path, clock, series_idle_secs=3600)
    for _ in range(3):
        check.observe(events("ctr", "2", clock.now(), [{"x": 1.0}]))
        clock.advance(3000)
        check.evaluate(clock.now())
    assert set(check.registry.windows) == {("ctr", "2", "x")}
    assert metric(ctx_of(check).registry, "sidecar_drift_series_expired_total") == 0.0


def test_models_named_in_config_are_never_refused_a_slot(tmp_path: Path, clock: FakeClock) -> None:
    check = _check(tmp_path, clock, max_models=5, models={"ctr": {"features": {"x": "numeric"}}})
    _junk_models(check, clock, 5)
    check.observe(events("ctr", "2", clock.now(), [{"x": 1.0}]))
    assert ("ctr", "2", "x") in check.registry.windows
    assert metric(ctx_of(check).registry, "sidecar_drift_values_dropped_total", reason="model_limit") is None


def test_one_models_junk_features_do_not_starve_other_models_or_versions(tmp_path: Path, clock: FakeClock) -> None:
    check = _check(tmp_path, clock, max_series=100, max_series_per_model=10)
    check.observe(events("junk", "1", clock.now(), [{f"id{i}": 1.0 for i in range(40)}]))
    check.observe(events("ctr", "2", clock.now(), [{"x": 1.0, "y": 2.0}]))
    reg = ctx_of(check).registry
    assert metric(reg, "sidecar_drift_values_dropped_total", reason="model_series_limit") == 30.0
    assert {k for k in check.registry.windows if k[0] == "ctr"} == {("ctr", "2", "x"), ("ctr", "2", "y")}
    assert metric(reg, "sidecar_drift_values_dropped_total", reason="series_limit") is None
    # The cap is per model/version: a new version of the same model (a rollout) gets its own series.
    check.observe(events("junk", "2", clock.now(), [{"x": 1.0}]))
    assert ("junk", "2", "x") in check.registry.windows


def test_after_a_restart_stored_series_get_a_fresh_idle_period(tmp_path: Path, clock: FakeClock) -> None:
    check = _check(tmp_path, clock, series_idle_secs=3600)
    check.observe(events("ctr", "2", clock.now(), [{"x": 1.0}]))
    clock.advance(3000)
    check.persist(force=True)
    ctx_of(check).store.close()
    again = _check(tmp_path, clock, series_idle_secs=3600)
    clock.advance(3000)  # 6000 s after the last event, but only 3000 s after the restart
    again.evaluate(clock.now())
    assert set(again.registry.windows) == {("ctr", "2", "x")}
    clock.advance(601)
    again.evaluate(clock.now())
    assert again.registry.windows == {} and ctx_of(again).store.keys("drift.window") == []


def test_a_rolling_reference_keeps_its_history_past_the_idle_time(tmp_path: Path, clock: FakeClock) -> None:
    check = _check(tmp_path, clock, series_idle_secs=3600, reference={"mode": "rolling"})
    check.observe(events("ctr", "2", clock.now(), [{"x": 1.0}]))
    clock.advance(86400.0)
    check.evaluate(clock.now())
    assert ("ctr", "2", "x") in check.refs.history  # a week of history is what the reference needs
    clock.advance(7 * 86400.0)
    check.evaluate(clock.now())
    assert check.refs.history == {} and ctx_of(check).store.keys("drift.history") == []
