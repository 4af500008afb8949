"""Runbooks, alert names and severities agree: each runbook's ``amtool silence add`` command silences the
alert it documents, as the alert book produces it for that check kind and as alerts/*.rules.yml defines it,
and the severity a runbook states is the one those alerts carry."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from drift_testutil import feed, make_ctx, normal_rows
from prometheus_client import CollectorRegistry

from sidecar.alerting.book import AlertBook
from sidecar.alerting.config import AlertingConfig
from sidecar.checks.business.config import BusinessCheckConfig
from sidecar.checks.business.eval import Result, to_finding
from sidecar.checks.business.examples import EXAMPLE_BUSINESS_CHECKS
from sidecar.checks.business.series import CheckState
from sidecar.checks.canary.check import CanaryCheck
from sidecar.checks.canary.config import CanaryConfig
from sidecar.checks.output_sanity.check import TESTS, OutputSanityCheck
from sidecar.checks.output_sanity.config import OutputSanityConfig
from sidecar.clock import FakeClock
from sidecar.model import Batch, Event, Finding
from sidecar.wiring.drift import drift_check

ROOT = Path(__file__).resolve().parents[2]
RUNBOOKS = ROOT / "docs" / "runbooks"
_SILENCE = re.compile(r"amtool silence add ([^`\n]*?)\s*(?:--|`|$)")
_MATCHER = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(=~|!=|=)(.*)$")
_SEVERITY = re.compile(r"^Severity \*\*(\w+)\*\*", re.M)


def silence_matchers(text: str) -> dict[str, str]:
    """The label matchers of a runbook's (one) silence command; placeholders such as ``<labels>`` skipped."""
    (cmd,) = set(_SILENCE.findall(text))
    out: dict[str, str] = {}
    for token in cmd.replace(",", " ").split():
        m = _MATCHER.match(token)
        if m:
            out[m.group(1)] = m.group(3)
    return out


def rules() -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for path in sorted((ROOT / "alerts").glob("*.rules.yml")):
        for g in yaml.safe_load(path.read_text())["groups"]:
            for r in g["rules"]:
                if "alert" in r:
                    out[r["alert"]] = r
    return out


def _drift_findings(tmp_path: Path) -> list[Finding]:
    """Real findings of the drift check: a shifted numeric feature (ks) and one going missing (missing)."""
    clock = FakeClock()
    ctx = make_ctx(
        tmp_path / "drift.sqlite",
        clock,
        {
            "checks": {
                "drift": {
                    "enabled": True,
                    "window_secs": 600,
                    "bucket_count": 6,
                    "min_samples": 200,
                    "sustained_secs": 0,
                    "reference": {"mode": "pinned", "pinned_events": 1000},
                }
            }
        },
    )
    check = drift_check(ctx)
    rng = np.random.default_rng(3)
    feed(check, clock, "ctr", "2", normal_rows(rng, 1000, ["a", "m"]), per_sec=50)
    rows = normal_rows(rng, 1500, ["a", "m"], loc={"a": 1.0})
    for i, r in enumerate(rows):
        if i % 2:
            r["m"] = None
    feed(check, clock, "ctr", "2", rows, per_sec=5)
    found = list(check.evaluate(clock.now()))
    tests = {f.labels["test"] for f in found}
    assert {"ks", "missing"} <= tests, tests
    return found


def _business_findings() -> list[Finding]:
    checks = {**EXAMPLE_BUSINESS_CHECKS["checks"], "click_rate": {"field": "fields.clicked", "threshold": 1}}
    out = []
    for name, raw in checks.items():
        chk = CheckState(name, BusinessCheckConfig.model_validate(raw))
        r = Result(
            model="m",
            version="all",
            value=1.0,
            baseline=2.0,
            change=-0.5,
            active=True,
            events=100,
            baseline_events=1000,
            baseline_coverage=1.0,
            insufficient="",
            trace_id=None,
        )
        out.append(to_finding(chk, r, 0.0))
    return out


def _verdict_findings() -> list[Finding]:
    """Real findings of the canary check (one pair) and of output sanity (every test)."""
    clock = FakeClock()
    canary = CanaryCheck(
        CanaryConfig.model_validate({"enabled": True, "min_samples": 20}), registry=CollectorRegistry(), clock=clock
    )
    sanity = OutputSanityCheck(
        OutputSanityConfig.model_validate(
            {"enabled": True, "min_samples": 1, "models": {"m": {"range": {"min": 0, "max": 1}}}}
        ),
        registry=CollectorRegistry(),
        clock=clock,
    )
    items = tuple(
        Event(model="m", version=v, timestamp=clock.now(), score=0.5, fields={"latency_ms": 1.0})
        for v in ("1", "2")
        for _ in range(20)
    )
    canary.observe(Batch("events", "t", items))
    sanity.observe(Batch("events", "t", items))
    found = [*canary.evaluate(clock.now()), *sanity.evaluate(clock.now())]
    assert {f.labels.get("test") for f in found if f.check == "output_sanity"} == set(TESTS)
    return found


