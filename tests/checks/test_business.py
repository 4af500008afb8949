"""Business-metric checks: aggregates, baselines, insufficient data, bounds, persistence and config errors."""

from __future__ import annotations

import random
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from sidecar.alerting.render import finding_text
from sidecar.alerting.render.business import agg_short
from sidecar.checks.business.check import BusinessChecks
from sidecar.checks.business.config import BusinessConfig
from sidecar.checks.business.examples import EXAMPLE_BUSINESS_CHECKS
from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.errors import ConfigError
from sidecar.model import Batch, Event
from sidecar.store import Store

T0 = 1_700_000_000.0


def _checks(
    tmp_path: Any,
    checks: dict[str, Any],
    clock: FakeClock,
    store: Store | None = None,
    registry: CollectorRegistry | None = None,
) -> BusinessChecks:
    cfg = BusinessConfig.model_validate({"enabled": True, "checks": checks})
    return BusinessChecks(
        cfg,
        registry=registry or CollectorRegistry(),
        clock=clock,
        store=store or Store(tmp_path / "s.sqlite"),
    )


def _batch(model: str, ts: float, scores: list[float], version: str = "1", **fields: float) -> Batch:
    return Batch(
        kind="events",
        source="t",
        items=tuple(Event(model=model, version=version, timestamp=ts, score=s, fields=dict(fields)) for s in scores),
    )


def _feed_ctr(bc: BusinessChecks, clock: FakeClock, hours: int, mean_of_hour: Any, rng: random.Random) -> None:
    for h in range(hours):
        clock.advance(3600)
        m = mean_of_hour(h)
        bc.observe(_batch("ctr", clock.now() - 1, [rng.gauss(m, m * 0.1) for _ in range(20)], version="3"))


def test_ctr_mean_drop_fires_against_the_7_day_baseline(tmp_path: Any) -> None:
    clock, rng = FakeClock(T0), random.Random(1)
    bc = _checks(tmp_path, {"ctr_mean_down": EXAMPLE_BUSINESS_CHECKS["checks"]["ctr_mean_down"]}, clock)
    _feed_ctr(bc, clock, 8 * 24, lambda h: 0.042, rng)
    (f,) = bc.evaluate(clock.now())
    assert not f.active and not f.insufficient_data
    assert f.value == pytest.approx(0.042, rel=0.03) and f.baseline == pytest.approx(0.042, rel=0.03)
    _feed_ctr(bc, clock, 24, lambda h: 0.034, rng)
    (f,) = bc.evaluate(clock.now())
    assert f.active and f.kind == "business" and f.severity == "high"
    assert f.effect_size == pytest.approx(-0.19, abs=0.03)
    # Grouped by model only: the value spans every version, and the labels say so.
    assert dict(f.labels) == {"alertname": "CtrMeanDown", "model": "ctr", "version": "all", "team": "growth"}


def test_identical_distributions_do_not_fire(tmp_path: Any) -> None:
    clock, rng = FakeClock(T0), random.Random(2)
    bc = _checks(tmp_path, {"ctr_mean_down": EXAMPLE_BUSINESS_CHECKS["checks"]["ctr_mean_down"]}, clock)
    fired = 0
    for _ in range(10):
        _feed_ctr(bc, clock, 24, lambda h: 0.042, rng)
        fired += sum(f.active for f in bc.evaluate(clock.now()))
    assert fired == 0


def test_too_little_data_says_so_instead_of_firing(tmp_path: Any) -> None:
    clock, rng = FakeClock(T0), random.Random(3)
    bc = _checks(tmp_path, {"ctr_mean_down": EXAMPLE_BUSINESS_CHECKS["checks"]["ctr_mean_down"]}, clock)
    # One day of baseline only (coverage 1/7 < 50%), then a 50% drop: must not fire.
    _feed_ctr(bc, clock, 24, lambda h: 0.042, rng)
    _feed_ctr(bc, clock, 24, lambda h: 0.021, rng)
    (f,) = bc.evaluate(clock.now())
    assert f.insufficient_data and not f.active
    assert f.facts["insufficient"] == "baseline" and f.facts["baseline_coverage"] == pytest.approx(1 / 7, abs=0.01)
    _, description = finding_text(f)
    assert "baseline" in description and "14%" in description


