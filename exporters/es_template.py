"""The Elasticsearch index template and ILM policy the audit exporter installs on start.

Audit events go to one index per UTC day of the event (``<index>-YYYY.MM.DD``), chosen from the event's own
time, so a replay of an event lands in the index that already holds it and ``create`` answers 409: no
duplicate, whatever the outage. The ILM policy deletes a day's index once it is ``retention_days`` old.

Mappings are explicit (``dynamic: false`` at the top: an unknown field is kept in ``_source`` but not
indexed, so a new label cannot blow up the mapping). Identifiers people filter on exactly (kind, model,
version, trace and request ids, outcome, alert name) are ``keyword``; free prose people search words in
(an alert's summary and description, a change's text, Triton's failure reason) is ``text``.
"""

from __future__ import annotations

import time
from typing import Any

__all__ = ["MAPPINGS", "index_for", "lifecycle_policy", "template_body"]

_KEYWORDS = (
    "id",
    "kind",
    "model",
    "version",
    "trace_id",
    "request_id",
    "outcome",
    "code",
    "rule",
    "bucket",
    "user",
    "who",
    "source",
    "alertname",
    "severity",
    "status",
    "fingerprint",
    "state",
    "alertmanager",
)
_TEXTS = ("what", "summary", "description", "reason", "link")

MAPPINGS: dict[str, Any] = {
    "dynamic": False,
    "properties": {
        "at": {"type": "date", "format": "epoch_second"},
        **{k: {"type": "keyword", "ignore_above": 256} for k in _KEYWORDS},
        **{k: {"type": "text"} for k in _TEXTS},
        "latency_ms": {"type": "double"},
        # Alert delivery and re-send rows: how many tries, which re-send window, when the alert became active.
        "attempts": {"type": "integer"},
        "window": {"type": "long"},
        "window_secs": {"type": "double"},
        "active_at": {"type": "date", "format": "epoch_second"},
        "starts_at": {"type": "date"},
        "ends_at": {"type": "date"},
        "stages_ms": {"type": "object", "dynamic": True},
        "labels": {"type": "flattened"},
        "annotations": {"type": "flattened"},
    },
}


def index_for(prefix: str, at: float) -> str:
    """The daily index of an event at Unix time ``at`` (UTC)."""
    return f"{prefix}-{time.strftime('%Y.%m.%d', time.gmtime(at))}"


def lifecycle_policy(retention_days: int) -> dict[str, Any]:
    return {
        "phases": {
            "hot": {"min_age": "0ms", "actions": {}},
            "delete": {"min_age": f"{retention_days}d", "actions": {"delete": {}}},
        }
    }


def template_body(prefix: str, policy_name: str, shards: int, replicas: int) -> dict[str, Any]:
    return {
        "index_patterns": [f"{prefix}-*"],
        "priority": 200,
        "template": {
            "settings": {
                "index.lifecycle.name": policy_name,
                "number_of_shards": shards,
                "number_of_replicas": replicas,
            },
            "mappings": MAPPINGS,
        },
        "_meta": {"managed_by": "triton-sidecar"},
    }
