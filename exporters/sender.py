"""The shared sender: a bounded queue drained by one worker that retries with backoff and jitter.

The retry policy is the OpenTelemetry Collector's ``retry_sender``: exponential backoff with random jitter,
the server's throttle hint (Retry-After) honoured, and a maximum elapsed time after which a batch is given up.
Every item that does not get through moves a counter: ``queue_full`` (refused at the door), ``permanent`` (the
backend refused it as sent) or ``gave_up`` (still failing after ``max_elapsed_secs``).

``send`` returns the items of the batch that must be retried (an empty list when all went through), so a
backend with per-item results (the Elasticsearch bulk API) retries only what failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge

from sidecar.clock import Clock
from sidecar.errors import PermanentExportError, RetryableExportError

__all__ = ["Backoff", "ExporterMetrics", "RetryPolicy", "Sender", "retry_after_secs"]

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    initial_backoff_secs: float = 0.5
    max_backoff_secs: float = 30.0
    multiplier: float = 2.0
    jitter: float = 0.2
    max_elapsed_secs: float = 300.0


class Backoff:
    """Exponential backoff with jitter; a Retry-After hint replaces the computed delay."""

    def __init__(self, policy: RetryPolicy, rng: random.Random | None = None) -> None:
        self.policy = policy
        self.rng = rng or random.Random()
        self._next = policy.initial_backoff_secs

    def reset(self) -> None:
        self._next = self.policy.initial_backoff_secs

    def next_delay(self, retry_after_s: float | None = None) -> float:
        p = self.policy
        if retry_after_s is not None and retry_after_s >= 0:
            delay = retry_after_s  # the server knows its own load; the give-up time still bounds it
        else:
            base = self._next
            delay = base * (1 + self.rng.uniform(-p.jitter, p.jitter))
        self._next = min(self._next * p.multiplier, p.max_backoff_secs)
        return max(0.0, delay)


class ExporterMetrics:
    """Self-telemetry shared by every queued exporter (created once per registry)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.sent = Counter(
            "sidecar_exporter_sent_items", "Items delivered, by exporter.", ["exporter"], registry=registry
        )
        self.dropped = Counter(
            "sidecar_exporter_dropped_items",
            "Items never delivered, by exporter and reason (queue_full, permanent, gave_up).",
            ["exporter", "reason"],
            registry=registry,
        )
        self.retries = Counter(
            "sidecar_exporter_retries",
            "Delivery attempts that failed and were retried.",
            ["exporter"],
            registry=registry,
        )
        self.queued = Gauge(
            "sidecar_exporter_queue_items",
            "Items waiting in an exporter's queue.",
            ["exporter"],
            registry=registry,
        )


class Sender(Generic[T]):
    def __init__(
        self,
        name: str,
        send: Callable[[list[T]], Awaitable[Sequence[T]]],
        *,
        policy: RetryPolicy,
        max_queue: int,
        max_batch: int,
        metrics: ExporterMetrics,
        clock: Clock,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rng: random.Random | None = None,
        logger: logging.Logger | None = None,
    ) -> None:
        self.name = name
        self._send = send
        self.policy = policy
        self.max_queue = max_queue
        self.max_batch = max_batch
        self.m = metrics
        self.clock = clock
        self._sleep = sleep
        self._rng = rng
        self.log = logger or logging.getLogger(f"sidecar.exporter.{name}")
        self._queue: deque[T] = deque()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.m.queued.labels(name).set(0)

    def __len__(self) -> int:
        return len(self._queue)

    def submit(self, item: T) -> bool:
        """Queue an item; False (and counted) when the queue is full. Safe from any thread."""
        if len(self._queue) >= self.max_queue:
            self.m.dropped.labels(self.name, "queue_full").inc()
            return False
        self._queue.append(item)
        self.m.queued.labels(self.name).set(len(self._queue))
        if self._loop is not None:
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._wake.set)
        return True

    async def send_batch(self, batch: list[T]) -> bool:
        """Deliver one batch, retrying as the policy says; True when every item went through."""
        backoff = Backoff(self.policy, self._rng)
        started = self.clock.monotonic()
        pending = batch
        while True:
            retry_after: float | None = None
            try:
                left = list(await self._send(pending))
            except PermanentExportError as exc:
                self.m.dropped.labels(self.name, "permanent").inc(len(pending))
                self.log.warning("%s refused %d items: %s", self.name, len(pending), exc)
                return False
            except RetryableExportError as exc:
                left, retry_after = pending, exc.retry_after_s
                self.log.debug("%s: retryable failure: %s", self.name, exc)
            except Exception as exc:  # a transport error is worth another try
                left = pending
                self.log.debug("%s: send failed: %r", self.name, exc)
            self.m.sent.labels(self.name).inc(len(pending) - len(left))
            if not left:
                return True
            delay = backoff.next_delay(retry_after)
            if self.clock.monotonic() - started + delay > self.policy.max_elapsed_secs:
                self.m.dropped.labels(self.name, "gave_up").inc(len(left))
                self.log.warning(
                    "%s gave up on %d items after %.0fs",
                    self.name,
                    len(left),
                    self.clock.monotonic() - started,
                )
                return False
            self.m.retries.labels(self.name).inc()
            pending = left
            await self._sleep(delay)

    async def flush(self) -> None:
        """Send everything queued now (used by the worker, at shutdown and by tests)."""
        while self._queue:
            batch = [self._queue.popleft() for _ in range(min(self.max_batch, len(self._queue)))]
            self.m.queued.labels(self.name).set(len(self._queue))
            await self.send_batch(batch)

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            await self.flush()

    async def start(self) -> None:
        if self._task is None:
            self._loop = asyncio.get_running_loop()
            self._task = asyncio.create_task(self._run(), name=f"sender-{self.name}")
            if self._queue:
                self._wake.set()

    async def shutdown(self, deadline_secs: float = 5.0) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None
        if self._queue:
            try:
                await asyncio.wait_for(self.flush(), deadline_secs)
            except (TimeoutError, Exception):
                n = len(self._queue)
                self._queue.clear()
                self.m.dropped.labels(self.name, "gave_up").inc(n)


def retry_after_secs(value: str | None, now: float) -> float | None:
    """Parse a Retry-After header (seconds or an HTTP date) into seconds from now; None when absent or bad."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        from email.utils import parsedate_to_datetime

        return max(0.0, parsedate_to_datetime(value).timestamp() - now)
    except (TypeError, ValueError, IndexError):
        return None