def _cold_start_findings() -> list[Finding]:
    from sidecar.checks.cold_start.check import ColdStartWatch
    from sidecar.checks.cold_start.config import ColdStartConfig
    from sidecar.model import Batch, Sample

    watch = ColdStartWatch(
        ColdStartConfig(enabled=True, max_load_secs=1, first_requests=1), registry=CollectorRegistry()
    )

    def poll(state: str, count: float, ns: float, at: float) -> None:
        watch.observe(
            Batch(
                kind="samples",
                source="triton_model_api",
                received_at=at,
                items=(
                    Sample("triton_model_state", (("model", "m"), ("state", state), ("version", "1")), 1.0),
                    Sample("triton_model_stats", (("model", "m"), ("stat", "success_count"), ("version", "1")), count),
                    Sample("triton_model_stats", (("model", "m"), ("stat", "success_ns"), ("version", "1")), ns),
                ),
            )
        )

    poll("LOADING", 0, 0, 0.0)
    poll("READY", 0, 0, 5.0)
    poll("READY", 1, 1e9, 6.0)
    for i in range(1, 4):
        poll("READY", 1 + i, 1e9 + i * 1e6, 6.0 + i)
    found = list(watch.evaluate(10.0))
    assert {f.check for f in found} == {"cold_start_load", "cold_start_first_requests"}, found
    return found


def _batching_findings() -> list[Finding]:
    from sidecar.checks.batching.check import BatchingAdvisor
    from sidecar.checks.batching.config import BatchingConfig
    from sidecar.model import Batch, Sample

    adv = BatchingAdvisor(BatchingConfig(enabled=True, min_requests=1), registry=CollectorRegistry())
    for at, n in ((0.0, 0.0), (10.0, 100.0)):
        items = [
            Sample("triton_model_config", (("field", k), ("model", "m")), v)
            for k, v in (("max_batch_size", 8), ("dynamic_batching", 1), ("max_queue_delay_us", 5000))
        ]
        items += [
            Sample("triton_model_stats", (("model", "m"), ("stat", k), ("version", "1")), v)
            for k, v in (("inference_count", n), ("execution_count", n), ("queue_count", n), ("queue_ns", n * 5e6))
        ]
        adv.observe(Batch(kind="samples", source="triton_model_api", items=tuple(items), received_at=at))
    found = list(adv.evaluate(10.0))
    assert [f.facts["verdict"] for f in found] == ["too_long"], found
    return found


def _probe_and_action_findings() -> list[Finding]:
    from sidecar.actions.config import ActionsConfig
    from sidecar.actions.layer import ActionLayer
    from sidecar.checks.probe.check import ModelProbe
    from sidecar.checks.probe.config import ProbesConfig
    from sidecar.component import Bus

    x = {"name": "x", "datatype": "FP32", "shape": [1], "data": [1]}
    probes = ProbesConfig.model_validate(
        {"enabled": True, "models": {"m": {"inputs": [x], "outputs": [{"name": "y"}]}}}
    )
    probe = ModelProbe(probes, client=None, registry=CollectorRegistry(), clock=FakeClock())  # type: ignore[arg-type]
    found = list(probe.evaluate(0.0))
    reg, clock = CollectorRegistry(), FakeClock()
    layer = ActionLayer(
        ActionsConfig.model_validate({"enabled": True, "models": {"m": {}}}),
        control=None,
        bus=Bus(reg),
        registry=reg,
        clock=clock,
    )
    trigger = dataclasses.replace(found[0], active=True, insufficient_data=False, evaluated_at=clock.now())
    layer.on_findings([trigger], clock.now())  # dry run: ActionPlanned
    for outcome in ("done", "failed", "held"):
        layer.records.append(dataclasses.replace(layer.records[0], outcome=outcome, id=outcome))
    return found + list(layer.evaluate(clock.now()))


def _goodput_findings() -> list[Finding]:
    from sidecar.checks.goodput.check import GoodputCheck
    from sidecar.checks.goodput.config import GoodputConfig
    from sidecar.model import Batch, Event

    chk = GoodputCheck(GoodputConfig(enabled=True), registry=CollectorRegistry())
    slow = Event(model="m", version="1", timestamp=0.0, fields={"ttft_ms": 900.0, "inter_token_ms": 10.0})
    fast = Event(model="m", version="1", timestamp=0.0, fields={"ttft_ms": 90.0, "inter_token_ms": 10.0})
    # 10% bad burns 10x: the slow pair (6x, warning) fires, the fast one (14.4x, critical) does not.
    chk.observe(Batch(kind="events", source="http", items=(slow,) * 3 + (fast,) * 27, received_at=0.0))
    found = list(chk.evaluate(10.0))
    assert [(f.active, f.severity) for f in found] == [(True, "warning")], found
    return found


