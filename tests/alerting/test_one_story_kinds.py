"""One story on every screen, for every finding kind the renderer knows: a finding built from typed facts
(``story_cases.py``) goes through the service's own path (``with_text``, then every finding sink: the alert book,
the audit trail, a webhook), and the words each screen gets state the same verdict and the same figures: the
alert's summary and description (what Alertmanager is sent), the alert's audit row, the finding's audit row, the
webhook body, and `/`'s line for the kind (from the gauges the check exports for the same moment).

Also the leftovers of the last review: a change's time reads the same in an alert and on the pages, the runbook
parameter table prints configured floats as a person wrote them, and an alert's audit rows carry the trace id
its finding carries.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from prometheus_client import CollectorRegistry
from story_cases import CASES, T0, TOKENS, TRACE, Case

from sidecar.alerting.render import finding_text
from sidecar.alerting.render.kinds import RENDERERS
from sidecar.alerting.render.text import num, pct, when
from sidecar.alerting.runbook_params import param_tables
from sidecar.clock import FakeClock
from sidecar.component import Passive, Role
from sidecar.config import parse_config
from sidecar.model import Change, Finding
from sidecar.pages.audit_rows import audit_row
from sidecar.pages.render import when_s
from sidecar.service import Service
from sidecar.store import Store
from sidecar.wiring.alerting import build as alerting
from sidecar.wiring.diagnose import build as webhooks

HOOK = "http://hooks.example/sidecar"


class Replay(Passive):
    """A check that reports the findings it is handed, so the service's own evaluation path renders them."""

    name = "replay"
    role = Role.CHECK

    def __init__(self) -> None:
        self.findings: list[Finding] = []

    def evaluate(self, now: float) -> Sequence[Finding]:
        return self.findings


class Sidecar:
    """The alert book, the audit trail and one webhook, built by their own wiring; the webhook's bodies are kept
    as its sender is handed them."""

    def __init__(self, tmp: Path) -> None:
        self.replay = Replay()
        self.clock = FakeClock(T0)
        cfg = parse_config({"alerting": {"enabled": True}, "webhooks": [{"name": "ops", "url": HOOK, "secret": "s"}]})
        self.svc = Service(
            cfg,
            clock=self.clock,
            registry=CollectorRegistry(),
            store=Store(tmp / "s.sqlite"),
            http=httpx.AsyncClient(transport=httpx.MockTransport(lambda r: httpx.Response(200))),
            factories=[alerting, webhooks, lambda ctx: [self.replay]],
        )
        self.bodies: list[dict[str, Any]] = []
        hook: Any = self.svc.component("webhook_ops")
        hook.sender.submit = lambda body: self.bodies.append(orjson.loads(body))

    def evaluate(self, *findings: Finding) -> None:
        self.replay.findings = list(findings)
        self.svc.evaluate_once(self.clock.now())

    def alert(self) -> Any:
        book: Any = self.svc.component("alert_book")
        [a] = book.alerts.values()
        return a

    def audit(self, kind: str) -> list[dict[str, Any]]:
        audit: Any = self.svc.component("audit")
        return list(audit.events(kind))


@pytest.fixture
def sidecar(tmp_path: Path) -> Iterator[Sidecar]:
    yield Sidecar(tmp_path)


def test_every_kind_the_renderer_knows_has_a_story() -> None:
    assert set(CASES) == set(RENDERERS)


def _has(text: str, figure: str, where: str) -> None:
    assert figure in text, f"{where} lacks {figure!r}: {text!r}"


def _no_raw(text: str, raw: str, where: str) -> None:
    # A raw form as a whole number token (0.912 but not 0.9123; 91% but not 91.2%).
    assert not re.search(rf"(?<![\d.]){re.escape(raw)}(?![\d])", text), f"{where} shows {raw!r}: {text!r}"


