"""The edge sources' self-telemetry, created once per registry and shared by the HTTP intake and the tailers."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter

__all__ = ["EdgeSourceMetrics"]


class EdgeSourceMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.received = Counter(
            "sidecar_edge_lines_received",
            "Edge log lines accepted, by source (http, file).",
            ["source"],
            registry=registry,
        )
        self.rejected = Counter(
            "sidecar_edge_lines_rejected",
            "Edge log lines refused, by source and reason (not_json, invalid, line_too_long, too_many).",
            ["source", "reason"],
            registry=registry,
        )
        self.errors = Counter(
            "sidecar_edge_source_errors",
            "Read failures of edge log files, by reason (stat, read, truncated, state).",
            ["source", "reason"],
            registry=registry,
        )
