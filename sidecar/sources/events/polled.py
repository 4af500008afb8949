"""What the file-based event sources share: read in a worker thread on an interval, publish on the bus, count."""

from __future__ import annotations

import asyncio
import logging

from prometheus_client import CollectorRegistry

from sidecar.clock import Clock
from sidecar.component import Bus
from sidecar.model import Batch, Event, EventColumns
from sidecar.polled import Polled, TickerFactory
from sidecar.probe_marker import split_probe_events
from sidecar.sources.events.metrics import EventsMetrics
from sidecar.store import Store

__all__ = ["PolledEventSource"]


class PolledEventSource(Polled):
    """Subclasses set ``name`` and ``source`` and implement ``read_once()``; file I/O runs off the event loop."""

    name: str
    source: str

    def __init__(
        self,
        *,
        interval_secs: float,
        metrics: EventsMetrics,
        bus: Bus,
        clock: Clock,
        store: Store,
        registry: CollectorRegistry,
        logger: logging.Logger | None = None,
        ticker: TickerFactory | None = None,
    ) -> None:
        super().__init__(interval_secs=interval_secs, registry=registry, logger=logger, ticker=ticker)
        self.m = metrics
        self.bus = bus
        self.clock = clock
        self.store = store

    def read_once(self) -> list[Event] | list[EventColumns]:
        raise NotImplementedError

    def publish(self, read: list[Event] | list[EventColumns]) -> None:
        """Events one by one (an ``events`` batch), or columns of the common shape (``event_columns``: no
        request id, so no probe among them)."""
        if read and isinstance(read[0], EventColumns):
            blocks = tuple(read)
            self.bus.publish(Batch("event_columns", self.source, blocks, received_at=self.clock.now()))
            self.m.received.labels(self.source).inc(sum(b.n for b in blocks))
            return
        events, probes = split_probe_events(read)  # type: ignore[arg-type]  # the model probe's own traffic
        if probes:
            self.m.rejected.labels(self.source, "probe").inc(probes)
        if events:
            self.bus.publish(
                Batch(kind="events", source=self.source, items=tuple(events), received_at=self.clock.now())
            )
            self.m.received.labels(self.source).inc(len(events))

    def poll_once(self) -> int:
        """Read and publish synchronously (tests); returns the number of events published."""
        read = self.read_once()
        self.publish(read)
        return sum(r.n if isinstance(r, EventColumns) else 1 for r in read)

    async def tick_once(self) -> None:
        self.publish(await asyncio.to_thread(self.read_once))

    def _close(self) -> None:
        """Release what the source holds open (called once at shutdown)."""

    async def shutdown(self) -> None:
        await super().shutdown()
        self._close()
