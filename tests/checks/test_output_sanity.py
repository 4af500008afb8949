"""Output sanity on a fake clock: NaN/inf, all zeros, out of range and collapsed, each its own finding."""

from __future__ import annotations

import math
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from pydantic import ValidationError

from sidecar.alerting.render import finding_text
from sidecar.checks.output_sanity.check import OutputSanityCheck
from sidecar.checks.output_sanity.config import OutputSanityConfig
from sidecar.clock import FakeClock
from sidecar.model import Batch, Event, Finding
from sidecar.sources.events.config import TensorMapping
from sidecar.sources.trace_files.tensors import events_from_trace_records


def make(clock: FakeClock, **cfg: Any) -> tuple[OutputSanityCheck, CollectorRegistry]:
    reg = CollectorRegistry()
    return OutputSanityCheck(
        OutputSanityConfig.model_validate({"enabled": True, **cfg}), registry=reg, clock=clock
    ), reg


def ev(
    t: float,
    score: float | None = None,
    *,
    version: str = "2",
    req: str | None = None,
    trace: str | None = None,
    **features: float,
) -> Event:
    return Event(
        model="ctr", version=version, timestamp=t, score=score, features=features, request_id=req, trace_id=trace
    )


def feed(chk: OutputSanityCheck, items: list[Event]) -> None:
    chk.observe(Batch("events", "test", tuple(items)))


def by_test(found: list[Finding] | Any) -> dict[str, Finding]:
    return {f.labels["test"]: f for f in found}


def ratio(reg: CollectorRegistry, test: str, version: str = "2") -> float | None:
    return reg.get_sample_value("sidecar_output_sanity_ratio", {"model": "ctr", "version": version, "test": test})


def test_one_nan_output_is_a_finding_with_its_request_id(clock: FakeClock) -> None:
    chk, reg = make(clock, models={"ctr": {"outputs": ["features.out"]}})
    t = clock.now()
    feed(chk, [ev(t, out=0.1 * (i % 7), req=f"req-{i}") for i in range(49)] + [ev(t, out=math.nan, req="req-x")])
    f = by_test(chk.evaluate(t))["nonfinite"]
    assert f.active and f.value == pytest.approx(1 / 50)
    assert f.facts["sample_request_ids"] == "req-x"
    assert f.labels == {"alertname": "ModelOutputSuspect", "model": "ctr", "version": "2", "test": "nonfinite"}
    assert finding_text(f)[0] == "ctr v2 outputs NaN or inf: 1 of 50 (2.0%) over 5m, e.g. request req-x"
    assert ratio(reg, "nonfinite") == pytest.approx(0.02)
    assert (
        reg.get_sample_value("sidecar_output_sanity_condition", {"model": "ctr", "version": "2", "test": "nonfinite"})
        == 1
    )


def test_finite_outputs_make_an_inactive_nonfinite_finding(clock: FakeClock) -> None:
    chk, reg = make(clock)
    feed(chk, [ev(clock.now(), 0.1 * (i % 9)) for i in range(50)])
    f = by_test(chk.evaluate(clock.now()))["nonfinite"]
    assert not f.active and not f.insufficient_data and ratio(reg, "nonfinite") == 0


def test_inf_in_a_field_counts_as_nonfinite(clock: FakeClock) -> None:
    chk, _ = make(clock, models={"ctr": {"outputs": ["fields.logit"]}})
    t = clock.now()
    items = [
        Event(model="ctr", version="2", timestamp=t, fields={"logit": math.inf if i == 3 else 1.0 + i})
        for i in range(10)
    ]
    feed(chk, items)
    f = by_test(chk.evaluate(t))["nonfinite"]
    assert f.active and f.facts["count"] == 1


def test_a_nan_in_a_triton_tensors_output_reaches_the_check(clock: FakeClock) -> None:
    records = [
        {"id": 1, "model_name": "ctr", "model_version": 2, "request_id": "req-1"},
        {
            "id": 1,
            "activity": "TENSOR_BACKEND_OUTPUT",
            "tensor": {"name": "score", "data": "nan,0.5", "shape": "2,1", "dtype": "FP32"},
        },
    ]
    events, skipped = events_from_trace_records(records, {"ctr": TensorMapping(inputs={"score": ["out"]})}, clock.now())
    assert not skipped and len(events) == 2
    chk, _ = make(clock, models={"ctr": {"outputs": ["features.out"]}})
    feed(chk, events)
    f = by_test(chk.evaluate(clock.now()))["nonfinite"]
    assert f.active and f.facts["count"] == 1 and f.facts["sample_request_ids"] == "req-1"


