"""The trace hub: the trace state every span batch on the bus ends in (store and stage histograms).

All ingest runs on the event loop thread (the file tailer's files are small and read there too), so the store
and the histograms need no lock against each other; the store still locks for readers in other threads.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from prometheus_client import CollectorRegistry, Counter

from sidecar.clock import Clock
from sidecar.component import Readiness, Role
from sidecar.model import Batch, Span, SpanRequests
from sidecar.polled import TickerFactory, periodic_ticker
from sidecar.processors.stages import StageHistograms
from sidecar.records import Record, from_span
from sidecar.state.trace_config import TracesConfig
from sidecar.state.traces import TraceStore

__all__ = ["TraceHub"]


class TraceHub:
    name = "traces"
    role = Role.SINK

    def __init__(
        self,
        cfg: TracesConfig,
        *,
        registry: CollectorRegistry,
        clock: Clock,
        logger: logging.Logger | None = None,
        ticker: TickerFactory | None = None,
    ) -> None:
        self.cfg = cfg
        self.clock = clock
        self.log = logger or logging.getLogger("sidecar.traces")
        self.store = TraceStore(
            registry,
            max_traces=cfg.max_traces,
            max_age_secs=cfg.max_age_secs,
            max_spans_per_trace=cfg.max_spans_per_trace,
            slow_threshold_ns=int(cfg.slow_threshold_ms * 1e6),
            max_bytes=cfg.store.max_bytes,
            max_trace_bytes=cfg.store.max_trace_bytes,
        )
        self.stages = StageHistograms(
            registry, buckets=cfg.stage_buckets_secs, max_model_versions=cfg.max_model_versions
        )
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
        self._periodic = (ticker or periodic_ticker)(
            "traces-expire", self._expire, min(60.0, cfg.max_age_secs / 10), self._expiry_failed, True
        )

    def ingest(self, spans: Sequence[Span], source: str) -> None:
        """Take frozen ``Span`` objects (trace files, tests)."""
        if spans:
            self.ingest_records([from_span(s) for s in spans], source)

    def on_spans(self, batch: Batch) -> None:
        """The bus subscriber: every span source's batches (records) end here."""
        self.ingest_records(batch.items, batch.source)

    def on_span_requests(self, batch: Batch) -> None:
        """The bus subscriber of ``span_requests`` (a trace file's requests whole): stored as requests whose spans
        are built when read, paired for the stage histograms from their event times. A batch small enough to be
        observed span by span is taken as its span records."""
        items: Sequence[SpanRequests] = batch.items
        n = sum(i.span_count for i in items)
        if not self.stages.batched(n):
            self.ingest_records([r for i in items for r in i.spans()], batch.source)
            return
        now = self.clock.now()
        with self.stages.observing(now, n):
            spans = self.store.add_requests(
                items, now, self.stages.on_stored, self.stages.on_trios, self.stages.on_requests
            )
        if spans:
            self._ingested.labels(batch.source).inc(spans)

    def ingest_records(self, records: Sequence[Record], source: str) -> None:
        """Take span records: store, stage histograms, counts."""
        if not records:
            return
        now = self.clock.now()
        with self.stages.observing(now, len(records)):
            self.store.add(records, now, self.stages.on_stored, self.stages.on_trios)
        self._taken(records, source, now)

    def _taken(self, records: Sequence[Record], source: str, now: float) -> None:
        if records:
            self._ingested.labels(source).inc(len(records))

    def relieve(self) -> int:
        """The memory limiter's relief (``Admission.on_memory_pressure``): evict the oldest traces down to
        ``traces.store.pressure_keep_fraction`` of the bytes held and keep the store's budget there until
        ``restore``; returns the estimated bytes freed."""
        freed = self.store.shed(self.cfg.store.pressure_keep_fraction)
        if freed:
            self.log.warning(
                "over the memory limit: evicted %.1f MiB of traces (%.1f MiB left)",
                freed / 1048576,
                self.store.nbytes / 1048576,
            )
        return freed

    def restore(self, headroom: int) -> bool:
        """The memory limiter's all-clear (``Admission.on_memory_pressure``): the process is ``headroom`` bytes
        under its limit, so a lowered store budget may grow back by half of it; returns whether still lowered."""
        return self.store.restore(headroom)

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
