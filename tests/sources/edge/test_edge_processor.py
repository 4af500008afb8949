"""The edge processor: counts per route group and node, hit ratio, latency quantiles within 1%, bounds counted,
and the series as Prometheus exposes them."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from prometheus_client import CollectorRegistry, generate_latest

from sidecar.clock import FakeClock
from sidecar.processors.edge import EdgeProcessor
from sidecar.processors.edge_config import EdgeSeriesConfig
from sidecar.processors.edge_record import EdgeRecord

NOW = 1_765_000_000.0 - 1_765_000_000.0 % 3600  # on the hour


def _rec(**kw: Any) -> EdgeRecord:
    base: dict[str, Any] = {
        "at": NOW + 10,
        "path": "/v2/models/ctr/infer",
        "cache": "HIT",
        "edge_s": 0.01,
        "origin_s": None,
        "status": 200,
        "node": "fra1",
    }
    base.update(kw)
    return EdgeRecord(**base)


def _proc(registry: CollectorRegistry, **cfg: Any) -> EdgeProcessor:
    config = EdgeSeriesConfig.model_validate(
        {"route_groups": [{"name": "infer", "prefixes": ["/v2/models/"]}, {"name": "weights", "regex": "^/model/"}]}
        | cfg
    )
    return EdgeProcessor(config, registry=registry, clock=FakeClock(NOW + 30))


def test_hit_ratio_counts_hits_and_misses_and_leaves_out_excluded() -> None:
    reg = CollectorRegistry()
    p = _proc(reg)
    p.observe(
        [_rec(cache="HIT")] * 7
        + [_rec(cache="STALE"), _rec(cache="MISS", origin_s=0.2), _rec(cache="EXPIRED", origin_s=0.3)]
        + [_rec(cache="")] * 5  # no cache lookup: not in the ratio
    )
    assert p.hits("infer", NOW, NOW + 60) == (8, 10)
    assert p.hits("all", NOW, NOW + 60) == (8, 10)
    text = generate_latest(reg).decode()
    assert (
        'sidecar_edge_requests_total{cache="hit",edge_node="fra1",route_group="infer",status_class="2xx"} 8.0' in text
    )
    assert (
        'sidecar_edge_requests_total{cache="none",edge_node="fra1",route_group="infer",status_class="2xx"} 5.0' in text
    )
    assert 'sidecar_edge_origin_requests_total{edge_node="fra1",route_group="infer"} 2.0' in text


def test_paths_fall_into_groups_and_unknown_paths_into_other() -> None:
    p = _proc(CollectorRegistry())
    p.observe([_rec(path="/model/weights/v1.3.7-onnx"), _rec(path="/healthz"), _rec(path="/v2/models/x/infer")])
    assert {g: p.hits(g, NOW, NOW + 60)[1] for g in p.groups()} == {"all": 3, "infer": 1, "other": 1, "weights": 1}


def test_a_route_field_names_a_group_up_to_the_bound() -> None:
    reg = CollectorRegistry()
    p = _proc(reg, max_groups=3)  # two configured + one from routes
    p.observe([_rec(path="/a", route="images"), _rec(path="/b", route="videos")])
    assert "images" in p.groups() and "videos" not in p.groups()
    assert reg.get_sample_value("sidecar_edge_series_dropped_total", {"reason": "group_overflow"}) == 1


def test_nodes_past_the_bound_fold_into_other_counted() -> None:
    reg = CollectorRegistry()
    p = _proc(reg, max_nodes=2)
    p.observe([_rec(node=f"pop{i}") for i in range(5)])
    nodes = {k[1] for k in p.requests}
    assert nodes == {"pop0", "pop1", "other"}
    assert reg.get_sample_value("sidecar_edge_series_dropped_total", {"reason": "node_overflow"}) == 3


def test_lines_older_than_the_ring_are_dropped_and_counted() -> None:
    reg = CollectorRegistry()
    p = _proc(reg, count_history_secs=3600)
    p.observe([_rec(at=NOW + 3 * 3600)])
    p.observe([_rec(at=NOW)])  # three hours before the newest minute: outside a one-hour ring
    assert reg.get_sample_value("sidecar_edge_series_dropped_total", {"reason": "too_old"}) == 1


def test_quantiles_are_within_one_percent_of_numpy() -> None:
    rng = np.random.default_rng(7)
    values = rng.lognormal(mean=-4.0, sigma=0.8, size=20_000)
    p = _proc(CollectorRegistry())
    p.observe([_rec(edge_s=float(v), at=NOW + (i % 240)) for i, v in enumerate(values)])
    n, qs = p.latency_quantiles("infer", "edge", NOW, NOW + 300)
    assert n == len(values)
    for q, got in zip((0.5, 0.99, 0.999), qs, strict=True):
        want = float(np.quantile(values, q, method="inverted_cdf"))
        assert got == pytest.approx(want, rel=0.011), q


def test_histograms_and_quantiles_are_exported() -> None:
    reg = CollectorRegistry()
    p = _proc(reg)
    p.observe([_rec(edge_s=0.004, origin_s=0.003, cache="MISS"), _rec(edge_s=0.02)])
    b = {"route_group": "infer", "edge_node": "fra1", "hop": "edge"}
    assert reg.get_sample_value("sidecar_edge_latency_seconds_bucket", b | {"le": "0.005"}) == 1
    assert reg.get_sample_value("sidecar_edge_latency_seconds_bucket", b | {"le": "+Inf"}) == 2
    assert reg.get_sample_value("sidecar_edge_latency_seconds_sum", b) == pytest.approx(0.024)
    q = reg.get_sample_value(
        "sidecar_edge_latency_quantile_seconds", {"route_group": "infer", "hop": "origin", "quantile": "0.999"}
    )
    assert q == pytest.approx(0.003, rel=0.011)
