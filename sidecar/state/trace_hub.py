"""The trace hub: where every span source hands its spans (store, stage histograms, bus, forwarder).

All ingest runs on the event loop thread (the file tailer's files are small and read there too), so the store
and the histograms need no lock against each other; the store still locks for readers in other threads.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter

from sidecar.clock import Clock
from sidecar.component import Bus, Readiness
from sidecar.model import Batch, Span
from sidecar.periodic import Periodic
from sidecar.processors.stages import StageHistograms
from sidecar.records import Record, from_span, to_span
from sidecar.sources.otlp.decode import DecodeResult, decode_json_doc, decode_protobuf, load_json
from sidecar.state.trace_config import TracesConfig
from sidecar.state.traces import TraceStore

__all__ = ["SpanSink", "TraceHub"]


class SpanSink(Protocol):
    def offer(self, spans: Sequence[Span | Record]) -> None:
        """Take spans (frozen ``Span`` objects or span records) without ever blocking (drop and count when
        full); records are turned into ``Span`` objects by the sink, off the receiving path."""


class TraceHub:
    name = "traces"
    role = "sink"

    def __init__(
        self,
        cfg: TracesConfig,
        registry: CollectorRegistry,
        clock: Clock,
        bus: Bus | None = None,
        logger: logging.Logger | None = None,
    ) -> None:
        self.cfg = cfg
        self.clock = clock
        self.bus = bus
        self.log = logger or logging.getLogger("sidecar.traces")
        self.store = TraceStore(
            registry,
            max_traces=cfg.max_traces,
            max_age_secs=cfg.max_age_secs,
            max_spans_per_trace=cfg.max_spans_per_trace,
            slow_threshold_ns=int(cfg.slow_threshold_ms * 1e6),
        )
        self.stages = StageHistograms(
            registry, buckets=cfg.stage_buckets_secs, max_model_versions=cfg.max_model_versions
        )
        self.sinks: list[SpanSink] = []
        self._ingested = Counter(
            "sidecar_traces_spans_ingested",
            "Spans taken into the trace store, by source.",
            ["source"],
            registry=registry,
        )
        self._expiry_errors = Counter(
            "sidecar_traces_expiry_errors",
            "Runs of the trace store's age expiry that failed (logged; the next run tries again).",
            registry=registry,
        )
        self._periodic = Periodic(
            "traces-expire",
            self._expire,
            min(60.0, cfg.max_age_secs / 10),
            on_error=self._expiry_failed,
            delay_first=True,
        )

    def ingest(self, spans: Sequence[Span], source: str) -> None:
        """Take frozen ``Span`` objects (trace files, tests)."""
        if spans:
            self.ingest_records([from_span(s) for s in spans], source)

    def ingest_otlp(self, body: bytes, as_json: bool) -> DecodeResult:
        """Decode an OTLP body and take its spans; raises ``ParseError`` when the body does not decode."""
        result = decode_json_doc(load_json(body)) if as_json else decode_protobuf(body)
        self.ingest_records(result.records, "otlp")
        return result

    def ingest_records(self, records: Sequence[Record], source: str) -> None:
        """Take span records (decoded by the Python path, trace files, tests): store, stage histograms,
        sinks, bus."""
        if not records:
            return
        now = self.clock.now()
        with self.stages.observing(now):
            self.store.add(records, now, self.stages.on_stored)
        self._taken(records, source, now)

    def _taken(self, records: Sequence[Record], source: str, now: float) -> None:
        if not records:
            return
        self._ingested.labels(source).inc(len(records))
        for sink in self.sinks:
            sink.offer(records)
        # Frozen Span objects are built for the bus only when someone listens: building them costs more than
        # the rest of ingest together.
        if self.bus is not None and self.cfg.publish_spans and self.bus.subscribers("spans"):
            items = tuple(to_span(r) for r in records)
            self.bus.publish(Batch(kind="spans", source=source, items=items, received_at=now))

    async def start(self) -> None:
        # Age eviction also happens on ingest; this loop covers a sidecar that stopped receiving.
        self._periodic.start()

    async def _expire(self) -> None:
        self.store.expire(self.clock.now())

    def _expiry_failed(self, exc: Exception) -> None:
        self._expiry_errors.inc()
        self.log.error("trace expiry failed", exc_info=exc)

    async def shutdown(self) -> None:
        await self._periodic.stop()

    def readiness(self) -> Readiness | None:
        return None

    def routes(self) -> None:
        return None
