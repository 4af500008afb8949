"""The canary verdict on a fake clock: each aspect (p50, p99, errors, scores) decided by its test and floor."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from sidecar.alerting.render import finding_text
from sidecar.checks.canary.check import CanaryCheck
from sidecar.checks.canary.config import CanaryConfig
from sidecar.clock import FakeClock
from sidecar.model import Batch, Event, Finding, Span
from sidecar.records import from_span


def make(clock: FakeClock, **cfg: Any) -> tuple[CanaryCheck, CollectorRegistry]:
    reg = CollectorRegistry()
    return CanaryCheck(CanaryConfig.model_validate({"enabled": True, **cfg}), registry=reg, clock=clock), reg


def events(
    model: str,
    version: str,
    t: float,
    *,
    latency: Iterable[float] | None = None,
    scores: Iterable[float] | None = None,
    errors: Iterable[int] | None = None,
) -> Batch:
    lat = list(latency) if latency is not None else None
    sc = list(scores) if scores is not None else None
    er = list(errors) if errors is not None else None
    n = len(next(x for x in (lat, sc, er) if x is not None))
    out = []
    for i in range(n):
        fields: dict[str, float] = {}
        if lat is not None:
            fields["latency_ms"] = lat[i]
        if er is not None:
            fields["error"] = float(er[i])
        out.append(
            Event(
                model=model,
                version=version,
                timestamp=t - i * 0.01,
                fields=fields,
                score=sc[i] if sc is not None else None,
            )
        )
    return Batch("events", "test", tuple(out))


def verdict(reg: CollectorRegistry, aspect: str, model: str = "ctr", b: str = "1", c: str = "2") -> float | None:
    return reg.get_sample_value(
        "sidecar_canary_verdict", {"model": model, "baseline": b, "candidate": c, "aspect": aspect}
    )


def only(found: Iterable[Finding]) -> Finding:
    (f,) = list(found)
    return f


rng = np.random.default_rng(7)


def test_a_slower_candidate_is_worse_on_p50_and_p99_with_the_numbers_in_the_alert(clock: FakeClock) -> None:
    chk, reg = make(clock)
    chk.observe(events("ctr", "1", clock.now(), latency=rng.normal(35, 2, 500)))
    chk.observe(events("ctr", "2", clock.now(), latency=rng.normal(41, 2, 500)))
    f = only(chk.evaluate(clock.now()))
    assert f.active and not f.insufficient_data
    assert f.labels == {"alertname": "CanaryVersionWorse", "model": "ctr", "baseline": "1", "candidate": "2"}
    assert f.facts["worse"] == "p50,p99"
    assert verdict(reg, "p50") == 1 and verdict(reg, "p99") == 1
    assert verdict(reg, "errors") is None and verdict(reg, "scores") is None  # no values: not decided
    p99 = {
        k: reg.get_sample_value(
            f"sidecar_canary_{k}", {"model": "ctr", "baseline": "1", "candidate": "2", "aspect": "p99"}
        )
        for k in ("baseline_value", "candidate_value")
    }
    assert 38 < p99["baseline_value"] < 42 and 44 < p99["candidate_value"] < 48  # type: ignore[operator]
    summary, description = finding_text(f)
    assert summary.startswith("ctr v2 worse on p50 by 1")
    assert "worse on p99 by " in summary and " ms vs v1 " in summary and "n=500/500" in summary
    assert summary.endswith("consider reverting to version 1")
    assert "error ratio: not decided (0 values for v2" in description


def test_the_same_latency_is_healthy_and_exported_as_zero(clock: FakeClock) -> None:
    chk, reg = make(clock)
    chk.observe(events("ctr", "1", clock.now(), latency=rng.normal(35, 2, 500), errors=[0] * 500))
    chk.observe(events("ctr", "2", clock.now(), latency=rng.normal(35, 2, 500), errors=[0] * 500))
    f = only(chk.evaluate(clock.now()))
    assert not f.active and not f.insufficient_data and f.facts["verdict"] == "healthy"
    assert [verdict(reg, a) for a in ("p50", "p99", "errors")] == [0, 0, 0]
    assert finding_text(f)[0].startswith("ctr v2 healthy against v1 (p50 ")


def test_a_significant_difference_below_the_floor_is_not_worse(clock: FakeClock) -> None:
    chk, reg = make(clock, max_samples=5000, min_relative_diff=0.10)
    # 3% slower, very tight: the test is sure, but 3% is under the 10% floor.
    chk.observe(events("ctr", "1", clock.now(), latency=rng.normal(100, 0.5, 5000)))
    chk.observe(events("ctr", "2", clock.now(), latency=rng.normal(103, 0.5, 5000)))
    f = only(chk.evaluate(clock.now()))
    assert f.facts["p50.q"] is not None and f.facts["p50.q"] < 1e-6  # type: ignore[operator]
    assert not f.active and verdict(reg, "p50") == 0
    chk2, reg2 = make(clock, max_samples=5000, min_relative_diff=0.02)
    chk2.observe(events("ctr", "1", clock.now(), latency=rng.normal(100, 0.5, 5000)))
    chk2.observe(events("ctr", "2", clock.now(), latency=rng.normal(103, 0.5, 5000)))
    assert only(chk2.evaluate(clock.now())).active and verdict(reg2, "p50") == 1


def test_too_few_values_is_insufficient_data_and_never_an_alert(clock: FakeClock) -> None:
    chk, reg = make(clock, min_samples=200)
    chk.observe(events("ctr", "1", clock.now(), latency=rng.normal(35, 2, 500)))
    chk.observe(events("ctr", "2", clock.now(), latency=rng.normal(90, 2, 150)))  # much slower, but 150 < 200
    f = only(chk.evaluate(clock.now()))
    assert f.insufficient_data and not f.active
    assert verdict(reg, "p99") is None
    assert (
        reg.get_sample_value("sidecar_canary_insufficient_data", {"model": "ctr", "baseline": "1", "candidate": "2"})
        == 1
    )
    assert finding_text(f)[0] == "ctr v2 vs v1: insufficient data"


def test_a_higher_error_ratio_is_worse_in_points(clock: FakeClock) -> None:
    chk, reg = make(clock)
    chk.observe(events("ctr", "1", clock.now(), errors=[1 if i % 100 == 0 else 0 for i in range(1000)]))
    chk.observe(events("ctr", "2", clock.now(), errors=[1 if i % 10 == 0 else 0 for i in range(1000)]))
    f = only(chk.evaluate(clock.now()))
    assert f.active and f.facts["worse"] == "errors"
    assert verdict(reg, "errors") == 1
    assert "worse on errors by 9.0 points (v2 10.0% vs v1 1.0%, n=1000/1000)" in finding_text(f)[0]


def test_a_lower_error_ratio_is_not_worse(clock: FakeClock) -> None:
    chk, reg = make(clock)
    chk.observe(events("ctr", "1", clock.now(), errors=[1 if i % 10 == 0 else 0 for i in range(1000)]))
    chk.observe(events("ctr", "2", clock.now(), errors=[0] * 1000))
    assert not only(chk.evaluate(clock.now())).active and verdict(reg, "errors") == 0


def test_scores_distributed_differently_are_flagged_with_the_ks_distance(clock: FakeClock) -> None:
    chk, reg = make(clock)
    chk.observe(events("ctr", "1", clock.now(), scores=rng.beta(2, 8, 500)))
    chk.observe(events("ctr", "2", clock.now(), scores=rng.beta(4, 6, 500)))
    f = only(chk.evaluate(clock.now()))
    assert f.active and f.facts["worse"] == "scores" and verdict(reg, "scores") == 1
    assert "scores differ (KS D=0." in finding_text(f)[0]
    chk2, reg2 = make(clock)
    chk2.observe(events("ctr", "1", clock.now(), scores=rng.beta(2, 8, 500)))
    chk2.observe(events("ctr", "2", clock.now(), scores=rng.beta(2, 8, 500)))
    assert not only(chk2.evaluate(clock.now())).active and verdict(reg2, "scores") == 0


def _span(
    model: str, version: str, i: int, end_s: float, dur_ms: float, *, name: str | None = None, status: int = 0
) -> tuple[Any, ...]:
    end = int(end_s * 1e9)
    attrs = {"triton.model_name": model, "triton.model_version": version} if name is None else {}
    return from_span(
        Span(
            trace_id=f"{i:032x}",
            span_id=f"{i + 1:016x}",
            parent_span_id=None,
            name=name or model,
            start_unix_nano=end - int(dur_ms * 1e6),
            end_unix_nano=end,
            attributes=attrs,
            status_code=status,
        )
    )


def test_model_spans_give_the_latency_and_compute_spans_and_unset_status_are_ignored(clock: FakeClock) -> None:
    chk, reg = make(clock)
    t = clock.now()
    recs = []
    for i in range(500):
        recs.append(_span("ctr", "1", 4 * i, t - i * 0.01, 20 + (i % 5)))
        recs.append(_span("ctr", "2", 4 * i + 2, t - i * 0.01, 30 + (i % 5)))
        recs.append(_span("ctr", "2", 4 * i + 3, t - i * 0.01, 1.0, name="compute"))  # no model attributes
    chk.observe(Batch("spans", "otlp", tuple(recs)))
    # Events with a *faster* v2: span latency wins once both sides have enough of it, never both mixed.
    chk.observe(events("ctr", "1", t, latency=[50.0] * 500))
    chk.observe(events("ctr", "2", t, latency=[10.0] * 500))
    f = only(chk.evaluate(t))
    assert f.facts["latency_source"] == "spans"
    assert f.facts["p50.base"] == 22 and f.facts["p50.cand"] == 32
    assert f.facts["worse"] == "p50,p99"
    assert f.facts["errors.n_base"] == 0  # Triton's spans set no status: they say nothing about errors
    assert (
        reg.get_sample_value("sidecar_canary_samples", {"model": "ctr", "version": "2", "signal": "latency_spans"})
        == 500
    )


def test_error_status_of_spans_counts(clock: FakeClock) -> None:
    chk, reg = make(clock, min_samples=100)
    t = clock.now()
    recs = [
        _span("m", v, 2 * i + (v == "2"), t, 5.0, status=2 if (v == "2" and i % 5 == 0) else 1)
        for i in range(400)
        for v in ("1", "2")
    ]
    chk.observe(Batch("spans", "otlp", tuple(recs)))
    f = only(chk.evaluate(t))
    assert f.facts["errors.cand"] == pytest.approx(0.2) and f.facts["errors.base"] == 0
    assert verdict(reg, "errors", model="m") == 1


def test_old_values_leave_the_window_and_a_version_gone_from_traffic_is_forgotten(clock: FakeClock) -> None:
    chk, reg = make(clock, window_secs=600)
    chk.observe(events("ctr", "1", clock.now(), latency=rng.normal(35, 2, 500)))
    chk.observe(events("ctr", "2", clock.now(), latency=rng.normal(41, 2, 500)))
    assert only(chk.evaluate(clock.now())).active
    clock.advance(601)
    chk.observe(events("ctr", "1", clock.now(), latency=rng.normal(35, 2, 500)))
    assert list(chk.evaluate(clock.now())) == []  # v2 sent nothing for a window: no pair
    assert verdict(reg, "p99") is None
    assert set(chk.models["ctr"]) == {"1"}
    assert (
        reg.get_sample_value("sidecar_canary_samples", {"model": "ctr", "version": "2", "signal": "latency_events"})
        is None
    )


def test_values_older_than_the_window_are_dropped_and_counted(clock: FakeClock) -> None:
    chk, reg = make(clock, window_secs=60)
    chk.observe(events("ctr", "1", clock.now() - 120, latency=[1.0] * 10))
    assert reg.get_sample_value("sidecar_canary_values_dropped_total", {"reason": "too_old"}) == 10
    assert chk.models == {}


def test_configured_pair_and_auto_pairs(clock: FakeClock) -> None:
    chk, _ = make(clock, pairs={"ctr": {"baseline": "3", "candidate": "2"}})
    for v in ("1", "2", "3"):
        chk.observe(events("ctr", v, clock.now(), latency=[1.0] * 10))
        chk.observe(events("rank", v, clock.now(), latency=[1.0] * 10))
    got = {(f.labels["model"], f.labels["baseline"], f.labels["candidate"]) for f in chk.evaluate(clock.now())}
    assert got == {("ctr", "3", "2"), ("rank", "1", "2"), ("rank", "1", "3")}


def test_versions_beyond_the_limit_are_dropped_and_counted(clock: FakeClock) -> None:
    chk, reg = make(clock, max_versions_per_model=2, max_models=1)
    for v in ("1", "2", "3"):
        chk.observe(events("ctr", v, clock.now(), latency=[1.0] * 5))
    chk.observe(events("rank", "1", clock.now(), latency=[1.0] * 5))
    assert reg.get_sample_value("sidecar_canary_values_dropped_total", {"reason": "version_limit"}) == 5
    assert reg.get_sample_value("sidecar_canary_values_dropped_total", {"reason": "model_limit"}) == 5
    assert set(chk.models) == {"ctr"} and set(chk.models["ctr"]) == {"1", "2"}


def test_memory_is_bounded_by_max_samples(clock: FakeClock) -> None:
    chk, reg = make(clock, max_samples=100, min_samples=20)
    for _ in range(5):
        chk.observe(events("ctr", "1", clock.now(), latency=[1.0] * 100))
    chk.observe(events("ctr", "2", clock.now(), latency=[1.0] * 100))
    chk.evaluate(clock.now())
    assert (
        reg.get_sample_value("sidecar_canary_samples", {"model": "ctr", "version": "1", "signal": "latency_events"})
        == 100
    )


def test_alert_off_keeps_the_verdict_but_makes_no_active_finding(clock: FakeClock) -> None:
    chk, reg = make(clock, alert=False)
    chk.observe(events("ctr", "1", clock.now(), latency=rng.normal(35, 2, 500)))
    chk.observe(events("ctr", "2", clock.now(), latency=rng.normal(41, 2, 500)))
    f = only(chk.evaluate(clock.now()))
    assert not f.active and f.facts["verdict"] == "worse" and verdict(reg, "p99") == 1


def test_config_rejects_a_pair_of_one_version() -> None:
    with pytest.raises(ValueError, match="candidate"):
        CanaryConfig.model_validate({"pairs": {"ctr": {"baseline": "1", "candidate": "1"}}})
