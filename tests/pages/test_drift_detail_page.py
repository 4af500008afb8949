"""``/drift/{model}/{version}/{feature}`` against the real drift check: the SVG's curves, D segment and bars are
drawn from the real reference and current window (recomputed here from the values the test sent), the numbers
equal the exported gauges, every name is escaped, and an unknown series is a 404 with a message."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient
from pagetree import Node, parse
from test_drift_page import PINNED, drift_service, drifted, gauge, post

from sidecar.app import create_app
from sidecar.checks.drift.view import ks_location
from sidecar.checks.stats.core import Ecdf, ks_2samp_fast
from sidecar.clock import FakeClock
from sidecar.pages.drift_detail import LEFT, PLOT_H, PLOT_W, TOP


def _points(node: Node) -> list[tuple[float, float]]:
    return [(float(a), float(b)) for a, b in (p.split(",") for p in node.attrs["points"].split())]


def _f_from_y(y: float) -> float:
    return 1.0 - (y - TOP) / PLOT_H


def _ecdf(vals: np.ndarray, x: float) -> float:
    return float(np.searchsorted(np.sort(vals), x, side="right") / vals.size)


def _ks_d(ref: np.ndarray, cur: np.ndarray) -> float:
    """D the plain way: both ECDFs (right-continuous) on the union of the points."""
    xs = np.concatenate([ref, cur])
    return float(
        np.max(
            np.abs(
                np.searchsorted(np.sort(ref), xs, side="right") / ref.size
                - np.searchsorted(np.sort(cur), xs, side="right") / cur.size
            )
        )
    )


def test_numeric_detail_draws_both_ecdfs_and_d_where_the_real_distributions_differ_most(
    tmp_path: Path, clock: FakeClock
) -> None:
    svc, client, data = drifted(tmp_path, clock)
    try:
        r = client.get("/drift/ctr/2/x")
    finally:
        client.__exit__(None, None, None)
    assert r.status_code == 200
    doc = parse(r.text)
    ref, cur = np.array(data.ref["x"]), np.array(data.cur["x"])
    d = _ks_d(ref, cur)
    stat = gauge(svc, "sidecar_drift_statistic", model="ctr", version="2", feature="x", test="ks")
    assert abs(d - stat) < 1e-12  # the test's own check that the values sent are the ones the check tested
    line = doc.by_id("d-line")
    assert float(line.attrs["data-d"]) == stat
    # The D segment stands at the x where the ECDFs of the real values differ most, between their heights.
    x = float(line.attrs["data-x"])
    f_ref, f_cur = _ecdf(ref, x), _ecdf(cur, x)
    assert abs(abs(f_ref - f_cur) - d) < 1e-12  # the curves of the values sent lie D apart at that x
    assert float(line.attrs["data-f-ref"]) == f_ref and float(line.attrs["data-f-cur"]) == f_cur
    assert line.attrs["x1"] == line.attrs["x2"]
    assert abs(_f_from_y(float(line.attrs["y1"])) - f_ref) < 1e-4
    assert abs(_f_from_y(float(line.attrs["y2"])) - f_cur) < 1e-4
    assert f"D = {stat:.4f}" in doc.by_id("d-label").text()
    ref_pts, cur_pts = _points(doc.by_id("ref-curve")), _points(doc.by_id("cur-curve"))
    for pts in (ref_pts, cur_pts):
        assert len(pts) <= 2 * 240 + 6  # bounded, whatever the window holds
        assert all(a[0] <= b[0] + 1e-9 and a[1] >= b[1] - 1e-9 for a, b in pairwise(pts))  # an ECDF
        assert (float(line.attrs["x1"]), float(line.attrs["y1"] if pts is ref_pts else line.attrs["y2"])) in pts
    # Each curve crosses one half at its own median (x shifted by 0.6 between them).
    lo = min(np.quantile(ref, 0.005), np.quantile(cur, 0.005), x)
    hi = max(np.quantile(ref, 0.995), np.quantile(cur, 0.995), x)
    pad = (hi - lo) * 0.03
    lo, hi = lo - pad, hi + pad
    for pts, vals in ((ref_pts, ref), (cur_pts, cur)):
        first_half = next(px for px, py in pts if _f_from_y(py) >= 0.5)
        expect = LEFT + (np.quantile(vals, 0.5, method="inverted_cdf") - lo) / (hi - lo) * PLOT_W
        assert abs(first_half - expect) < 0.06 / (hi - lo) * PLOT_W, (first_half, expect)
    nums = {t.attrs["id"]: t.text() for t in doc.by_id("numbers").find_all("td") if "id" in t.attrs}
    lab = {"model": "ctr", "version": "2", "feature": "x", "test": "ks"}
    assert nums["n-statistic"] == f"{stat:.6g}"
    assert nums["n-p"] == f"{gauge(svc, 'sidecar_drift_p_value', **lab):.4g}"
    assert nums["n-p-raw"] == f"{gauge(svc, 'sidecar_drift_p_value_raw', **lab):.4g}"
    assert nums["n-effect"] == f"{gauge(svc, 'sidecar_drift_effect_size', **lab):.4f} / 0.05"
    assert nums["n-samples"] == f"{len(cur)} / {PINNED}"
    assert nums["n-held"] == "10m / 10m"
    assert doc.by_id("reference").text().count("pinned") == 2  # kind and source (pinned:2)


def test_categorical_detail_draws_the_share_of_every_category_and_marks_the_new_one(
    tmp_path: Path, clock: FakeClock
) -> None:
    svc, client, data = drifted(tmp_path, clock)
    try:
        doc = parse(client.get("/drift/ctr/2/country").text)
        y = parse(client.get("/drift/ctr/2/y").text)
    finally:
        client.__exit__(None, None, None)
    bars = {g.attrs["data-category"]: g for g in doc.by_id("bars").find_all("g", cls="cat")}
    assert set(bars) == {"de", "fr", "xx"}
    for cat, g in bars.items():
        assert float(g.attrs["data-ref-share"]) == data.ref["country"].count(cat) / PINNED
        assert float(g.attrs["data-cur-share"]) == data.cur["country"].count(cat) / len(data.cur["country"])
        ref_w, cur_w = (float(rect.attrs["width"]) for rect in g.find_all("rect"))
        assert (ref_w > cur_w) == (g.attrs["data-ref-share"] > g.attrs["data-cur-share"])
    assert "new" in bars["xx"].classes and "new" not in bars["de"].classes
    assert float(bars["xx"].attrs["data-ref-share"]) == 0.0
    assert [li.text() for li in doc.by_id("new-categories").find_all("li")] == ["xx"]
    unseen = gauge(svc, "sidecar_drift_unseen_ratio", model="ctr", version="2", feature="country")
    assert f"{unseen * 100:.1f}% of the current values" in doc.text()
    psi = gauge(svc, "sidecar_drift_effect_size", model="ctr", version="2", feature="country", test="chi2")
    assert doc.by_id("n-effect").text() == f"{psi:.4f} / 0.1"
    # y: the distribution of its values is unchanged, its missing ratio rose from 0 to about 20%.
    miss = {
        w: gauge(svc, "sidecar_drift_missing_ratio", model="ctr", version="2", feature="y", window=w)
        for w in ("current", "reference")
    }
    assert miss["current"] == data.cur["y"].count(None) / len(data.cur["y"]) and miss["reference"] == 0
    assert y.by_id("n-missing").text() == f"{miss['current'] * 100:.1f}% / 0.0%"
    assert y.by_id("missing").text().count("drifting") == 1
    assert y.by_id("state").find(cls="badge").text() == "drifting"


def test_unknown_series_is_a_404_with_a_message_and_every_name_is_escaped(tmp_path: Path, clock: FakeClock) -> None:
    evil_model, evil_feature = "<script>alert(1)</script>", "<img src=x onerror=alert(2)>&\"'"
    svc = drift_service(tmp_path, clock)
    rng = np.random.default_rng(3)
    with TestClient(create_app(svc)) as client:
        post(client, clock, evil_model, "1", [{evil_feature: float(v)} for v in rng.normal(0, 1, 300)])
        svc.evaluate_once(clock.now())
        listing = client.get("/drift")
        rows = parse(listing.text).by_id("drift").find_all("tr", cls="feature")
        href = rows[0].find("a").attrs["href"]
        detail = client.get(href)
        unknown = client.get(f"/drift/ctr/2/{evil_feature}")
        other_version = client.get(f"/drift/{evil_model}/2/{evil_feature}")
        short = client.get("/drift/ctr/2")
        filtered = client.get("/drift", params={"model": evil_model})
    assert short.status_code == 404
    assert "a drift page is /drift/{model}/{version}/{feature}" in parse(short.text).by_id("not-found").text()
    assert parse(filtered.text).find("input", name="model").attrs["value"] == evil_model
    assert len(parse(filtered.text).by_id("drift").find_all("tr", cls="feature")) == 1
    for page in (listing.text, detail.text, unknown.text, filtered.text):
        assert "<script>" not in page and "<img" not in page
    assert len(rows) == 1
    assert rows[0].attrs["data-model"] == evil_model and rows[0].attrs["data-feature"] == evil_feature
    assert href.startswith("/drift/%3Cscript%3E") and "/" not in href[len("/drift/") :].replace("/1/", "", 1)
    assert detail.status_code == 200
    doc = parse(detail.text)
    assert evil_model in doc.find("h1").text() and evil_feature in doc.find("h1").text()
    # Still collecting its reference: no drawing, the reason instead.
    assert "reference collecting 300/500 events of version 1" in doc.by_id("no-reference").text()
    for r in (unknown, other_version):
        assert r.status_code == 404
    msg = parse(unknown.text).by_id("not-found").text()
    assert msg == (
        f"No such drift series: the drift check monitors no feature {evil_feature!r} of model 'ctr' version '2'."
    )


def test_the_drawn_d_is_the_checks_ks_d_for_exact_samples_and_sketches() -> None:
    """Where the page puts D: the same D as the check's KS (exact samples, or a sketch's weighted CDF), and the
    two curves really lie D apart at the x it reports."""
    rng = np.random.default_rng(5)
    ref = Ecdf.from_values(rng.normal(0, 1, 3000))
    for cur in (
        Ecdf.from_values(rng.normal(0.3, 1.2, 4000)),
        Ecdf.from_values(np.round(rng.normal(0.2, 1, 20_000), 1)),  # ties, and above scipy's exact size
        Ecdf.from_weighted(rng.normal(0.4, 1, 400), rng.integers(1, 60, 400).astype(float), 12_000, 0.01),
    ):
        d, x, f_ref, f_cur = ks_location(ref, cur)
        assert d == pytest.approx(ks_2samp_fast(ref, cur).d, abs=1e-12)
        assert f_ref == ref.count_le(np.array([x]))[0] / ref.n
        total = cur.n if cur.cum is None else float(cur.cum[-1])
        assert f_cur == pytest.approx(cur.count_le(np.array([x]))[0] / total, abs=1e-15)
        assert abs(f_ref - f_cur) == pytest.approx(d, abs=1e-12)
