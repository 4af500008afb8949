"""Purges are changes: posted to /v1/changes, they start a watch; hits on covered paths after them, or a pattern
no path matched, are findings with the words on-call reads."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry

from sidecar.alerting.render import finding_text
from sidecar.checks.edge.config import PurgeWatchConfig
from sidecar.checks.edge.purge import PurgeWatch
from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.model import Batch, Change
from sidecar.processors.edge_record import EdgeRecord
from sidecar.purge import Purge, parse_purge, purge_what
from sidecar.service import Service
from sidecar.store import Store

T = 1_764_907_200.0  # 2025-12-05 04:00 UTC


def _hit(path: str, at: float, cache: str = "HIT") -> EdgeRecord:
    return EdgeRecord(at, path, cache, 0.001, None, 200, "n1")


def _watch(**cfg: Any) -> PurgeWatch:
    return PurgeWatch(PurgeWatchConfig.model_validate(cfg), hit_statuses=["HIT", "STALE"], registry=CollectorRegistry())


def test_the_purge_text_form_round_trips_and_scopes_match() -> None:
    assert parse_purge(purge_what("/model/weights/v1.3.", "prefix")) == Purge("/model/weights/v1.3.", "prefix")
    assert parse_purge("deploy v1.3.7") is None
    assert Purge("/a/*.onnx", "glob").covers("/a/m.onnx") and not Purge("/a/*.onnx", "glob").covers("/a/m.pt")
    assert Purge("/a", "exact").covers("/a") and not Purge("/a", "exact").covers("/a/b")


def test_hits_after_a_purge_on_covered_paths_are_a_finding() -> None:
    w = _watch(grace_secs=5)
    w.observe([_hit("/model/weights/v1.3.7-onnx", T - 100)])
    w.on_changes(
        Batch(
            kind="changes",
            source="api",
            items=(Change(what=purge_what("/model/weights/v1.3.", "prefix"), at=T, who="ops", id="c1"),),
        )
    )
    w.observe([_hit("/model/weights/v1.3.7-onnx", T + 2)])  # within the grace: not counted
    w.observe([_hit("/model/weights/v1.3.7-onnx", T + 60 + i) for i in range(37)])
    w.observe([_hit("/model/weights/v1.3.7-onnx", T + 70, cache="MISS"), _hit("/model/weights/v1.4", T + 70)])
    taken, unmatched = w.evaluate(T + 600)
    assert taken.active and taken.value == 37
    assert not unmatched.active
    assert finding_text(taken)[0] == (
        "purge of /model/weights/v1.3. at 04:00 did not take: 37 hits on /model/weights/v1.3.7-onnx since"
    )


def test_a_purge_that_took_is_quiet() -> None:
    w = _watch()
    w.add(Purge("/img/", "prefix"), at=T)
    w.observe([_hit("/img/a.png", T + 60, cache="MISS"), _hit("/img/a.png", T + 61, cache="MISS")])
    taken, unmatched = w.evaluate(T + 120)
    assert not taken.active and not unmatched.active


def test_a_pattern_no_path_matched_is_named() -> None:
    w = _watch()
    w.observe([_hit("/model/weights/v1.3.7-onnx", T - 10)])
    w.add(Purge("/models/weights/v1.3.", "prefix"), at=T, who="ops")  # "models": a typo
    _, unmatched = w.evaluate(T + 60)
    assert unmatched.active
    assert finding_text(unmatched)[0] == "purge of /models/weights/v1.3. at 04:00 matched no path seen"


def test_watches_are_bounded_and_expire() -> None:
    reg = CollectorRegistry()
    w = PurgeWatch(PurgeWatchConfig(max_purges=2, watch_secs=600), hit_statuses=["HIT"], registry=reg)
    for i in range(3):
        w.add(Purge(f"/p{i}", "prefix"), at=T + i)
    assert reg.get_sample_value("sidecar_edge_purges_dropped_total", {"reason": "max_purges"}) == 1
    assert len(w.evaluate(T + 60)) == 4
    assert w.evaluate(T + 700) == []


@pytest.fixture
def svc(tmp_path: Path) -> Iterator[tuple[TestClient, Service]]:
    from sidecar.app import create_app
    from sidecar.wiring.alerting import build as alerting
    from sidecar.wiring.edge import build as edge

    cfg = parse_config({"edge": {"enabled": True}, "alerting": {"enabled": True}})
    service = Service(
        cfg,
        clock=FakeClock(T + 30),
        registry=CollectorRegistry(),
        store=Store(tmp_path / "s.sqlite"),
        factories=[alerting, edge],
    )
    with TestClient(create_app(service)) as c:
        yield c, service


def test_a_purge_posted_to_changes_is_watched(svc: tuple[TestClient, Service]) -> None:
    c, service = svc
    line = {"time": T + 20, "path": "/model/weights/v1.3.7-onnx", "cache": "HIT", "status": 200}
    assert c.post("/v1/edge", json=[line | {"time": T - 20}]).status_code == 200
    r = c.post("/v1/changes", json={"purge": {"pattern": "/model/weights/v1.3."}, "who": "ops", "at": T})
    assert r.status_code == 201, r.text
    assert c.post("/v1/edge", json=[line]).status_code == 200
    found = {f.check: f for f in service.evaluate_once(T + 30)}
    assert found["edge_purge_not_taken"].active
    listed = c.get("/v1/changes").json()
    assert any(ch["what"] == "cache purge prefix /model/weights/v1.3." for ch in listed)


def test_a_bad_purge_is_400_naming_the_field(svc: tuple[TestClient, Service]) -> None:
    c, _ = svc
    r = c.post("/v1/changes", json={"purge": {"pattern": "/a", "scope": "regex"}})
    assert r.status_code == 400 and "purge.scope" in r.text
    r = c.post("/v1/changes", json={"purge": {"pattern": "/a"}, "what": "something else"})
    assert r.status_code == 400 and "leave it out with purge" in r.text


def test_hits_after_a_refill_are_fresh_and_not_counted() -> None:
    w = _watch(grace_secs=0)
    w.add(Purge("/m/", "prefix"), at=T)
    w.observe([_hit("/m/a", T + 1, cache="MISS"), _hit("/m/a", T + 2), _hit("/m/a", T + 3), _hit("/m/b", T + 4)])
    taken, _ = w.evaluate(T + 60)
    assert taken.value == 1 and taken.facts["top_path"] == "/m/b"


def test_an_edge_alert_cites_the_purge_as_a_recent_change(svc: tuple[TestClient, Service]) -> None:
    c, service = svc
    line = {"time": T + 20, "path": "/model/weights/v1.3.7-onnx", "cache": "HIT", "status": 200}
    assert (
        c.post("/v1/changes", json={"purge": {"pattern": "/model/weights/v1.3."}, "who": "ops", "at": T}).status_code
        == 201
    )
    assert c.post("/v1/edge", json=[line]).status_code == 200
    service.evaluate_once(T + 30)
    alerts = [a for a in c.get("/v1/alerts").json() if a["labels"].get("alertname") == "EdgePurgeNotTaken"]
    assert len(alerts) == 1
    text = str(alerts[0]["annotations"])
    assert "did not take: 1 hit on /model/weights/v1.3.7-onnx since" in text
    assert "cache purge prefix /model/weights/v1.3." in text  # the purge, cited as a recent change
