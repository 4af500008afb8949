"""Builds a trace-file source the way wiring does, for tests that drive it directly."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from sidecar.clock import Clock, FakeClock
from sidecar.component import Bus
from sidecar.model import Batch
from sidecar.records import Record
from sidecar.sources.events.config import TritonTraceConfig
from sidecar.sources.events.metrics import EventsMetrics
from sidecar.sources.trace_files import TraceFileSource, merge
from sidecar.sources.trace_files.config import TraceFileConfig
from sidecar.sources.trace_files.metrics import TraceFileMetrics
from sidecar.sources.trace_files.records import Scan
from sidecar.sources.trace_files.settings import TraceFileSettings
from sidecar.store import Store
from sidecar.wiring.span_subs import subscribe_spans


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


def published_span_batches(tmp: Path, data: bytes, **settings: Any) -> list[tuple[Record, ...]]:
    """The span batches a trace-file source publishes for ``data`` (one file, read until a poll takes nothing),
    as the bus carries them; ``settings`` are more ``TraceFileSettings`` fields (``max_read_bytes``)."""
    reg = CollectorRegistry()
    bus = Bus(reg)
    got: list[Batch] = []
    subscribe_spans(bus, "capture", got.append)
    folder = tmp / "files"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    (folder / "trace.json.0").write_bytes(data)
    s = TraceFileSettings(path=str(folder / "trace.json"), settle_secs=0.0, **settings)
    clock = FakeClock(start=1_800_000_000.0, monotonic=8400.0)  # just after the recorded files' (since boot) times
    src = TraceFileSource(s, bus=bus, metrics=TraceFileMetrics(reg), clock=clock, store=Store(":memory:"))
    for _ in range(1000):
        if not src.poll_once():
            break
    return [b.items for b in got]
