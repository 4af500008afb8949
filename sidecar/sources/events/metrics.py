"""The events sources' self-telemetry, created once per registry and shared by the three sources."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter

__all__ = ["EventsMetrics"]


class EventsMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.received = Counter(
            "sidecar_events_received", "Events accepted and published, by source.", ["source"], registry=registry
        )
        self.rejected = Counter(
            "sidecar_events_rejected",
            "Events or lines refused, by source and reason.",
            ["source", "reason"],
            registry=registry,
        )
        self.errors = Counter(
            "sidecar_events_source_errors",
            "Read failures of file sources, by source and reason.",
            ["source", "reason"],
            registry=registry,
        )
