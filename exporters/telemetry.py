"""The self-telemetry every exporter shares: one set of families, labelled by exporter.

    sidecar_export_received_total{exporter}          items handed to the exporter
    sidecar_export_sent_total{exporter}              items the backend accepted
    sidecar_export_dropped_total{exporter,reason}    items that will never be delivered
    sidecar_export_failed_total{exporter,reason}     delivery attempts that failed (retried or not)
    sidecar_export_queue_items{exporter}             items waiting now

Drop reasons: ``queue_full`` (refused at the door), ``permanent`` (the backend refused it as sent),
``gave_up`` (retries or time exhausted), ``shutdown`` (still queued when the sidecar stopped). Failure
reasons: ``connect``, ``timeout``, ``http_429``, ``http_5xx``, ``http_4xx``, ``bad_answer``, ``error``.

The families are registered once per ``CollectorRegistry``; ``ExportTelemetry.of(registry)`` hands every
exporter built on that registry the same instance, so two exporters never collide on a family name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

__all__ = ["ExportTelemetry", "ExporterStats"]

# The instance lives on the registry it registered its families in (per Service, never module-wide), so
# every exporter built on one registry shares it and two registries never share anything.
_ATTR = "_sidecar_export_telemetry"


class _QueueGauge(Collector):
    """Queue depth read at scrape time, summed over every queue an exporter registered (one per target)."""

    def __init__(self) -> None:
        self.depths: dict[str, list[Callable[[], int]]] = {}

    def collect(self) -> Iterator[GaugeMetricFamily]:
        g = GaugeMetricFamily(
            "sidecar_export_queue_items", "Items waiting in an exporter's queue.", labels=["exporter"]
        )
        for name, fns in sorted(self.depths.items()):
            g.add_metric([name], float(sum(f() for f in fns)))
        yield g


class ExportTelemetry:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.received = Counter(
            "sidecar_export_received", "Items handed to an exporter.", ["exporter"], registry=registry
        )
        self.sent = Counter(
            "sidecar_export_sent", "Items the exporter's backend accepted.", ["exporter"], registry=registry
        )
        self.dropped = Counter(
            "sidecar_export_dropped",
            "Items never delivered, by reason (queue_full, permanent, gave_up, shutdown).",
            ["exporter", "reason"],
            registry=registry,
        )
        self.failed = Counter(
            "sidecar_export_failed",
            "Delivery attempts that failed, by reason (connect, timeout, http_429, http_5xx, http_4xx, "
            "bad_answer, error).",
            ["exporter", "reason"],
            registry=registry,
        )
        self._queues = _QueueGauge()
        registry.register(self._queues)

    @classmethod
    def of(cls, registry: CollectorRegistry) -> ExportTelemetry:
        t = getattr(registry, _ATTR, None)
        if not isinstance(t, ExportTelemetry):
            t = cls(registry)
            setattr(registry, _ATTR, t)
        return t

    def exporter(self, name: str) -> ExporterStats:
        return ExporterStats(self, name)


class ExporterStats:
    """The families bound to one exporter's label value."""

    def __init__(self, t: ExportTelemetry, name: str) -> None:
        self.t = t
        self.name = name
        self._received = t.received.labels(name)
        self._sent = t.sent.labels(name)

    def received(self, n: int = 1) -> None:
        if n:
            self._received.inc(n)

    def sent(self, n: int = 1) -> None:
        if n:
            self._sent.inc(n)

    def dropped(self, reason: str, n: int = 1) -> None:
        if n:
            self.t.dropped.labels(self.name, reason).inc(n)

    def failed(self, reason: str) -> None:
        self.t.failed.labels(self.name, reason).inc()

    def track_queue(self, depth: Callable[[], int]) -> None:
        self.t._queues.depths.setdefault(self.name, []).append(depth)
