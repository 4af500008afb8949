"""Events -> drift through the real app and service: admin reference API, metrics exposition lint."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry

from sidecar.app import create_app
from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.service import Service
from sidecar.store import Store
from sidecar.wiring.drift import build as drift_build
from sidecar.wiring.events import build as events_build


def _service(tmp_path: Path, clock: FakeClock) -> Service:
    cfg = parse_config(
        {
            "server": {"admin_token": "adm"},
            "checks": {
                "drift": {
                    "enabled": True,
                    "method": "window",
                    "sustained_secs": 0,
                    "min_samples": 100,
                    "reference": {"mode": "pinned", "pinned_events": 500},
                }
            },
        }
    )
    return Service(
        cfg,
        clock=clock,
        registry=CollectorRegistry(),
        store=Store(tmp_path / "s.sqlite"),
        factories=[events_build, drift_build],
    )


def _post(client: TestClient, clock: FakeClock, rng: np.random.Generator, n: int, shift: float) -> None:
    for _ in range(n // 100):
        evs = [
            {
                "model": "ctr",
                "version": 2,
                "timestamp": clock.now(),
                "features": {"x": float(v), "y": float(w), "country": "de" if w > 0 else "fr"},
                "score": float(abs(v)),
            }
            for v, w in zip(rng.normal(shift, 1, 100), rng.normal(0, 1, 100), strict=True)
        ]
        assert client.post("/v1/events", json=evs).json()["accepted"] == 100
        clock.advance(10)


def test_events_to_drift_finding_and_admin_reference_change(tmp_path: Path, clock: FakeClock) -> None:
    svc = _service(tmp_path, clock)
    rng = np.random.default_rng(0)
    with TestClient(create_app(svc)) as client:
        _post(client, clock, rng, 500, 0.0)
        clock.advance(1800)
        _post(client, clock, rng, 2000, 0.6)
        findings = svc.evaluate_once(clock.now())
        active = {(f.labels["feature"], f.labels["test"]) for f in findings if f.active}
        assert active == {("x", "ks"), ("_score", "ks")}
        assert client.get("/admin/drift/references").status_code == 401
        r = client.put(
            "/admin/drift/references/ctr",
            json={"mode": "pinned", "pinned_events": 0},
            headers={"authorization": "Bearer adm"},
        )
        assert r.status_code == 400 and "pinned_events" in r.text
        r = client.put(
            "/admin/drift/references/ctr",
            json={"mode": "pinned", "pinned_events": 300, "who": "bob"},
            headers={"authorization": "Bearer adm"},
        )
        assert r.status_code == 200
        listing = client.get("/admin/drift/references", headers={"authorization": "Bearer adm"}).json()
        assert listing["references"] == [] and listing["specs"]["ctr"]["pinned_events"] == 300
        metrics = client.get("/metrics").text
    assert 'sidecar_drift_drifting{feature="x",model="ctr",test="ks",version="2"} 1.0' in metrics
    if shutil.which("promtool"):
        out = subprocess.run(["promtool", "check", "metrics"], input=metrics.encode(), capture_output=True, timeout=30)
        assert out.returncode == 0, out.stdout.decode() + out.stderr.decode()


@pytest.mark.prometheus
def test_drift_exposition_passes_promtool(tmp_path: Path, clock: FakeClock) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed")
    svc = _service(tmp_path, clock)
    with TestClient(create_app(svc)) as client:
        _post(client, clock, np.random.default_rng(1), 1000, 0.0)
        svc.evaluate_once(clock.now())
        metrics = client.get("/metrics").text
    assert "sidecar_drift_p_value" in metrics and "sidecar_events_received_total" in metrics
    out = subprocess.run([promtool, "check", "metrics"], input=metrics.encode(), capture_output=True, timeout=30)
    assert out.returncode == 0, out.stdout.decode() + out.stderr.decode()