def test_all_zero_outputs_fire_above_their_share_and_need_min_samples(clock: FakeClock) -> None:
    cfg = {"models": {"ctr": {"outputs": ["features.a", "features.b"]}}, "min_samples": 100, "zero_max_ratio": 0.5}
    chk, reg = make(clock, **cfg)
    t = clock.now()
    # A row is all-zero only when every output is 0: (0, 1) is not.
    feed(chk, [ev(t, a=0.0, b=0.0) for _ in range(60)] + [ev(t, a=0.0, b=1.0 + i) for i in range(40)])
    f = by_test(chk.evaluate(t))["all_zero"]
    assert f.active and f.value == pytest.approx(0.6) and ratio(reg, "all_zero") == pytest.approx(0.6)
    assert finding_text(f)[0].startswith("ctr v2 outputs all zeros: 60 of 100 (60.0%) over 5m")
    chk2, _ = make(clock, **cfg)
    feed(chk2, [ev(t, a=0.0, b=0.0) for _ in range(40)] + [ev(t, a=1.0, b=float(i)) for i in range(60)])
    assert not by_test(chk2.evaluate(t))["all_zero"].active
    chk3, reg3 = make(clock, **cfg)
    feed(chk3, [ev(t, a=0.0, b=0.0) for _ in range(99)])
    f3 = by_test(chk3.evaluate(t))["all_zero"]
    assert f3.insufficient_data and not f3.active and ratio(reg3, "all_zero") is None


def test_a_score_outside_the_declared_range_is_a_finding_with_its_trace(clock: FakeClock) -> None:
    chk, reg = make(clock, models={"ctr": {"range": {"min": 0, "max": 1}}})
    t = clock.now()
    tid = "ab" * 16
    feed(chk, [ev(t, 0.01 * i) for i in range(99)] + [ev(t, 1.2, trace=tid)])
    f = by_test(chk.evaluate(t))["out_of_range"]
    assert f.active and f.trace_id == tid and f.facts["sample_trace_ids"] == tid
    assert finding_text(f)[0] == f"ctr v2 outputs outside [0, 1]: 1 of 100 (1.0%) over 5m, e.g. trace {tid}"
    assert ratio(reg, "out_of_range") == pytest.approx(0.01)


def test_no_declared_range_means_no_range_test(clock: FakeClock) -> None:
    chk, _ = make(clock)
    feed(chk, [ev(clock.now(), 1e9)])
    assert "out_of_range" not in by_test(chk.evaluate(clock.now()))


def test_one_value_dominating_the_window_is_collapsed(clock: FakeClock) -> None:
    chk, reg = make(clock, min_samples=100, collapsed_ratio=0.95)
    t = clock.now()
    feed(chk, [ev(t, 0.5) for _ in range(97)] + [ev(t, 0.1 * i) for i in range(1, 4)])
    f = by_test(chk.evaluate(t))["collapsed"]
    assert f.active and f.value == pytest.approx(0.97) and f.facts["dominant"] == "0.5"
    assert ratio(reg, "collapsed") == pytest.approx(0.97)
    assert finding_text(f)[0] == "ctr v2 outputs collapsed: 0.5 is 97% of 100 outputs over 5m"
    chk2, _ = make(clock, min_samples=100, collapsed_ratio=0.95)
    feed(chk2, [ev(t, 0.5) for _ in range(90)] + [ev(t, 0.01 * i) for i in range(1, 11)])
    assert not by_test(chk2.evaluate(t))["collapsed"].active


def test_each_version_is_its_own_series(clock: FakeClock) -> None:
    chk, _ = make(clock, min_samples=10)
    t = clock.now()
    feed(chk, [ev(t, 0.5, version="1") for _ in range(20)] + [ev(t, 0.01 * i, version="2") for i in range(20)])
    found = [(f.labels["version"], f.labels["test"]) for f in chk.evaluate(t) if f.active]
    assert found == [("1", "collapsed")]


def test_outputs_leave_the_window_and_their_metrics_go(clock: FakeClock) -> None:
    chk, reg = make(clock, window_secs=300)
    feed(chk, [ev(clock.now(), 0.3)])
    assert by_test(chk.evaluate(clock.now()))
    assert ratio(reg, "nonfinite") == 0
    clock.advance(301)
    assert list(chk.evaluate(clock.now())) == []
    assert ratio(reg, "nonfinite") is None and chk.series == {}


def test_drops_are_counted_by_reason(clock: FakeClock) -> None:
    chk, reg = make(clock, max_models=1, max_versions_per_model=1, window_secs=60)
    t = clock.now()
    feed(chk, [ev(t, 0.1), ev(t, 0.1, version="3"), ev(t - 120, 0.1), ev(t)])
    chk.observe(Batch("events", "t", (Event(model="other", version="1", timestamp=t, score=0.2),)))

    def dropped(reason: str) -> float | None:
        return reg.get_sample_value("sidecar_output_sanity_events_dropped_total", {"reason": reason})

    assert [dropped(r) for r in ("version_limit", "too_old", "no_output", "model_limit")] == [1, 1, 1, 1]
    assert reg.get_sample_value("sidecar_output_sanity_events_total") == 1


def test_config_errors_name_the_field() -> None:
    with pytest.raises(ValidationError, match=r"models\.ctr\.outputs"):
        OutputSanityConfig.model_validate({"models": {"ctr": {"outputs": ["logits"]}}})
    with pytest.raises(ValidationError, match="max: must not be below min"):
        OutputSanityConfig.model_validate({"models": {"ctr": {"range": {"min": 1, "max": 0}}}})
    with pytest.raises(ValidationError, match="at least one"):
        OutputSanityConfig.model_validate({"models": {"ctr": {"range": {}}}})
