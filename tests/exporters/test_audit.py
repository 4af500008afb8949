"""The audit log in SQLite: idempotent, bounded (rows, bytes, retention), and GET /v1/audit (filters, cursor
pages, hostile parameters answered 400)."""

from __future__ import annotations

import base64
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from prometheus_client import CollectorRegistry

from exporters.audit import AuditLog
from exporters.audit_query import encode_cursor
from sidecar.clock import FakeClock
from sidecar.store import Store

T0 = 1_700_000_000.0


def test_audit_log_is_idempotent_and_bounded_per_class(tmp_path: Path) -> None:
    reg = CollectorRegistry()
    audit = AuditLog(max_rows=1, registry=reg, store=Store(tmp_path / "s.sqlite"), clock=FakeClock(T0))
    assert audit.record("alert_fired", "a", T0, {"labels": {"alertname": "A"}})
    assert not audit.record("alert_fired", "a", T0, {"labels": {"alertname": "A"}})
    audit.record("change", "b", T0 + 1, {"what": "deploy"})
    audit.record("alert_resolved", "c", T0 + 2, {"labels": {"alertname": "A"}})
    # The second alert row pushed out the first alert row, not the (older) change: one row per class here.
    assert [e["kind"] for e in audit.events()] == ["alert_resolved", "change"]
    assert reg.get_sample_value("sidecar_audit_events_evicted_total", {"why": "max_rows", "kind": "alerts"}) == 1
    assert audit.rows() == {"requests": 0, "alerts": 1, "changes": 1, "findings": 0, "actions": 0}


def test_size_cap_and_retention_delete_the_oldest_counted(tmp_path: Path) -> None:
    reg, clock = CollectorRegistry(), FakeClock(T0)
    audit = AuditLog(
        max_rows=1000, max_bytes=2000, retention_days=1, registry=reg, store=Store(tmp_path / "s.sqlite"), clock=clock
    )
    audit.record("change", "old", T0 - 2 * 86400, {"what": "long ago"})  # the first write sweeps retention
    assert reg.get_sample_value("sidecar_audit_events_evicted_total", {"why": "retention", "kind": "changes"}) == 1
    for i in range(40):
        audit.record("change", f"c-{i:02d}", T0 + i, {"what": "x" * 80})
    rows = audit.store.query("SELECT SUM(LENGTH(body)), MIN(id) FROM audit_events")[0]
    assert rows[0] <= 2000 and rows[1] > "c-00"
    assert reg.get_sample_value("sidecar_audit_events_evicted_total", {"why": "max_bytes", "kind": "changes"}) >= 1
    # The counts it keeps in memory agree with the table after a reopen.
    again = AuditLog(max_rows=1000, max_bytes=2000, registry=CollectorRegistry(), store=audit.store)
    assert again._bytes == {"changes": rows[0]}


@pytest.fixture
def client(tmp_path: Path) -> tuple[httpx.AsyncClient, AuditLog]:
    audit = AuditLog(
        max_rows=10_000, registry=CollectorRegistry(), store=Store(tmp_path / "s.sqlite"), clock=FakeClock(T0 + 1000)
    )
    for i in range(25):
        audit.record(
            "request",
            f"r-{i:02d}",
            T0 + i // 2,
            {  # pairs share a time: the cursor must split them
                "model": "ctr" if i % 2 else "fraud",
                "version": "1",
                "trace_id": f"t{i:02d}",
                "request_id": f"q{i}",
            },
        )
    audit.record("change", "ch", T0 + 5, {"what": "x'; DROP TABLE audit_events; --", "model": "ctr"})
    app = FastAPI()
    app.include_router(audit.routes())
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t"), audit


async def test_filters_and_cursor_pages_cover_every_row_once(client: tuple[httpx.AsyncClient, AuditLog]) -> None:
    c, _ = client
    seen: list[str] = []
    params: dict[str, str] = {"kind": "request", "limit": "4"}
    for _ in range(10):
        r = await c.get("/v1/audit", params=params)
        assert r.status_code == 200
        body = r.json()
        seen += [e["id"] for e in body["events"]]
        if body["next_cursor"] is None:
            break
        params["cursor"] = body["next_cursor"]
    assert sorted(seen) == sorted(f"r-{i:02d}" for i in range(25)) and len(seen) == 25
    r = await c.get("/v1/audit", params={"model": "ctr", "kind": "request", "since": str(T0 + 10)})
    assert [e["id"] for e in r.json()["events"]] == ["r-23", "r-21"]  # newest first
    r = await c.get("/v1/audit", params={"trace_id": "t07"})
    assert [e["request_id"] for e in r.json()["events"]] == ["q7"]


