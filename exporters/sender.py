"""THE retry loop of every exporter: a bounded queue drained by one worker that retries with backoff.

The policy follows the OpenTelemetry Collector's ``retry_sender`` and the AWS "full jitter" advice:
exponential backoff where each delay is drawn at random below the computed one (``jitter`` = 1, the default,
is full jitter: uniform in [0, backoff]), the server's throttle hint (Retry-After, seconds or an HTTP date)
honoured, and a bounded number of attempts (``max_attempts``) and time (``max_elapsed_secs``) after which the
batch is dropped with a reason.

What is retried: transport errors, timeouts, 408, 429 and 5xx. Any other 4xx is permanent: the backend will
never take the batch as sent, so it is dropped at once (counted, logged). An exporter may narrow the
retryable statuses (OTLP retries only 429, 502, 503 and 504, as its specification says).

The queue is pluggable (``SendQueue``): ``MemoryQueue`` for exporters whose items may be lost on a crash,
the Alertmanager's store-backed outbox for notices that must survive one. A durable queue is never given up
on: its items stay until delivered, refused or replaced, retried at the capped backoff.

``send`` returns the items of the batch that must be retried (an empty list when all went through), so a
backend with per-item results (the Elasticsearch bulk API) retries only what failed. Every item and attempt
is counted through ``exporters.telemetry``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import re
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, Generic, TypeVar

import httpx

from exporters.queues import MemoryQueue, SendQueue
from exporters.telemetry import ExporterStats
from sidecar.clock import Clock
from sidecar.errors import DeliveryError, PermanentExportError, RefusedError, RetryableExportError
from sidecar.redact import mask_url

__all__ = [
    "Backoff",
    "DeliveryError",
    "MemoryQueue",
    "Outcome",
    "Partial",
    "RefusedError",
    "RetryPolicy",
    "SendQueue",
    "Sender",
    "check_response",
    "retry_after_secs",
    "scrub",
]

T = TypeVar("T")
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")


def scrub(text: str) -> str:
    """``text`` with every URL in it masked: transport errors may quote the URL they failed on."""
    return _URL.sub(lambda m: mask_url(m.group(0)), text)


RETRYABLE_STATUS = frozenset({408, 429})


@dataclass(frozen=True)
class RetryPolicy:
    initial_backoff_secs: float = 0.5
    max_backoff_secs: float = 30.0
    multiplier: float = 2.0
    jitter: float = 1.0
    max_elapsed_secs: float = 300.0
    max_attempts: int | None = None


class Backoff:
    """Exponential backoff; each delay is ``base * (1 - jitter * U[0,1))``; Retry-After replaces it."""

    def __init__(self, policy: RetryPolicy, rng: random.Random | None = None) -> None:
        self.policy = policy
        self.rng = rng or random.Random()
        self._next = policy.initial_backoff_secs

    def reset(self) -> None:
        self._next = self.policy.initial_backoff_secs

    def next_delay(self, retry_after_s: float | None = None) -> float:
        p = self.policy
        if retry_after_s is not None and retry_after_s >= 0:
            delay = retry_after_s  # the server knows its own load; the give-up limits still bound it
        else:
            delay = self._next * (1 - p.jitter * self.rng.random())
        self._next = min(self._next * p.multiplier, p.max_backoff_secs)
        return max(0.0, delay)


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
        return max(0.0, parsedate_to_datetime(value).timestamp() - now)
    except (TypeError, ValueError, IndexError):
        return None


def check_response(resp: httpx.Response, now: float, what: str, retryable: Collection[int] | None = None) -> None:
    """Raise for a response that is not 2xx: ``DeliveryError`` when worth retrying, else permanent."""
    code = resp.status_code
    if code < 300:
        return
    retry = (code in RETRYABLE_STATUS or code >= 500) if retryable is None else code in retryable
    if retry:
        reason = "http_5xx" if code >= 500 else f"http_{code}"
        raise DeliveryError(reason, f"{what} answered {code}", retry_after_secs(resp.headers.get("retry-after"), now))
    raise RefusedError("http_5xx" if code >= 500 else "http_4xx", f"{what} answered {code}: {resp.text[:300]}")


@dataclass(frozen=True)
class Partial(Generic[T]):
    """What ``send`` returns when the backend answered per item: the items to retry, and how many it refused
    for good (dropped as ``permanent``; the rest of the batch counts as sent)."""

    retry: Sequence[T]
    refused: int = 0


@dataclass(frozen=True)
class Outcome:
    kind: str  # empty | sent | rejected | retry
    retry_after: float | None = None


class Sender(Generic[T]):
    def __init__(
        self,
        name: str,
        send: Callable[[list[T]], Awaitable[Sequence[T] | Partial[T]]],
        *,
        policy: RetryPolicy,
        queue: SendQueue[T],
        max_batch: int,
        stats: ExporterStats,
        clock: Clock,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rng: random.Random | None = None,
        logger: logging.Logger | None = None,
        idle_wake_secs: float | None = None,
        close: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.name = name
        self._send = send
        self.policy = policy
        self.queue = queue
        self.max_batch = max_batch
        self.stats = stats
        self.clock = clock
        self._sleep = sleep
        self._rng = rng
        # A durable queue can be filled by another process run (a restart); waking now and then finds it.
        self.idle_wake_secs = idle_wake_secs
        self.log = logger or logging.getLogger(f"sidecar.exporter.{name}")
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._down = False
        self._close = close  # releases what ``send`` holds (a TLS client of its own), after the last flush
        self._inflight: tuple[asyncio.Future[Sequence[T] | Partial[T]], list[T]] | None = None
        stats.track_queue(lambda: len(self.queue))

    def __len__(self) -> int:
        return len(self.queue)

    @property
    def down(self) -> bool:
        """True from a failed attempt until the next delivery."""
        return self._down

    def submit_many(self, items: Sequence[Any]) -> int:
        """Queue items; returns how many were accepted (the rest are counted as queue_full). Any thread."""
        self.stats.received(len(items))
        refused = self.queue.put(items)
        self.stats.dropped("queue_full", refused)
        self.notify()
        return len(items) - refused

    def submit(self, item: T) -> bool:
        return self.submit_many([item]) == 1

    def notify(self) -> None:
        if self._loop is not None:
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._wake.set)

    async def attempt(self) -> Outcome:
        """One request for the head batch, no waiting; settles the queue and counts the outcome."""
        batch = self.queue.head(self.max_batch)
        if not batch:
            return Outcome("empty")
        # Shielded: a shutdown that cancels the worker mid-request lets the request finish and settles its
        # answer, so a batch the backend already took is not sent a second time by the final flush.
        fut = asyncio.ensure_future(self._send(batch))
        self._inflight = (fut, batch)
        try:
            await asyncio.shield(fut)
        except asyncio.CancelledError:
            if fut.done():
                self._inflight = None
                self._settle(batch, fut)
            raise
        except Exception:  # the future holds it; _settle reads and counts it
            pass
        self._inflight = None
        return self._settle(batch, fut)

    def _settle(self, batch: list[T], fut: asyncio.Future[Sequence[T] | Partial[T]]) -> Outcome:
        if fut.cancelled():
            return Outcome("retry")
        exc = fut.exception()
        if isinstance(exc, PermanentExportError):
            self.queue.settle(batch, [])
            self.stats.failed(getattr(exc, "reason", "http_4xx"))
            self.stats.dropped("permanent", len(batch))
            self.log.warning("%s refused %d items: %s", self.name, len(batch), scrub(str(exc)))
            return Outcome("rejected")
        if isinstance(exc, RetryableExportError):
            return self._failed(getattr(exc, "reason", "error"), str(exc), exc.retry_after_s)
        if isinstance(exc, httpx.TimeoutException):
            return self._failed("timeout", repr(exc), None)
        if isinstance(exc, httpx.HTTPError):
            return self._failed("connect", repr(exc), None)
        if exc is not None:  # an encoding bug must not stop delivery of the rest
            self.log.error("%s: send failed: %s", self.name, scrub(repr(exc)))
            return self._failed("error", repr(exc), None)
        result = fut.result()
        refused = 0
        if isinstance(result, Partial):
            left, refused = list(result.retry), result.refused
        else:
            left = list(result)
        self.queue.settle(batch, left)
        self.stats.sent(len(batch) - len(left) - refused)
        self.stats.dropped("permanent", refused)
        if left:
            self.stats.failed("partial")
            return Outcome("retry")
        if self._down:
            self.log.info("%s is reachable again", self.name)
            self._down = False
        return Outcome("sent")

    def _failed(self, reason: str, why: str, retry_after: float | None) -> Outcome:
        self.stats.failed(reason)
        if not self._down:
            # Once per outage, not once per retry: a backend down for an hour must not flood the log.
            self.log.warning("%s unavailable (%s); retrying", self.name, scrub(why))
            self._down = True
        return Outcome("retry", retry_after)

    async def deliver_head(self) -> str:
        """Deliver the head batch, retrying as the policy says: empty, sent, rejected or gave_up."""
        p = self.policy
        backoff = Backoff(p, self._rng)
        started = self.clock.monotonic()
        attempts = 0
        while True:
            out = await self.attempt()
            if out.kind != "retry":
                return out.kind
            attempts += 1
            delay = backoff.next_delay(out.retry_after)
            elapsed = self.clock.monotonic() - started
            if not self.queue.durable and (
                elapsed + delay > p.max_elapsed_secs or (p.max_attempts is not None and attempts >= p.max_attempts)
            ):
                batch = self.queue.head(self.max_batch)
                self.queue.settle(batch, [])
                self.stats.dropped("gave_up", len(batch))
                self.log.warning(
                    "%s gave up on %d items after %d attempts in %.0fs", self.name, len(batch), attempts, elapsed
                )
                return "gave_up"
            if self.queue.durable:
                # A durable queue is never given up on, so a Retry-After of a day would silence it for a day:
                # the hint is honoured up to the time an in-memory queue would have retried for.
                delay = min(delay, p.max_elapsed_secs)
            await self._sleep(delay)

    async def flush(self) -> None:
        """Send everything queued now, with retries (never returns early for a durable queue: use drain_now)."""
        while len(self.queue):
            await self.deliver_head()

    async def drain_now(self) -> str:
        """Send batches without waiting until the queue is empty or the backend asks to retry later."""
        kind = "empty"
        for _ in range(100_000):
            kind = (await self.attempt()).kind
            if kind in ("empty", "retry"):
                break
        return kind

    async def _run(self) -> None:
        while True:
            self._wake.clear()  # before looking, so a submit while we deliver is never missed
            if await self.deliver_head() != "empty":
                continue
            # asyncio.wait, not wait_for: on Python 3.11 wait_for can swallow a cancel that races the event,
            # which would leave this loop running after shutdown.
            waiter = asyncio.ensure_future(self._wake.wait())
            try:
                await asyncio.wait({waiter}, timeout=self.idle_wake_secs)
            finally:
                waiter.cancel()

    async def start(self) -> None:
        if self._task is None:
            self._loop = asyncio.get_running_loop()
            self._task = asyncio.create_task(self._run(), name=f"sender-{self.name}")

    async def shutdown(self, deadline_secs: float = 5.0) -> None:
        try:
            await self._stop(deadline_secs)
        finally:
            if self._close is not None:
                await self._close()

    async def _stop(self, deadline_secs: float) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._inflight is not None:
            fut, batch = self._inflight
            self._inflight = None
            await asyncio.wait({fut}, timeout=deadline_secs)
            if fut.done():
                self._settle(batch, fut)
            else:
                fut.cancel()
        if not len(self.queue):
            return
        with contextlib.suppress(TimeoutError, Exception):
            await asyncio.wait_for(self.drain_now() if self.queue.durable else self.flush(), deadline_secs)
        if not self.queue.durable:  # a durable queue keeps the rest for the next start
            self.stats.dropped("shutdown", self.queue.clear())
