"""A restart neither resolves a firing alert nor restarts a pending one's hold (issue: with a hold longer than
the endsAt margin, a restart dropped the firing alert from Alertmanager for the hold time, then paged again)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from prometheus_client import CollectorRegistry

from sidecar.alerting.book import AlertBook
from sidecar.alerting.book_state import NS
from sidecar.alerting.config import AlertingConfig
from sidecar.model import Finding
from sidecar.store import Store

T0 = 1_700_000_000.0
HOLD = 600.0  # longer than 4 x max(15 s eval, 60 s resend): the case that paged falsely


class ListSink:
    def __init__(self) -> None:
        self.notices: list[dict[str, Any]] = []

    def enqueue(self, notices: Sequence[Mapping[str, Any]]) -> None:
        self.notices.extend(dict(n) for n in notices)


def _book(store: Store) -> tuple[AlertBook, ListSink]:
    sink = ListSink()
    book = AlertBook(
        AlertingConfig.model_validate({"enabled": True, "for_secs": {"ctr_mean_down": HOLD}}),
        registry=CollectorRegistry(),
        eval_interval_secs=15.0,
        sink=sink,
        runbook_base="https://rb.example",
        dashboard_base=None,
        sidecar_url="http://sidecar:9500",
        store=store,
    )
    return book, sink


def _finding(active: bool) -> Finding:
    return Finding(
        check="ctr_mean_down",
        kind="business",
        active=active,
        value=0.03,
        baseline=0.04,
        effect_size=-0.25,
        threshold=0.15,
        window_secs=3600,
        severity="high",
        labels={"model": "rec", "version": "3"},
    )


def test_a_firing_alert_keeps_firing_across_a_restart_with_its_original_starts_at(tmp_path) -> None:
    store = Store(tmp_path / "s.db")
    book, sink = _book(store)
    book.on_findings([_finding(True)], T0)
    book.on_findings([_finding(True)], T0 + HOLD)
    assert [a.state for a in book.alerts.values()] == ["firing"]
    starts = sink.notices[-1]["startsAt"]
    store.close()  # kill -9 is the same for the store: every transition was already written

    store2 = Store(tmp_path / "s.db")
    book2, sink2 = _book(store2)
    book2.on_findings([_finding(True)], T0 + HOLD + 30)  # the first round after the restart
    assert [a.state for a in book2.alerts.values()] == ["firing"]
    assert sink2.notices and sink2.notices[0]["startsAt"] == starts
    assert sink2.notices[0]["endsAt"] > sink2.notices[0]["startsAt"]  # still firing, not resolved


def test_a_pending_alert_keeps_its_elapsed_hold_across_a_restart(tmp_path) -> None:
    store = Store(tmp_path / "s.db")
    book, _ = _book(store)
    book.on_findings([_finding(True)], T0)
    book.on_findings([_finding(True)], T0 + HOLD - 60)
    assert [a.state for a in book.alerts.values()] == ["pending"]

    book2, sink2 = _book(store)
    book2.on_findings([_finding(True)], T0 + HOLD)  # held since T0: fires now, not HOLD seconds later
    assert [a.state for a in book2.alerts.values()] == ["firing"]
    assert len(sink2.notices) == 1


def test_a_resolved_alert_is_forgotten_by_the_store_and_an_unreadable_row_is_skipped(tmp_path) -> None:
    store = Store(tmp_path / "s.db")
    store.put(NS, "garbage", b"{not json")
    book, _ = _book(store)  # the bad row must not stop the book
    book.on_findings([_finding(True)], T0)
    assert store.keys(NS) and "garbage" not in store.keys(NS)
    book.on_findings([_finding(False)], T0 + 1)  # pending, never fired: gone from book and store
    assert store.keys(NS) == []
