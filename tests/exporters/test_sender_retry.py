"""Found in review: the retry settings reach the Alertmanager exporter's policy field by field."""

from __future__ import annotations

from pathlib import Path

import httpx
from prometheus_client import CollectorRegistry

from exporters.alertmanager import AlertmanagerExporter
from exporters.config import AlertmanagerConfig
from exporters.sender import RetryPolicy
from sidecar.clock import FakeClock
from sidecar.store import Store


def test_alertmanager_retry_config_becomes_the_same_policy(tmp_path: Path) -> None:
    cfg = AlertmanagerConfig.model_validate(
        {
            "urls": ["http://am:9093"],
            "retry": {
                "initial_backoff_secs": 0.25,
                "max_backoff_secs": 7,
                "multiplier": 3,
                "jitter": 0.05,
                "max_elapsed_secs": 42,
            },
        }
    )
    am = AlertmanagerExporter(
        cfg, registry=CollectorRegistry(), clock=FakeClock(), store=Store(tmp_path / "s"), http=httpx.AsyncClient()
    )
    assert am.policy == RetryPolicy(
        initial_backoff_secs=0.25, max_backoff_secs=7, multiplier=3, jitter=0.05, max_elapsed_secs=42
    )
