"""The rolling reference ("the same hours last week") on a fake clock, across a restart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from drift_testutil import built_check, ctx_of, feed, make_ctx, normal_rows

from sidecar.alerting.render import finding_text
from sidecar.checks.drift.check import DriftCheck
from sidecar.checks.drift.references import Reference
from sidecar.clock import FakeClock

WEEK = 7 * 86400.0


def _check(tmp_path: Path, clock: FakeClock) -> DriftCheck:
    cfg: dict[str, Any] = {
        "checks": {
            "drift": {
                "enabled": True,
                "method": "window",
                "window_secs": 1800,
                "bucket_count": 6,
                "min_samples": 200,
                "sustained_secs": 0,
                "eval_threads": 1,
                "reference": {"mode": "rolling"},
            }
        }
    }
    ctx = make_ctx(tmp_path / "state.sqlite", clock, cfg)
    return built_check(ctx)


def test_last_weeks_same_hours_become_the_reference(tmp_path: Path, clock: FakeClock) -> None:
    check = _check(tmp_path, clock)
    rng = np.random.default_rng(21)
    t0 = clock.now()  # 800 s into an hour: the week-ago window [t0, t0 + 1800) lies inside that hour
    hour_start = t0 - t0 % 3600
    # Last week: a ~ N(5, 1), b ~ N(0, 1), 2 events/s for an hour (into the next hour too).
    feed(check, clock, "m", "1", normal_rows(rng, 7200, ["a", "b"], loc={"a": 5.0}), per_sec=2)
    in_hour = int(2 * (hour_start + 3600 - t0))  # the events of last week's hour that holds the window
    # Three days later, other traffic (a ~ N(0, 1)): it is history too, but not the same hours.
    clock.advance(3 * 86400.0 - 3600)
    feed(check, clock, "m", "1", normal_rows(rng, 1000, ["a", "b"]), per_sec=10)
    early = check.evaluate(clock.now())
    assert all(f.insufficient_data for f in early if f.labels["test"] == "ks")
    assert "same hours last week" in next(finding_text(f)[0] for f in early if f.labels["feature"] == "a")
    # A week after t0: the same hours, a unchanged, b shifted by half a standard deviation.
    clock.advance(t0 + WEEK - clock.now())
    feed(check, clock, "m", "1", normal_rows(rng, 3600, ["a", "b"], loc={"a": 5.0, "b": 0.5}), per_sec=2)
    now = clock.now()
    assert now == t0 + WEEK + 1800
    ref = check.reference_for("m", "1", "a", now)
    assert isinstance(ref, Reference) and ref.source == "rolling"
    assert ref.n == in_hour and ref.ecdf is not None
    assert 4.9 < float(np.mean(ref.ecdf.sample(2000, np.random.default_rng(0)))) < 5.1  # last week's a
    found = check.evaluate(now)
    ks = {f.labels["feature"]: f for f in found if f.labels["test"] == "ks"}
    assert {k for k, f in ks.items() if f.active} == {"b"}
    assert not ks["a"].insufficient_data and ks["a"].effect_size is not None and ks["a"].effect_size < 0.05
    # The history is persisted: after a restart the same reference is there.
    check.persist(force=True)
    ctx_of(check).store.close()
    again = _check(tmp_path, clock)
    ref2 = again.reference_for("m", "1", "b", now)
    assert isinstance(ref2, Reference) and ref2.n == in_hour
    assert {f.labels["feature"] for f in again.evaluate(now) if f.active} == {"b"}
