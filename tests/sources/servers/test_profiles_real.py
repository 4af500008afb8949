"""The profiles on expositions captured from the real servers (tests/data/servers/*-real.prom), so the wire shape
each real server writes is held even where its venv is not installed. Each capture is what the server exposed
after the traffic of its live test (the counts below are that traffic: the live test's constants)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from sidecar.promtext import parse_exposition
from sidecar.sources.servers import DistName, Gauge, detect, map_exposition
from sidecar.sources.servers.registry import family_names
from sidecar.sources.servers.schema import ServingSnapshot


def _read(text: str, want: str) -> ServingSnapshot:
    expo = parse_exposition(text, eager_labels=False)
    prof = detect(family_names((n for n, _l, _v in expo.samples), expo.types))
    assert prof is not None and prof.name == want
    snap = map_exposition(expo, prof, server="s", taken_at=0.0)
    assert snap.refused == ()
    return snap


def test_mlserver_1_7(fixture_text: Callable[[str], str]) -> None:
    snap = _read(fixture_text("mlserver-real.prom"), "mlserver")
    assert {k: dict(m.requests) for k, m in snap.models.items()} == {
        ("iris", "v1"): {"success": 12, "failure": 4},
        ("iris", ""): {"success": 3, "failure": 0},  # version="None": no version named
        ("nosuch", ""): {"failure": 1},
    }
    assert snap.models[("iris", "v1")].dists[DistName.REQUEST_DURATION].count == 16


def test_bentoml_1_4_service(fixture_text: Callable[[str], str]) -> None:
    snap = _read(fixture_text("bentoml-real.prom"), "bentoml")
    (key,) = snap.models
    assert key == ("Iris", "")  # service_version="not available"
    m = snap.models[key]
    assert dict(m.requests) == {"success": 12, "failure": 6}  # the /readyz polls skipped
    assert m.dists[DistName.REQUEST_DURATION].count == 18
    assert m.gauges[Gauge.IN_FLIGHT] == 0
    assert "bentoml_service_request" in snap.families and "bentoml_api_server_request" not in snap.families


def test_kserve_0_21(fixture_text: Callable[[str], str]) -> None:
    m = _read(fixture_text("kserve-real.prom"), "kserve").models[("iris", "")]
    assert dict(m.requests) == {"other": 16}  # reached predict: 12 good, 4 that raised
    assert m.dists[DistName.COMPUTE_DURATION].count == 16


def test_torchserve_0_12(fixture_text: Callable[[str], str]) -> None:
    snap = _read(fixture_text("torchserve-real.prom"), "torchserve")
    assert {k: dict(m.requests) for k, m in snap.models.items()} == {
        ("iris", ""): {"other": 14},  # model_version="default": 10 good, 4 the handler failed
        ("iris", "1.0"): {"other": 3},
    }
    assert snap.models[("iris", "")].dists[DistName.QUEUE_DURATION].count == 14


def test_ray_serve_2_60(fixture_text: Callable[[str], str]) -> None:
    m = _read(fixture_text("rayserve-real.prom"), "rayserve").models[("Iris", "")]
    assert dict(m.requests) == {"success": 12, "failure": 4}
    compute = m.dists[DistName.COMPUTE_DURATION]
    assert compute.count == 16 and compute.buckets[-1] == (float("inf"), pytest.approx(16))
    assert m.gauges[Gauge.IN_FLIGHT] == 0
