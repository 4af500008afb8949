"""Drift findings carry numbers only; sidecar/alerting/render/drift.py writes the sentences people read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from drift_testutil import feed, make_ctx, normal_rows
from prometheus_client import CollectorRegistry

from sidecar.alerting.book import AlertBook
from sidecar.alerting.config import AlertingConfig
from sidecar.alerting.render import finding_text
from sidecar.alerting.render.drift import version_text
from sidecar.clock import FakeClock
from sidecar.model import Finding
from sidecar.wiring.drift import drift_check


def _finding(version: str = "2", **facts: Any) -> Finding:
    base: dict[str, Any] = {
        "test": "ks",
        "statistic": 0.2,
        "p_raw": 1e-9,
        "q": 3e-9,
        "effect": 0.2,
        "floor": 0.05,
        "n_cur": 3000,
        "n_ref": 2000,
        "missing_ratio": 0.0,
        "ref_missing_ratio": 0.0,
        "held_secs": None,
        "sustained_secs": 300.0,
        "insufficient": None,
        "method": "asymp",
    }
    base.update(facts)
    return Finding(
        check="drift",
        kind="drift",
        active=True,
        value=0.2,
        labels={"model": "ctr", "version": version, "feature": "b", "test": base["test"]},
        facts=base,
    )


def test_ks_finding_reads_as_before_with_sentence_ending_description() -> None:
    summary, description = finding_text(_finding(held_secs=120.0))
    assert summary == ("drift ctr v2 b: KS D=0.2000 (asymp), p(BH)=3e-09, n=3000 vs 2000; condition held 120s of 300s")
    assert description == "Effect floor 0.05; missing ratio 0.000 (reference 0.000)."


@pytest.mark.parametrize("version", ["unversioned", ""])
def test_unversioned_series_are_rendered_as_all_versions(version: str) -> None:
    summary, _ = finding_text(_finding(version=version))
    assert summary.startswith("drift ctr all versions b: ") and "vunversioned" not in summary
    assert version_text(version) == "all versions" and version_text("7") == "v7"


def test_chi_square_names_new_categories() -> None:
    f = _finding(test="chi2", statistic=812.25, dof=3, psi=0.412, unseen="es", unseen_count=1, unseen_ratio=0.2)
    assert finding_text(f)[0] == (
        "drift ctr v2 b: chi2=812.2 dof=3 PSI=0.412; new categories es (20.0%), p(BH)=3e-09, n=3000 vs 2000"
    )


def test_missing_values_finding() -> None:
    f = _finding(
        test="missing", statistic=0.5, effect=0.5, missing_ratio=0.5, ref_missing_ratio=0.01, held_secs=0.0, floor=0.1
    )
    assert finding_text(f)[0] == "missing values ctr v2 b: missing 50.0% vs 1.0%; condition held 0s of 300s"


@pytest.mark.parametrize(
    ("facts", "reason"),
    [
        (
            {"insufficient": "too_few_samples", "n_cur": 12, "n_ref": 2000, "min_samples": 200},
            "12 current / 2000 reference values (need 200)",
        ),
        (
            {"insufficient": "collecting", "collected": 40, "target": 2000, "ref_version": "2"},
            "reference collecting 40/2000 events of version 2",
        ),
        ({"insufficient": "waiting_for_version", "ref_version": "3"}, "waiting for version 3's first events"),
        ({"insufficient": "absent_from_pin", "ref_version": "2"}, "feature absent from version 2's pinned reference"),
        ({"insufficient": "not_in_file", "path": "/ref/train.csv"}, "feature not in reference file /ref/train.csv"),
        ({"insufficient": "no_history"}, "no history yet for the rolling reference"),
        ({"insufficient": "no_traffic_last_week"}, "no traffic in the same hours last week yet"),
    ],
)
def test_insufficient_data_reasons(facts: dict[str, Any], reason: str) -> None:
    assert finding_text(_finding(**facts))[0] == f"drift ctr v2 b: insufficient data ({reason})"


def test_the_check_writes_facts_not_prose(tmp_path: Path, clock: FakeClock) -> None:
    ctx = make_ctx(
        tmp_path / "s.sqlite",
        clock,
        {
            "checks": {
                "drift": {
                    "enabled": True,
                    "method": "window",
                    "window_secs": 600,
                    "sustained_secs": 0,
                    "reference": {"mode": "pinned", "pinned_events": 500},
                }
            }
        },
    )
    check = drift_check(ctx)
    rng = np.random.default_rng(3)
    feed(check, clock, "ctr", "unversioned", normal_rows(rng, 100, ["a", "b"]), per_sec=20)
    early = check.evaluate(clock.now())
    assert {(f.facts["insufficient"], f.facts["collected"], f.facts["target"]) for f in early} == {
        ("collecting", 100, 500)
    }
    assert all(f.insufficient_data and f.facts["statistic"] is None for f in early)
    feed(check, clock, "ctr", "unversioned", normal_rows(rng, 400, ["a", "b"]), per_sec=20)
    clock.advance(600)
    feed(check, clock, "ctr", "unversioned", normal_rows(rng, 1000, ["a", "b"], loc={"b": 1.0}), per_sec=10)
    found = check.evaluate(clock.now())
    assert all(f.summary == "" and f.description == "" for f in early + found)
    b = next(f for f in found if f.labels["feature"] == "b" and f.labels["test"] == "ks")
    assert b.active and b.facts["test"] == "ks" and b.facts["method"] == "exact"
    assert b.facts["statistic"] == b.value and b.facts["q"] == b.p_value and b.facts["n_ref"] == 500
    assert b.facts["floor"] == 0.05 and b.facts["held_secs"] == 0.0 and b.facts["insufficient"] is None
    p_raw = b.facts["p_raw"]
    assert isinstance(p_raw, float) and p_raw <= b.facts["q"]  # type: ignore[operator]
    assert finding_text(b)[0].startswith("drift ctr all versions b: KS D=")


def test_alert_description_separates_the_finding_from_recent_changes() -> None:
    book_sink: list[dict[str, Any]] = []

    class Sink:
        def enqueue(self, notices: Any) -> None:
            book_sink.extend(dict(n) for n in notices)

    book = AlertBook(
        AlertingConfig.model_validate({"enabled": True}),
        registry=CollectorRegistry(),
        eval_interval_secs=15.0,
        sink=Sink(),
        runbook_base="rb",
        dashboard_base=None,
        sidecar_url="http://sidecar:9500",
    )
    book.on_findings([_finding()], 1_700_000_000.0)
    ann = book_sink[0]["annotations"]
    assert ann["description"] == "Effect floor 0.05; missing ratio 0.000 (reference 0.000). Recent changes: none."
    assert ann["summary"].startswith("[WARNING] drift ctr v2 b: KS D=0.2000 (asymp), p(BH)=3e-09")
