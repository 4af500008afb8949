"""The three classic business checks, as a config snippet (``checks.business``) the demo and tests use.

- ``ctr_mean_down``: predicted-CTR mean over the last 24 hours down more than 15% against the 7 days before it
  (model drift).
- ``fraud_score_p95_up``: fraud-score p95 over the last hour up more than 30% vs the day before (an attack).
- ``wer_high``: real-time word error rate above 8% for 5 minutes (audio quality).
"""

from __future__ import annotations

from typing import Any

__all__ = ["EXAMPLE_BUSINESS_CHECKS"]

EXAMPLE_BUSINESS_CHECKS: dict[str, Any] = {
    "enabled": True,
    "checks": {
        "ctr_mean_down": {
            "display_name": "CTR mean",
            "model": "ctr",
            "field": "score",
            "aggregate": "mean",
            "window_secs": 86_400,
            "bucket_secs": 300,
            "baseline_secs": 7 * 86_400,
            "baseline_bucket_secs": 3_600,
            "compare": "relative",
            "direction": "down",
            "threshold": 0.15,
            "for_secs": 900,
            "severity": "high",
            "team": "growth",
            "runbook": "ctr-mean-down.md",
        },
        "fraud_score_p95_up": {
            "display_name": "fraud-score p95",
            "model": "fraud",
            "field": "score",
            "aggregate": "quantile",
            "quantile": 0.95,
            "window_secs": 3_600,
            "bucket_secs": 60,
            "baseline_secs": 86_400,
            "baseline_bucket_secs": 3_600,
            "compare": "relative",
            "direction": "up",
            "threshold": 0.30,
            "for_secs": 300,
            "severity": "critical",
            "team": "risk",
            "runbook": "fraud-score-p95-up.md",
        },
        "wer_high": {
            "display_name": "WER",
            "model": "asr",
            "field": "fields.wer",
            "aggregate": "mean",
            "window_secs": 300,
            "bucket_secs": 10,
            "compare": "absolute",
            "direction": "up",
            "threshold": 0.08,
            "for_secs": 300,
            "severity": "high",
            "team": "speech",
            "min_events": 20,
            "runbook": "wer-high.md",
        },
    },
}
