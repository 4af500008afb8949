"""Tails one edge access log (JSON Lines) and hands each read's records to the edge sinks (processor, purges)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from prometheus_client import CollectorRegistry

from sidecar.clock import Clock
from sidecar.polled import Polled, TickerFactory
from sidecar.processors.edge_record import EdgeRecord, EdgeSink
from sidecar.sources.edge.config import EdgeFileConfig, EdgeSourceConfig
from sidecar.sources.edge.lines import parse_lines
from sidecar.sources.edge.metrics import EdgeSourceMetrics
from sidecar.sources.edge.parse import EdgeParser
from sidecar.sources.edge.tail import LineTail
from sidecar.store import Store

__all__ = ["EdgeTailer"]

SOURCE = "file"


class EdgeTailer(Polled):
    def __init__(
        self,
        cfg: EdgeFileConfig,
        *,
        source_cfg: EdgeSourceConfig,
        metrics: EdgeSourceMetrics,
        sinks: Sequence[EdgeSink],
        clock: Clock,
        store: Store,
        registry: CollectorRegistry,
        logger: logging.Logger | None = None,
        ticker: TickerFactory | None = None,
        index: int = 0,
    ) -> None:
        self.name = f"edge_file_{index}"
        super().__init__(interval_secs=cfg.poll_interval_secs, registry=registry, logger=logger, ticker=ticker)
        self.cfg = cfg
        self.m = metrics
        self.sinks = tuple(sinks)
        self.clock = clock
        self.parser = EdgeParser(source_cfg, node=cfg.node)
        self.tail = LineTail(
            cfg.path,
            store=store,
            namespace="edge.file",
            max_line_bytes=cfg.max_line_bytes,
            max_read_bytes=cfg.max_read_bytes,
            start_at_end=cfg.start_at_end,
            count=self._count,
        )
        self._line_no = 0

    def _count(self, reason: str) -> None:
        if reason == "line_too_long":
            self.m.rejected.labels(SOURCE, reason).inc()
        else:
            self.m.errors.labels(SOURCE, reason).inc()

    def read_once(self) -> list[EdgeRecord]:
        """Read and parse what is new (blocking file I/O: the poll loop runs it in a thread)."""
        lines = self.tail.read()
        got = parse_lines(self.parser, lines, self.clock.now())
        first = self._line_no + 1
        self._line_no += len(lines)
        if got.not_json:
            self.m.rejected.labels(SOURCE, "not_json").inc(got.not_json)
        if got.invalid:
            self.m.rejected.labels(SOURCE, "invalid").inc(len(got.invalid))
            if self.log.isEnabledFor(logging.DEBUG):
                for i, exc in got.invalid:
                    self.log.debug("rejected line %d: %s", first + i, exc)
        return got.records

    def publish(self, records: list[EdgeRecord]) -> None:
        if records:
            for sink in self.sinks:
                sink.observe(records)
            self.m.received.labels(SOURCE).inc(len(records))

    def poll_once(self) -> int:
        """Read and hand over synchronously (tests); returns the number of records."""
        records = self.read_once()
        self.publish(records)
        return len(records)

    async def tick_once(self) -> None:
        self.publish(await asyncio.to_thread(self.read_once))

    async def shutdown(self) -> None:
        await super().shutdown()
        self.tail.close()