@pytest.mark.parametrize(
    "params,says",
    [
        ({"kind": "a" * 201}, "kind:"),
        ({"model": ""}, "model:"),
        ({"order": "at; DELETE FROM audit_events"}, "unknown parameter"),
        ({"since": "0", "until": str(T0)}, "since:"),  # 1970: outside 2000..2100
        ({"since": str(T0), "until": str(T0 + 40 * 86400)}, "at most 31 days"),
        ({"until": str(T0 + 1000)}, None),  # only until: a 31-day look-back, fine
        ({"since": "nan"}, "since:"),
        ({"since": "1e400"}, "since:"),
        ({"since": str(T0 + 10), "until": str(T0)}, "until: must not be before since"),
        ({"limit": "0"}, "limit:"),
        ({"limit": "100000000000000000000"}, "limit:"),
        ({"limit": "-1"}, "limit:"),
        ({"cursor": "not-a-cursor"}, "cursor:"),
        ({"cursor": base64.urlsafe_b64encode(b'{"at": 1}').decode()}, "cursor:"),
        ({"cursor": base64.urlsafe_b64encode(b'["1", "x"]').decode()}, "cursor:"),
        ({"cursor": "A" * 5000}, "cursor:"),
    ],
)
async def test_hostile_parameters_are_answered_400_with_a_message(
    client: tuple[httpx.AsyncClient, AuditLog], params: dict[str, str], says: str | None
) -> None:
    c, audit = client
    r = await c.get("/v1/audit", params=params)
    if says is None:
        assert r.status_code == 200
        return
    assert r.status_code == 400 and says in r.json()["detail"]
    assert audit.store.query("SELECT COUNT(*) FROM audit_events")[0][0] == 26  # nothing was changed


@pytest.mark.parametrize("params", [{"model": "ctr' OR '1'='1"}, {"trace_id": "x; DROP TABLE audit_events"}])
async def test_an_injection_in_a_filter_is_only_a_value_matching_nothing(
    client: tuple[httpx.AsyncClient, AuditLog], params: dict[str, str]
) -> None:
    c, audit = client
    r = await c.get("/v1/audit", params=params)
    assert r.status_code == 200 and r.json()["events"] == []
    assert audit.store.query("SELECT COUNT(*) FROM audit_events")[0][0] == 26


async def test_a_repeated_parameter_is_refused(client: tuple[httpx.AsyncClient, AuditLog]) -> None:
    c, _ = client
    r = await c.get("/v1/audit?model=ctr&model=fraud")
    assert r.status_code == 400 and "twice" in r.json()["detail"]


async def test_a_stored_injection_text_is_data(client: tuple[httpx.AsyncClient, AuditLog]) -> None:
    c, _ = client
    r = await c.get("/v1/audit", params={"kind": "change"})
    assert r.json()["events"][0]["what"] == "x'; DROP TABLE audit_events; --"
    # A cursor made by hand with a quote in it only positions the page.
    r = await c.get("/v1/audit", params={"cursor": encode_cursor(T0 + 100, "z' OR 1=1 --")})
    assert r.status_code == 200 and len(r.json()["events"]) == 26


def test_findings_are_audited_when_they_cross_and_clear_not_every_round(tmp_path: Path) -> None:
    from exporters.audit_findings import FindingAudit
    from sidecar.model import Finding

    reg = CollectorRegistry()
    audit = AuditLog(max_rows=100, registry=reg, store=Store(tmp_path / "s.sqlite"), clock=FakeClock(T0))
    fa = FindingAudit(audit, registry=reg)

    def f(active: bool) -> Finding:
        return Finding(
            check="ctr_mean",
            kind="business",
            labels={"model": "ctr", "version": "2"},
            active=active,
            value=0.01,
            threshold=0.02,
        )

    for i, active in enumerate([False, True, True, True, False, False, True]):
        fa.on_findings([f(active)], T0 + 60 * i)
    got = [(e["kind"], e["at"]) for e in reversed(audit.events(limit=10))]
    assert got == [("finding_crossed", T0 + 60), ("finding_cleared", T0 + 240), ("finding_crossed", T0 + 360)]
    assert audit.events(kind="finding_crossed")[0]["model"] == "ctr"


def test_a_failed_batch_stores_nothing_and_counts_stay_true(tmp_path: Path) -> None:
    from exporters.audit_outbox import AuditOutbox

    reg = CollectorRegistry()
    store = Store(tmp_path / "s.sqlite")
    outbox = AuditOutbox(store, max_rows=100)

    class Es:  # the sender's surface the audit log uses
        def __init__(self) -> None:
            self.notified = 0
            from exporters.telemetry import ExportTelemetry

            self.stats = ExportTelemetry.of(reg).exporter("elasticsearch")

        def notify(self) -> None:
            self.notified += 1

    es = Es()
    audit = AuditLog(
        max_rows=100,
        registry=reg,
        store=store,
        es=es,
        outbox=outbox,  # type: ignore[arg-type]
        clock=FakeClock(T0),
    )
    assert audit.record_many([("change", "a", T0, {}), ("change", "b", T0, {})]) == 2
    bad: dict[str, object] = {"x": object()}  # not JSON-encodable: the whole batch fails
    assert audit.record_many([("change", "c", T0, {}), ("change", "d", T0, bad)]) == 0
    assert reg.get_sample_value("sidecar_audit_errors_total", {"reason": "other"}) == 2
    assert sorted(e["id"] for e in audit.events()) == ["a", "b"]  # "c" was rolled back with "d"
    assert len(outbox) == 2 and [d.id for d in outbox.head(10)] == ["a", "b"]
    assert audit.rows()["changes"] == 2 and es.notified == 1
