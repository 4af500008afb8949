"""Resolved alerts stay in the book (and on /alerts) for ``keep_resolved_secs``, bounded by
``max_resolved_alerts``, re-sent only for ``resolved_retention_secs``; a fake clock drives the time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry
from test_book import T0, _book, _ctr

from sidecar.app import create_app
from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.errors import ConfigError
from sidecar.model import Finding
from sidecar.service import Service
from sidecar.store import Store
from sidecar.wiring.alerting import build as alerting
from sidecar.wiring.pages import build as pages


def _drift(feature: str, active: bool) -> Finding:
    return Finding(
        check="drift",
        kind="drift",
        active=active,
        severity="warning",
        labels={"model": "fraud", "version": "2", "feature": feature, "test": "ks"},
        value=0.3,
    )


def test_a_resolved_alert_is_kept_for_keep_resolved_secs_and_re_sent_only_for_the_retention() -> None:
    clock = FakeClock(T0)
    book, sink = _book({"resend_delay_secs": 60, "resolved_retention_secs": 120, "keep_resolved_secs": 3600})
    book.on_findings([_ctr(True)], clock.now())
    clock.advance(60)
    book.on_findings([_ctr(False)], clock.now())
    (a,) = book.alerts.values()
    assert a.state == "inactive" and a.resolved_at == T0 + 60
    sent = len(sink.notices)
    for _ in range(4):  # re-sent while within resolved_retention_secs (60 s and 120 s after it resolved)
        clock.advance(60)
        book.on_findings([], clock.now())
    assert len(sink.notices) == sent + 2
    clock.advance(3600 - 240)  # 3600 s after it resolved: still kept, still unsent
    book.on_findings([], clock.now())
    assert list(book.alerts.values()) == [a] and len(sink.notices) == sent + 2
    clock.advance(1)
    book.on_findings([], clock.now())
    assert book.alerts == {}
    assert book._gauge.labels("resolved")._value.get() == 0


def test_the_default_keeps_a_resolved_alert_a_day() -> None:
    clock = FakeClock(T0)
    book, _ = _book()
    book.on_findings([_ctr(True)], clock.now())
    book.on_findings([_ctr(False)], clock.now())
    clock.advance(23 * 3600)
    book.on_findings([], clock.now())
    assert [a.state for a in book.alerts.values()] == ["inactive"]
    clock.advance(3600 + 1)
    book.on_findings([], clock.now())
    assert book.alerts == {}


def test_resolved_alerts_are_bounded_by_count_the_longest_resolved_first_counted() -> None:
    reg = CollectorRegistry()
    clock = FakeClock(T0)
    book, _ = _book({"max_resolved_alerts": 2}, registry=reg)
    feats = ["a", "b", "c", "d"]
    book.on_findings([_drift(f, True) for f in feats], clock.now())
    firing = {f: True for f in feats}
    for f in feats:  # resolve one a minute: a first, d last
        clock.advance(60)
        firing[f] = False
        book.on_findings([_drift(g, on) for g, on in firing.items()], clock.now())
    kept = sorted(a.labels["feature"] for a in book.alerts.values())
    assert kept == ["c", "d"]
    assert reg.get_sample_value("sidecar_alerts_resolved_evicted_total") == 2


def test_a_resolved_alert_firing_again_is_replaced_by_the_new_one() -> None:
    clock = FakeClock(T0)
    book, _ = _book()
    book.on_findings([_ctr(True)], clock.now())
    book.on_findings([_ctr(False)], clock.now())
    clock.advance(600)
    book.on_findings([_ctr(True)], clock.now())
    (a,) = book.alerts.values()
    assert a.state == "firing" and a.active_at == T0 + 600 and a.resolved_at is None


@pytest.mark.parametrize("bad", [{"keep_resolved_secs": -1}, {"max_resolved_alerts": 0}])
def test_bad_values_are_config_errors_naming_the_field(bad: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match=f"alerting.{next(iter(bad))}"):
        parse_config({"alerting": {"enabled": True, **bad}})


def test_the_alerts_page_shows_a_resolved_alert_with_when_hours_later() -> None:
    clock = FakeClock(T0)
    svc = Service(
        parse_config({"triton": {"enabled": False}, "alerting": {"enabled": True}}),
        clock=clock,
        store=Store(":memory:"),
        registry=CollectorRegistry(),
        http=httpx.AsyncClient(transport=httpx.MockTransport(lambda r: httpx.Response(200))),
        factories=[alerting, pages],
    )
    book = svc.component("alert_book")
    book.on_findings([_drift("amount", True)], clock.now())
    clock.advance(300)
    book.on_findings([_drift("amount", False)], clock.now())
    clock.advance(5 * 3600)  # long past resolved_retention_secs (15 min)
    book.on_findings([], clock.now())
    html = TestClient(create_app(svc)).get("/alerts").text
    resolved = html.split('id="resolved"')[1].split('id="delivery"')[0]
    assert "FeatureDrifting" in resolved and "<br>resolved" in resolved and "(5.0h ago)" in resolved
    assert 'data-state="firing"' not in html


def test_after_a_restart_a_kept_resolved_alert_is_listed_but_not_sent_again(tmp_path: Path) -> None:
    from test_book import ListSink

    from sidecar.alerting.book import AlertBook
    from sidecar.alerting.config import AlertingConfig

    def book(store: Store) -> tuple[AlertBook, ListSink]:
        sink = ListSink()
        b = AlertBook(
            AlertingConfig.model_validate({"enabled": True, "resolved_retention_secs": 900}),
            registry=CollectorRegistry(),
            eval_interval_secs=15.0,
            sink=sink,
            runbook_base="https://rb.example",
            dashboard_base=None,
            sidecar_url="http://sidecar:9500",
            store=store,
        )
        return b, sink

    store = Store(tmp_path / "s.db")
    first, _ = book(store)
    first.on_findings([_drift("amount", True)], T0)
    first.on_findings([_drift("amount", False)], T0 + 60)
    again, sink = book(store)  # restarted an hour later: past the re-send time, inside keep_resolved_secs
    again.on_findings([], T0 + 3600)
    (a,) = again.alerts.values()
    assert a.state == "inactive" and a.resolved_at == T0 + 60 and sink.notices == []