def test_fraud_p95_from_kll_sketches(tmp_path: Any) -> None:
    clock, rng = FakeClock(T0), random.Random(4)
    bc = _checks(tmp_path, {"fraud_score_p95_up": EXAMPLE_BUSINESS_CHECKS["checks"]["fraud_score_p95_up"]}, clock)
    for minute in range(25 * 60):
        clock.advance(60)
        attack = minute >= 24 * 60
        scores = [rng.betavariate(2, 8) * (1.5 if attack else 1.0) for _ in range(10)]
        bc.observe(_batch("fraud", clock.now() - 1, scores))
    (f,) = bc.evaluate(clock.now())
    assert f.active and f.facts["aggregate"] == "quantile" and f.facts["quantile"] == 0.95
    assert agg_short(f.facts) == "p95"
    # p95 of Beta(2, 8) is about 0.43; KLL k=200 keeps rank error near 1.3%.
    assert f.baseline == pytest.approx(0.43, abs=0.03)
    assert f.effect_size is not None and f.effect_size > 0.30


def test_wer_absolute_threshold_and_other_aggregates(tmp_path: Any) -> None:
    clock = FakeClock(T0)
    checks = {
        "wer_high": EXAMPLE_BUSINESS_CHECKS["checks"]["wer_high"],
        "click_rate": {
            "field": "fields.clicked",
            "aggregate": "rate",
            "window_secs": 60,
            "bucket_secs": 10,
            "threshold": 0.5,
            "direction": "down",
            "min_events": 1,
        },
        "ctr_ratio": {
            "field": "fields.clicked",
            "aggregate": "ratio",
            "denominator": "count",
            "window_secs": 60,
            "bucket_secs": 10,
            "threshold": 0.5,
            "min_events": 1,
        },
    }
    bc = _checks(tmp_path, checks, clock)
    for _ in range(30):
        clock.advance(10)
        bc.observe(
            Batch(
                kind="events",
                source="t",
                items=(
                    Event(model="asr", version="1", timestamp=clock.now(), fields={"wer": 0.12, "clicked": 1.0}),
                    Event(model="asr", version="1", timestamp=clock.now(), fields={"wer": 0.06, "clicked": 0.0}),
                ),
            )
        )
    by = {f.check: f for f in bc.evaluate(clock.now())}
    assert by["wer_high"].value == pytest.approx(0.09) and by["wer_high"].active
    assert by["click_rate"].value == pytest.approx(6 / 60) and by["click_rate"].active  # 6 clicks a minute
    assert by["ctr_ratio"].value == pytest.approx(0.5) and not by["ctr_ratio"].active


def test_missing_and_bad_values_are_counted_not_used(tmp_path: Any) -> None:
    clock, reg = FakeClock(T0), CollectorRegistry()
    bc = _checks(tmp_path, {"wer_high": EXAMPLE_BUSINESS_CHECKS["checks"]["wer_high"]}, clock, registry=reg)
    bc.observe(
        Batch(
            kind="events",
            source="t",
            items=(
                Event(model="asr", version="1", timestamp=clock.now(), fields={}),
                Event(model="asr", version="1", timestamp=clock.now(), fields={"wer": float("nan")}),
                Event(model="asr", version="1", timestamp=clock.now() - 10_000, fields={"wer": 0.1}),
                Event(model="asr", version="1", timestamp=clock.now() + 10_000, fields={"wer": 0.1}),
                Event(model="asr", version="1", timestamp=clock.now(), fields={"wer": 0.1}),
            ),
        )
    )

    def dropped(reason: str) -> float | None:
        return reg.get_sample_value("sidecar_business_events_dropped_total", {"check": "wer_high", "reason": reason})

    assert [dropped(r) for r in ("missing_field", "not_numeric", "too_old", "future")] == [1, 1, 1, 1]
    assert reg.get_sample_value("sidecar_business_events_total", {"check": "wer_high"}) == 1


