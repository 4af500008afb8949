"""The drift check end to end on a fake clock: shifts found, identical distributions quiet, NaN, restart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from drift_testutil import built_check, ctx_of, feed, make_ctx, metric, normal_rows
from prometheus_client import CollectorRegistry

from sidecar.alerting.render import finding_text
from sidecar.checks.drift.check import DriftCheck
from sidecar.clock import FakeClock
from sidecar.model import Change

FEATS = ["a", "b", "c", "d", "e"]


def _cfg(**drift: Any) -> dict[str, Any]:
    # These tests are about the window method (window_secs, sustained_secs as wall time, evaluate right
    # after feeding); the default method multiscale is tested in test_drift_multiscale.py.
    base: dict[str, Any] = {
        "enabled": True,
        "method": "window",
        "window_secs": 600,
        "bucket_count": 6,
        "min_samples": 200,
        "sustained_secs": 300,
        "reference": {"mode": "pinned", "pinned_events": 2000},
    }
    base.update(drift)
    return {"checks": {"drift": base}}


def _check(tmp_path: Path, clock: FakeClock, **drift: Any) -> DriftCheck:
    ctx = make_ctx(tmp_path / "state.sqlite", clock, _cfg(**drift))
    return built_check(ctx)


def _active(findings: list[Any], test: str | None = None) -> set[str]:
    return {f.labels["feature"] for f in findings if f.active and (test is None or f.labels["test"] == test)}


def test_identical_distributions_give_no_finding_across_seeds(tmp_path: Path) -> None:
    # 30 seeds x 5 features x 3 evaluations: the budget is at most one seed with any active finding.
    noisy_seeds = 0
    for seed in range(30):
        clock = FakeClock()
        check = _check(
            tmp_path / str(seed), clock, sustained_secs=0, reference={"mode": "pinned", "pinned_events": 1000}
        )
        rng = np.random.default_rng(seed)
        feed(check, clock, "m", "1", normal_rows(rng, 1000, FEATS), per_sec=50)
        feed(check, clock, "m", "1", normal_rows(rng, 1500, FEATS), per_sec=5)
        found = set()
        for _ in range(3):
            found |= _active(check.evaluate(clock.now()))
            clock.advance(10)
        noisy_seeds += bool(found)
    assert noisy_seeds <= 1


def test_mean_shift_found_only_after_it_is_sustained(tmp_path: Path, clock: FakeClock) -> None:
    check = _check(tmp_path, clock)
    rng = np.random.default_rng(1)
    feed(check, clock, "ctr", "2", normal_rows(rng, 2000, FEATS), per_sec=20)
    feed(check, clock, "ctr", "2", normal_rows(rng, 3000, FEATS, loc={"b": 0.5}), per_sec=10)
    first = check.evaluate(clock.now())
    assert _active(first) == set()  # condition holds but not yet for sustained_secs
    cond = {f.labels["feature"] for f in first if f.annotations.get("condition") == "true"}
    assert cond == {"b"}
    clock.advance(299)
    assert _active(check.evaluate(clock.now())) == set()
    feed(check, clock, "ctr", "2", normal_rows(rng, 20, FEATS, loc={"b": 0.5}), per_sec=10)
    found = check.evaluate(clock.now())
    assert _active(found) == {"b"}
    b = next(f for f in found if f.active)
    assert b.labels == {"model": "ctr", "version": "2", "feature": "b", "test": "ks"}
    assert b.p_value is not None and b.p_value < 0.01 and b.effect_size is not None and b.effect_size > 0.1
    reg: CollectorRegistry = ctx_of(check).registry
    assert metric(reg, "sidecar_drift_drifting", model="ctr", version="2", feature="b", test="ks") == 1.0
    assert metric(reg, "sidecar_drift_drifting", model="ctr", version="2", feature="a", test="ks") == 0.0
    assert metric(reg, "sidecar_drift_samples", model="ctr", version="2", feature="b", window="reference") == 2000


def test_variance_change_is_found(tmp_path: Path, clock: FakeClock) -> None:
    check = _check(tmp_path, clock, sustained_secs=0)
    rng = np.random.default_rng(2)
    feed(check, clock, "m", "1", normal_rows(rng, 2000, FEATS), per_sec=20)
    feed(check, clock, "m", "1", normal_rows(rng, 3000, FEATS, scale={"c": 1.6}), per_sec=10)
    assert _active(check.evaluate(clock.now())) == {"c"}


def test_new_category_is_found_and_named(tmp_path: Path, clock: FakeClock) -> None:
    check = _check(tmp_path, clock, sustained_secs=0)
    rng = np.random.default_rng(3)
    ref = [{"country": str(rng.choice(["de", "fr", "it"])), "x": float(rng.normal())} for _ in range(2000)]
    cur = [
        {"country": str(rng.choice(["de", "fr", "it", "es"], p=[0.3, 0.25, 0.25, 0.2])), "x": float(rng.normal())}
        for _ in range(3000)
    ]
    feed(check, clock, "m", "1", ref, per_sec=20)
    clock.advance(600)  # the reference traffic leaves the current window
    feed(check, clock, "m", "1", cur, per_sec=10)
    found = check.evaluate(clock.now())
    assert _active(found) == {"country"}
    f = next(f for f in found if f.active)
    assert f.labels["test"] == "chi2" and "new categories es (" in finding_text(f)[0]
    assert metric(
        ctx_of(check).registry, "sidecar_drift_unseen_ratio", model="m", version="1", feature="country"
    ) == pytest.approx(0.2, abs=0.03)


def test_nan_burst_is_reported_as_missing_not_as_a_shift(tmp_path: Path, clock: FakeClock) -> None:
    check = _check(tmp_path, clock, sustained_secs=0)
    rng = np.random.default_rng(4)
    feed(check, clock, "m", "1", normal_rows(rng, 2000, FEATS), per_sec=20)
    clock.advance(600)
    rows = normal_rows(rng, 3000, FEATS)
    for r in rows[::2]:
        r["d"] = float("nan")
    feed(check, clock, "m", "1", rows, per_sec=10)
    found = check.evaluate(clock.now())
    assert _active(found, "missing") == {"d"}
    assert _active(found, "ks") == set()
    reg = ctx_of(check).registry
    assert metric(
        reg, "sidecar_drift_missing_ratio", model="m", version="1", feature="d", window="current"
    ) == pytest.approx(0.5, abs=0.01)
    assert metric(reg, "sidecar_drift_samples", model="m", version="1", feature="d", window="current") < 3000


def test_restart_keeps_reference_windows_and_sustain_clock(tmp_path: Path, clock: FakeClock) -> None:
    check = _check(tmp_path, clock)
    rng = np.random.default_rng(5)
    feed(check, clock, "m", "1", normal_rows(rng, 2000, FEATS), per_sec=20)
    feed(check, clock, "m", "1", normal_rows(rng, 3000, FEATS, loc={"a": 0.5}), per_sec=10)
    before = {(f.labels["feature"], f.labels["test"]): f for f in check.evaluate(clock.now())}
    check.persist(force=True)
    ctx_of(check).store.close()
    again = _check(tmp_path, clock)  # a fresh process: same store file, new registry
    after = {(f.labels["feature"], f.labels["test"]): f for f in again.evaluate(clock.now())}
    assert not any(f.insufficient_data for f in after.values())
    assert after[("a", "ks")].value == before[("a", "ks")].value
    assert after[("a", "ks")].annotations["condition"] == "true" and not after[("a", "ks")].active
    clock.advance(300)
    feed(again, clock, "m", "1", normal_rows(rng, 10, FEATS, loc={"a": 0.5}), per_sec=10)
    assert _active(again.evaluate(clock.now())) == {"a"}  # held since before the restart
    assert {r["version"] for r in again.describe_references()} == {"1"}


def test_file_reference_and_reference_change_are_logged(tmp_path: Path, clock: FakeClock) -> None:
    rng = np.random.default_rng(6)
    ref = tmp_path / "train.csv"
    vals = rng.normal(size=(3000, 2))
    ref.write_text("a,b\n" + "\n".join(f"{x},{y}" for x, y in vals))
    check = _check(tmp_path, clock, sustained_secs=0, models={"m": {"reference": {"mode": "file", "path": str(ref)}}})
    changes: list[Change] = []

    # Reference changes leave the check on the bus (kind "changes"), where the change log subscribes.
    ctx_of(check).bus.subscribe("changes", "test", lambda batch: changes.extend(batch.items))
    feed(check, clock, "m", "7", normal_rows(rng, 3000, ["a", "b"], loc={"a": 0.4}), per_sec=10)
    assert _active(check.evaluate(clock.now())) == {"a"}
    check.set_reference(
        "m", check.spec_for("m").model_copy(update={"mode": "pinned", "pinned_events": 100}), who="alice"
    )
    assert len(changes) == 1 and changes[0].model == "m" and changes[0].who == "alice"
    found = check.evaluate(clock.now())
    assert all(f.insufficient_data for f in found if f.labels["test"] != "missing")


def test_config_change_of_reference_is_a_change(tmp_path: Path, clock: FakeClock) -> None:
    check = _check(tmp_path, clock)
    feed(check, clock, "m", "1", normal_rows(np.random.default_rng(7), 2000, ["a"]), per_sec=20)
    assert check.describe_references()
    ctx_of(check).store.close()
    again = _check(tmp_path, clock, reference={"mode": "pinned", "pinned_events": 500})
    assert again.describe_references() == []
    assert metric(ctx_of(again).registry, "sidecar_drift_reference_changes_total") == 1.0


def test_series_and_category_bounds_are_counted(tmp_path: Path, clock: FakeClock) -> None:
    check = _check(tmp_path, clock, max_series=3, max_categories=2)
    feed(check, clock, "m", "1", [{"a": 1.0, "b": 2.0, "c": "x", "d": 4.0, "e": 5.0}], per_sec=1)
    feed(check, clock, "m", "1", [{"c": v} for v in ["y", "z", "w"]], per_sec=3)
    reg = ctx_of(check).registry
    assert metric(reg, "sidecar_drift_values_dropped_total", reason="series_limit") == 2.0
    assert metric(reg, "sidecar_drift_values_dropped_total", reason="category_limit") == 2.0


def test_sketch_mode_finds_the_shift_exact_mode_finds(tmp_path: Path, clock: FakeClock) -> None:
    check = _check(
        tmp_path, clock, sustained_secs=0, max_exact_samples=600, reference={"mode": "pinned", "pinned_events": 5000}
    )
    rng = np.random.default_rng(8)
    feed(check, clock, "m", "1", normal_rows(rng, 5000, ["a", "b"]), per_sec=50)
    feed(check, clock, "m", "1", normal_rows(rng, 20000, ["a", "b"], loc={"a": 0.2}), per_sec=40)
    found = check.evaluate(clock.now())
    assert _active(found) == {"a"}
    a_ks = next(f for f in found if f.labels["feature"] == "a" and f.labels["test"] == "ks")
    assert "sketch" in finding_text(a_ks)[0]


def test_threaded_evaluation_gives_the_same_findings_as_one_thread(tmp_path: Path) -> None:
    results = []
    for threads in (1, 4):
        clock = FakeClock()
        # A reference above 10,000 values takes our asymptotic path (scipy's own below it).
        check = _check(
            tmp_path / str(threads),
            clock,
            sustained_secs=0,
            eval_threads=threads,
            reference={"mode": "pinned", "pinned_events": 11_000},
        )
        rng = np.random.default_rng(12)
        feed(check, clock, "m", "1", normal_rows(rng, 11_000, FEATS), per_sec=200)
        clock.advance(600)  # the reference traffic leaves the window (which stays exact, no sketch)
        feed(check, clock, "m", "1", normal_rows(rng, 3000, FEATS, loc={"e": 0.3}, scale={"a": 1.5}), per_sec=10)
        results.append(
            {
                (f.labels["feature"], f.labels["test"]): (f.value, f.p_value, f.active)
                for f in check.evaluate(clock.now())
            }
        )
    assert results[0] == results[1]
    assert {k[0] for k, v in results[0].items() if v[2]} == {"a", "e"}
    assert all("(asymp)" in finding_text(f)[0] for f in check.evaluate(clock.now()) if f.labels["test"] == "ks")
