"""POST /v1/events through the real app: validation naming the field, partial acceptance, hostile bodies."""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry

from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.model import Batch
from sidecar.service import Service
from sidecar.store import Store
from sidecar.wiring.event_subs import subscribe_events

NOW = 1_700_000_000.0


@pytest.fixture
def app_and_seen(tmp_path: Any) -> Iterator[tuple[TestClient, list[Batch], Service]]:
    from sidecar.app import create_app
    from sidecar.wiring.events import build

    cfg = parse_config(
        {"server": {"max_body_bytes": 200_000, "push_token": "s3cret"}, "events": {"max_events_per_batch": 100}}
    )
    svc = Service(
        cfg, clock=FakeClock(NOW), registry=CollectorRegistry(), store=Store(tmp_path / "s.sqlite"), factories=[build]
    )
    seen: list[Batch] = []
    subscribe_events(svc.bus, "test", seen.append)  # columns too, as events
    app: FastAPI = create_app(svc)
    with TestClient(app, headers={"authorization": "Bearer s3cret"}) as client:
        yield client, seen, svc


def _ev(**kw: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "model": "ctr",
        "version": "2",
        "timestamp": NOW - 1,
        "features": {"x": 1.5, "c": "de"},
        "score": 0.3,
    }
    doc.update(kw)
    return doc


def test_valid_batch_is_published(app_and_seen: tuple[TestClient, list[Batch], Service]) -> None:
    client, seen, _ = app_and_seen
    r = client.post(
        "/v1/events",
        json={"events": [_ev(), _ev(version=3, request_id="r1", label=1, trace_id="AB" * 16, fields={"clicked": 1})]},
    )
    assert r.status_code == 200, r.text
    assert r.json()["accepted"] == 2 and r.json()["rejected"] == []
    items = seen[0].items
    assert seen[0].source == "http" and len(items) == 2
    e = items[1]
    assert e.version == "3" and e.trace_id == "ab" * 16 and e.fields == {"clicked": 1.0}  # type: ignore[union-attr]
    assert e.features == {"x": 1.5, "c": "de"}  # type: ignore[union-attr]


def test_partial_batch_keeps_the_good_and_names_the_bad(app_and_seen: tuple[TestClient, list[Batch], Service]) -> None:
    client, seen, svc = app_and_seen
    bad = [_ev(), _ev(features={"x": [1, 2]}), _ev(model=""), _ev(timestamp=NOW * 1000), _ev(), _ev(featurez={})]
    r = client.post("/v1/events", json=bad)
    assert r.status_code == 200
    body = r.json()
    assert body["accepted"] == 2 and len(seen[0].items) == 2
    by_index = {x["index"]: x for x in body["rejected"]}
    assert set(by_index) == {1, 2, 3, 5}
    assert by_index[1]["field"] == "events[1].features.x"
    assert by_index[2]["field"] == "events[2].model"
    assert "future" in by_index[3]["error"]
    assert by_index[5]["field"] == "events[5].featurez" and by_index[5]["error"] == "unknown field"
    assert svc.registry.get_sample_value("sidecar_events_rejected_total", {"source": "http", "reason": "invalid"}) == 4


def test_all_bad_is_400_naming_field_and_index(app_and_seen: tuple[TestClient, list[Batch], Service]) -> None:
    client, seen, _ = app_and_seen
    r = client.post("/v1/events", json=[_ev(score="high")])
    assert r.status_code == 400
    assert r.json()["error"].startswith("events[0].score: must be a number")
    assert seen == []


@pytest.mark.parametrize(
    ("body", "headers", "status", "fragment"),
    [
        (b"{not json", {}, 400, "not JSON"),
        (b"42", {}, 400, "event object"),
        (orjson.dumps([_ev()] * 101), {}, 413, "more than 100 events"),
        (b"x" * 300_000, {}, 413, "over the limit"),
        (gzip.compress(b"[" + b" " * 1_000_000 + b"]"), {"content-encoding": "gzip"}, 413, "decompressed"),
        (b"\x1f\x8b garbage", {"content-encoding": "gzip"}, 400, "not valid gzip"),
        (orjson.dumps(_ev(features={f"f{i}": 1 for i in range(300)})), {}, 400, "more than 256 features"),
        (orjson.dumps(_ev(features={"x" * 500: 1})), {}, 400, "longer than 128"),
        (orjson.dumps(_ev(features={"x": "y" * 10_000})), {}, 400, "longer than 256"),
        (b'[{"model": "m", "features": {"x": 1e999}}]', {}, 400, "not JSON"),
    ],
)
def test_hostile_bodies_are_refused_cleanly(
    app_and_seen: tuple[TestClient, list[Batch], Service],
    body: bytes,
    headers: dict[str, str],
    status: int,
    fragment: str,
) -> None:
    client, seen, _ = app_and_seen
    r = client.post("/v1/events", content=body, headers={"content-type": "application/json", **headers})
    assert r.status_code == status, r.text
    assert fragment in r.text
    assert seen == []


def test_ndjson_and_auth(app_and_seen: tuple[TestClient, list[Batch], Service]) -> None:
    client, seen, _ = app_and_seen
    body = b"\n".join(orjson.dumps(_ev()) for _ in range(3)) + b"\n"
    r = client.post("/v1/events", content=body, headers={"content-type": "application/x-ndjson"})
    assert r.status_code == 200 and r.json()["accepted"] == 3
    r = client.post("/v1/events", json=[_ev()], headers={"authorization": "Bearer wrong"})
    assert r.status_code == 401
    assert len(seen) == 1


def test_the_api_description_of_post_events_states_its_durability(app_and_seen: Any) -> None:
    # An operator reading /docs must learn what a 200 does and does not promise across a crash.
    client, _, _ = app_and_seen
    op = client.get("/openapi.json").json()["paths"]["/v1/events"]["post"]
    assert "at most once" in op["description"].lower()
    assert "checks.eval_interval_secs" in op["description"] and "kill -9" in op["description"]
