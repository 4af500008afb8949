"""The demo's defences that act: a model probe on each model that answers a plain request, the canary verdict
on ``fraud`` v1 against v2, and the actions layer, in dry-run unless ``sidecar demo --act``.

- ``probes``: ``ctr`` v1 and v2 and ``fraud`` v1 and v2, every 10 s, over Triton's HTTP API (tritonclient): a
  known input, a score in [0, 1] of shape [1, 1]. ``chat`` is not probed: it is decoupled (a stream), and the
  probe sends one plain inference request.
- ``checks.canary``: scaled to the demo's minutes (a 5-minute window, 100 values a side, a P99 decided with 2
  values above it on each side: 200 values) and held for 30 s. ``ctr`` gets no comparison
  (``exclude_models: [ctr]``): its two versions are two different models on purpose (for the version-level SLIs
  and per-version drift), not a rollout.
- ``actions``: a worse canary verdict on ``fraud`` reverts it to its baseline (load with a ``version_policy``
  override); a failing probe reloads the model. Dry-run (the default) records the plan (alert ActionPlanned,
  the plan on ``/`` and in the audit) and sends nothing; ``--act`` carries it out, which needs Triton in explicit
  model-control mode (the demo starts it so then).
"""

from __future__ import annotations

from typing import Any

__all__ = ["DEMO_CANARY", "demo_actions", "demo_probes"]

_SCORE = [{"name": "score", "shape": [1, 1], "datatype": "FP32", "min": 0.0, "max": 1.0}]

DEMO_CANARY: dict[str, Any] = {
    "enabled": True,
    "window_secs": 300.0,
    "min_samples": 100,
    "min_tail_samples": 2,
    "pairs": {"fraud": {"baseline": "1", "candidate": "2"}},
    "exclude_models": ["ctr"],
    "for_secs": 30.0,
}


def demo_probes() -> dict[str, Any]:
    return {
        "enabled": True,
        "interval_secs": 10.0,
        "models": {
            "ctr": {
                "versions": ["1", "2"],
                "inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [0.5, 0.5, 0.5, 0.5]}],
                "outputs": _SCORE,
            },
            "fraud": {
                "versions": ["1", "2"],
                "inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 3], "data": [0.5, 0.5, 0.5]}],
                "outputs": _SCORE,
            },
        },
    }


def demo_actions(act: bool) -> dict[str, Any]:
    return {
        "enabled": True,
        "dry_run": not act,
        "cooldown_secs": 300.0,
        "models": {
            "fraud": {"on_canary_worse": ["revert"], "on_probe_failure": ["reload"]},
            "ctr": {"on_probe_failure": ["reload"]},
        },
    }
