"""``/drift`` against the real drift check: every monitored feature, its numbers as the check exported them,
and its state."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from fastapi.testclient import TestClient
from pagetree import parse
from prometheus_client import CollectorRegistry

from sidecar.app import create_app
from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.service import Service
from sidecar.store import Store
from sidecar.wiring.drift import build as drift
from sidecar.wiring.events import build as events
from sidecar.wiring.pages import build as pages


def _post(client: TestClient, clock: FakeClock, rng: np.random.Generator, n: int, shift: float) -> None:
    for _ in range(n // 100):
        evs = [{"model": "ctr", "version": 2, "timestamp": clock.now(),
                "features": {"x": float(v), "y": float(w), "country": "de" if w > 0 else "fr"},
                "score": float(abs(v))}
               for v, w in zip(rng.normal(shift, 1, 100), rng.normal(0, 1, 100), strict=True)]
        assert client.post("/v1/events", json=evs).json()["accepted"] == 100
        clock.advance(10)


def test_drift_page_lists_every_feature_with_the_checks_numbers(tmp_path: Path, clock: FakeClock) -> None:
    cfg = parse_config({"checks": {"drift": {"enabled": True, "sustained_secs": 0, "min_samples": 100,
                                             "reference": {"mode": "pinned", "pinned_events": 500}}}})
    svc = Service(cfg, clock=clock, registry=CollectorRegistry(), store=Store(tmp_path / "s.sqlite"),
                  factories=[events, drift, pages])
    rng = np.random.default_rng(0)
    with TestClient(create_app(svc)) as client:
        assert "No drift monitoring configured" in parse(client.get("/drift").text).text()
        _post(client, clock, rng, 500, 0.0)
        clock.advance(1800)
        _post(client, clock, rng, 2000, 0.6)
        svc.evaluate_once(clock.now())
        doc = parse(client.get("/drift").text)
        other = parse(client.get("/drift?model=rank").text)
    rows = {r.attrs["data-feature"]: [td.text().strip() for td in r.find_all("td")]
            for r in doc.by_id("drift").find_all("tr", cls="feature")}
    assert set(rows) == {"x", "y", "country", "_score"}
    # Drifting first (as the check decided: sidecar_drift_drifting), then the rest.
    assert list(rows)[:2] == ["_score", "x"] and rows["x"][3] == "drifting" and rows["y"][3] == "ok"
    assert rows["country"][4] == "chi2" and rows["x"][4] == "ks"
    labels = {"model": "ctr", "version": "2", "feature": "x", "test": "ks"}
    p = svc.registry.get_sample_value("sidecar_drift_p_value", labels)
    effect = svc.registry.get_sample_value("sidecar_drift_effect_size", labels)
    n_cur = svc.registry.get_sample_value("sidecar_drift_samples",
                                          {"model": "ctr", "version": "2", "feature": "x", "window": "current"})
    assert p is not None and effect is not None and n_cur is not None
    assert rows["x"][6] == f"{p:.3g}" and rows["x"][8] == f"{effect:.3f}"
    assert rows["x"][10].startswith(f"{int(n_cur)} / ")
    assert "No drift monitoring configured for model rank" in other.text()
