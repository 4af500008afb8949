"""The one retry loop: full jitter, Retry-After, permanent vs retryable answers, bounded attempts, counted drops."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from email.utils import format_datetime

import httpx
import pytest
from prometheus_client import CollectorRegistry

from exporters.sender import Backoff, MemoryQueue, RetryPolicy, Sender, check_response
from exporters.telemetry import ExportTelemetry
from sidecar.clock import FakeClock

T0 = 1_700_000_000.0


def _sample(reg: CollectorRegistry, name: str, **labels: str) -> float | None:
    return reg.get_sample_value(name, labels)


def _sender(
    answers: list[httpx.Response | Exception],
    reg: CollectorRegistry,
    clock: FakeClock,
    slept: list[float],
    **policy: object,
) -> tuple[Sender[int], list[list[int]]]:
    calls: list[list[int]] = []

    async def send(batch: list[int]) -> list[int]:
        calls.append(list(batch))
        a = answers.pop(0) if answers else httpx.Response(200)
        if isinstance(a, Exception):
            raise a
        check_response(a, clock.now(), "test backend")
        return []

    async def sleep(s: float) -> None:
        slept.append(s)
        clock.advance(s)

    s: Sender[int] = Sender(
        "t",
        send,
        policy=RetryPolicy(**policy),
        queue=MemoryQueue(100),  # type: ignore[arg-type]
        max_batch=10,
        stats=ExportTelemetry.of(reg).exporter("t"),
        clock=clock,
        sleep=sleep,
        rng=random.Random(3),
    )
    return s, calls


def test_full_jitter_draws_each_delay_between_zero_and_the_capped_backoff() -> None:
    b = Backoff(RetryPolicy(initial_backoff_secs=1, max_backoff_secs=8, multiplier=2), random.Random(7))
    delays = [b.next_delay() for _ in range(200)]
    caps = [min(2.0**i, 8) for i in range(200)]
    assert all(0 <= d <= c for d, c in zip(delays, caps, strict=True))
    # Full jitter, not +-20%: some delays fall well below half their cap.
    assert any(d < c / 2 for d, c in zip(delays[3:], caps[3:], strict=True))


async def test_retry_after_as_http_date_sets_the_wait() -> None:
    reg, clock, slept = CollectorRegistry(), FakeClock(T0), []
    when = format_datetime(datetime.fromtimestamp(T0 + 12, UTC), usegmt=True)
    s, calls = _sender([httpx.Response(503, headers={"Retry-After": when})], reg, clock, slept)
    s.submit(1)
    await s.flush()
    assert slept == [pytest.approx(12.0)] and len(calls) == 2
    assert _sample(reg, "sidecar_export_sent_total", exporter="t") == 1
    assert _sample(reg, "sidecar_export_failed_total", exporter="t", reason="http_5xx") == 1


@pytest.mark.parametrize(
    ("status", "retried"),
    [(400, False), (401, False), (404, False), (408, True), (429, True), (500, True), (503, True)],
)
async def test_4xx_is_permanent_except_408_and_429(status: int, retried: bool) -> None:
    reg, clock, slept = CollectorRegistry(), FakeClock(T0), []
    s, calls = _sender([httpx.Response(status)], reg, clock, slept)
    s.submit(1)
    await s.flush()
    assert len(calls) == (2 if retried else 1)
    assert _sample(reg, "sidecar_export_sent_total", exporter="t") == (1 if retried else 0)
    assert _sample(reg, "sidecar_export_dropped_total", exporter="t", reason="permanent") == (None if retried else 1)


async def test_transport_errors_are_retried_and_labelled() -> None:
    reg, clock, slept = CollectorRegistry(), FakeClock(T0), []
    s, calls = _sender([httpx.ConnectError("refused"), httpx.ReadTimeout("slow")], reg, clock, slept)
    s.submit(1)
    await s.flush()
    assert len(calls) == 3 and len(slept) == 2
    assert _sample(reg, "sidecar_export_failed_total", exporter="t", reason="connect") == 1
    assert _sample(reg, "sidecar_export_failed_total", exporter="t", reason="timeout") == 1


async def test_max_attempts_bounds_the_retries_then_drops_with_a_reason() -> None:
    reg, clock, slept = CollectorRegistry(), FakeClock(T0), []
    s, calls = _sender([httpx.Response(503)] * 10, reg, clock, slept, max_attempts=3)
    s.submit_many([1, 2])
    await s.flush()
    assert len(calls) == 3 and len(slept) == 2 and len(s) == 0
    assert _sample(reg, "sidecar_export_dropped_total", exporter="t", reason="gave_up") == 2
    assert _sample(reg, "sidecar_export_queue_items", exporter="t") == 0


async def test_shutdown_counts_what_is_left_as_shutdown() -> None:
    reg, clock, slept = CollectorRegistry(), FakeClock(T0), []
    s, _calls = _sender([], reg, clock, slept)
    s.submit_many([1, 2, 3])
    assert _sample(reg, "sidecar_export_queue_items", exporter="t") == 3
    await s.shutdown(deadline_secs=0)
    assert _sample(reg, "sidecar_export_dropped_total", exporter="t", reason="shutdown") == 3
    assert _sample(reg, "sidecar_export_received_total", exporter="t") == 3


def test_every_exporter_on_a_registry_shares_one_set_of_families() -> None:
    reg = CollectorRegistry()
    a, b = ExportTelemetry.of(reg).exporter("a"), ExportTelemetry.of(reg).exporter("b")
    a.received(2)
    b.dropped("queue_full")
    assert _sample(reg, "sidecar_export_received_total", exporter="a") == 2
    assert _sample(reg, "sidecar_export_dropped_total", exporter="b", reason="queue_full") == 1


async def test_shutdown_during_a_request_lets_it_finish_and_never_sends_the_batch_twice() -> None:
    import asyncio

    reg, clock = CollectorRegistry(), FakeClock(T0)
    calls: list[list[int]] = []
    in_flight, release = asyncio.Event(), asyncio.Event()

    async def send(batch: list[int]) -> list[int]:
        calls.append(list(batch))
        in_flight.set()
        await release.wait()  # the backend has taken it; its answer is still on the way
        return []

    s: Sender[int] = Sender(
        "t",
        send,
        policy=RetryPolicy(),
        queue=MemoryQueue(10),
        max_batch=10,
        stats=ExportTelemetry.of(reg).exporter("t"),
        clock=clock,
    )
    await s.start()
    s.submit_many([1, 2])
    await in_flight.wait()
    stopping = asyncio.ensure_future(s.shutdown(deadline_secs=5))
    await asyncio.sleep(0)
    release.set()
    await stopping
    assert calls == [[1, 2]]
    assert _sample(reg, "sidecar_export_sent_total", exporter="t") == 2
    assert _sample(reg, "sidecar_export_dropped_total", exporter="t", reason="shutdown") is None


ANSWERS = [200, 200, 400, 408, 429, 500, 503, "connect", "timeout", "partial"]


@pytest.mark.parametrize("seed", range(25))
async def test_every_item_handed_in_is_sent_dropped_or_still_queued(seed: int) -> None:
    """received == sent + dropped (every reason) + queued, whatever the backend answers."""
    rng = random.Random(seed)
    reg, clock = CollectorRegistry(), FakeClock(T0)

    async def send(batch: list[int]) -> list[int]:
        a = rng.choice(ANSWERS)
        if a == "connect":
            raise httpx.ConnectError("refused")
        if a == "timeout":
            raise httpx.ReadTimeout("slow")
        if a == "partial":
            return batch[: rng.randrange(len(batch) + 1)]
        check_response(httpx.Response(int(a)), clock.now(), "t")
        return []

    async def sleep(s: float) -> None:
        clock.advance(s)

    s: Sender[int] = Sender(
        "t",
        send,
        policy=RetryPolicy(max_elapsed_secs=rng.choice([1.0, 30.0]), max_attempts=rng.choice([None, 2, 5])),
        queue=MemoryQueue(rng.randrange(1, 40)),
        max_batch=rng.randrange(1, 8),
        stats=ExportTelemetry.of(reg).exporter("t"),
        clock=clock,
        sleep=sleep,
        rng=rng,
    )
    for _ in range(rng.randrange(1, 6)):
        s.submit_many(list(range(rng.randrange(0, 30))))
        if rng.random() < 0.5:
            await s.deliver_head()
    if rng.random() < 0.5:
        await s.flush()
    else:
        await s.shutdown(deadline_secs=0)

    def total(name: str) -> float:
        return sum(
            m.value
            for f in reg.collect()
            if f.name == name
            for m in f.samples
            if m.name == f"{name}_total" or m.name == name
        )

    received = total("sidecar_export_received")
    assert received == reg.get_sample_value("sidecar_export_received_total", {"exporter": "t"})
    assert received == total("sidecar_export_sent") + total("sidecar_export_dropped") + len(s)
    assert len(s) == 0  # flush and shutdown both leave nothing behind in memory
