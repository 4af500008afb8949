"""Builds a trace-file source the way wiring does, for tests that drive it directly."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from sidecar.clock import Clock
from sidecar.component import Bus
from sidecar.sources.events.config import TritonTraceConfig
from sidecar.sources.events.metrics import EventsMetrics
from sidecar.sources.trace_files import TraceFileSource, merge
from sidecar.sources.trace_files.config import TraceFileConfig
from sidecar.sources.trace_files.metrics import TraceFileMetrics
from sidecar.sources.trace_files.records import Scan
from sidecar.store import Store


def span_source(
    cfg: TraceFileConfig, bus: Bus, registry: CollectorRegistry, clock: Clock, store: Store | None = None
) -> TraceFileSource:
    return TraceFileSource(
        merge(cfg, None), bus=bus, metrics=TraceFileMetrics(registry), clock=clock, store=store or Store(":memory:")
    )


def tensor_source(
    cfg: TritonTraceConfig,
    bus: Bus,
    registry: CollectorRegistry,
    clock: Clock,
    store: Store,
    events_metrics: EventsMetrics | None = None,
) -> TraceFileSource:
    return TraceFileSource(
        merge(None, cfg),
        bus=bus,
        metrics=TraceFileMetrics(registry),
        clock=clock,
        store=store,
        events_metrics=events_metrics or EventsMetrics(registry),
    )


def scan_figures(s: Scan) -> tuple[int, bool, int, int, int]:
    """What a scan says but its records (two ways of scanning the same bytes must agree on all of it)."""
    return (s.consumed, s.closed, s.held, s.damaged, s.not_objects)
