"""The fleet business counters: per check, model and version, the sums and counts a business check aggregates,
and a quantile check's values in bins frozen at the drift reference of its field; the columnar path counts
what the per-event path counts; a new reference id starts a series again; bad values are counted apart."""

from __future__ import annotations

import math

import numpy as np
import pytest
from prometheus_client import CollectorRegistry, generate_latest

from sidecar.checks.business.config import BusinessCheckConfig
from sidecar.checks.drift.config import ReferenceConfig
from sidecar.checks.drift.references import Reference
from sidecar.checks.fleet.bins import freeze, histogram_quantile
from sidecar.checks.fleet.business import FleetBusiness, reference_feature
from sidecar.checks.fleet.config import FleetConfig
from sidecar.checks.stats.core import Ecdf
from sidecar.clock import FakeClock
from sidecar.model import Batch, Event, EventColumns

CHECKS = {
    "ctr_mean": BusinessCheckConfig(field="features.clicked", aggregate="mean", threshold=0.1, model="ctr"),
    "fraud_p95": BusinessCheckConfig(field="score", aggregate="quantile", quantile=0.95, threshold=0.9),
    "wer_ratio": BusinessCheckConfig(
        field="fields.errors", aggregate="ratio", denominator="fields.words", threshold=0.08
    ),
    "latency_p99": BusinessCheckConfig(field="fields.ms", aggregate="quantile", quantile=0.99, threshold=100),
}


class _Refs:
    def __init__(self, scores: np.ndarray) -> None:
        self.refs = {("ctr", "*", "_score"): Reference("numeric", len(scores), 0, "t", 0.0, Ecdf.from_values(scores))}

    def spec_for(self, model: str) -> ReferenceConfig:
        return ReferenceConfig(mode="file", path="/refs/x.csv")

    def frozen_references(self) -> dict[tuple[str, str, str], Reference]:
        return dict(self.refs)


def _make(refs: _Refs, registry: CollectorRegistry | None = None) -> FleetBusiness:
    return FleetBusiness(
        FleetConfig(enabled=True, business_bins=50),
        checks=CHECKS,
        references=refs,
        registry=registry or CollectorRegistry(),
        clock=FakeClock(),
    )


