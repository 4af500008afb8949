"""``/drift`` against the real drift check, alert book and events API: every monitored feature with the numbers
the check exported, the floor and hold it was judged by, its reference, missing ratios, new categories, its state
worst first, and a link to its alert while one is pending or firing (issue 13, "Pages")."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from fastapi.testclient import TestClient
from pagetree import Node, parse
from prometheus_client import CollectorRegistry

from sidecar.app import create_app
from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.pages.render import ago
from sidecar.service import Service
from sidecar.store import Store
from sidecar.wiring.alerting import build as alerting
from sidecar.wiring.events import build as events
from sidecar.wiring.pages import build as pages_only
from sidecar.wiring.pages import factories

AM = "http://alertmanager.example:9093"
PINNED = 500


@dataclass
class Posted:
    """What the test sent, per feature: the reference (the pinned first events) and the current window."""

    ref: dict[str, list[Any]] = field(default_factory=dict)
    cur: dict[str, list[Any]] = field(default_factory=dict)


def drift_service(tmp_path: Path, clock: FakeClock, **drift: Any) -> Service:
    cfg = parse_config(
        {
            "checks": {
                "drift": {
                    "enabled": True,
                    "method": "window",
                    "sustained_secs": 600,
                    "min_samples": 100,
                    "reference": {"mode": "pinned", "pinned_events": PINNED},
                    **drift,
                }
            },
            "alerting": {"enabled": True, "alertmanager": {"urls": [AM]}},
        }
    )
    drift_f, pages_f = factories()
    return Service(
        cfg,
        clock=clock,
        registry=CollectorRegistry(),
        store=Store(tmp_path / "s.sqlite"),
        http=httpx.AsyncClient(transport=httpx.MockTransport(lambda r: httpx.Response(200, json={}))),
        factories=[alerting, events, drift_f, pages_f],
    )


def post(
    client: TestClient,
    clock: FakeClock,
    model: str,
    version: str,
    rows: list[dict[str, Any]],
    into: dict[str, list[Any]] | None = None,
) -> None:
    for i in range(0, len(rows), 100):
        chunk = rows[i : i + 100]
        evs = [{"model": model, "version": version, "timestamp": clock.now(), "features": r} for r in chunk]
        assert client.post("/v1/events", json=evs).json()["accepted"] == len(chunk)
        if into is not None:
            for r in chunk:
                for k, v in r.items():
                    into.setdefault(k, []).append(v)
        clock.advance(10)


def ctr_rows(
    rng: np.random.Generator, n: int, *, shift: float, y_missing: float, new_share: float
) -> list[dict[str, Any]]:
    """x shifts by ``shift``; y keeps its distribution but loses ``y_missing`` of its values; country gets a
    category the reference never had (``xx``) in ``new_share`` of the rows."""
    out = []
    for v, w, u, m in zip(rng.normal(shift, 1, n), rng.normal(0, 1, n), rng.random(n), rng.random(n), strict=True):
        out.append(
            {
                "x": float(v),
                "y": None if m < y_missing else float(w),
                "country": "xx" if u < new_share else ("de" if w > 0 else "fr"),
            }
        )
    return out


def drifted(tmp_path: Path, clock: FakeClock) -> tuple[Service, TestClient, Posted]:
    """ctr v2 with a pinned reference and a shifted current window, evaluated twice 600 s apart (so the
    condition first holds, then has held long enough); rank v1 still collecting its reference."""
    svc = drift_service(tmp_path, clock)
    client = TestClient(create_app(svc))
    client.__enter__()
    rng = np.random.default_rng(0)
    data = Posted()
    post(client, clock, "ctr", "2", ctr_rows(rng, PINNED, shift=0, y_missing=0, new_share=0), data.ref)
    clock.advance(3600)  # the reference's events leave the current window
    post(client, clock, "ctr", "2", ctr_rows(rng, 2000, shift=0.6, y_missing=0.2, new_share=0.25), data.cur)
    post(client, clock, "rank", "1", [{"z": float(v)} for v in rng.normal(0, 1, 200)])
    svc.evaluate_once(clock.now())
    clock.advance(600)
    svc.evaluate_once(clock.now())
    return svc, client, data


def table_rows(doc: Node) -> dict[str, dict[str, Node]]:
    heads = [th.text().strip() for th in doc.by_id("drift").find_all("th")]
    return {
        f"{r.attrs['data-model']}/{r.attrs['data-feature']}": dict(zip(heads, r.find_all("td"), strict=True))
        for r in doc.by_id("drift").find_all("tr", cls="feature")
    }


def gauge(svc: Service, name: str, **labels: str) -> float:
    v = svc.registry.get_sample_value(name, labels)
    assert v is not None, (name, labels)
    return v


def test_drift_page_lists_every_feature_with_the_checks_numbers_worst_first(tmp_path: Path, clock: FakeClock) -> None:
    svc, client, _ = drifted(tmp_path, clock)
    try:
        doc = parse(client.get("/drift").text)
        rank = parse(client.get("/drift?model=rank").text)
        other = parse(client.get("/drift?model=fraud").text)
    finally:
        client.__exit__(None, None, None)
    rows = table_rows(doc)
    assert set(rows) == {"ctr/x", "ctr/y", "ctr/country", "rank/z"}
    state = {k: r["state"].find("span", cls="badge").text() for k, r in rows.items()}  # the first: the state
    # Worst first: drifting (x by KS, y by its missing values, country by PSI), then insufficient data.
    assert list(state.values()) == ["drifting", "drifting", "drifting", "insufficient data"]
    assert list(rows)[-1] == "rank/z"
    assert rows["rank/z"]["state"].find(cls="reason").text() == "reference collecting 200/500 events of version 1"
    assert "missing values rose" in rows["ctr/y"]["state"].text()
    assert rows["ctr/y"]["held / needed"].text() == "10m / 10m"  # the missing-values test's hold
    cfg = svc.config.checks.drift
    for feature, test, floor in (("x", "ks", cfg.ks_effect_floor), ("country", "chi2", cfg.psi_effect_floor)):
        r, lab = rows[f"ctr/{feature}"], {"model": "ctr", "version": "2", "feature": feature, "test": test}
        assert r["test"].text().startswith(test)
        assert r["statistic now"].text() == f"{gauge(svc, 'sidecar_drift_statistic', **lab):.4g}"
        assert r["p (BH) now"].text() == f"{gauge(svc, 'sidecar_drift_p_value', **lab):.3g}"
        assert r["effect / floor now"].text() == f"{gauge(svc, 'sidecar_drift_effect_size', **lab):.3f} / {floor:g}"
        n = {
            w: int(gauge(svc, "sidecar_drift_samples", model="ctr", version="2", feature=feature, window=w))
            for w in ("current", "reference")
        }
        assert r["n cur / ref now"].text() == f"{n['current']} / {n['reference']}"
        # The condition began at the first evaluation and has held the 600 s the check needs.
        assert r["held / needed"].text() == "10m / 10m"
        # Pinned to version 2's first events; its age counts from the moment it froze (the 500th event).
        frozen = next(
            d["created_at"] for d in svc.component("drift").describe_references() if d.get("feature") == feature
        )
        assert r["reference"].text() == f"pinned v2 {ago(clock.now() - frozen)} old"
    miss = {
        w: gauge(svc, "sidecar_drift_missing_ratio", model="ctr", version="2", feature="y", window=w)
        for w in ("current", "reference")
    }
    assert rows["ctr/y"]["missing cur / ref"].text() == f"{miss['current'] * 100:.1f}% / {miss['reference'] * 100:.1f}%"
    unseen = gauge(svc, "sidecar_drift_unseen_ratio", model="ctr", version="2", feature="country")
    assert rows["ctr/country"]["new categories"].text() == f"xx ({unseen * 100:.1f}%)"
    # Links: the detail page of each feature, and the alert the book holds for it.
    assert rows["ctr/x"]["feature"].find("a").attrs["href"] == "/drift/ctr/2/x"
    alert = rows["ctr/x"]["state"].find("a", cls="alert")
    assert alert.attrs["href"] in ("/alerts#pending", "/alerts#firing") and "FeatureDrifting" in alert.text()
    assert "FeatureMissingValuesHigh" in rows["ctr/y"]["state"].find("a", cls="alert").text()
    assert rows["rank/z"]["state"].find_all("a", cls="alert") == []
    # The model filter.
    assert set(table_rows(rank)) == {"rank/z"}
    assert other.by_id("none").text() == "No drift evaluation yet for model fraud."


def test_drift_page_before_any_evaluation_and_without_a_drift_check(tmp_path: Path, clock: FakeClock) -> None:
    svc = drift_service(tmp_path, clock)
    with TestClient(create_app(svc)) as client:
        assert parse(client.get("/drift").text).by_id("none").text() == "No drift evaluation yet."
    bare = Service(
        parse_config({}),
        clock=clock,
        registry=CollectorRegistry(),
        store=Store(tmp_path / "b.sqlite"),
        factories=[pages_only],
    )
    with TestClient(create_app(bare)) as client:
        r = client.get("/drift")
        assert r.status_code == 200
        assert "Drift monitoring is not configured" in parse(r.text).by_id("none").text()
        assert client.get("/drift/ctr/2/x").status_code == 404


def test_drift_page_warns_when_the_last_evaluation_is_old(tmp_path: Path, clock: FakeClock) -> None:
    svc, client, _ = drifted(tmp_path, clock)
    try:
        assert parse(client.get("/drift").text).find_all(id="stale") == []
        clock.advance(10 * svc.config.checks.eval_interval_secs)  # no evaluation since: a stuck worker thread
        note = parse(client.get("/drift").text).by_id("stale").text()
    finally:
        client.__exit__(None, None, None)
    assert "may be out of date" in note


def test_a_series_whose_condition_holds_but_not_yet_long_enough(tmp_path: Path, clock: FakeClock) -> None:
    svc = drift_service(tmp_path, clock, sustained_secs=900)
    rng = np.random.default_rng(1)
    with TestClient(create_app(svc)) as client:
        post(client, clock, "ctr", "2", ctr_rows(rng, PINNED, shift=0, y_missing=0, new_share=0))
        clock.advance(3600)
        post(client, clock, "ctr", "2", ctr_rows(rng, 2000, shift=0.6, y_missing=0, new_share=0))
        svc.evaluate_once(clock.now())
        clock.advance(300)
        svc.evaluate_once(clock.now())
        rows = table_rows(parse(client.get("/drift").text))
    x = rows["ctr/x"]
    assert x["state"].text().strip() == "condition holds"
    assert x["held / needed"].text() == "5m / 15m"
    assert rows["ctr/y"]["state"].text().strip() == "ok"
    assert rows["ctr/y"]["held / needed"].text() == "\N{EN DASH} / 15m"  # the condition does not hold
    assert next(iter(rows)) == "ctr/x"


def test_file_and_rolling_references_are_named_with_their_age(tmp_path: Path, clock: FakeClock) -> None:
    ref_file = tmp_path / "ctr_reference.csv"
    rng = np.random.default_rng(2)
    ref_file.write_text("x\n" + "\n".join(f"{v:.5f}" for v in rng.normal(0, 1, 400)) + "\n")
    svc = drift_service(
        tmp_path,
        clock,
        models={
            "ctr": {"reference": {"mode": "file", "path": str(ref_file)}},
            "fraud": {"reference": {"mode": "rolling", "rolling_offset_secs": 86400}},
        },
    )
    loaded_at = clock.now()
    with TestClient(create_app(svc)) as client:
        clock.advance(7200)
        post(client, clock, "ctr", "2", [{"x": float(v)} for v in rng.normal(0, 1, 300)])
        post(client, clock, "fraud", "1", [{"amount": float(v)} for v in rng.normal(0, 1, 300)])
        svc.evaluate_once(clock.now())
        rows = table_rows(parse(client.get("/drift").text))
        detail = parse(client.get("/drift/ctr/2/x").text)
    # The source as the check names it (the file's name).
    assert rows["ctr/x"]["reference"].text() == f"file {ago(clock.now() - loaded_at)} old{ref_file.name}"
    assert rows["ctr/x"]["reference"].find(cls="src").text() == ref_file.name
    assert rows["ctr/x"]["state"].text().strip() == "ok"
    assert rows["fraud/amount"]["reference"].text() == "rolling 24.0h back"
    assert rows["fraud/amount"]["state"].find(cls="reason").text() == "no traffic in the same hours last week yet"
    assert detail.by_id("reference").text().count(f"file:{ref_file.name}") == 1
