"""Audit retention per class: a flood of request records evicts only request records (the alert and change
history stays whole), each class is held to its own rows and bytes, and a store failure is counted and logged
with SQLite's own reason ("database or disk is full"), not the rollback that follows it."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from exporters.audit import AuditLog
from exporters.audit_retention import Budget, class_of, uniform
from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.store import Store

T0 = 1_700_000_000.0


def _evicted(reg: CollectorRegistry, why: str, kind: str) -> float:
    return reg.get_sample_value("sidecar_audit_events_evicted_total", {"why": why, "kind": kind}) or 0.0


def test_a_request_flood_never_evicts_alert_or_change_history(tmp_path: Path) -> None:
    reg = CollectorRegistry()
    budgets = {**uniform(100, 10**9), "requests": Budget(max_rows=500, max_bytes=10**9)}
    audit = AuditLog(budgets=budgets, registry=reg, store=Store(tmp_path / "s.sqlite"), clock=FakeClock(T0))
    for i in range(21):  # the history first: the oldest rows of all
        audit.record("change", f"ch-{i}", T0 + i, {"what": f"deploy {i}"})
        audit.record("alert_fired", f"al-{i}", T0 + i, {"labels": {"alertname": "A", "n": str(i)}})
    for b in range(40):  # then 4,000 request rows, eight times their budget, in batches as the join writes them
        assert audit.record_many([("request", f"r-{b}-{j}", T0 + 100 + b, {"model": "m"}) for j in range(100)]) == 100
    kinds = dict(audit.store.query("SELECT kind, COUNT(*) FROM audit_events GROUP BY kind"))
    assert kinds == {"change": 21, "alert_fired": 21, "request": 500}
    assert _evicted(reg, "max_rows", "requests") == 3500
    assert _evicted(reg, "max_rows", "changes") == 0 and _evicted(reg, "max_rows", "alerts") == 0
    # The newest requests are the ones kept.
    assert audit.store.query("SELECT MIN(at) FROM audit_events WHERE kind = 'request'")[0][0] == T0 + 135


def test_a_request_flood_by_size_never_evicts_other_classes(tmp_path: Path) -> None:
    reg = CollectorRegistry()
    budgets = {**uniform(10_000, 10**9), "requests": Budget(max_rows=10_000, max_bytes=50_000)}
    audit = AuditLog(budgets=budgets, registry=reg, store=Store(tmp_path / "s.sqlite"), clock=FakeClock(T0))
    audit.record("change", "ch", T0, {"what": "x" * 5000})
    audit.record("finding_crossed", "fi", T0, {"summary": "y" * 5000})
    for i in range(100):
        audit.record("request", f"r-{i}", T0 + 1 + i, {"pad": "z" * 1000})
    size = audit.store.query("SELECT SUM(size) FROM audit_events WHERE cls = 'requests'")[0][0]
    assert size <= 50_000
    assert _evicted(reg, "max_bytes", "requests") > 0
    assert {r[0] for r in audit.store.query("SELECT id FROM audit_events WHERE cls != 'requests'")} == {"ch", "fi"}


def test_each_class_keeps_its_own_budget_from_config(tmp_path: Path) -> None:
    from sidecar.wiring.audit import build

    cfg = parse_config(
        {
            "store": {"path": str(tmp_path / "s.sqlite")},
            "alerting": {
                "enabled": True,
                "audit": {"retention": {"alerts": {"max_rows": 3}, "requests": {"max_rows": 7, "max_bytes": 9999}}},
            },
        }
    )
    assert cfg.alerting.audit.retention.changes.max_rows == 20_000  # the defaults of the other classes
    assert cfg.alerting.audit.retention.requests.max_bytes == 9999

    class Ctx:
        config = cfg
        registry = CollectorRegistry()
        store = Store(tmp_path / "s.sqlite")
        clock = FakeClock(T0)
        logger = logging.getLogger("t")

    audit = build(Ctx())  # type: ignore[arg-type]
    assert audit is not None
    assert audit.budgets["alerts"] == Budget(3, 32 * 1024 * 1024)
    assert audit.budgets["requests"] == Budget(7, 9999)
    for i in range(10):
        audit.record("alert_resolved", f"a{i}", T0 + i, {})
        audit.record("action_unload", f"x{i}", T0 + i, {})
    assert audit.rows()["alerts"] == 3 and audit.rows()["actions"] == 10


def test_a_retention_config_error_names_the_field() -> None:
    from sidecar.errors import ConfigError

    with pytest.raises(ConfigError, match=r"alerting\.audit\.retention\.changes\.max_rows"):
        parse_config({"alerting": {"audit": {"retention": {"changes": {"max_rows": 0}}}}})
    with pytest.raises(ConfigError, match=r"alerting\.audit\.retention\.request"):
        parse_config({"alerting": {"audit": {"retention": {"request": {"max_rows": 5}}}}})


def test_rows_written_before_the_classes_existed_are_classed_on_open(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.sqlite")
    store.execute("CREATE TABLE audit_events (id TEXT PRIMARY KEY, at REAL, kind TEXT, body BLOB)")
    for i, kind in enumerate(["request", "alert_fired", "change", "finding_cleared", "action_x", "request"]):
        store.execute("INSERT INTO audit_events VALUES (?, ?, ?, ?)", (f"e{i}", T0 + i, kind, b"{}"))
    audit = AuditLog(max_rows=1, registry=CollectorRegistry(), store=store, clock=FakeClock(T0))
    assert audit.rows() == {"requests": 2, "alerts": 1, "changes": 1, "findings": 1, "actions": 1}
    audit.record("request", "new", T0 + 10, {})  # the requests class is over: only its own rows go
    assert sorted(r[0] for r in store.query("SELECT id FROM audit_events")) == ["e1", "e2", "e3", "e4", "new"]


@pytest.mark.parametrize(
    ("kind", "cls"),
    [
        ("request", "requests"),
        ("alert_fired", "alerts"),
        ("alert_delivery_failed", "alerts"),
        ("change", "changes"),
        ("finding_crossed", "findings"),
        ("action_unload", "actions"),
        ("something_new", "actions"),
    ],
)
def test_class_of(kind: str, cls: str) -> None:
    assert class_of(kind) == cls


def _full_disk(store: Store) -> None:
    """SQLite's own SQLITE_FULL ("database or disk is full"): the file may not grow past its current pages."""
    pages = store.query("PRAGMA page_count")[0][0]
    store.execute(f"PRAGMA max_page_count = {pages}")