def _samples(reg: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for m in reg.collect():
        for s in m.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_sums_counts_and_bins_equal_a_direct_computation_and_bad_values_are_counted() -> None:
    rng = np.random.default_rng(1)
    refs = _Refs(rng.uniform(size=4000))
    reg = CollectorRegistry()
    fb = _make(refs, reg)
    scores = rng.uniform(0.1, 1.1, size=300)
    events = [
        Event("ctr", "2", 0.0, {"clicked": float(i % 7 == 0)}, float(s), fields={"errors": 2.0, "words": 10.0})
        for i, s in enumerate(scores)
    ]
    events += [
        Event("ctr", "2", 0.0, {"clicked": "yes"}),  # not a number: counted apart
        Event("other", "1", 0.0, {"clicked": 1.0}),  # another model: ctr_mean takes only ctr
    ]
    fb.observe(Batch(kind="events", source="t", items=tuple(events)))
    got = _samples(reg)
    key = (("check", "ctr_mean"), ("model", "ctr"), ("version", "2"))
    assert got[("sidecar_fleet_business_events_total", key)] == 300
    assert got[("sidecar_fleet_business_sum_total", key)] == sum(1 for i in range(300) if i % 7 == 0)
    wer = (("check", "wer_ratio"), ("model", "ctr"), ("version", "2"))
    assert got[("sidecar_fleet_business_denominator_total", wer)] == 3000.0
    assert got[("sidecar_fleet_business_sum_total", wer)] == 600.0
    skipped = {k[1]: v for k, v in got.items() if k[0] == "sidecar_fleet_business_values_skipped_total"}
    assert skipped[(("check", "ctr_mean"), ("reason", "not_numeric"))] == 1
    assert skipped[(("check", "latency_p99"), ("reason", "missing_field"))] == 302  # no fields.ms anywhere
    assert skipped[(("check", "fraud_p95"), ("reason", "missing_field"))] == 2  # two events without a score
    # the score's bins are the drift reference's (the _score feature), 50 of them, at its quantiles
    frozen = freeze(refs.refs[("ctr", "*", "_score")], 50, 1)
    assert frozen is not None
    want = np.cumsum(frozen.count_numbers(scores)[0])
    rid = frozen.ref_id
    for le, c in zip(frozen.labels, want, strict=True):
        lab = (("check", "fraud_p95"), ("le", le), ("model", "ctr"), ("ref_id", rid), ("version", "2"))
        assert got[("sidecar_fleet_business_bin_bucket", lab)] == c
    assert got[("sidecar_fleet_business_bin_count", (*lab[:1], *lab[2:]))] == 300
    # the settings ride along for the rules
    thr = (("aggregate", "quantile"), ("check", "fraud_p95"), ("compare", "absolute"), ("direction", "up"))
    assert got[("sidecar_fleet_business_threshold", (*thr, ("quantile", "0.95")))] == 0.9
    assert b"sidecar_fleet_business_bin_bucket" in generate_latest(reg)


def test_a_quantile_check_without_a_reference_of_its_field_is_not_binned() -> None:
    assert reference_feature("score") == "_score" and reference_feature("features.x") == "x"
    assert reference_feature("fields.ms") is None and reference_feature("label") is None
    reg = CollectorRegistry()
    fb = _make(_Refs(np.arange(100.0)), reg)
    fb.observe(Batch(kind="events", source="t", items=(Event("m", "1", 0.0, {}, 0.5, fields={"ms": 3.0}),)))
    got = _samples(reg)
    assert got[("sidecar_fleet_business_values_skipped_total", (("check", "latency_p99"), ("reason", "no_reference")))]
    assert got[("sidecar_fleet_business_values_skipped_total", (("check", "fraud_p95"), ("reason", "no_reference")))]


def test_the_columnar_path_counts_what_the_per_event_path_counts() -> None:
    rng = np.random.default_rng(2)
    refs = _Refs(rng.uniform(size=1000))
    a_reg, b_reg = CollectorRegistry(), CollectorRegistry()
    per_event, columnar = _make(refs, a_reg), _make(refs, b_reg)
    clicked, score = (rng.uniform(size=200) < 0.2).astype(float), rng.uniform(size=200)
    score[::10] = np.nan  # no score
    block = EventColumns("ctr", "2", np.zeros(200), {"clicked": clicked}, score)
    per_event.observe(Batch(kind="events", source="t", items=tuple(block.events())))
    columnar.observe_columns(Batch(kind="event_columns", source="t", items=(block,)))
    a, b = _samples(a_reg), _samples(b_reg)
    counted = {k: v for k, v in a.items() if k[0].startswith("sidecar_fleet_business") and "created" not in k[0]}
    assert counted == {k: v for k, v in b.items() if k in counted}
    assert set(counted) == {k for k in b if k[0].startswith("sidecar_fleet_business") and "created" not in k[0]}


def test_a_new_reference_id_starts_the_quantile_series_again() -> None:
    refs = _Refs(np.linspace(0, 1, 500))
    fb = _make(refs)
    fb.observe(Batch(kind="events", source="t", items=(Event("ctr", "2", 0.0, {}, 0.3),) * 5))
    ((_, before),) = [(k, s) for k, s in fb.snapshot() if k[0] == "fraud_p95"]
    refs.refs = _Refs(np.linspace(0, 2, 500)).refs  # a reference update: other edges, another id
    fb.refresh()
    ((_, after),) = [(k, s) for k, s in fb.snapshot() if k[0] == "fraud_p95"]
    assert before.bins is not None and after.bins is not None and before.bins.ref_id != after.bins.ref_id
    assert after.events == 0 and after.counts is not None and int(after.counts.sum()) == 0


@pytest.mark.parametrize(
    ("q", "cum", "want"),
    [
        (0.95, [480, 660, 900, 900], 0.8 + 0.1 * (855 - 660) / 240),  # inside (0.8, 0.9]
        (0.99, [480, 660, 800, 900], 0.9),  # in the +Inf bucket: the last finite edge
        (0.1, [480, 660, 900, 900], 0.5 * 90 / 480),  # the first bucket starts at 0
    ],
)
def test_histogram_quantile_is_prometheus_arithmetic(q: float, cum: list[float], want: float) -> None:
    assert histogram_quantile(q, [0.5, 0.8, 0.9, math.inf], cum) == pytest.approx(want, abs=1e-12)
