"""One story on every screen, the other kinds: a business alert pending then firing, a canary verdict, an
output-sanity finding and a diagnosis read the same (state, words, since, figures) in ``/v1/alerts``, what
Alertmanager got, ``/alerts``, ``/``, ``/metrics`` and, for the diagnosis, the webhook body."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from onestory import HOOK, T0, Sidecar, alert_of, row_with, same_everywhere
from waiting import wait_until

from sidecar.wiring.diagnose import build as diagnose

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


def test_a_business_alert_pending_then_firing_reads_the_same_everywhere(verdicts: Sidecar) -> None:
    s = verdicts.screens()
    alert = alert_of(s, "WerHigh", version="2")
    same_everywhere(s, alert, "pending")
    value = s.metric("sidecar_business_value", check="wer_high", model="ctr", version="2")
    assert value is not None and math.isclose(value, 0.12, rel_tol=1e-9)
    assert "WER" in alert["annotations"]["summary"] and f"{value:.3g}" in alert["annotations"]["summary"]
    assert s.metric("sidecar_business_condition", check="wer_high", model="ctr", version="2", severity="warning") == 1
    verdicts.evaluate_at(T0 + 180)
    s = verdicts.screens()
    firing = alert_of(s, "WerHigh", version="2")
    same_everywhere(s, firing, "firing")
    assert (
        firing["startsAt"] == alert["startsAt"] and firing["annotations"]["summary"] == alert["annotations"]["summary"]
    )
    assert not [a for a in s.api if a["labels"]["alertname"] == "WerHigh" and a["labels"]["version"] == "1"]


def test_a_canary_verdict_reads_the_same_everywhere(verdicts: Sidecar) -> None:
    s = verdicts.screens()
    alert = alert_of(s, "CanaryVersionWorse", candidate="2")
    same_everywhere(s, alert, "firing")
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
    row = row_with(s.status.by_id("verdicts").find_all("tr"), "canary", "ctr 2 vs 1")
    assert row.find(cls="badge").text() == "worse"
    assert sorted(row.find_all("td")[-1].text().split(", ")) == worse


def test_an_output_sanity_finding_reads_the_same_everywhere(verdicts: Sidecar) -> None:
    s = verdicts.screens()
    alert = alert_of(s, "ModelOutputSuspect", version="2", test="all_zero")
    same_everywhere(s, alert, "firing")
    ratio = s.metric("sidecar_output_sanity_ratio", model="ctr", version="2", test="all_zero")
    assert ratio == 1.0
    assert "200 of 200 (100.0%)" in alert["annotations"]["summary"]
    row = row_with(s.status.by_id("verdicts").find_all("tr"), "output sanity", "ctr 2")
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
        # The webhook's own sender delivers it (started with the app): wait for that call, not a clock.
        assert wait_until(lambda: side.webhook, 10)
        s = side.screens()
        alert = alert_of(s, "Diagnosis", diagnosis="metrics_404")
        same_everywhere(s, alert, "firing")
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
