"""One story on every screen, drift: every figure and state a person reads agrees across ``/``, ``/alerts``,
``/drift``, the detail page, ``/v1/alerts``, the Alertmanager payload, the audit trail and ``/metrics``.

The real events API, drift check (method multiscale), alert book and Alertmanager exporter on a fake clock;
the expected figures are computed here, independently, with scipy on the values posted.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from onestory import T0, DriftStory, Screens, Sidecar, alert_rows, page, row_with, when
from pagetree import Node
from scipy.stats import false_discovery_control, ks_2samp


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
    assert "firing" in row_with(s.status.by_id("alerts").find_all("tr"), "FeatureDrifting", 'feature="x"').text()
    # `/alerts`, `/drift`, the detail page, Alertmanager: firing / drifting.
    row_with(alert_rows(s.alerts, "firing"), "FeatureDrifting", 'feature="x"')
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
    row = row_with(alert_rows(s.alerts, "firing"), "FeatureDrifting", 'feature="x"')
    assert summary in row.text()
    assert summary in row_with(s.status.by_id("alerts").find_all("tr"), "FeatureDrifting").text()
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
    row = row_with(alert_rows(s.alerts, "resolved"), "FeatureDrifting", 'feature="x"')
    assert when(alert["startsAt"]) in row.text() and when(alert["endsAt"]) in row.text()
    assert not alert_rows(s.alerts, "firing"), [a["annotations"]["summary"] for a in s.api]
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


def test_a_change_reads_at_the_same_time_on_status_changes_and_the_alert_that_cites_it(tmp_path: Path) -> None:
    story = DriftStory(tmp_path)
    try:
        story.start()
        r = story.client.post("/v1/changes", json={"what": "feature pipeline v7", "model": "ctr", "version": "2"})
        assert r.status_code == 201, r.text
        [at] = [c["at"] for c in story.client.get("/v1/changes").json() if c["id"] in r.json()["ids"]]
        story.block(1.0)
        story.block(1.0)
        s = story.screens()
        shown = dt.datetime.fromtimestamp(at, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%SZ")
        iso = dt.datetime.fromtimestamp(at, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")
        changes = page(story.client, "/changes")
        [status_row] = [tr for tr in s.status.by_id("changes").find_all("tr") if "feature pipeline v7" in tr.text()]
        [changes_row] = [tr for tr in changes.by_id("changes").find_all("tr") if "feature pipeline v7" in tr.text()]
        # `/` and `/changes` write the time the same way (not the API's ISO form on one of them).
        assert shown in status_row.text() and iso not in status_row.text(), status_row.text()
        assert shown in changes_row.text()
        # The drift alert cites it, at that time written the same way (one formatter, not ISO in the alert and a
        # short form on the pages), and `/changes` lists the alert as citing it.
        alert = _drift_alert(s)
        description = alert["annotations"]["description"]
        assert f"feature pipeline v7 by ? at {shown}" in description and iso not in description, description
        assert "FeatureDrifting" in changes_row.find(cls="cited").text()
    finally:
        story.close()


def test_a_categorical_alert_reads_the_same_from_firing_to_now(tmp_path: Path) -> None:
    """country gains a new category in two blocks, then a quiet one: the words the alert fired with (its
    evidence's chi-square, degrees of freedom and new categories) are the words it reads later, everywhere."""
    ref = {"mode": "pinned", "pinned_events": 1000}
    drift = {"enabled": True, "method": "multiscale", "eval_threads": 1, "min_samples": 100, "reference": ref}
    side = Sidecar(tmp_path, {"checks": {"drift": drift}})
    try:
        for block, (n, new) in enumerate(((1000, 0), (400, 5), (400, 5), (400, 0))):
            side.clock.advance(T0 + 60 * block + 1 - side.clock.now())
            side.post(
                [
                    {
                        "model": "ctr",
                        "version": "2",
                        "timestamp": side.clock.now(),
                        "features": {"country": "br" if new and i % new == 0 else ("de" if i % 3 else "fr")},
                    }
                    for i in range(n)
                ]
            )
            side.evaluate_at(T0 + 60 * (block + 1))
        s = side.screens()
        alert = _drift_alert(s, "country")
        summary = alert["annotations"]["summary"]
        rows = side.client.get("/v1/audit", params={"limit": 100}).json()["events"]
        fired = [e["annotations"]["summary"] for e in rows if e["kind"] == "alert_fired"]
        assert fired == [summary]  # the words it fired with are the words it reads now
        assert "new categories br" in summary  # the evidence's own new category, though the latest look has none
        assert summary in row_with(alert_rows(s.alerts, "firing"), "FeatureDrifting").text()
    finally:
        side.close()


def test_the_reference_reads_the_same_time_in_the_alert_and_on_the_detail_page(
    firing: tuple[DriftStory, Screens],
) -> None:
    _, s = firing
    description = _drift_alert(s)["annotations"]["description"]
    age = [tr for tr in s.detail.find_all("tr") if tr.find("th") and tr.find("th").text() == "age"]
    assert len(age) == 1, s.detail.text()
    since = re.search(r"since (\S+ \S+Z)", age[0].text())
    assert since, age[0].text()
    assert f"frozen {since.group(1)}" in description, description  # the same moment, written the same way