def test_series_are_bounded(tmp_path: Any) -> None:
    clock, reg = FakeClock(T0), CollectorRegistry()
    bc = _checks(
        tmp_path,
        {
            "c": {
                "field": "score",
                "threshold": 1,
                "group_by": ["model", "version"],
                "max_series": 2,
                "window_secs": 60,
            }
        },
        clock,
        registry=reg,
    )
    for v in ("1", "2", "3"):
        bc.observe(_batch("m", clock.now(), [0.5], version=v))
    assert len(bc.checks["c"].series) == 2
    assert reg.get_sample_value("sidecar_business_events_dropped_total", {"check": "c", "reason": "series_limit"}) == 1


def test_baseline_survives_a_restart(tmp_path: Any) -> None:
    clock, rng = FakeClock(T0), random.Random(5)
    store = Store(tmp_path / "s.sqlite")
    cfg = {"ctr_mean_down": EXAMPLE_BUSINESS_CHECKS["checks"]["ctr_mean_down"]}
    bc = _checks(tmp_path, cfg, clock, store=store)
    _feed_ctr(bc, clock, 7 * 24, lambda h: 0.042, rng)
    bc.evaluate(clock.now())
    store.close()
    # A new process: fresh registry and component, same store file.
    store2 = Store(tmp_path / "s.sqlite")
    bc2 = _checks(tmp_path, cfg, clock, store=store2)
    _feed_ctr(bc2, clock, 24, lambda h: 0.034, rng)
    (f,) = bc2.evaluate(clock.now())
    assert not f.insufficient_data and f.active
    assert f.baseline == pytest.approx(0.042, rel=0.03)
    store2.close()


@pytest.mark.parametrize(
    ("check", "path", "needle"),
    [
        ({"threshold": 1}, "checks.business.checks.wer.field", "Field required"),
        ({"field": "fields.", "threshold": 1}, "checks.business.checks.wer.field", "unknown event field"),
        ({"field": "scor", "threshold": 1}, "checks.business.checks.wer.field", "unknown event field"),
        (
            {"field": "score", "aggregate": "ratio", "threshold": 1},
            "checks.business.checks.wer",
            "denominator",
        ),
        (
            {"field": "score", "aggregate": "ratio", "denominator": "fields", "threshold": 1},
            "checks.business.checks.wer.denominator",
            "unknown event field",
        ),
        (
            {"field": "score", "compare": "relative", "threshold": 0.1},
            "checks.business.checks.wer",
            "baseline_secs",
        ),
        (
            {"field": "score", "threshold": 1, "window_secs": 86400, "bucket_secs": 1},
            "checks.business.checks.wer",
            "bounded memory",
        ),
    ],
)
def test_a_check_over_a_missing_field_is_a_config_error_naming_the_path(
    check: dict[str, Any], path: str, needle: str
) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config({"checks": {"business": {"enabled": True, "checks": {"wer": check}}}})
    assert err.value.path == path
    assert needle in str(err.value)


def test_examples_parse() -> None:
    cfg = parse_config({"checks": {"business": EXAMPLE_BUSINESS_CHECKS}})
    assert set(cfg.checks.business.checks) == {"ctr_mean_down", "fraud_score_p95_up", "wer_high"}


def test_the_demo_regression_fires_then_resolves(tmp_path: Any) -> None:
    from alerting_helpers import make_service

    from sidecar.demo.business_demo import DEMO_ALERTING, DEMO_BUSINESS_CHECKS, score_for

    clock, rng = FakeClock(T0), random.Random(11)
    svc = make_service(
        tmp_path,
        {"alerting": DEMO_ALERTING, "checks": {"eval_interval_secs": 5, "business": DEMO_BUSINESS_CHECKS}},
        clock=clock,
    )
    states: list[tuple[float, str]] = []
    for step in range(int(900 / 5)):
        t = step * 5.0
        clock.advance(5)
        svc.bus.publish(
            Batch(
                kind="events",
                source="demo",
                items=tuple(
                    Event(model="ctr", version="2", timestamp=clock.now(), score=score_for("ctr", t, rng))
                    for _ in range(5)
                ),
            )
        )
        svc.evaluate_once(clock.now())
        for a in svc.component("alert_book").alerts.values():  # type: ignore[attr-defined]
            if not states or states[-1][1] != a.state:
                states.append((t, a.state))
    fired = [t for t, s in states if s == "firing"]
    resolved = [t for t, s in states if s == "inactive"]
    assert fired and 360 < fired[0] < 480, states
    assert resolved and 540 <= resolved[0] < 700, states