@pytest.mark.parametrize("kind", sorted(CASES))
def test_a_finding_reads_the_same_on_every_screen(sidecar: Sidecar, kind: str) -> None:
    case: Case = CASES[kind]
    summary, description = finding_text(case.finding)
    sidecar.evaluate(case.finding)
    alert = sidecar.alert()
    assert alert.state == "firing"
    notice = alert.notice("")  # what Alertmanager is sent, and /v1/alerts lists
    [fired] = sidecar.audit("alert_fired")
    [crossed] = sidecar.audit("finding_crossed")
    [body] = sidecar.bodies
    screens = {
        "alert summary (Alertmanager)": notice["annotations"]["summary"],
        "alert audit row": fired["annotations"]["summary"],
        "finding audit row": crossed["summary"],
        "webhook body": body["summary"],
    }
    # Every screen quotes the renderer's own summary: the alert wraps it in its template, the others carry it.
    for where, text in screens.items():
        _has(text, summary, where)
    assert fired["annotations"] == notice["annotations"]
    assert "| model |" not in notice["annotations"]["summary"]  # a finding of no model says so in a word
    assert body["description"] == description
    _has(notice["annotations"]["description"], description.rstrip("."), "alert description (Alertmanager)")
    # The verdict and the figures, in the one form the renderer writes them; never another form of them.
    for where, text in {**screens, "alert description": notice["annotations"]["description"]}.items():
        for raw in case.raw:
            _no_raw(text, raw, where)
    for figure in case.figures:
        for where, text in screens.items():
            _has(text, figure, where)
    # `/audit`'s rows: the words above, and the finding's bare value and threshold in the summary's form.
    for doc in (fired, crossed):
        row = audit_row(doc)
        shown = " ".join([row.title, row.text, *(f"{k} {v}" for k, v in row.facts)])
        _has(shown, summary, f"/audit row of {doc['kind']}")
        for raw in case.raw:
            _no_raw(shown, raw, f"/audit row of {doc['kind']}")
    if case.line is not None:
        assert case.gauges is not None
        reg = CollectorRegistry()
        case.gauges(reg)
        line = case.line(reg) or ""
        for figure in case.line_figures:
            _has(line, figure, "/ line")
        for raw in case.raw:
            _no_raw(line, raw, "/ line")


@pytest.mark.parametrize("kind", ["goodput", "output_sanity"])
def test_an_alert_with_a_trace_names_it_in_its_audit_rows(sidecar: Sidecar, kind: str) -> None:
    sidecar.evaluate(CASES[kind].finding)
    [fired] = sidecar.audit("alert_fired")
    assert fired["trace_id"] == TRACE and "trace_url" in fired["annotations"]
    audit: Any = sidecar.svc.component("audit")
    found = audit.page({"trace_id": TRACE}, ["trace_id"])
    assert "alert_fired" in {e["kind"] for e in found["events"]}, found
    sidecar.clock.advance(60)
    sidecar.evaluate()  # the finding is gone: the alert resolves, and its row names the trace too
    [resolved] = sidecar.audit("alert_resolved")
    assert resolved["trace_id"] == TRACE


def test_an_alert_without_a_trace_has_no_trace_id_in_its_row(sidecar: Sidecar) -> None:
    sidecar.evaluate(CASES["probe"].finding)
    [fired] = sidecar.audit("alert_fired")
    assert "trace_id" not in fired


def test_a_token_drift_alert_never_quotes_a_quiet_latest_window_as_its_evidence() -> None:
    """Active on 2 of the last 3 windows, the latest alone within bounds: its PSI and p are the latest window's,
    and the words say so, instead of "adjusted p 0.4 below the level"."""
    import dataclasses

    facts = dataclasses.replace(TOKENS.finding.facts, q=0.4, psi=0.02, statistic=3.1)  # type: ignore[type-var]
    quiet = dataclasses.replace(TOKENS.finding, facts=facts, value=0.02)
    summary, description = finding_text(quiet)
    assert "the latest window does not (PSI 0.02)" in summary, summary
    assert "below the per-window level" not in description and "at or above" not in description, description
    assert "The latest window alone does not" in description and "adjusted p 0.4" in description
    loud_summary, loud_description = finding_text(TOKENS.finding)
    assert "PSI 0.21" in loud_summary and "below the per-window level" in loud_description


def test_a_change_time_reads_the_same_in_an_alert_and_on_the_pages(sidecar: Sidecar) -> None:
    at = T0 - 754.25
    book: Any = sidecar.svc.component("alert_book")
    book.recent_changes = lambda model, version, since, *, until: [Change("deploy v7", at, "ci", model="chat")]
    sidecar.evaluate(CASES["goodput"].finding)
    description = sidecar.alert().annotations["description"]
    assert f"deploy v7 by ci at {when_s(at)}" in description, description
    assert when_s(at) == when(at) == "2027-01-15 07:47:25Z"  # the pages' filter is the renderer's formatter
    assert "T07:47" not in description


