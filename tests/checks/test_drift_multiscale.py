"""Method 'multiscale': minutes to detect, a stated budget, no alarm on a seasonal cycle or a trivial shift."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from drift_testutil import built_check, ctx_of, events, make_ctx, normal_rows

from sidecar.alerting.render import finding_text
from sidecar.checks.drift.check import DriftCheck
from sidecar.checks.drift.config import DriftConfig
from sidecar.checks.drift.multiscale import look_level
from sidecar.clock import FakeClock
from sidecar.errors import ConfigError
from sidecar.model import Event

AMP = 1.0  # sd of the daily cycle: an off-centre reference hour would carry up to ~0.26 sd of it


def _check(tmp_path: Path, clock: FakeClock, **drift: Any) -> DriftCheck:
    cfg = {
        "enabled": True,
        "method": "multiscale",
        "eval_threads": 1,
        "reference": {"mode": "pinned", "pinned_events": 5000},
        **drift,
    }
    ctx = make_ctx(tmp_path / "s.sqlite", clock, {"checks": {"drift": cfg}})
    return built_check(ctx)


def _run(
    check: DriftCheck,
    clock: FakeClock,
    rng: np.random.Generator,
    secs: float,
    rate: int,
    shift: float = 0.0,
    batch: float = 10.0,
) -> float | None:
    """Feeds features a, b (b shifted by ``shift`` sd), evaluating every 60 s; the first active time."""
    start = clock.now()
    while clock.now() - start < secs:
        n = int(rate * batch)
        check.observe_columns("m", "1", clock.now(), {"a": rng.normal(size=n), "b": rng.normal(shift, 1, n)})
        clock.advance(batch)
        if clock.now() % 60 == 0:
            active = [f for f in check.evaluate(clock.now()) if f.active]
            if active:
                assert {f.labels["feature"] for f in active} == {"b"}
                return clock.now() - start
    return None


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_02_sd_shift_is_flagged_within_five_minutes(tmp_path: Path, seed: int) -> None:
    clock = FakeClock(start=1_700_000_000.0 - 1_700_000_000.0 % 60)
    check = _check(tmp_path, clock)
    rng = np.random.default_rng(seed)
    assert _run(check, clock, rng, 600, 100) is None  # the reference (first 5000 events) and no drift
    clock.advance(20)  # the shift starts mid-block: the first block after it is diluted
    delay = _run(check, clock, rng, 900, 100, shift=0.2)
    assert delay is not None and delay <= 300


def test_a_005_sd_shift_never_alerts(tmp_path: Path) -> None:
    clock = FakeClock(start=1_700_000_000.0 - 1_700_000_000.0 % 60)
    check = _check(tmp_path, clock)
    rng = np.random.default_rng(7)
    assert _run(check, clock, rng, 3 * 3600, 100, shift=0.05) is None


def test_a_daily_cycle_with_the_same_hours_last_week_never_alerts(tmp_path: Path) -> None:
    """+-1 sd over the day, tested over its steepest hours: a reference hour off-centre from the block by
    30-60 minutes carries 0.13-0.26 sd of the cycle, which this traffic shows within minutes."""
    clock = FakeClock(start=1_700_000_000.0 - 1_700_000_000.0 % 3600)
    check = _check(tmp_path, clock, reference={"mode": "rolling"})
    rng = np.random.default_rng(3)
    rate, week, steep = 20, 7 * 86400, 4 * 3600  # the cycle is steepest at 4 h (and 16 h) of each day
    start = clock.now()
    found: list[tuple[Any, ...]] = []
    looked = 0
    while clock.now() - start < week + steep + 2 * 3600:
        t = clock.now() - start
        batch = 600.0 if t < week - 3600 else 60.0  # the history week in bulk, the tested hours per minute
        n = int(rate * batch)
        mean = AMP * math.sin(2 * math.pi * (t + batch / 2 - steep) / 86400)
        check.observe_columns("m", "1", clock.now(), {"c": rng.normal(mean, 1, n)})
        clock.advance(batch)
        if clock.now() - start > week + steep - 2 * 3600:
            fs = check.evaluate(clock.now())
            looked += sum(1 for f in fs if f.labels["test"] == "ks" and not f.insufficient_data)
            found += [(clock.now() - start - week, f.facts["scale_secs"], f.facts["statistic"]) for f in fs if f.active]
    assert looked >= 200  # the reference was there: the test ran
    assert found == []


def test_bulk_columns_fill_the_same_windows_as_events(tmp_path: Path) -> None:
    clock = FakeClock(start=1_700_000_000.0)
    a, b = _check(tmp_path / "a", clock), _check(tmp_path / "b", clock)
    vals = np.random.default_rng(0).normal(size=300)
    vals[1::7] = np.nan  # not the first: a missing first value cannot tell an event's feature kind
    a.observe_columns("m", "1", clock.now(), {"x": vals, "k": ["u" if v > 0 else None for v in vals]})
    from sidecar.model import Batch

    b.observe(
        Batch(
            "events",
            "t",
            tuple(Event("m", "1", clock.now(), {"x": float(v), "k": "u" if v > 0 else None}) for v in vals),
        )
    )
    for f in ("x", "k"):
        sa = a.registry.windows[("m", "1", f)].snapshot()
        sb = b.registry.windows[("m", "1", f)].snapshot()
        assert (sa.total, sa.missing, sa.counts) == (sb.total, sb.missing, sb.counts)
        if f == "x":
            assert np.array_equal(np.sort(sa.raw), np.sort(sb.raw))  # type: ignore[arg-type]
    assert a.refs.pinned[("m", "1")].events == b.refs.pinned[("m", "1")].events == 300


def test_the_per_look_levels_spend_exactly_the_budget() -> None:
    cfg = DriftConfig(method="multiscale", false_alarms_per_day=0.02)  # no level capped by p_threshold
    k, n = cfg.sustained_looks, cfg.sustained_of
    spent = sum(86400 / s * math.comb(n - 1, k - 1) * look_level(cfg, s) ** k for s in cfg.scales_secs)
    assert spent == pytest.approx(0.02)
    assert look_level(cfg, 60) < look_level(cfg, 300) < look_level(cfg, 1800) <= cfg.p_threshold


def test_the_evidence_count_survives_a_restart(tmp_path: Path) -> None:
    clock = FakeClock(start=1_700_000_000.0 - 1_700_000_000.0 % 60)
    check = _check(tmp_path, clock)
    rng = np.random.default_rng(5)
    _run(check, clock, rng, 600, 100)
    # One drifting 1-minute block, then a restart: the next drifting block must complete 2 of 3.
    check.observe_columns("m", "1", clock.now(), {"a": rng.normal(size=6000), "b": rng.normal(1, 1, 6000)})
    clock.advance(60)
    assert not [f for f in check.evaluate(clock.now()) if f.active]
    check.persist(force=True)
    ctx_of(check).store.close()
    again = _check(tmp_path, clock)  # a fresh process: same store file, new registry
    again.observe_columns("m", "1", clock.now(), {"a": rng.normal(size=6000), "b": rng.normal(1, 1, 6000)})
    clock.advance(60)
    active = [f for f in again.evaluate(clock.now()) if f.active]
    assert {(f.labels["feature"], f.facts["scale_secs"], f.facts["looks_drifting"]) for f in active} == {("b", 60.0, 2)}


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        ({"scales_secs": [300, 60]}, "scales_secs"),
        ({"scales_secs": [60, 90]}, "scales_secs"),
        ({"sustained_looks": 4, "sustained_of": 3}, "sustained_looks"),
        ({"method": "cusum"}, "method"),
    ],
)
def test_bad_multiscale_config_names_the_field(bad: dict[str, Any], field: str) -> None:
    from sidecar.config import parse_config

    with pytest.raises((ConfigError, ValueError), match=field):
        parse_config({"checks": {"drift": bad}})


def test_a_multiscale_finding_says_how_many_blocks_drifted(tmp_path: Path) -> None:
    from sidecar.alerting.render.drift import render

    clock = FakeClock(start=1_700_000_000.0 - 1_700_000_000.0 % 60)
    check = _check(tmp_path, clock)
    rng = np.random.default_rng(2)
    _run(check, clock, rng, 600, 100)
    _run(check, clock, rng, 600, 100, shift=0.5)
    b = next(f for f in check.evaluate(clock.now()) if f.labels["feature"] == "b" and f.labels["test"] == "ks")
    summary, _ = render(b)
    assert b.active and b.facts["method"] in ("asymp", "sketch", "exact")  # the KS method, not overwritten
    assert "of the last 3 60s blocks drifted (active at 2 of 3" in summary, summary


def test_a_block_whose_centred_hours_are_half_missing_has_no_rolling_reference(tmp_path: Path) -> None:
    """At 10 minutes past an hour the centred reference is the hour before and the hour after, a week ago;
    with only the latter in the history, using it alone would be 30 minutes off-centre."""
    clock = FakeClock(start=1_700_000_000.0 - 1_700_000_000.0 % 3600)
    check = _check(tmp_path, clock, reference={"mode": "rolling"})
    start = clock.now()
    rng = np.random.default_rng(0)
    while clock.now() - start < 7 * 86400 + 660:
        check.observe_columns("m", "1", clock.now(), {"c": rng.normal(size=600)})
        clock.advance(600.0 if clock.now() - start < 7 * 86400 - 600 else 60.0)
    ref = check.reference_for("m", "1", "c", clock.now())  # the 'window' form still answers
    assert ref is not None
    from sidecar.checks.drift.refs import NoReference

    half = check.refs.reference_for("m", "1", "c", clock.now(), (start + 7 * 86400 + 540, start + 7 * 86400 + 600))
    assert isinstance(half, NoReference) and half.reason == "no_traffic_last_week"
    whole = check.refs.reference_for("m", "1", "c", clock.now(), (start + 7 * 86400 + 1740, start + 7 * 86400 + 1800))
    assert not isinstance(whole, NoReference)


def _rows_run(
    check: DriftCheck, clock: FakeClock, rows: list[dict[str, Any]], per_sec: int
) -> tuple[set[tuple[str, str]], float | None, list[Any]]:
    """Feeds event rows at ``per_sec``, evaluating at every 60 s block end: the (feature, test) pairs ever
    active, the first active time after the start, and the findings of the first evaluation with any."""
    start, seen, first, first_found = clock.now(), set(), None, []
    for i in range(0, len(rows), per_sec):
        check.observe(events("m", "1", clock.now(), rows[i : i + per_sec]))
        clock.advance(1.0)
        if clock.now() % 60 == 0:
            found = check.evaluate(clock.now())
            active = {(f.labels["feature"], f.labels["test"]) for f in found if f.active}
            if active and first is None:
                first, first_found = clock.now() - start, found
            seen |= active
    return seen, first, first_found


def _default_check(tmp_path: Path, clock: FakeClock) -> DriftCheck:
    # No method named: these tests are about the default.
    cfg = {"enabled": True, "eval_threads": 1, "reference": {"mode": "pinned", "pinned_events": 2000}}
    ctx = make_ctx(tmp_path / "d.sqlite", clock, {"checks": {"drift": cfg}})
    check = built_check(ctx)
    assert ctx.config.checks.drift.method == "multiscale"
    return check


def test_by_default_a_variance_change_is_flagged_and_named_within_five_minutes(tmp_path: Path) -> None:
    clock = FakeClock(start=1_700_000_000.0 - 1_700_000_000.0 % 60)
    check = _default_check(tmp_path, clock)
    rng = np.random.default_rng(12)
    quiet, _, _ = _rows_run(check, clock, normal_rows(rng, 20 * 600, ["a", "b", "c"]), 20)
    assert quiet == set()
    seen, first, _ = _rows_run(check, clock, normal_rows(rng, 20 * 600, ["a", "b", "c"], scale={"c": 1.5}), 20)
    assert seen == {("c", "ks")}
    assert first is not None and first <= 300


def test_by_default_a_new_category_is_flagged_and_named(tmp_path: Path) -> None:
    clock = FakeClock(start=1_700_000_000.0 - 1_700_000_000.0 % 60)
    check = _default_check(tmp_path, clock)
    rng = np.random.default_rng(13)
    ref = [{"country": str(rng.choice(["de", "fr", "it"])), "x": float(rng.normal())} for _ in range(20 * 600)]
    cur = [
        {"country": str(rng.choice(["de", "fr", "it", "es"], p=[0.3, 0.25, 0.25, 0.2])), "x": float(rng.normal())}
        for _ in range(20 * 600)
    ]
    assert _rows_run(check, clock, ref, 20)[0] == set()
    seen, first, found = _rows_run(check, clock, cur, 20)
    assert seen == {("country", "chi2")}
    assert first is not None and first <= 300
    f = next(f for f in found if f.active)
    assert "new categories es (" in finding_text(f)[0]


def test_by_default_a_nan_rate_rising_to_20_percent_is_a_missing_finding_not_a_shift(tmp_path: Path) -> None:
    clock = FakeClock(start=1_700_000_000.0 - 1_700_000_000.0 % 60)
    check = _default_check(tmp_path, clock)
    rng = np.random.default_rng(14)
    assert _rows_run(check, clock, normal_rows(rng, 20 * 600, ["a", "d"]), 20)[0] == set()
    rows = normal_rows(rng, 20 * 600, ["a", "d"])
    for r in rows[::5]:
        r["d"] = float("nan")
    seen, first, _ = _rows_run(check, clock, rows, 20)
    assert seen == {("d", "missing")}
    assert first is not None and first <= 300
