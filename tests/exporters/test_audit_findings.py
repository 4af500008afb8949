"""Findings are audited once per transition, across restarts too: the state of each series is in the
embedded store, written with the audit rows."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from exporters.audit import AuditLog
from exporters.audit_findings import FindingAudit
from sidecar.clock import FakeClock
from sidecar.model import Finding
from sidecar.store import Store

T0 = 1_700_000_000.0


def _finding(active: bool, model: str = "ctr") -> Finding:
    return Finding(
        check="ctr_mean",
        kind="business",
        labels={"model": model, "version": "2"},
        active=active,
        value=0.01,
        threshold=0.02,
    )


def _start(path: Path, now: float) -> tuple[Store, AuditLog, FindingAudit]:
    """A fresh process's objects on the same SQLite file."""
    store = Store(path)
    reg = CollectorRegistry()
    audit = AuditLog(max_rows=1000, registry=reg, store=store, clock=FakeClock(now))
    return store, audit, FindingAudit(audit, registry=reg)


def _kinds(audit: AuditLog) -> list[str]:
    return [e["kind"] for e in reversed(audit.events(limit=100))]


def test_a_condition_held_across_three_restarts_is_one_crossing(tmp_path: Path) -> None:
    db = tmp_path / "s.sqlite"
    now = T0
    for _ in range(4):  # the first run, then three restarts, the condition true all along
        store, audit, fa = _start(db, now)
        for _ in range(3):
            now += 60
            fa.on_findings([_finding(True)], now)
        store.close()
    store, audit, fa = _start(db, now)
    assert _kinds(audit) == ["finding_crossed"]
    # It clears (after yet another restart) and crosses again: one row each.
    fa.on_findings([_finding(False)], now + 60)
    store.close()
    store, audit, fa = _start(db, now + 120)
    fa.on_findings([_finding(False)], now + 120)
    fa.on_findings([_finding(True)], now + 180)
    store.close()
    store, audit, fa = _start(db, now + 240)
    fa.on_findings([_finding(True)], now + 240)
    assert _kinds(audit) == ["finding_crossed", "finding_cleared", "finding_crossed"]
    store.close()


def test_a_condition_that_cleared_while_down_is_recorded_cleared_on_the_first_round(tmp_path: Path) -> None:
    db = tmp_path / "s.sqlite"
    store, audit, fa = _start(db, T0)
    fa.on_findings([_finding(True), _finding(True, "fraud")], T0)
    store.close()
    store, audit, fa = _start(db, T0 + 600)
    fa.on_findings([_finding(False), _finding(True, "fraud")], T0 + 600)
    rows = [(e["kind"], e["model"]) for e in reversed(audit.events(limit=100))]
    assert sorted(rows) == [("finding_cleared", "ctr"), ("finding_crossed", "ctr"), ("finding_crossed", "fraud")]
    assert rows[-1] == ("finding_cleared", "ctr")
    store.close()


def test_a_failed_write_keeps_nothing_so_the_next_round_records_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, audit, fa = _start(tmp_path / "s.sqlite", T0)
    real = store.execute

    def full(sql: str, params: Sequence[Any] = ()) -> int:
        if "audit_findings_true" in sql:  # the state row fails after the audit row was written
            raise sqlite3.OperationalError("database or disk is full")
        return real(sql, params)

    monkeypatch.setattr(store, "execute", full)
    fa.on_findings([_finding(True)], T0)
    assert audit.events() == []  # the audit row was rolled back with it
    assert audit.rows()["findings"] == 0
    monkeypatch.setattr(store, "execute", real)
    fa.on_findings([_finding(True)], T0 + 60)
    fa.on_findings([_finding(True)], T0 + 120)
    assert [(e["kind"], e["at"]) for e in audit.events()] == [("finding_crossed", T0 + 60)]
    store.close()


def test_series_over_max_series_are_counted_not_persisted(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.sqlite")
    reg = CollectorRegistry()
    audit = AuditLog(max_rows=1000, registry=reg, store=store, clock=FakeClock(T0))
    fa = FindingAudit(audit, registry=reg, max_series=2)
    fa.on_findings([_finding(True, f"m{i}") for i in range(5)], T0)
    assert len(audit.events(kind="finding_crossed")) == 5
    assert store.query("SELECT COUNT(*) FROM audit_findings_true")[0][0] == 2
    assert reg.get_sample_value("sidecar_audit_findings_untracked_total") == 3


def test_a_series_true_for_longer_than_retention_is_forgotten_at_start(tmp_path: Path) -> None:
    db = tmp_path / "s.sqlite"
    store, audit, fa = _start(db, T0)
    fa.on_findings([_finding(True, "gone"), _finding(True, "kept")], T0)
    store.close()
    store, audit, fa = _start(db, T0 + 29 * 86400)  # within retention_days (30): both still known
    assert store.query("SELECT COUNT(*) FROM audit_findings_true")[0][0] == 2
    store.close()
    store, audit, fa = _start(db, T0 + 31 * 86400)  # past it: forgotten, slots freed
    assert store.query("SELECT COUNT(*) FROM audit_findings_true")[0][0] == 0
    fa.on_findings([_finding(True, "kept")], T0 + 31 * 86400)  # still true: recorded crossed once more
    assert [(e["kind"], e["model"]) for e in audit.events()] == [("finding_crossed", "kept")]
    store.close()