def test_numbers_read_as_a_person_wrote_them() -> None:
    assert [num(x) for x in (0.1 + 0.2, 3.0, 250, 1e-5, 0.05)] == ["0.3", "3", "250", "1e-05", "0.05"]
    assert [pct(x) for x in (0.912, 0.9995, 1.0, 0.99, None)] == ["91.2%", "99.95%", "100%", "99%", "n/a"]


def test_the_runbook_table_prints_configured_floats_as_written() -> None:
    cfg = parse_config({"checks": {"drift": {"enabled": True, "psi_effect_floor": 0.1 + 0.2}}})
    [table] = param_tables(cfg, "FeatureDrifting.md")
    rows = {r.path: r.value for r in table.rows}
    assert rows["checks.drift.psi_effect_floor"] == "0.3"
    assert not any("0000000" in v for v in rows.values()), rows


def test_the_runbook_table_says_a_share_as_the_alert_does() -> None:
    cfg = parse_config({"checks": {"goodput": {"enabled": True, "objective": 0.995}}})
    [table] = param_tables(cfg, "GoodputBurn.md")
    [row] = [r for r in table.rows if r.path == "checks.goodput.objective"]
    assert (row.value, row.hint) == ("0.995", "99.5%")
    summary = finding_text(CASES["goodput"].finding)[0]
    assert "its 99% objective" in summary  # the alert's form of a share is the hint's (render.text.pct)


def test_a_configured_float_in_a_finding_reads_as_written() -> None:
    import dataclasses

    drift = CASES["drift"].finding
    odd = dataclasses.replace(drift, facts=dataclasses.replace(drift.facts, floor=0.1 + 0.2))  # type: ignore[type-var]
    assert "Effect floor 0.3;" in finding_text(odd)[1]


def test_a_business_change_quotes_one_form_of_each_figure() -> None:
    from sidecar.facts import BusinessFacts

    change = (0.03333 - 0.042) / 0.042
    f = Finding(
        check="ctr_mean_down",
        kind="business",
        labels={"model": "rec", "version": "3"},
        active=True,
        value=0.03333,
        baseline=0.042,
        effect_size=change,
        threshold=0.15,
        window_secs=86400,
        facts=BusinessFacts(
            display_name="CTR mean",
            aggregate="mean",
            compare="relative",
            direction="down",
            events=1000,
            window_secs=86400,
            baseline_secs=7 * 86400,
            change=change,
        ),
    )
    summary, description = finding_text(f)
    assert "24h avg 0.0333)" in summary and "down 20.6%" in summary
    assert "is 0.0333." in description and "-20.6%" in description and "0.03333" not in description


def test_an_alert_resolved_after_a_restart_still_names_its_trace(tmp_path: Path) -> None:
    before = Sidecar(tmp_path)
    before.evaluate(CASES["goodput"].finding)
    after = Sidecar(tmp_path)  # the same store: the book restores its alerts
    after.clock.advance(60)
    after.evaluate()
    [resolved] = after.audit("alert_resolved")
    assert resolved["trace_id"] == TRACE


@pytest.mark.parametrize(
    ("runbook", "path"),
    [("ModelProbeFailing.md", "probes"), ("ActionTaken.md", "actions"), ("EdgeHitRatioBurn.md", "edge.checks.sla")],
)
def test_the_new_alerts_runbooks_show_their_settings(runbook: str, path: str) -> None:
    off = parse_config({})
    [table] = param_tables(off, runbook)
    assert table.title == path and table.note == "not enabled in this config"  # edge.checks.sla: edge is off
    probe = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 1], "data": [0.5]}], "outputs": [{"name": "y"}]}
    on = parse_config(
        {
            "probes": {"enabled": True, "models": {"ctr": probe}},
            "actions": {"enabled": True},
            "edge": {"enabled": True, "source": {"http": True}},
        }
    )
    [table] = param_tables(on, runbook)
    assert table.note == "" and any(r.path == f"{path}.enabled" and r.value == "true" for r in table.rows)
