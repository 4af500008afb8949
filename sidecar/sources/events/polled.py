"""What the file-based event sources share: read in a worker thread on an interval, publish on the bus, count."""

from __future__ import annotations

import asyncio
import logging

from sidecar.component import Context, Readiness
from sidecar.model import Batch, Event
from sidecar.periodic import Periodic
from sidecar.sources.events.metrics import EventsMetrics

__all__ = ["PolledEventSource"]


class PolledEventSource:
    """Subclasses set ``name`` and ``source`` and implement ``read_once()``; file I/O runs off the event loop."""

    name: str
    source: str
    role = "source"

    def __init__(self, ctx: Context, metrics: EventsMetrics, interval_secs: float) -> None:
        self.ctx = ctx
        self.m = metrics
        self._log: logging.Logger = ctx.logger.getChild(self.name)
        self._periodic = Periodic(self.name, self._poll, interval_secs, on_error=self._poll_failed)

    def read_once(self) -> list[Event]:
        raise NotImplementedError

    def publish(self, events: list[Event]) -> None:
        if events:
            self.ctx.bus.publish(
                Batch(kind="events", source=self.source, items=tuple(events), received_at=self.ctx.clock.now())
            )
            self.m.received.labels(self.source).inc(len(events))

    def poll_once(self) -> int:
        """Read and publish synchronously (tests); returns the number of events published."""
        events = self.read_once()
        self.publish(events)
        return len(events)

    async def _poll(self) -> None:
        self.publish(await asyncio.to_thread(self.read_once))

    def _poll_failed(self, exc: Exception) -> None:
        self.m.errors.labels(self.source, "internal").inc()
        self._log.error("%s failed; retrying", self.name, exc_info=exc)

    def _close(self) -> None:
        """Release what the source holds open (called once at shutdown)."""

    async def start(self) -> None:
        self._periodic.start()

    async def shutdown(self) -> None:
        await self._periodic.stop()
        self._close()

    def readiness(self) -> Readiness | None:
        return None

    def routes(self) -> None:
        return None
