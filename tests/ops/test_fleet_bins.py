"""The fleet bins: edges frozen at the reference's quantiles, a content-hash reference id, per-bin counters that
add exactly across replicas, counted refusals, and the exposition the fleet rules read."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as openmetrics_latest
from prometheus_client.parser import text_string_to_metric_families
from scipy import stats as sps

from sidecar.checks.drift.config import ReferenceConfig
from sidecar.checks.drift.references import Reference
from sidecar.checks.fleet.bins import OTHER, binned_statistics, freeze, reference_id
from sidecar.checks.fleet.check import FleetBins
from sidecar.checks.fleet.config import FleetConfig
from sidecar.checks.stats.core import Ecdf
from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.errors import ConfigError
from sidecar.model import Batch, Event
from sidecar.service import Service


def _numeric(values: np.ndarray, source: str = "file:a.csv", created_at: float = 0.0) -> Reference:
    return Reference("numeric", len(values), 0, source, created_at, Ecdf.from_values(values))


class _Refs:
    def __init__(self, refs: dict[tuple[str, str, str], Reference], mode: str = "file") -> None:
        self.refs = refs
        self.mode = mode

    def spec_for(self, model: str) -> ReferenceConfig:
        if self.mode == "file":
            return ReferenceConfig(mode="file", path="ref.csv")
        return ReferenceConfig(mode=self.mode)  # type: ignore[arg-type]

    def frozen_references(self) -> dict[tuple[str, str, str], Reference]:
        return dict(self.refs)


def _events(model: str, version: str, rows: list[dict[str, object]]) -> Batch:
    return Batch(kind="events", source="test", items=tuple(Event(model, version, 0.0, r) for r in rows))


def _sample(registry: CollectorRegistry, name: str, labels: dict[str, str]) -> float | None:
    return registry.get_sample_value(name, labels)


def test_numeric_edges_sit_at_the_reference_quantiles_and_its_cdf_there_is_exact() -> None:
    ref = _numeric(np.arange(1000, dtype=np.float64))
    fb = freeze(ref, 20, 50)
    assert fb is not None and fb.kind == "numeric"
    assert fb.n_bins == 20 and fb.labels[-1] == "+Inf" and fb.lows[0] == "-Inf"
    assert fb.ref_cdf == tuple(i / 20 for i in range(1, 21))
    assert fb.edges[0] == 49.0 and fb.edges[-1] == 949.0
    assert fb.lows[1:] == fb.labels[:-1]
    # Tied quantiles merge: a reference of three values has at most three bins whatever `bins` says.
    tied = freeze(_numeric(np.repeat([1.0, 2.0, 3.0], 100)), 20, 50)
    assert tied is not None and tied.labels == ("1.0", "2.0", "3.0", "+Inf")
    assert tied.ref_cdf == pytest.approx((1 / 3, 2 / 3, 1.0, 1.0))


def test_reference_id_is_a_content_hash_of_the_reference_and_the_binning() -> None:
    vals = np.random.default_rng(1).normal(size=500)
    a = _numeric(vals.copy(), source="file:/one/ref.csv", created_at=1.0)
    b = _numeric(vals.copy(), source="file:/two/ref.csv", created_at=99.0)
    assert reference_id(a, 20, 50) == reference_id(b, 20, 50)
    assert reference_id(a, 20, 50) != reference_id(a, 10, 50)
    shifted = _numeric(vals + 1e-9)
    assert reference_id(a, 20, 50) != reference_id(shifted, 20, 50)
    c1 = Reference("categorical", 10, 0, "x", 0.0, counts={"us": 6, "de": 4})
    c2 = Reference("categorical", 10, 0, "y", 5.0, counts={"de": 4, "us": 6})
    assert reference_id(c1, 20, 50) == reference_id(c2, 20, 50)


def test_categorical_bins_take_the_most_frequent_categories_and_other() -> None:
    ref = Reference("categorical", 100, 0, "f", 0.0, counts={"us": 50, "de": 30, "fr": 15, "it": 5})
    fb = freeze(ref, 20, 2)
    assert fb is not None
    assert fb.labels == ("de", "us", OTHER)
    assert fb.ref_cdf == pytest.approx((0.3, 0.5, 0.2))
    assert list(fb.count_categories(["us", "it", "xx", "de", "us"])) == [1, 2, 2]


def test_counts_add_exactly_across_replicas_and_binned_d_is_a_lower_bound_within_one_bin() -> None:
    rng = np.random.default_rng(7)
    ref_vals = rng.normal(size=5000)
    ref = _numeric(ref_vals)
    refs = _Refs({("m", "*", "x"): ref})
    cur = rng.normal(0.1, 1.0, size=3000)
    replicas = [
        FleetBins(FleetConfig(enabled=True), references=refs, registry=CollectorRegistry(), clock=FakeClock())
        for _ in range(3)
    ]
    for i, part in enumerate(np.array_split(cur, 7)):
        replicas[i % 3].observe(_events("m", "1", [{"x": float(v)} for v in part]))
    one = FleetBins(FleetConfig(enabled=True), references=refs, registry=CollectorRegistry(), clock=FakeClock())
    one.observe(_events("m", "1", [{"x": float(v)} for v in cur]))
    merged = sum(r.snapshot()[0][2] for r in replicas)
    ((_, fb, whole, _, _),) = one.snapshot()
    assert list(merged) == list(whole) and merged.sum() == 3000
    n, d, psi = binned_statistics("numeric", fb.ref_cdf, merged)
    exact = sps.ks_2samp(cur, ref_vals).statistic
    assert n == 3000 and d <= exact + 1e-12
    assert exact - d <= max(np.diff(np.concatenate(([0.0], fb.ref_cdf)))) + max(merged) / n
    assert psi > 0


def test_missing_wrong_types_and_refusals_are_counted() -> None:
    reg = CollectorRegistry()
    refs = _Refs(
        {
            ("m", "*", "x"): _numeric(np.arange(100.0)),
            ("m", "*", "c"): Reference("categorical", 4, 0, "f", 0.0, counts={"a": 2, "b": 2}),
        }
    )
    fleet = FleetBins(FleetConfig(enabled=True, max_series=2), references=refs, registry=reg, clock=FakeClock())
    fleet.observe(
        _events(
            "m",
            "1",
            [
                {"x": 5.0, "c": "a", "new": 1.0},
                {"x": None, "c": None},
                {"x": "text", "c": 3},
                {"x": float("nan"), "c": "z"},
            ],
        )
    )
    by = {k[2]: (fb, counts, miss) for k, fb, counts, miss, _ in fleet.snapshot()}
    base = {"model": "m", "version": "1", "ref_id": by["x"][0].ref_id}
    assert int(by["x"][1].sum()) == 1 and by["x"][2] == 3
    assert list(by["c"][1]) == [1, 0, 2] and by["c"][2] == 1  # "3" and "z" are not reference categories
    assert _sample(reg, "sidecar_fleet_values_unbinned_total", {"reason": "not_in_reference"}) == 1
    # A second version takes two more series slots: refused, counted.
    fleet.observe(_events("m", "2", [{"x": 1.0}]))
    assert _sample(reg, "sidecar_fleet_values_unbinned_total", {"reason": "series_limit"}) == 1
    assert _sample(reg, "sidecar_fleet_feature_count", {**base, "feature": "x"}) == 1
    reg2 = CollectorRegistry()
    rolling = FleetBins(FleetConfig(enabled=True), references=_Refs({}, "rolling"), registry=reg2, clock=FakeClock())
    rolling.observe(_events("m", "1", [{"x": 1.0, "y": 2.0}]))
    assert _sample(reg2, "sidecar_fleet_values_unbinned_total", {"reason": "rolling_reference"}) == 2
    pinned = FleetBins(
        FleetConfig(enabled=True), references=_Refs({}, "pinned"), registry=CollectorRegistry(), clock=FakeClock()
    )
    pinned.observe(_events("m", "1", [{"x": 1.0}]))
    assert pinned.c_unbinned.labels("no_reference")._value.get() == 1


def test_a_new_reference_restarts_the_series_under_its_new_id() -> None:
    reg = CollectorRegistry()
    refs = _Refs({("m", "*", "x"): _numeric(np.arange(100.0))})
    fleet = FleetBins(FleetConfig(enabled=True), references=refs, registry=reg, clock=FakeClock())
    fleet.observe(_events("m", "1", [{"x": 5.0}, {"x": 50.0}]))
    old_id = fleet.snapshot()[0][1].ref_id
    refs.refs[("m", "*", "x")] = _numeric(np.arange(100.0) * 2)
    fleet.evaluate(0.0)
    ((_, fb, counts, _, _),) = fleet.snapshot()
    assert fb.ref_id != old_id and int(counts.sum()) == 0
    assert (
        _sample(reg, "sidecar_fleet_feature_count", {"model": "m", "version": "1", "feature": "x", "ref_id": old_id})
        is None
    )
    assert _sample(reg, "sidecar_fleet_reference_changes_total", {}) == 1


def test_exposition_has_buckets_reference_cdf_with_lower_edges_and_size() -> None:
    reg = CollectorRegistry()
    refs = _Refs({("m", "*", "x"): _numeric(np.arange(10.0) - 1.0)})
    fleet = FleetBins(FleetConfig(enabled=True, bins=2), references=refs, registry=reg, clock=FakeClock())
    fleet.observe(_events("m", "1", [{"x": 1.0}, {"x": 3.0}, {"x": 4.5}, {"x": 11.0}]))
    # Edges below zero: prometheus_client would leave _count out of a histogram with a negative bucket.
    samples = {
        (sm.name, tuple(sorted(sm.labels.items()))): sm.value
        for fam in text_string_to_metric_families(generate_latest(reg).decode())
        for sm in fam.samples
    }
    rid = fleet.snapshot()[0][1].ref_id
    lab = (("feature", "x"), ("model", "m"), ("ref_id", rid), ("version", "1"))

    def got(name: str, **extra: str) -> float:
        return samples[(name, tuple(sorted((*lab, *extra.items()))))]

    assert got("sidecar_fleet_feature_bucket", le="3.0") == 2
    assert got("sidecar_fleet_feature_bucket", le="+Inf") == 4
    assert got("sidecar_fleet_feature_count") == 4
    assert got("sidecar_fleet_reference_cdf", le="3.0", lo="-Inf") == 0.5
    assert got("sidecar_fleet_reference_cdf", le="+Inf", lo="3.0") == 1.0
    assert got("sidecar_fleet_reference_size") == 10
    om = openmetrics_latest(reg).decode()
    assert f'sidecar_fleet_feature_count{{feature="x",model="m",ref_id="{rid}",version="1"}} 4.0' in om


def test_the_service_bins_against_the_drift_checks_file_reference(tmp_path: Path) -> None:
    (tmp_path / "ref.csv").write_text("x\n" + "\n".join(str(i) for i in range(200)) + "\n")
    cfg = {
        "store": {"path": str(tmp_path / "s.sqlite")},
        "checks": {
            "drift": {
                "enabled": True,
                "reference": {"mode": "file", "path": str(tmp_path / "ref.csv")},
                "models": {"m": {"features": {"x": "numeric"}}},
            },
            "fleet": {"enabled": True, "bins": 4},
        },
    }
    reg = CollectorRegistry()
    svc = Service(parse_config(cfg), registry=reg, clock=FakeClock())
    try:
        svc.bus.publish(_events("m", "7", [{"x": 10.0}, {"x": 120.0}, {"x": 500.0}]))
        fleet = svc.component("fleet")
        ((key, fb, counts, _, _),) = fleet.snapshot()
        assert key == ("m", "7", "x") and fb.labels == ("49.0", "99.0", "149.0", "+Inf")
        assert list(counts) == [1, 0, 1, 1]
    finally:
        svc.store.close()
    with pytest.raises(ConfigError, match=r"checks\.fleet\.enabled"):
        Service(
            parse_config({"store": {"path": str(tmp_path / "t.sqlite")}, "checks": {"fleet": {"enabled": True}}}),
            registry=CollectorRegistry(),
        )


def test_the_component_has_the_common_shape() -> None:
    import inspect

    from sidecar.component import Role

    params = list(inspect.signature(FleetBins.__init__).parameters.values())[1:]
    assert params[0].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD and params[0].name == "cfg"
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params[1:])
    fleet = FleetBins(FleetConfig(enabled=True), references=_Refs({}), registry=CollectorRegistry(), clock=FakeClock())
    assert fleet.role is Role.CHECK and fleet.routes() is None and fleet.readiness() is None
    assert fleet.evaluate(0.0) == []


def test_the_columnar_path_bins_what_the_per_event_path_bins() -> None:
    from sidecar.model import EventColumns

    rng = np.random.default_rng(9)
    refs = _Refs(
        {("m", "*", "x"): _numeric(rng.normal(size=500)), ("m", "*", "_score"): _numeric(rng.uniform(size=500))}
    )
    a_reg, b_reg = CollectorRegistry(), CollectorRegistry()
    cfg = FleetConfig(enabled=True, bins=10)
    per_event = FleetBins(cfg, references=refs, registry=a_reg, clock=FakeClock())
    columnar = FleetBins(cfg, references=refs, registry=b_reg, clock=FakeClock())
    score = rng.uniform(size=300)
    score[::7] = np.nan  # an event without a score
    block = EventColumns("m", "3", np.zeros(300), {"x": rng.normal(0.2, 1, size=300), "y": np.ones(300)}, score)
    per_event.observe(Batch(kind="events", source="t", items=tuple(block.events())))
    columnar.observe_columns(Batch(kind="event_columns", source="t", items=(block,)))
    a, b = per_event.snapshot(), columnar.snapshot()
    assert [k for k, *_ in a] == [k for k, *_ in b] == [("m", "3", "_score"), ("m", "3", "x")]
    for (_, fa, ca, ma, ta), (_, fb, cb, mb, tb) in zip(a, b, strict=True):
        assert fa.ref_id == fb.ref_id and list(ca) == list(cb) and ma == mb and ta == pytest.approx(tb, abs=1e-9)
    assert int(a[0][2].sum()) == 300 - len(range(0, 300, 7))
    # y has no reference: not binned, counted the same on both paths
    for reg in (a_reg, b_reg):
        assert _sample(reg, "sidecar_fleet_values_unbinned_total", {"reason": "not_in_reference"}) == 300


def test_the_service_builds_the_business_counters_beside_the_bins(tmp_path: Path) -> None:
    (tmp_path / "ref.csv").write_text("x\n" + "\n".join(str(i) for i in range(200)) + "\n")
    cfg = {
        "store": {"path": str(tmp_path / "s.sqlite")},
        "checks": {
            "drift": {"enabled": True, "reference": {"mode": "file", "path": str(tmp_path / "ref.csv")}},
            "fleet": {"enabled": True, "bins": 4},
            "business": {
                "enabled": True,
                "checks": {"x_mean": {"field": "features.x", "aggregate": "mean", "threshold": 1.0}},
            },
        },
    }
    reg = CollectorRegistry()
    svc = Service(parse_config(cfg), registry=reg, clock=FakeClock())
    try:
        svc.bus.publish(_events("m", "7", [{"x": 10.0}, {"x": 120.0}, {"x": 500.0}]))
        labels = {"check": "x_mean", "model": "m", "version": "7"}
        assert _sample(reg, "sidecar_fleet_business_events_total", labels) == 3
        assert _sample(reg, "sidecar_fleet_business_sum_total", labels) == 630.0
    finally:
        svc.store.close()