def _tokens_findings() -> list[Finding]:
    from sidecar.checks.drift.config import DriftConfig
    from sidecar.checks.tokens.check import TokenDriftCheck
    from sidecar.checks.tokens.config import TokensConfig

    chk = TokenDriftCheck(TokensConfig(enabled=True), budget=DriftConfig(), registry=CollectorRegistry())
    ev = Event(model="chat", version="1", timestamp=0.0, fields={"tokens_in": 300.0})
    chk.observe(Batch(kind="events", source="http", items=(ev,) * 10, received_at=0.0))
    return list(chk.evaluate(10.0))  # the reference is being captured: made active below, as every kind


@pytest.fixture(scope="module")
def book_alerts(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[dict[str, str], str]]:
    """(labels, runbook file) of every alert the book makes from findings of each check kind."""
    findings = (
        _drift_findings(tmp_path_factory.mktemp("drift"))
        + _business_findings()
        + _verdict_findings()
        + _cold_start_findings()
        + _batching_findings()
        + _probe_and_action_findings()
        + _goodput_findings()
        + _tokens_findings()
    )
    book = AlertBook(
        AlertingConfig.model_validate({"enabled": True}),
        registry=CollectorRegistry(),
        eval_interval_secs=15,
        sink=None,
        runbook_base="http://sidecar/runbooks",
        dashboard_base=None,
        sidecar_url="http://sidecar",
    )
    book.on_findings([dataclasses.replace(f, active=True, insufficient_data=False) for f in findings], 0.0)
    return [(a.labels, a.annotations["runbook_url"].rsplit("/", 1)[1]) for a in book.alerts.values()]


def test_the_book_names_drift_alerts_as_the_rules_and_runbooks_do(
    book_alerts: list[tuple[dict[str, str], str]],
) -> None:
    names = {(lab["check"], lab.get("test", "")): lab["alertname"] for lab, _ in book_alerts}
    assert names[("drift", "ks")] == "FeatureDrifting"
    assert names[("drift", "missing")] == "FeatureMissingValuesHigh"
    assert names[("ctr_mean_down", "")] == "CtrMeanDown"
    assert names[("canary", "")] == "CanaryVersionWorse"
    assert names[("output_sanity", "collapsed")] == "ModelOutputSuspect"


def test_each_book_alert_links_a_runbook_whose_silence_command_matches_it(
    book_alerts: list[tuple[dict[str, str], str]],
) -> None:
    by_rule = rules()
    for labels, runbook in book_alerts:
        path = RUNBOOKS / runbook
        assert path.exists(), (labels["alertname"], runbook)
        text = path.read_text()
        matchers = silence_matchers(text)
        assert matchers, runbook
        if "alertname" in matchers:
            assert matchers["alertname"] == labels["alertname"], (runbook, labels)
        missing = set(matchers) - set(labels)
        assert not missing, f"{runbook}: silence matches labels the alert has not: {missing}"
        stated = _SEVERITY.search(text)
        if stated:
            assert stated.group(1) == labels["severity"], (runbook, labels)
        rule = by_rule.get(labels["alertname"])
        if rule is not None:  # the same alert on the Prometheus path: same severity, same runbook
            assert rule["labels"].get("severity", labels["severity"]) == labels["severity"], labels["alertname"]
            assert rule["annotations"].get("runbook_url", runbook).rsplit("/", 1)[1] == runbook


@pytest.mark.parametrize("runbook", sorted(p.name for p in RUNBOOKS.glob("*.md")))
def test_every_runbook_silence_command_names_an_alert_that_exists(
    runbook: str, book_alerts: list[tuple[dict[str, str], str]]
) -> None:
    text = (RUNBOOKS / runbook).read_text()
    matchers = silence_matchers(text)
    by_rule = rules()
    book = {lab["alertname"]: lab for lab, _ in book_alerts}
    name = matchers.get("alertname")
    if name is None:  # the generic business runbook silences by check and model
        assert {"check", "model"} <= set(matchers), runbook
        return
    assert name in by_rule or name in book, f"{runbook}: alertname={name} matches no alert"
    stated = _SEVERITY.search(text)
    if stated and name in by_rule:
        assert by_rule[name]["labels"]["severity"] == stated.group(1), (runbook, name)
    if stated and name in book:
        assert book[name]["severity"] == stated.group(1), (runbook, name)
