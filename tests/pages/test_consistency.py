"""One story on every screen: for recorded states, every figure and state a person reads agrees across ``/``,
``/alerts``, ``/drift``, the detail page, ``/v1/alerts``, the Alertmanager payload and ``/metrics``.

The drift story runs the real events API, drift check (method multiscale), alert book and Alertmanager exporter
on a fake clock; the expected figures are computed here, independently, with scipy on the values posted. The
other kinds run their finding through the same book and pages.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from fastapi.testclient import TestClient
from pagetree import Node, parse
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families
from scipy.stats import false_discovery_control, ks_2samp

from sidecar.app import create_app
from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.service import Service
from sidecar.store import Store
from sidecar.wiring.alerting import build as alerting
from sidecar.wiring.business import build as business
from sidecar.wiring.canary import build as canary
from sidecar.wiring.diagnose import build as diagnose
from sidecar.wiring.events import build as events
from sidecar.wiring.pages import factories

AM = "http://alertmanager.example:9093"
HOOK = "http://hooks.example/sidecar"
T0 = 1_800_000_000.0 - 1_800_000_000.0 % 1800  # a boundary of every scale (60, 300, 1800 s)
REF_N, BLOCK_N = 1000, 400


@dataclass
class Screens:
    """Every screen of one moment, as a person (or Alertmanager, or Prometheus) gets it."""

    status: Node
    alerts: Node
    drift: Node
    detail: Node
    api: list[dict[str, Any]]
    posted: list[dict[str, Any]]  # the Alertmanager payload's alerts, the newest notice per fingerprint
    metrics: dict[tuple[str, tuple[tuple[str, str], ...]], float]

    def metric(self, name: str, **labels: str) -> float | None:
        want = tuple(sorted(labels.items()))
        return self.metrics.get((name, want))


class Sidecar:
    """The sidecar in-process on a fake clock, its Alertmanager answered here (every POSTed alert kept)."""

    def __init__(self, tmp: Path, raw: dict[str, Any], extra: list[Any] | None = None) -> None:
        self.clock = FakeClock(T0)
        self.posted: list[dict[str, Any]] = []
        self.webhook: list[dict[str, Any]] = []
        cfg = parse_config({**raw, "alerting": {"enabled": True, "alertmanager": {"urls": [AM]}}})
        drift_f, pages_f = factories()
        self.svc = Service(
            cfg,
            clock=self.clock,
            registry=CollectorRegistry(),
            store=Store(tmp / "s.sqlite"),
            http=httpx.AsyncClient(transport=httpx.MockTransport(self._upstream)),
            factories=[alerting, events, business, canary, drift_f, pages_f, *(extra or [])],
        )
        self.client = TestClient(create_app(self.svc))
        self.client.__enter__()  # starts the components (the checks subscribe to events)

    def close(self) -> None:
        self.client.__exit__(None, None, None)

    def _upstream(self, request: httpx.Request) -> httpx.Response:
        if str(request.url) == f"{AM}/api/v2/alerts":
            self.posted.extend(json.loads(request.content))
            return httpx.Response(200, json={})
        if str(request.url) == HOOK:
            self.webhook.append(json.loads(request.content))
            return httpx.Response(200, json={})
        return httpx.Response(404)  # Triton too: its metrics endpoint answers 404

    def post(self, evs: list[dict[str, Any]]) -> None:
        for i in range(0, len(evs), 500):
            assert self.client.post("/v1/events", json=evs[i : i + 500]).json()["accepted"] == len(evs[i : i + 500])

    def evaluate_at(self, t: float) -> None:
        self.clock.advance(t - self.clock.now())
        self.svc.evaluate_once(t)
        asyncio.run(self.svc.component("alertmanager").flush_all())

    def screens(self, detail: str = "") -> Screens:
        c = self.client
        metrics: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
        for fam in text_string_to_metric_families(c.get("/metrics").text):
            for s in fam.samples:
                metrics[(s.name, tuple(sorted(s.labels.items())))] = s.value
        newest: dict[str, dict[str, Any]] = {}
        for a in self.posted:
            newest[json.dumps(a["labels"], sort_keys=True)] = a
        return Screens(
            status=_page(c, "/"),
            alerts=_page(c, "/alerts"),
            drift=_page(c, "/drift"),
            detail=_page(c, detail) if detail else parse(""),
            api=c.get("/v1/alerts").json(),
            posted=list(newest.values()),
            metrics=metrics,
        )


class DriftStory(Sidecar):
    """ctr v2, feature x: a pinned reference, then 60 s blocks posted one by one, evaluated at each block end."""

    def __init__(self, tmp: Path) -> None:
        drift = {
            "enabled": True,
            "method": "multiscale",
            "eval_threads": 1,
            "min_samples": 100,
            "reference": {"mode": "pinned", "pinned_events": REF_N},
        }
        super().__init__(tmp, {"checks": {"drift": drift}})
        self.rng = np.random.default_rng(5)
        self.ref: list[float] = []
        self.blocks: list[list[float]] = []  # the values of x in each block after the reference

    def _post(self, xs: list[float]) -> None:
        # Every tenth value of y missing, in the reference and the current blocks alike: the missing-values
        # test runs (and stays quiet) beside the KS test of the same feature.
        self.post(
            [
                {
                    "model": "ctr",
                    "version": "2",
                    "timestamp": self.clock.now(),
                    "features": {"x": x, "y": None if i % 10 == 0 else float(i % 7)},
                }
                for i, x in enumerate(xs)
            ]
        )

    def start(self) -> None:
        """The reference (the first REF_N events) in the first block, evaluated at its end (no drift)."""
        self.clock.advance(1)
        self.ref = [float(v) for v in self.rng.normal(0, 1, REF_N)]
        self._post(self.ref)
        self.evaluate_at(T0 + 60)

    def block(self, shift: float) -> None:
        """One 60 s block of BLOCK_N values of x shifted by ``shift`` sd, evaluated at its end."""
        end = T0 + 60 * (len(self.blocks) + 2)
        self.clock.advance(end - 59 - self.clock.now())
        xs = [float(v) for v in self.rng.normal(shift, 1, BLOCK_N)]
        self.blocks.append(xs)
        self._post(xs)
        self.evaluate_at(end)


def _page(c: TestClient, path: str) -> Node:
    r = c.get(path)
    assert r.status_code == 200, (path, r.text)
    return parse(r.text)


@dataclass(frozen=True)
class Evidence:
    d: float
    p: float
    n_cur: int
    n_ref: int


def _y(n: int) -> list[float]:
    """The non-missing values of y in ``n`` events (see ``DriftStory._post``)."""
    return [float(i % 7) for i in range(n) if i % 10]


def _ks(ref: list[float], cur: list[float]) -> Evidence:
    """x's KS test, its p Benjamini-Hochberg-adjusted together with y's (the model version's two features)."""
    res = ks_2samp(ref, cur)
    p_y = ks_2samp(_y(len(ref)), _y(len(cur))).pvalue
    q = false_discovery_control([res.pvalue, p_y], method="bh")[0]
    return Evidence(float(res.statistic), float(q), len(cur), len(ref))


# The figures a sentence quotes: "D=0.323", "p(BH)=3.1e-24", "n=400 vs 1000".
_D = re.compile(r"\bD=([0-9.]+(?:e[-+]?\d+)?)")
_P = re.compile(r"\bp\(BH\)=([0-9.]+(?:e[-+]?\d+)?)")
_N = re.compile(r"\bn=(\d+) vs (\d+)")


def _figures(text: str) -> tuple[float, float, int, int]:
    d, p, n = _D.search(text), _P.search(text), _N.search(text)
    assert d and p and n, f"no D, p(BH) and n in {text!r}"
    return float(d.group(1)), float(p.group(1)), int(n.group(1)), int(n.group(2))


def _agrees(text: str, ev: Evidence, where: str) -> None:
    d, p, n_cur, n_ref = _figures(text)
    assert math.isclose(d, ev.d, rel_tol=5e-3), f"{where}: D={d}, the evidence says {ev.d:.4g}: {text!r}"
    assert math.isclose(p, ev.p, rel_tol=5e-2), f"{where}: p={p}, the evidence says {ev.p:.3g}: {text!r}"
    assert (n_cur, n_ref) == (ev.n_cur, ev.n_ref), f"{where}: n={n_cur} vs {n_ref}: {text!r}"


def _drift_alert(s: Screens, feature: str = "x") -> dict[str, Any]:
    [a] = [
        a for a in s.api if a["labels"].get("feature") == feature and a["labels"].get("alertname") == "FeatureDrifting"
    ]
    return a


def _alert_rows(doc: Node, state: str) -> list[Node]:
    tables = [t for t in doc.find_all("table", cls="alerts") if t.attrs.get("data-state") == state]
    return tables[0].find_all("tr", cls="alert") if tables else []


def _row_with(rows: list[Node], *words: str) -> Node:
    found = [r for r in rows if all(w in r.text() for w in words)]
    assert len(found) == 1, f"{len(found)} rows with {words}"
    return found[0]


def _iter_drift_rows(doc: Node) -> Iterator[Node]:
    yield from doc.by_id("drift").find_all("tr", cls="feature")


@pytest.fixture
def firing(tmp_path: Path) -> Iterator[tuple[DriftStory, Screens]]:
    """x drifted in two blocks of the last three and the latest block is quiet: the finding stays active on the
    60 s scale (2 of the last 3), and the latest block alone says "no drift"."""
    story = DriftStory(tmp_path)
    story.start()
    story.block(1.0)
    story.block(1.0)
    story.block(0.0)
    yield story, story.screens("/drift/ctr/2/x")
    story.close()


def test_a_drifting_feature_is_drifting_on_every_screen(firing: tuple[DriftStory, Screens]) -> None:
    _, s = firing
    assert s.metric("sidecar_drift_drifting", model="ctr", version="2", feature="x", test="ks") == 1
    alert = _drift_alert(s)
    assert alert["state"] == "firing"
    # `/`: the drifting-features card lists x under its KS test; its alerts card shows the alert firing.
    card = s.status.by_id("drift")
    assert "No feature drifting" not in card.text()
    assert any("x" in [td.text() for td in tr.find_all("td")] for tr in card.find_all("tr")), card.text()
    assert "firing" in _row_with(s.status.by_id("alerts").find_all("tr"), "FeatureDrifting", 'feature="x"').text()
    # `/alerts`, `/drift`, the detail page, Alertmanager: firing / drifting.
    _row_with(_alert_rows(s.alerts, "firing"), "FeatureDrifting", 'feature="x"')
    [row] = [r for r in _iter_drift_rows(s.drift) if r.attrs["data-feature"] == "x"]
    assert "st-drifting" in row.classes
    assert s.detail.by_id("state").find(cls="badge").text() == "drifting"
    [posted] = [
        a for a in s.posted if a["labels"].get("feature") == "x" and a["labels"]["alertname"] == "FeatureDrifting"
    ]
    assert posted["labels"] == alert["labels"] and posted["startsAt"] == alert["startsAt"]


def test_a_firing_alert_quotes_the_evidence_that_fired_it_everywhere(firing: tuple[DriftStory, Screens]) -> None:
    story, s = firing
    fired_on = _ks(story.ref, story.blocks[1])  # the block that made it 2 of 3: the latest that drifted
    latest = _ks(story.ref, story.blocks[2])
    assert latest.p > 0.01 < fired_on.d and fired_on.p < 1e-10  # the story is what it says
    alert = _drift_alert(s)
    summary = alert["annotations"]["summary"]
    _agrees(summary, fired_on, "/v1/alerts summary")
    [posted] = [
        a for a in s.posted if a["labels"].get("feature") == "x" and a["labels"]["alertname"] == "FeatureDrifting"
    ]
    assert posted["annotations"] == alert["annotations"]  # Alertmanager reads the same words
    # The audit trail: the alert's row has its words, the finding's row the renderer's words it wraps.
    rows = story.client.get("/v1/audit", params={"limit": 100}).json()["events"]
    fired = [e for e in rows if e["kind"] == "alert_fired" and e["labels"].get("feature") == "x"]
    assert [e["annotations"]["summary"] for e in fired] == [summary]
    crossed = [e for e in rows if e["kind"] == "finding_crossed" and e["labels"].get("feature") == "x"]
    assert crossed and all(e["summary"] and e["summary"] in summary for e in crossed)
    # `/alerts` and `/` show the book's summary whole.
    row = _row_with(_alert_rows(s.alerts, "firing"), "FeatureDrifting", 'feature="x"')
    assert summary in row.text()
    assert summary in _row_with(s.status.by_id("alerts").find_all("tr"), "FeatureDrifting").text()
    # `/drift`: the row's figures are the evidence's.
    [drow] = [r for r in _iter_drift_rows(s.drift) if r.attrs["data-feature"] == "x"]
    _agrees(drow.find(cls="evidence").text(), fired_on, "/drift row")
    # The detail page: the test's figures are the evidence's; the drawing's D is labelled as the window now.
    _agrees(s.detail.by_id("evidence").text(), fired_on, "detail page")
    # "Now" figures, where shown, are labelled now and are what /metrics says now.
    now_d = s.metric("sidecar_drift_statistic", model="ctr", version="2", feature="x", test="ks")
    assert now_d is not None and math.isclose(now_d, latest.d, rel_tol=1e-9)
    now_text = row.find(cls="now").text()
    assert now_text.startswith("now:"), now_text
    assert math.isclose(_figures(now_text)[0], latest.d, rel_tol=5e-3)


def _when(iso: str) -> str:
    """An alert's ISO time as the pages write it (``2027-01-15 08:00:00Z``)."""
    return iso.replace("T", " ")[:19] + "Z"


def test_a_resolved_drift_alert_is_resolved_on_every_screen(firing: tuple[DriftStory, Screens]) -> None:
    story, before = firing
    fired = _drift_alert(before)
    story.block(0.0)  # now 1 of the last 3 blocks drifted: the finding is no longer active
    s = story.screens("/drift/ctr/2/x")
    assert s.metric("sidecar_drift_drifting", model="ctr", version="2", feature="x", test="ks") == 0
    alert = _drift_alert(s)
    assert alert["state"] == "inactive" and alert["startsAt"] == fired["startsAt"]
    # The resolved alert keeps the words it fired with: the evidence, not the quiet block that resolved it.
    assert alert["annotations"]["summary"] == fired["annotations"]["summary"]
    [posted] = [
        a for a in s.posted if a["labels"].get("feature") == "x" and a["labels"]["alertname"] == "FeatureDrifting"
    ]
    ends = dt.datetime.fromisoformat(posted["endsAt"].replace("Z", "+00:00")).timestamp()
    assert posted["endsAt"] == alert["endsAt"] and ends <= story.clock.now()  # Alertmanager reads it resolved
    assert posted["annotations"] == alert["annotations"]
    row = _row_with(_alert_rows(s.alerts, "resolved"), "FeatureDrifting", 'feature="x"')
    assert _when(alert["startsAt"]) in row.text() and _when(alert["endsAt"]) in row.text()
    assert not _alert_rows(s.alerts, "firing"), [a["annotations"]["summary"] for a in s.api]
    assert "FeatureDrifting" not in s.status.by_id("alerts").text()  # `/` lists active and pending alerts only
    card = s.status.by_id("drift")
    assert all("x" not in [td.text() for td in tr.find_all("td")[1:2]] for tr in card.find_all("tr"))
    [drow] = [r for r in _iter_drift_rows(s.drift) if r.attrs["data-feature"] == "x"]
    holds = s.metric("sidecar_drift_condition", model="ctr", version="2", feature="x", test="ks") == 1
    state = "condition holds" if holds else "ok"
    assert drow.find(cls="state").find(cls="badge").text() == state
    assert s.detail.by_id("state").find(cls="badge").text() == state
    assert drow.find(cls="evidence").text().startswith("none: not drifting")
    with pytest.raises(AssertionError):
        s.detail.by_id("evidence")  # nothing fires: no evidence shown


WER = {
    "field": "fields.wer",
    "aggregate": "mean",
    "compare": "absolute",
    "direction": "up",
    "threshold": 0.08,
    "display_name": "WER",
    "window_secs": 300,
    "bucket_secs": 60,
    "min_events": 10,
    "for_secs": 120,
    "group_by": ["model", "version"],
}


@pytest.fixture
def verdicts(tmp_path: Path) -> Iterator[Sidecar]:
    """ctr v1 (today) and v2 (the candidate) side by side: v2 is twice as slow, answers only zeros and has a
    WER of 0.12 (the business check fires above 0.08 after 120 s)."""
    side = Sidecar(
        tmp_path,
        {
            "checks": {
                "business": {"enabled": True, "checks": {"wer_high": WER}},
                "canary": {
                    "enabled": True,
                    "min_samples": 50,
                    "for_secs": 0,
                    "pairs": {"ctr": {"baseline": "1", "candidate": "2"}},
                },
                "output_sanity": {"enabled": True, "min_samples": 50, "for_secs": 0},
            }
        },
    )
    rng = np.random.default_rng(11)
    side.clock.advance(10)
    evs = []
    for version, lat, wer in (("1", 20.0, 0.05), ("2", 40.0, 0.12)):
        for i in range(200):
            evs.append(
                {
                    "model": "ctr",
                    "version": version,
                    "timestamp": side.clock.now(),
                    "score": float(rng.random()) if version == "1" else 0.0,
                    "fields": {"wer": wer, "latency_ms": float(rng.normal(lat, lat / 10))},
                    "request_id": f"req-{version}-{i}",
                }
            )
    side.post(evs)
    side.evaluate_at(T0 + 60)
    yield side
    side.close()


def _alert(s: Screens, alertname: str, **labels: str) -> dict[str, Any]:
    found = [
        a
        for a in s.api
        if a["labels"]["alertname"] == alertname and all(a["labels"].get(k) == v for k, v in labels.items())
    ]
    assert len(found) == 1, [a["labels"] for a in s.api]
    return found[0]


def _posted(s: Screens, alert: dict[str, Any]) -> dict[str, Any] | None:
    found = [a for a in s.posted if a["labels"] == alert["labels"]]
    return found[0] if found else None


def _same_everywhere(s: Screens, alert: dict[str, Any], state: str) -> None:
    """One alert: the same state, words and since-time in /v1/alerts, Alertmanager, /alerts and /."""
    name, summary = alert["labels"]["alertname"], alert["annotations"]["summary"]
    assert alert["state"] == state
    posted = _posted(s, alert)
    if state == "pending":
        assert posted is None  # Alertmanager hears of an alert once it fires, as from Prometheus
    else:
        assert posted is not None and posted["annotations"] == alert["annotations"]
        assert posted["startsAt"] == alert["startsAt"]
    labels = [f'{k}="{v}"' for k, v in alert["labels"].items() if k in ("model", "version", "candidate", "test")]
    row = _row_with(_alert_rows(s.alerts, state), name, *labels)
    assert summary in row.text() and _when(alert["startsAt"]) in row.text()
    status_row = _row_with(s.status.by_id("alerts").find_all("tr"), name, *labels)
    assert status_row.find(cls="badge").text() == state and summary in status_row.text()


def test_a_business_alert_pending_then_firing_reads_the_same_everywhere(verdicts: Sidecar) -> None:
    s = verdicts.screens()
    alert = _alert(s, "WerHigh", version="2")
    _same_everywhere(s, alert, "pending")
    value = s.metric("sidecar_business_value", check="wer_high", model="ctr", version="2")
    assert value is not None and math.isclose(value, 0.12, rel_tol=1e-9)
    assert "WER" in alert["annotations"]["summary"] and f"{value:.3g}" in alert["annotations"]["summary"]
    assert s.metric("sidecar_business_condition", check="wer_high", model="ctr", version="2", severity="warning") == 1
    verdicts.evaluate_at(T0 + 180)
    s = verdicts.screens()
    firing = _alert(s, "WerHigh", version="2")
    _same_everywhere(s, firing, "firing")
    assert (
        firing["startsAt"] == alert["startsAt"] and firing["annotations"]["summary"] == alert["annotations"]["summary"]
    )
    assert not [a for a in s.api if a["labels"]["alertname"] == "WerHigh" and a["labels"]["version"] == "1"]


def test_a_canary_verdict_reads_the_same_everywhere(verdicts: Sidecar) -> None:
    s = verdicts.screens()
    alert = _alert(s, "CanaryVersionWorse", candidate="2")
    _same_everywhere(s, alert, "firing")
    worse = sorted(
        dict(k[1])["aspect"]
        for k, v in s.metrics.items()
        if k[0] == "sidecar_canary_verdict" and v == 1 and dict(k[1]).get("candidate") == "2"
    )
    assert worse and all(f"worse on {a}" in alert["annotations"]["summary"] for a in worse if a in ("p50", "p99"))
    # The figures the summary quotes are the ones /metrics exports.
    lab = {"model": "ctr", "baseline": "1", "candidate": "2", "aspect": "p50"}
    base, cand = s.metric("sidecar_canary_baseline_value", **lab), s.metric("sidecar_canary_candidate_value", **lab)
    assert base is not None and cand is not None
    assert f"v2 {cand:.3g} ms vs v1 {base:.3g} ms" in alert["annotations"]["summary"]
    row = _row_with(s.status.by_id("verdicts").find_all("tr"), "canary", "ctr 2 vs 1")
    assert row.find(cls="badge").text() == "worse"
    assert sorted(row.find_all("td")[-1].text().split(", ")) == worse


def test_an_output_sanity_finding_reads_the_same_everywhere(verdicts: Sidecar) -> None:
    s = verdicts.screens()
    alert = _alert(s, "ModelOutputSuspect", version="2", test="all_zero")
    _same_everywhere(s, alert, "firing")
    ratio = s.metric("sidecar_output_sanity_ratio", model="ctr", version="2", test="all_zero")
    assert ratio == 1.0
    assert "200 of 200 (100.0%)" in alert["annotations"]["summary"]
    row = _row_with(s.status.by_id("verdicts").find_all("tr"), "output sanity", "ctr 2")
    assert row.find(cls="badge").text() == "suspect" and "all_zero" in row.text()


def test_a_diagnosis_reads_the_same_everywhere_and_in_the_webhook_body(tmp_path: Path) -> None:
    side = Sidecar(
        tmp_path,
        {
            "triton": {"enabled": True, "metrics_url": "http://triton.example:8002/metrics"},
            "webhooks": [{"name": "ops", "url": HOOK, "secret": "s3cret"}],
        },
        extra=[diagnose],
    )
    try:
        asyncio.run(side.svc.component("diagnose").probe_once())  # Triton's metrics answer 404
        side.evaluate_at(T0 + 30)
        asyncio.run(side.svc.component("webhook_ops").sender.drain_now())
        s = side.screens()
        alert = _alert(s, "Diagnosis", diagnosis="metrics_404")
        _same_everywhere(s, alert, "firing")
        [body] = side.webhook
        assert body["kind"] == "diagnosis" and body["labels"]["diagnosis"] == "metrics_404"
        # The webhook quotes the finding's words, the alert wraps the same words in its template.
        assert body["summary"] and body["summary"] in alert["annotations"]["summary"]
        assert body["description"] and body["description"] in alert["annotations"]["description"]
        assert body["facts"]["problem"] == body["summary"]
        # `/`'s diagnoses card says the same problem.
        assert body["summary"] in s.status.by_id("diagnoses").text()
    finally:
        side.close()
