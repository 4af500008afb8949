"""One bad timestamp must never disable alerting: refused at the door (400 naming the field, nothing stored),
and a stored row that cannot be rendered is skipped and counted by GET /v1/changes and by annotation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from alerting_helpers import make_service
from prometheus_client import CollectorRegistry

from sidecar.app import create_app
from sidecar.clock import FakeClock
from sidecar.model import Finding

T0 = 1_700_000_000.0
CFG: dict[str, Any] = {"alerting": {"enabled": True, "default_for_secs": 0}}


def _sample(reg: CollectorRegistry, name: str, labels: dict[str, str] | None = None) -> float:
    return reg.get_sample_value(name, labels or {}) or 0.0


async def test_a_change_time_in_milliseconds_or_out_of_range_is_refused_and_nothing_is_stored(tmp_path: Path):
    svc = make_service(tmp_path, CFG, clock=FakeClock(T0))
    app = create_app(svc, manage_lifecycle=False)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://sc") as c:
        for at in (T0 * 1000, 1e300, -1.0, 253402300800.0):
            r = await c.post("/v1/changes", json=[{"what": "ok one"}, {"what": "deploy", "at": at}])
            assert r.status_code == 400, r.text
            assert r.json()["detail"].startswith("[1].at:")
        r = await c.post("/v1/changes", json={"what": "deploy", "at": T0 * 1000})
        assert "milliseconds" in r.json()["detail"]
        r = await c.get("/v1/changes")
        assert r.status_code == 200 and r.json() == []  # not even the valid first item of a refused request


async def test_a_stored_unrenderable_change_neither_breaks_get_nor_blocks_an_alert(tmp_path: Path):
    reg = CollectorRegistry()
    svc = make_service(tmp_path, CFG, clock=FakeClock(T0), registry=reg)
    # As an older version stored it: a change with a time outside Python's date range, for every model.
    svc.store.execute(
        "INSERT INTO alerting_changes (id, at, what, who, model, version, link, source) "
        "VALUES ('bad', 1e18, 'deploy', '', NULL, NULL, NULL, 'api')"
    )
    svc.store.execute(
        "INSERT INTO alerting_changes (id, at, what, who, model, version, link, source) "
        f"VALUES ('good', {T0 - 60}, 'feature PR#1', 'ci', NULL, NULL, NULL, 'api')"
    )
    app = create_app(svc, manage_lifecycle=False)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://sc") as c:
        r = await c.get("/v1/changes")
        assert r.status_code == 200 and [x["id"] for x in r.json()] == ["good"]
    book = svc.component("alert_book")
    finding = Finding(
        check="ctr_mean_down",
        kind="business",
        active=True,
        value=0.03,
        baseline=0.04,
        effect_size=-0.25,
        threshold=0.15,
        window_secs=3600,
        severity="high",
        labels={"model": "rec", "version": "3"},
    )
    sent: list[Any] = []
    book.sink = type("S", (), {"enqueue": lambda self, n: sent.extend(n)})()
    book.on_findings([finding], T0)
    assert [a.state for a in book.alerts.values()] == ["firing"]
    assert sent and "feature PR#1" in sent[0]["annotations"]["description"]
    assert _sample(reg, "sidecar_changes_unreadable_total") >= 1


def test_recent_returns_as_many_good_changes_as_asked_despite_unrenderable_rows(tmp_path: Path) -> None:
    reg = CollectorRegistry()
    svc = make_service(tmp_path, CFG, clock=FakeClock(T0), registry=reg)
    for i in range(4):  # newest-looking rows first in ORDER BY at DESC: they used to eat the LIMIT
        svc.store.execute(
            "INSERT INTO alerting_changes (id, at, what, who, model, version, link, source) "
            f"VALUES ('bad{i}', 1e18, 'deploy', '', NULL, NULL, NULL, 'api')"
        )
    for i in range(5):
        svc.store.execute(
            "INSERT INTO alerting_changes (id, at, what, who, model, version, link, source) "
            f"VALUES ('good{i}', {T0 - i}, 'PR#{i}', 'ci', NULL, NULL, NULL, 'api')"
        )
    got = svc.component("changes").recent(None, None, 0, limit=3)
    assert [c.id for c in got] == ["good0", "good1", "good2"]
    assert _sample(reg, "sidecar_changes_unreadable_total") == 4


async def test_get_changes_refuses_a_since_that_is_not_a_time(tmp_path: Path) -> None:
    svc = make_service(tmp_path, CFG, clock=FakeClock(T0))
    app = create_app(svc, manage_lifecycle=False)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://sc") as c:
        for since in ("nan", "inf", "-inf", "1e400"):
            r = await c.get("/v1/changes", params={"since": since})
            assert r.status_code == 400 and r.json()["detail"].startswith("since:"), (since, r.text)
        assert (await c.get("/v1/changes", params={"since": T0})).status_code == 200
