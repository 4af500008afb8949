"""One story on every screen, the harness: the sidecar in-process on a fake clock with its Alertmanager and
webhook answered here, every screen of one moment (``/``, ``/alerts``, ``/drift``, a detail page,
``/v1/alerts``, what Alertmanager got, ``/metrics``), and the checks that one alert reads the same on all.
Used by ``test_consistency.py`` (drift) and ``test_consistency_verdicts.py`` (the other kinds)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from fastapi.testclient import TestClient
from pagetree import Node, parse
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from sidecar.app import create_app
from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.service import Service
from sidecar.store import Store
from sidecar.wiring.alerting import build as alerting
from sidecar.wiring.business import build as business
from sidecar.wiring.canary import build as canary
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
            status=page(c, "/"),
            alerts=page(c, "/alerts"),
            drift=page(c, "/drift"),
            detail=page(c, detail) if detail else parse(""),
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


def page(c: TestClient, path: str) -> Node:
    r = c.get(path)
    assert r.status_code == 200, (path, r.text)
    return parse(r.text)


def alert_rows(doc: Node, state: str) -> list[Node]:
    tables = [t for t in doc.find_all("table", cls="alerts") if t.attrs.get("data-state") == state]
    return tables[0].find_all("tr", cls="alert") if tables else []


def row_with(rows: list[Node], *words: str) -> Node:
    found = [r for r in rows if all(w in r.text() for w in words)]
    assert len(found) == 1, f"{len(found)} rows with {words}"
    return found[0]


def when(iso: str) -> str:
    """An alert's ISO time as the pages write it (``2027-01-15 08:00:00Z``)."""
    return iso.replace("T", " ")[:19] + "Z"


def alert_of(s: Screens, alertname: str, **labels: str) -> dict[str, Any]:
    found = [
        a
        for a in s.api
        if a["labels"]["alertname"] == alertname and all(a["labels"].get(k) == v for k, v in labels.items())
    ]
    assert len(found) == 1, [a["labels"] for a in s.api]
    return found[0]


def posted_of(s: Screens, alert: dict[str, Any]) -> dict[str, Any] | None:
    found = [a for a in s.posted if a["labels"] == alert["labels"]]
    return found[0] if found else None


def same_everywhere(s: Screens, alert: dict[str, Any], state: str) -> None:
    """One alert: the same state, words and since-time in /v1/alerts, Alertmanager, /alerts and /."""
    name, summary = alert["labels"]["alertname"], alert["annotations"]["summary"]
    assert alert["state"] == state
    posted = posted_of(s, alert)
    if state == "pending":
        assert posted is None  # Alertmanager hears of an alert once it fires, as from Prometheus
    else:
        assert posted is not None and posted["annotations"] == alert["annotations"]
        assert posted["startsAt"] == alert["startsAt"]
    labels = [f'{k}="{v}"' for k, v in alert["labels"].items() if k in ("model", "version", "candidate", "test")]
    row = row_with(alert_rows(s.alerts, state), name, *labels)
    assert summary in row.text() and when(alert["startsAt"]) in row.text()
    status_row = row_with(s.status.by_id("alerts").find_all("tr"), name, *labels)
    assert status_row.find(cls="badge").text() == state and summary in status_row.text()
