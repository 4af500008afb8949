"""The profiles on expositions captured from the real servers (tests/data/servers/*-real.prom), so the wire shape
each real server writes is held even where its venv is not installed. Each capture is what the server exposed
after the traffic of its live test (the counts below are that traffic: the live test's constants)."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest
from prometheus_client import CollectorRegistry

from sidecar.clock import FakeClock
from sidecar.polled import ManualTicker
from sidecar.promtext import parse_exposition
from sidecar.sources.servers import DistName, Gauge, detect, map_exposition
from sidecar.sources.servers.config import ServingTargetConfig
from sidecar.sources.servers.export import ServingExport
from sidecar.sources.servers.registry import family_names
from sidecar.sources.servers.schema import ServingSnapshot
from sidecar.sources.servers.source import ServerSource
from sidecar.sources.servers.telemetry import ServerTelemetry


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


async def test_a_server_that_declared_its_families_but_served_nothing_is_read_with_0_models(
    fixture_text: Callable[[str], str],
) -> None:
    """A fresh MLServer (or KServe, TorchServe) writes # HELP/# TYPE of its labelled families and no series: the
    profile matches (0 models, ready), where it once read as "matches no profile". Here: the real capture's
    declarations without its samples."""
    text = "".join(line for line in fixture_text("mlserver-real.prom").splitlines(keepends=True) if line[0] == "#")
    registry = CollectorRegistry()

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text=text, headers={"content-type": "text/plain; version=0.0.4"})

    source = ServerSource(
        ServingTargetConfig(name="ml", url="http://ml:8082/metrics"),
        registry=registry,
        clock=FakeClock(),
        http=httpx.AsyncClient(transport=httpx.MockTransport(answer)),
        export=ServingExport(registry),
        telemetry=ServerTelemetry(registry),
        ticker=ManualTicker,
    )
    assert await source.scrape_once()
    assert source.readiness().ok and source.readiness().detail.endswith("mlserver profile, 0 models")
    assert registry.get_sample_value("sidecar_server_profile_info", {"server": "ml", "profile": "mlserver"}) == 1
