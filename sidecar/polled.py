"""The base of every polled component (scrapes, polls, file tails, expiry sweeps): it owns the ticker, the
lifecycle, readiness and the crash counter, so a component writes only its ``poll_once()`` (the OpenTelemetry
Collector's scraper helper).

- The ticker runs ``tick_once()``: by default it calls ``poll_once()`` (or the ``job=`` the component names) and
  awaits it when it is a coroutine; a
  component whose poll blocks (file I/O) overrides ``tick_once`` to run it in a worker thread.
- The ticker is injected: ``ticker=`` takes a factory; the default runs ``Periodic`` on the event loop, and
  tests pass ``ManualTicker`` and call ``tick()``, so no test runs a real timer.
- A run that raises is counted in ``sidecar_component_crashes_total{component}`` and logged with its
  traceback, and the loop goes on: after start-up, components fail open (expected failures, such as a target
  answering 500, are the component's own to count by reason; a crash is what it did not expect).
- ``start()`` returns at once; ``shutdown()`` is idempotent and safe without ``start()``.
"""

from __future__ import annotations

import inspect
import logging
import weakref
from collections.abc import Awaitable, Callable
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter

from sidecar.component import Passive, Role
from sidecar.periodic import Periodic

__all__ = ["ManualTicker", "Polled", "Ticker", "TickerFactory", "periodic_ticker"]

Job = Callable[[], Awaitable[object]]


class Ticker(Protocol):
    def start(self) -> None: ...

    async def stop(self) -> None: ...


# (name, job, interval_secs, on_error, delay_first) -> a ticker that runs job every interval once started.
TickerFactory = Callable[[str, Job, float, Callable[[Exception], None], bool], Ticker]


def periodic_ticker(
    name: str, job: Job, interval_secs: float, on_error: Callable[[Exception], None], delay_first: bool
) -> Ticker:
    return Periodic(name, job, interval_secs, on_error=on_error, delay_first=delay_first)


class ManualTicker:
    """A ticker for tests: nothing runs until ``await tick()``, which runs the job once as the loop would
    (an exception goes to ``on_error``, never to the caller)."""

    def __init__(
        self, name: str, job: Job, interval_secs: float, on_error: Callable[[Exception], None], delay_first: bool
    ) -> None:
        self.name, self.interval_secs = name, interval_secs
        self._job, self._on_error = job, on_error
        self.running = False
        self.ticks = 0

    def start(self) -> None:
        self.running = True

    async def stop(self) -> None:
        self.running = False

    async def tick(self) -> None:
        self.ticks += 1
        try:
            await self._job()
        except Exception as exc:
            self._on_error(exc)


_CRASHES: weakref.WeakKeyDictionary[CollectorRegistry, Counter] = weakref.WeakKeyDictionary()


def _crash_counter(registry: CollectorRegistry) -> Counter:
    counter = _CRASHES.get(registry)
    if counter is None:
        counter = _CRASHES[registry] = Counter(
            "sidecar_component_crashes",
            "Runs of a polled component that raised something it did not expect (the loop goes on).",
            ["component"],
            registry=registry,
        )
    return counter


class Polled(Passive):
    """Subclass, set ``name`` (and ``role`` when it is not a source), call ``super().__init__`` and write
    ``poll_once``; override ``readiness``/``routes`` only where the component has a say."""

    name: str
    role: Role = Role.SOURCE

    def __init__(
        self,
        *,
        interval_secs: float,
        registry: CollectorRegistry,
        logger: logging.Logger | None = None,
        ticker: TickerFactory | None = None,
        delay_first: bool = False,
        ticker_name: str | None = None,
        job: Callable[[], object] | None = None,
    ) -> None:
        self.log = logger or logging.getLogger(f"sidecar.{self.name}")
        self._job = job or self.poll_once
        self._crashes = _crash_counter(registry).labels(self.name)
        self.ticker = (ticker or periodic_ticker)(
            ticker_name or self.name, self.tick_once, interval_secs, self._crashed, delay_first
        )

    def poll_once(self) -> object:
        """One poll (sync or async); tests call it directly."""
        raise NotImplementedError

    async def tick_once(self) -> None:
        result = self._job()
        if inspect.isawaitable(result):
            await result

    def _crashed(self, exc: Exception) -> None:
        self._crashes.inc()
        self.log.error("%s: a run failed unexpectedly", self.name, exc_info=exc)

    async def start(self) -> None:
        self.ticker.start()

    async def shutdown(self) -> None:
        await self.ticker.stop()
