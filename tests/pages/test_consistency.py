"""One story on every screen: for recorded states, every figure and state a person reads agrees across ``/``,
``/alerts``, ``/drift``, the detail page, ``/v1/alerts``, the Alertmanager payload and ``/metrics``.

The drift story runs the real events API, drift check (method multiscale), alert book and Alertmanager exporter
on a fake clock; the expected figures are computed here, independently, with scipy on the values posted. The
other kinds run their finding through the same book and pages.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
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
from sidecar.wiring.events import build as events
from sidecar.wiring.pages import factories

AM = "http://alertmanager.example:9093"
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


@dataclass
class DriftStory:
    """ctr v2, feature x: a pinned reference, then 60 s blocks posted one by one, evaluated at each block end."""

    tmp: Path
    clock: FakeClock = field(default_factory=lambda: FakeClock(T0))
    rng: np.random.Generator = field(default_factory=lambda: np.random.default_rng(5))
    ref: list[float] = field(default_factory=list)
    blocks: list[list[float]] = field(default_factory=list)  # the values of each block after the reference
    posted: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        cfg = parse_config(
            {
                "checks": {
                    "drift": {
                        "enabled": True,
                        "method": "multiscale",
                        "eval_threads": 1,
                        "min_samples": 100,
                        "reference": {"mode": "pinned", "pinned_events": REF_N},
                    }
                },
                "alerting": {"enabled": True, "alertmanager": {"urls": [AM]}},
            }
        )
        drift_f, pages_f = factories()
        self.svc = Service(
            cfg,
            clock=self.clock,
            registry=CollectorRegistry(),
            store=Store(self.tmp / "s.sqlite"),
            http=httpx.AsyncClient(transport=httpx.MockTransport(self._upstream)),
            factories=[alerting, events, drift_f, pages_f],
        )
        self.client = TestClient(create_app(self.svc))
        self.client.__enter__()  # starts the components (the drift check subscribes to events)

    def _upstream(self, request: httpx.Request) -> httpx.Response:
        if str(request.url) == f"{AM}/api/v2/alerts":
            self.posted.extend(json.loads(request.content))
            return httpx.Response(200, json={})
        return httpx.Response(404)

    def _post(self, xs: list[float]) -> None:
        # Every tenth value missing, in the reference and the current blocks alike: the missing-values test
        # runs (and stays quiet) beside the KS test of the same feature.
        evs = [
            {
                "model": "ctr",
                "version": "2",
                "timestamp": self.clock.now(),
                "features": {"x": x, "y": None if i % 10 == 0 else float(i % 7)},
            }
            for i, x in enumerate(xs)
        ]
        for i in range(0, len(evs), 500):
            assert self.client.post("/v1/events", json=evs[i : i + 500]).json()["accepted"] == len(evs[i : i + 500])

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

    def evaluate_at(self, t: float) -> None:
        self.clock.advance(t - self.clock.now())
        self.svc.evaluate_once(t)
        asyncio.run(self.svc.component("alertmanager").flush_all())

    def screens(self, feature: str = "x") -> Screens:
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
            detail=_page(c, f"/drift/ctr/2/{feature}"),
            api=c.get("/v1/alerts").json(),
            posted=list(newest.values()),
            metrics=metrics,
        )


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
    yield story, story.screens()
    story.client.__exit__(None, None, None)


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
