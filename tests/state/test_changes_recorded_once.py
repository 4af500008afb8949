"""A change is recorded once: a retry (with or without ``at``, an ``id`` or an ``Idempotency-Key``) is answered
200 with the first id and stores nothing new; a change and its audit row are stored together or not at all."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from alerting_helpers import make_service
from prometheus_client import CollectorRegistry

from sidecar.app import create_app
from sidecar.clock import FakeClock

T0 = 1_700_000_000.0
CFG: dict[str, Any] = {"alerting": {"enabled": True, "changes": {"idempotency_window_secs": 600}}}
DEPLOY = {"what": "feature PR#221", "who": "ci", "model": "rec"}


def _client(svc: Any) -> httpx.AsyncClient:
    app = create_app(svc, manage_lifecycle=False)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app, raise_app_exceptions=False), base_url="http://sc")


def _audit_rows(svc: Any) -> list[tuple[Any, ...]]:
    return svc.store.query("SELECT id, kind FROM audit_events WHERE kind = 'change'")


async def test_a_retry_without_at_is_answered_200_with_the_first_id_and_stored_once(tmp_path: Path) -> None:
    clock = FakeClock(T0)
    svc = make_service(tmp_path, CFG, clock=clock)
    async with _client(svc) as c:
        first = await c.post("/v1/changes", json=DEPLOY)
        assert first.status_code == 201, first.text
        clock.advance(45)  # the CI job timed out waiting and sends the same change again
        retry = await c.post("/v1/changes", json=DEPLOY)
        assert retry.status_code == 200 and retry.json() == first.json()
        assert [x["at"] for x in (await c.get("/v1/changes")).json()] == [T0]  # the first one's time
        assert len(_audit_rows(svc)) == 1
        clock.advance(600)  # past the window: the same text is a new change
        again = await c.post("/v1/changes", json=DEPLOY)
        assert again.status_code == 201 and again.json() != first.json()
        assert len((await c.get("/v1/changes")).json()) == 2


async def test_an_idempotency_key_or_id_makes_a_retry_the_same_change_for_good(tmp_path: Path) -> None:
    clock = FakeClock(T0)
    reg = CollectorRegistry()
    svc = make_service(tmp_path, CFG, clock=clock, registry=reg)
    async with _client(svc) as c:
        key = {"Idempotency-Key": "deploy-rec-42"}
        first = await c.post("/v1/changes", json=DEPLOY, headers=key)
        assert first.status_code == 201 and first.json() == {"ids": ["deploy-rec-42"]}
        clock.advance(86_400)  # a key holds beyond the window of derived keys
        assert (await c.post("/v1/changes", json=DEPLOY, headers=key)).json() == first.json()
        # The same key for a different change is the client's mistake: 422, nothing stored.
        r = await c.post("/v1/changes", json={**DEPLOY, "what": "another PR"}, headers=key)
        assert r.status_code == 422 and "deploy-rec-42" in r.json()["detail"]
        r = await c.post("/v1/changes", json=[{**DEPLOY, "id": "a"}, {**DEPLOY, "id": "a", "who": "bob"}])
        assert r.status_code == 422 and r.json()["detail"].startswith("[1].id:")
        # A list under one key: each item gets its own id derived from it.
        r = await c.post("/v1/changes", json=[DEPLOY, {**DEPLOY, "what": "x"}], headers={"Idempotency-Key": "b"})
        assert r.status_code == 201 and r.json() == {"ids": ["b#0", "b#1"]}
        r = await c.post("/v1/changes", json=DEPLOY, headers={"Idempotency-Key": "x" * 201})
        assert r.status_code == 400 and r.json()["detail"].startswith("Idempotency-Key:")
        whats = sorted(x["what"] for x in (await c.get("/v1/changes")).json())
        assert whats == ["feature PR#221", "feature PR#221", "x"]
    assert (
        reg.get_sample_value("sidecar_http_refused_total", {"endpoint": "changes", "reason": "idempotency_conflict"})
        == 2
    )
    assert reg.get_sample_value("sidecar_changes_duplicates_total") == 1


async def test_a_failure_between_the_change_and_its_audit_row_leaves_neither(tmp_path: Path) -> None:
    reg = CollectorRegistry()
    svc = make_service(tmp_path, CFG, clock=FakeClock(T0), registry=reg)
    # Injected between the two writes: the audit row's insert fails after the change's has run.
    svc.store.execute(
        "CREATE TRIGGER injected BEFORE INSERT ON audit_events BEGIN SELECT RAISE(ABORT, 'injected failure'); END"
    )
    async with _client(svc) as c:
        r = await c.post("/v1/changes", json=[DEPLOY, {**DEPLOY, "what": "second"}])
        assert r.status_code == 500 and r.json()["failed_subscribers"] == ["changes"]
        assert (await c.get("/v1/changes")).json() == [] and _audit_rows(svc) == []
        assert reg.get_sample_value("sidecar_push_subscriber_failures_total", {"endpoint": "/v1/changes"}) == 1
        svc.store.execute("DROP TRIGGER injected")
        r = await c.post("/v1/changes", json=[DEPLOY, {**DEPLOY, "what": "second"}])  # the client's retry
        assert r.status_code == 201
        assert len((await c.get("/v1/changes")).json()) == 2 and len(_audit_rows(svc)) == 2
