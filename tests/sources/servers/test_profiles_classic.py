"""Model servers without LLM figures (MLServer, ...), each on an exposition built from its own source."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from sidecar.promtext import parse_exposition
from sidecar.sources.servers import DistName, Gauge, detect, map_exposition
from sidecar.sources.servers.registry import family_names
from sidecar.sources.servers.schema import ServingSnapshot


def _detect_and_map(text: str, want: str) -> ServingSnapshot:
    expo = parse_exposition(text, eager_labels=False)
    prof = detect(family_names((n for n, _l, _v in expo.samples), expo.types))
    assert prof is not None and prof.name == want
    snap = map_exposition(expo, prof, server="s", taken_at=0.0)
    assert snap.refused == ()
    return snap


def test_mlserver(fixture_text: Callable[[str], str]) -> None:
    expo = parse_exposition(fixture_text("mlserver.prom"), eager_labels=False)
    prof = detect(family_names((n for n, _l, _v in expo.samples), expo.types))
    assert prof is not None and prof.name == "mlserver"
    snap = map_exposition(expo, prof, server="s", taken_at=0.0)
    m = snap.models[("iris", "v1.2")]
    assert dict(m.requests) == {"success": 40, "failure": 2}
    e2e = m.dists[DistName.REQUEST_DURATION]
    assert (e2e.count, e2e.sum) == (42, pytest.approx(1.05))
    assert e2e.buckets == ()  # a summary: average only


def test_bentoml_counts_by_status_and_skips_the_probe_routes(fixture_text: Callable[[str], str]) -> None:
    m = _detect_and_map(fixture_text("bentoml.prom"), "bentoml").models[("iris_classifier", "abc123")]
    assert dict(m.requests) == {"success": 30, "failure": 3}  # /healthz and /readyz's 200 answers are not requests
    e2e = m.dists[DistName.REQUEST_DURATION]
    assert e2e.count == 33 and e2e.sum == pytest.approx(6.6)
    assert m.gauges[Gauge.IN_FLIGHT] == 2


def test_kserve_predict_time(fixture_text: Callable[[str], str]) -> None:
    m = _detect_and_map(fixture_text("kserve.prom"), "kserve").models[("sklearn-iris", "")]
    compute = m.dists[DistName.COMPUTE_DURATION]
    assert compute.count == 25 and compute.sum / compute.count == pytest.approx(0.08)
    assert dict(m.requests) == {"other": 25}  # reached predict, failed or not: received, not by outcome


def test_ray_serve_request_counter_counts_successes_and_the_error_counter_failures(
    fixture_text: Callable[[str], str],
) -> None:
    m = _detect_and_map(fixture_text("rayserve.prom"), "rayserve").models[("Summarizer", "")]
    assert dict(m.requests) == {"success": 50, "failure": 5}  # one or the other per query (a real 2.60.0 agrees)
    compute = m.dists[DistName.COMPUTE_DURATION]
    assert compute.sum / compute.count == pytest.approx(0.15)  # 7500 ms over 50
    assert compute.buckets[0] == (pytest.approx(0.001), 0)
    assert m.gauges[Gauge.IN_FLIGHT] == 3


def test_torchserve_latency_counters(fixture_text: Callable[[str], str]) -> None:
    m = _detect_and_map(fixture_text("torchserve.prom"), "torchserve").models[("resnet18", "")]
    assert dict(m.requests) == {"other": 40}  # received, not by outcome
    assert m.dists[DistName.REQUEST_DURATION].sum / 40 == pytest.approx(0.05)
    assert m.dists[DistName.QUEUE_DURATION].sum / 40 == pytest.approx(0.01)
