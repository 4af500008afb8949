"""The config the demo's sidecar runs with (the embedded defaults plus what points at the demo's Triton)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from sidecar.demo.actions_demo import DEMO_CANARY, demo_actions, demo_probes
from sidecar.demo.business_demo import DEMO_ALERTING, DEMO_BUSINESS_CHECKS
from sidecar.demo.drift_demo import DEMO_DRIFT_CONFIG
from sidecar.demo.edge_nginx import edge_config
from sidecar.demo.goodput_demo import DEMO_GOODPUT, DEMO_TOKENS

__all__ = ["demo_config"]


def demo_config(
    triton_http: str,
    triton_metrics: str,
    port: int,
    workdir: Path,
    alertmanager_url: str | None = None,
    edge_log: Path | None = None,
    *,
    act: bool = False,
) -> dict[str, Any]:
    """The config the demo runs with: the embedded defaults plus what points at the demo's Triton, and, when an
    nginx stands in front of it (``edge_log``: its JSON access log), the edge source tailing that log. ``act``:
    the actions layer carries its plans out instead of only showing them (dry-run)."""
    alerting = copy.deepcopy(DEMO_ALERTING)
    alerting["alertmanager"]["urls"] = [alertmanager_url] if alertmanager_url else []
    raw: dict[str, Any] = {
        "server": {"host": "127.0.0.1", "port": port, "public_url": f"http://127.0.0.1:{port}"},
        "store": {"path": str(workdir / "sidecar-state.sqlite")},
        "triton": {"metrics_url": triton_metrics, "http_url": triton_http, "interval_secs": 2.0},
        # The fraud model is slow for about 1% of requests (250 ms): those traces, and the ones queued behind
        # them, are what the "slow" view lists.
        "traces": {
            "enabled": True,
            "slow_threshold_ms": 200.0,
            "failure_join": {"metrics_url": triton_metrics, "interval_secs": 5.0},
        },
        "checks": {
            "eval_interval_secs": 5.0,
            "drift": copy.deepcopy(DEMO_DRIFT_CONFIG),
            "business": copy.deepcopy(DEMO_BUSINESS_CHECKS),
            "goodput": copy.deepcopy(DEMO_GOODPUT),
            "tokens": copy.deepcopy(DEMO_TOKENS),
            "canary": copy.deepcopy(DEMO_CANARY),
        },
        "alerting": alerting,
        "probes": demo_probes(),
        "actions": demo_actions(act),
    }
    if edge_log is not None:
        raw["edge"] = edge_config(edge_log)
    return raw