def test_a_full_disk_is_logged_and_counted_as_disk_full(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    reg = CollectorRegistry()
    store = Store(tmp_path / "s.sqlite")
    audit = AuditLog(max_rows=10**6, registry=reg, store=store, clock=FakeClock(T0))
    audit.record("change", "before", T0, {})
    _full_disk(store)
    with caplog.at_level(logging.ERROR, logger="sidecar.audit"):
        got = audit.record_many([("request", f"r{i}", T0, {"pad": "x" * 4000}) for i in range(20)])
    assert got == 0
    assert reg.get_sample_value("sidecar_audit_errors_total", {"reason": "disk_full"}) == 20
    text = caplog.text
    assert "database or disk is full" in text and "cannot rollback" not in text
    # The store is usable again once there is room, and its counts match the table (nothing half-written).
    store.execute("PRAGMA max_page_count = 1073741823")
    assert audit.record("request", "after", T0 + 1, {})
    assert audit.rows()["requests"] == 1 and audit.rows()["changes"] == 1


def test_a_failed_commit_does_not_leave_a_transaction_open(tmp_path: Path) -> None:
    import sqlite3

    store = Store(tmp_path / "s.sqlite")
    store.execute("CREATE TABLE t (v BLOB)")
    _full_disk(store)
    with pytest.raises(sqlite3.OperationalError, match="database or disk is full"), store.transaction():
        store.execute("INSERT INTO t VALUES (?)", (b"x" * 100_000,))
    assert not store._conn.in_transaction
    with pytest.raises(sqlite3.OperationalError, match="database or disk is full"):
        store.executemany("INSERT INTO t VALUES (?)", [(b"y" * 100_000,)])
    assert not store._conn.in_transaction
