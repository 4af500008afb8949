"""Re-sends of a firing alert reach the audit trail: the book reports each re-send (not the first send, not a
resolved alert's re-sends), and the audit keeps the first re-send of each ``resent_every_secs`` window under an
id derived from the alert and the window, so neither a restart nor a replay duplicates it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from alerting_helpers import make_service
from prometheus_client import CollectorRegistry

from sidecar.alerting.book import Alert, AlertBook
from sidecar.alerting.config import AlertingConfig
from sidecar.clock import FakeClock
from sidecar.model import Finding
from sidecar.store import Store

T0 = 1_700_000_000.0


def _ctr(active: bool) -> Finding:
    return Finding(
        check="ctr_mean_down",
        kind="business",
        active=active,
        value=0.034,
        threshold=0.15,
        severity="high",
        labels={"alertname": "CtrMeanDown", "model": "rec", "version": "3"},
    )


class Sink:
    def __init__(self) -> None:
        self.n = 0
        self.fail = False

    def enqueue(self, notices: Any) -> None:
        if self.fail:
            raise OSError("store failed")
        self.n += len(notices)


def _book(sink: Sink, seen: list[tuple[str, float]], store: Store | None = None) -> AlertBook:
    def hook(what: str, a: Alert, now: float) -> None:
        seen.append((what, now))

    return AlertBook(
        AlertingConfig.model_validate({"enabled": True, "resend_delay_secs": 60}),
        registry=CollectorRegistry(),
        eval_interval_secs=15.0,
        sink=sink,
        runbook_base="",
        dashboard_base=None,
        sidecar_url="",
        on_transition=hook,
        store=store,
    )


def test_the_book_reports_each_resend_of_a_firing_alert_only() -> None:
    sink, seen = Sink(), []  # type: ignore[var-annotated]
    book = _book(sink, seen)
    book.on_findings([_ctr(True)], T0)  # fires and is sent: not a re-send
    book.on_findings([_ctr(True)], T0 + 30)  # not due
    book.on_findings([_ctr(True)], T0 + 60)
    book.on_findings([_ctr(True)], T0 + 120)
    book.on_findings([_ctr(False)], T0 + 150)  # resolved, sent
    book.on_findings([_ctr(False)], T0 + 210)  # a resolved alert re-sent: not a firing re-send
    assert sink.n == 5
    assert seen == [("fired", T0), ("resent", T0 + 60), ("resent", T0 + 120), ("resolved", T0 + 150)]


def test_a_send_that_was_not_queued_is_not_a_resend_when_retried() -> None:
    sink, seen = Sink(), []  # type: ignore[var-annotated]
    book = _book(sink, seen)
    sink.fail = True
    book.on_findings([_ctr(True)], T0)  # fired, but the outbox refused the notice
    sink.fail = False
    book.on_findings([_ctr(True)], T0 + 15)  # the first send that got through
    book.on_findings([_ctr(True)], T0 + 75)
    assert seen == [("fired", T0), ("resent", T0 + 75)]


def test_a_restored_firing_alert_sent_again_is_a_resend(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.sqlite")
    seen: list[tuple[str, float]] = []
    _book(Sink(), seen, store).on_findings([_ctr(True)], T0)
    again: list[tuple[str, float]] = []
    _book(Sink(), again, store).on_findings([_ctr(True)], T0 + 20)
    assert again == [("resent", T0 + 20)]


def _resent(svc: Any) -> list[dict[str, Any]]:
    return [e for e in svc.component("audit").events(kind="alert_resent", limit=1000)]


def test_the_audit_keeps_one_resend_row_per_window_and_a_restart_adds_none(tmp_path: Path) -> None:
    clock = FakeClock(T0)
    cfg = {"alerting": {"enabled": True, "resend_delay_secs": 60, "audit": {"resent_every_secs": 600}}}
    svc = make_service(tmp_path, cfg, clock=clock)
    book: Any = svc.component("alert_book")
    for _ in range(21):  # fires at T0, re-sent every minute for 20 minutes: windows [0,600) [600,1200) [1200,)
        book.on_findings([_ctr(True)], clock.now())
        clock.advance(60)
    rows = _resent(svc)
    assert sorted(r["at"] - T0 for r in rows) == [60, 600, 1200]
    assert len({r["id"] for r in rows}) == 3
    assert all(r["labels"]["alertname"] == "CtrMeanDown" and r["active_at"] == T0 for r in rows)
    assert rows[0]["window_secs"] == 600
    # A restarted sidecar re-sends on its first round, inside the window already recorded: no new row.
    svc2 = make_service(tmp_path, cfg, clock=clock, store=svc.store)
    svc2.component("alert_book").on_findings([_ctr(True)], clock.now())  # type: ignore[attr-defined]
    assert len(_resent(svc2)) == 3
    reg = svc2.registry
    assert reg.get_sample_value("sidecar_audit_events_total", {"kind": "alert_resent"}) is None
