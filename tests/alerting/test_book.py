"""The alert book's lifecycle (pending -> firing -> resolved), resends, endsAt, bounds and annotations."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from sidecar.alerting.book import AlertBook
from sidecar.alerting.config import AlertingConfig
from sidecar.alerting.templates import TemplateError, render, validate_template
from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.errors import ConfigError
from sidecar.model import Change, Finding

T0 = 1_700_000_000.0


class ListSink:
    def __init__(self) -> None:
        self.notices: list[dict[str, Any]] = []

    def enqueue(self, notices: Sequence[Mapping[str, Any]]) -> None:
        self.notices.extend(dict(n) for n in notices)


class FakeChanges:
    name = "changes"

    def __init__(self, changes: list[Change]) -> None:
        self.changes = changes

    def recent(self, model: str | None, version: str | None, since: float, *, until: float) -> list[Change]:
        return [
            c
            for c in sorted(self.changes, key=lambda c: -c.at)
            if since <= c.at <= until and (c.model is None or c.model == model)
        ]


def _ts(s: str) -> float:
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


def _book(
    cfg: dict[str, Any] | None = None,
    changes: FakeChanges | None = None,
    registry: CollectorRegistry | None = None,
) -> tuple[AlertBook, ListSink]:
    sink = ListSink()
    book = AlertBook(
        AlertingConfig.model_validate({"enabled": True, **(cfg or {})}),
        registry=registry or CollectorRegistry(),
        eval_interval_secs=15.0,
        sink=sink,
        recent_changes=changes.recent if changes is not None else None,
        runbook_base="https://rb.example/runbooks",
        dashboard_base="https://grafana.example",
        sidecar_url="http://sidecar:9500",
    )
    return book, sink


def _ctr(active: bool, value: float = 0.034, **kw: Any) -> Finding:
    return Finding(
        check="ctr_mean_down",
        kind="business",
        active=active,
        value=value,
        baseline=0.042,
        effect_size=(value - 0.042) / 0.042,
        threshold=0.15,
        window_secs=86400,
        severity="high",
        labels={"alertname": "CtrMeanDown", "model": "rec", "version": "3", "team": "growth"},
        annotations={"runbook": "ctr-mean-down.md"},
        facts={
            "display_name": "CTR mean",
            "aggregate": "mean",
            "direction": "down",
            "compare": "relative",
            "baseline_secs": 7 * 86400,
            "change": (value - 0.042) / 0.042,
            "events": 1000,
        },
        **kw,
    )


def test_pending_then_firing_after_the_hold_then_resolved_like_prometheus() -> None:
    clock = FakeClock(T0)
    book, sink = _book({"for_secs": {"ctr_mean_down": 60}, "resend_delay_secs": 60, "resolved_retention_secs": 900})
    book.on_findings([_ctr(True)], clock.now())
    (a,) = book.alerts.values()
    assert a.state == "pending" and sink.notices == []  # pending alerts are never sent
    clock.advance(45)
    book.on_findings([_ctr(True)], clock.now())
    assert a.state == "pending" and sink.notices == []
    clock.advance(15)
    book.on_findings([_ctr(True)], clock.now())
    assert a.state == "firing"
    (n,) = sink.notices
    assert _ts(n["startsAt"]) == pytest.approx(T0)  # startsAt is when it became active, as Prometheus does
    assert _ts(n["endsAt"]) == pytest.approx(clock.now() + 4 * 60)  # 4 x max(eval 15 s, resend 60 s)
    assert n["labels"] == {
        "alertname": "CtrMeanDown",
        "model": "rec",
        "version": "3",
        "team": "growth",
        "check": "ctr_mean_down",
        "severity": "high",
    }
    # Not re-sent before the resend delay, re-sent after it with endsAt moved ahead.
    clock.advance(30)
    book.on_findings([_ctr(True)], clock.now())
    assert len(sink.notices) == 1
    clock.advance(30)
    book.on_findings([_ctr(True)], clock.now())
    assert len(sink.notices) == 2 and _ts(sink.notices[-1]["endsAt"]) == pytest.approx(clock.now() + 240)
    # Resolved: sent at once with endsAt = the resolve time (in the past from then on), re-sent for a while.
    clock.advance(15)
    resolved_at = clock.now()
    book.on_findings([_ctr(False, value=0.041)], clock.now())
    assert a.state == "inactive" and len(sink.notices) == 3
    assert _ts(sink.notices[-1]["endsAt"]) == pytest.approx(resolved_at)
    clock.advance(60)
    book.on_findings([], clock.now())
    assert len(sink.notices) == 4 and _ts(sink.notices[-1]["endsAt"]) == pytest.approx(resolved_at)
    clock.advance(900)
    book.on_findings([], clock.now())
    # Not re-sent after resolved_retention_secs; kept (and shown) for keep_resolved_secs (tests/alerting/
    # test_book_resolved.py).
    assert len(sink.notices) == 4 and a.state == "inactive" and list(book.alerts.values()) == [a]


def test_condition_gone_while_pending_drops_the_alert_unsent() -> None:
    book, sink = _book({"default_for_secs": 300})
    book.on_findings([_ctr(True)], T0)
    book.on_findings([_ctr(False)], T0 + 60)
    assert book.alerts == {} and sink.notices == []


def test_insufficient_data_never_fires() -> None:
    book, sink = _book()
    book.on_findings([_ctr(True, insufficient_data=True)], T0)
    assert book.alerts == {} and sink.notices == []


def test_hold_comes_from_the_check_when_not_overridden() -> None:
    # The check states its hold on the finding; the book looks nothing up.
    book, _ = _book()
    book.on_findings([_ctr(True, for_secs=120.0)], T0)
    book.on_findings([_ctr(True, for_secs=120.0)], T0 + 100)
    assert next(iter(book.alerts.values())).state == "pending"
    book.on_findings([_ctr(True, for_secs=120.0)], T0 + 120)
    assert next(iter(book.alerts.values())).state == "firing"


def test_max_active_alerts_is_a_counted_bound() -> None:
    reg = CollectorRegistry()
    book, _ = _book({"max_active_alerts": 2}, registry=reg)
    findings = [
        Finding(check=f"c{i}", kind="business", labels={"model": "m"}, active=True, value=1.0) for i in range(3)
    ]
    book.on_findings(findings, T0)
    assert len(book.alerts) == 2
    assert reg.get_sample_value("sidecar_alerts_refused_total") == 1
    assert reg.get_sample_value("sidecar_alerts", {"state": "firing"}) == 2


def test_annotations_tell_the_business_story_with_the_recent_change() -> None:
    changes = FakeChanges(
        [
            Change(
                what="feature PR#221", at=T0 - 3600, who="ci", model="rec", link="https://github.com/acme/rec/pull/221"
            ),
            Change(what="other model deploy", at=T0 - 60, model="fraud"),
        ]
    )
    book, sink = _book(changes=changes)
    book.on_findings([_ctr(True, value=0.03437, trace_id="0af7651916cd43dd8448eb211c80319c")], T0)
    ann = sink.notices[0]["annotations"]
    assert ann["summary"] == (
        "[HIGH] CTR mean down 18.2% (7d avg 0.042 -> 24h avg 0.0344) | model rec v3 | "
        "recent change: feature PR#221 (https://github.com/acme/rec/pull/221)"
    )
    assert "feature PR#221" in ann["description"] and "other model" not in ann["description"]
    assert ann["runbook_url"] == "https://rb.example/runbooks/ctr-mean-down.md"
    assert ann["dashboard_url"].startswith("https://grafana.example/d/")
    assert ann["trace_url"] == "http://sidecar:9500/traces/0af7651916cd43dd8448eb211c80319c"


def test_absolute_and_other_kinds_use_their_own_templates() -> None:
    book, sink = _book()
    wer = Finding(
        check="wer_high",
        kind="business",
        labels={"model": "asr", "version": "1"},
        active=True,
        value=0.0912,
        threshold=0.08,
        window_secs=300,
        severity="high",
        facts={"display_name": "WER", "aggregate": "mean", "direction": "up", "compare": "absolute", "events": 60},
    )
    drift = Finding(
        check="drift_ks",
        kind="drift",
        labels={"model": "ctr", "version": "2", "feature": "x0"},
        active=True,
        value=0.2,
        summary="feature x0 drifted (KS D=0.20, p=1e-9)",
    )
    book.on_findings([wer, drift], T0)
    by = {n["labels"]["check"]: n["annotations"]["summary"] for n in sink.notices}
    assert by["wer_high"] == "[HIGH] WER 0.0912 above 0.08 over 5m | model asr v1 | recent change: none"
    assert by["drift_ks"] == ("[WARNING] feature x0 drifted (KS D=0.20, p=1e-9) | model ctr v2 | recent change: none")


def test_custom_template_renders() -> None:
    book, sink = _book({"templates": {"summary": "{SEVERITY}: {display_name} {change_pct:+.0f}% on {model}"}})
    book.on_findings([_ctr(True)], T0)
    assert sink.notices[0]["annotations"]["summary"] == "HIGH: CTR mean -19% on rec"


@pytest.mark.parametrize(
    ("template", "needle"),
    [
        ("{nope}", "unknown placeholder {nope}"),
        ("{value.__class__}", "unknown placeholder"),
        ("{model[0]}", "unknown placeholder"),
        ("{model!r}", "conversion"),
        ("{value:{width}}", "nested"),
        ("{model:.2f}", "format spec"),
        ("{unclosed", "malformed"),
    ],
)
def test_a_bad_template_is_a_config_error_naming_the_path(template: str, needle: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config({"alerting": {"templates": {"summary": template}}})
    assert err.value.path == "alerting.templates.summary"
    assert needle in str(err.value)
    with pytest.raises(TemplateError):
        validate_template(template)


def test_render_never_reaches_object_internals() -> None:
    class Evil:
        def __format__(self, spec: str) -> str:
            return "formatted"

    assert render("{value}", {"value": Evil()}) == "formatted"
    with pytest.raises(TemplateError):
        render("{value.__init__.__globals__}", {"value": Evil()})


def test_fired_and_resolved_alerts_become_audit_events(tmp_path: Any) -> None:
    from alerting_helpers import make_service

    clock = FakeClock(T0)
    svc = make_service(tmp_path, {"alerting": {"enabled": True}}, clock=clock)
    book: Any = svc.component("alert_book")
    book.on_findings([_ctr(True)], clock.now())
    clock.advance(60)
    book.on_findings([_ctr(False)], clock.now())
    audit: Any = svc.component("audit")
    kinds = [(e["kind"], e["labels"]["alertname"]) for e in audit.events()]
    assert kinds == [("alert_resolved", "CtrMeanDown"), ("alert_fired", "CtrMeanDown")]


def test_descriptions_are_sentences_that_never_run_together() -> None:
    book, sink = _book()
    drift = Finding(
        check="drift",
        kind="drift",
        labels={"model": "ctr", "version": "2", "feature": "x0", "test": "ks"},
        active=True,
        value=0.2,
        summary="drift ctr v2 x0",
        description="effect floor 0.1; missing ratio 0.000 (reference 0.000)",
    )
    book.on_findings([drift, _ctr(True)], T0)
    by = {n["labels"]["check"]: n["annotations"]["description"] for n in sink.notices}
    assert by["drift"] == "effect floor 0.1; missing ratio 0.000 (reference 0.000). Recent changes: none."
    assert by["ctr_mean_down"] == (
        "CTR mean (mean) over the last 24h is 0.034. Over the 7d before it, it was 0.042: a change of -19.0%, "
        "where the check fires below -15%. 1000 events in the window. Recent changes: none."
    )
