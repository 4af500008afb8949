"""Admission of pushes, per endpoint, and the memory limiter.

Each push endpoint (``/v1/traces``, ``/v1/events``, ``/v1/changes``, ...) has budgets of its own, so one kind
of input can never take another's capacity:

- at most ``max_inflight`` requests in flight (429 + Retry-After above);
- at most ``max_inflight_bytes`` of request bodies being read or handled (429 + Retry-After above), counted as
  the body arrives (``reserve``, called by ``RequestGuard.read_body``) and released when the request ends.

The memory limiter (``memory_limit_bytes``, from ``server.memory_limit_mib``) does not refuse everything once
the process is over the limit. Memory that pushed data holds is bounded by the stores' own byte budgets
(``traces.store``); over the limit, the limiter first runs the *relief* hooks the big stores registered
(``on_memory_pressure``: the trace store evicts its oldest traces and holds its budget down, so it does not
refill into the same pressure) and hands freed memory back to the system (``malloc_trim``), at most once per
``relief_interval_secs``. Back under the limit, at most as often, each store may grow its budget back by half
the headroom left (``restore``), until it has its configured size again. While the process stays over the
limit (memory the stores cannot give back), each endpoint is cut to one request in flight (503 + Retry-After
beyond it): every endpoint still gets through, and the memory held by bodies in flight is at most one body per
endpoint. Every refusal is counted by endpoint
and reason in ``sidecar_http_refused_total`` (by the ``refuse`` callable the guard passes in).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import math
import os
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from fastapi import HTTPException
from prometheus_client import CollectorRegistry, Counter, Gauge

__all__ = ["Admission", "Refuse", "malloc_trim", "rss_bytes"]

Refuse = Callable[[str, str, int, str, "dict[str, str] | None"], HTTPException]


def rss_bytes() -> int:
    """Resident set size of this process (Linux /proc; 0 where unknown)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def malloc_trim() -> None:
    """Hand free heap pages back to the system (glibc); evicted strings otherwise keep RSS where it was."""
    with contextlib.suppress(OSError, AttributeError):  # not glibc
        ctypes.CDLL(None).malloc_trim(0)


@dataclass
class _Ticket:
    endpoint: str
    bytes: int = 0


# The admission the current request holds (set by ``admit`` for the request's task, read by ``reserve``).
_TICKET: ContextVar[_Ticket | None] = ContextVar("sidecar_admission_ticket", default=None)


class Admission:
    def __init__(
        self,
        registry: CollectorRegistry,
        refuse: Refuse,
        *,
        max_inflight: int,
        max_inflight_bytes: int,
        memory_limit_bytes: int | None = None,
        relief_interval_secs: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
        rss: Callable[[], int] = rss_bytes,
        trim: Callable[[], None] = malloc_trim,
        logger: logging.Logger | None = None,
    ) -> None:
        self.max_inflight = max_inflight
        self.max_inflight_bytes = max_inflight_bytes
        self.memory_limit_bytes = memory_limit_bytes
        self.relief_interval_secs = relief_interval_secs
        self._refuse = refuse
        self._clock = clock
        self._rss = rss
        self._trim = trim
        self._log = logger or logging.getLogger("sidecar.http")
        self._inflight: dict[str, int] = {}
        self._bytes: dict[str, int] = {}
        self._reliefs: list[tuple[str, Callable[[], int]]] = []
        self._restores: list[tuple[str, Callable[[int], bool]]] = []
        self._last_relief: float | None = None
        self._last_restore: float | None = None
        self._held_down = False  # a store's budget is below its configured size since a relief
        self._retry_memory = str(max(1, math.ceil(relief_interval_secs)))
        self._inflight_g = Gauge(
            "sidecar_http_inflight_requests", "Push requests being handled now.", registry=registry
        )
        self._bytes_g = Gauge(
            "sidecar_http_inflight_bytes",
            "Request body bytes of pushes in flight, by endpoint (at most server.max_inflight_bytes_mib each).",
            ["endpoint"],
            registry=registry,
        )
        self._pressure_g = Gauge(
            "sidecar_memory_pressure",
            "1 while the process is over server.memory_limit_mib (each push endpoint is cut to one request in "
            "flight), else 0.",
            registry=registry,
        )
        self._relief_runs = Counter(
            "sidecar_memory_reliefs",
            "Times the memory limiter asked the stores to evict (the process was over server.memory_limit_mib).",
            registry=registry,
        )
        self._relief_freed = Counter(
            "sidecar_memory_relief_freed_bytes",
            "Estimated bytes the stores evicted when asked by the memory limiter, by store.",
            ["store"],
            registry=registry,
        )
        self._relief_errors = Counter(
            "sidecar_memory_relief_errors", "Relief hooks that raised (logged), by store.", ["store"], registry=registry
        )

    def on_memory_pressure(
        self, store: str, relieve: Callable[[], int], restore: Callable[[int], bool] | None = None
    ) -> None:
        """Register a store's relief: called over the memory limit, ``relieve`` evicts, holds the store's budget
        down and returns the bytes it freed; called under the limit, ``restore(headroom)`` may grow the budget
        back by part of the headroom and returns whether it is still held down."""
        self._reliefs.append((store, relieve))
        if restore is not None:
            self._restores.append((store, restore))
        self._relief_freed.labels(store)

    def inflight(self, endpoint: str) -> int:
        return self._inflight.get(endpoint, 0)

    def inflight_bytes(self, endpoint: str) -> int:
        return self._bytes.get(endpoint, 0)

    def over_memory_limit(self) -> bool:
        """Whether the process is over the limit, after running the stores' relief if it is due."""
        limit = self.memory_limit_bytes
        if limit is None:
            return False
        rss = self._rss()
        if rss > limit:
            now = self._clock()
            if self._last_relief is None or now - self._last_relief >= self.relief_interval_secs:
                self._last_relief = now
                self._relieve(rss, limit)
                rss = self._rss()
        elif self._held_down:
            now = self._clock()
            if self._last_restore is None or now - self._last_restore >= self.relief_interval_secs:
                self._last_restore = now
                self._restore(limit - rss)
        over = rss > limit
        self._pressure_g.set(1 if over else 0)
        return over

    def _restore(self, headroom: int) -> None:
        held = False
        for store, restore in self._restores:
            try:
                held = restore(headroom) or held
            except Exception:
                self._relief_errors.labels(store).inc()
                self._log.exception("memory restore of %s failed", store)
        self._held_down = held
        if not held:
            self._log.info("memory under the limit again: every store has its configured budget back")

    def _relieve(self, rss: int, limit: int) -> None:
        self._relief_runs.inc()
        self._held_down = bool(self._restores)
        freed = 0
        for store, relieve in self._reliefs:
            try:
                n = relieve()
            except Exception:
                self._relief_errors.labels(store).inc()
                self._log.exception("memory relief of %s failed", store)
                continue
            freed += n
            self._relief_freed.labels(store).inc(n)
        self._trim()
        self._log.warning(
            "memory %.0f MiB over the limit of %.0f MiB: stores evicted ~%.1f MiB; now %.0f MiB",
            rss / 1048576,
            limit / 1048576,
            freed / 1048576,
            self._rss() / 1048576,
        )

    @asynccontextmanager
    async def admit(self, endpoint: str) -> AsyncIterator[None]:
        """Hold one of ``endpoint``'s in-flight slots for the request; refuse when its budgets are spent."""
        count = self._inflight.get(endpoint, 0)
        if count >= self.max_inflight:
            raise self._refuse(
                endpoint, "overloaded", 429, "too many requests in flight; retry later", {"Retry-After": "1"}
            )
        if self.over_memory_limit() and count:
            raise self._refuse(
                endpoint,
                "memory_limit",
                503,
                "the sidecar is over its memory limit: one request at a time on this endpoint; retry later",
                {"Retry-After": self._retry_memory},
            )
        ticket = _Ticket(endpoint)
        token = _TICKET.set(ticket)
        self._inflight[endpoint] = count + 1
        self._inflight_g.inc()
        try:
            yield
        finally:
            _TICKET.reset(token)
            self._inflight[endpoint] -= 1
            self._inflight_g.dec()
            if ticket.bytes:
                self._bytes[endpoint] -= ticket.bytes
                self._bytes_g.labels(endpoint).set(self._bytes[endpoint])

    def reserve(self, endpoint: str, n: int) -> None:
        """Count ``n`` more body bytes against the endpoint's in-flight budget (429 when it is spent); a no-op
        outside ``admit``. A request alone on its endpoint is never refused here (the body limit bounds it)."""
        ticket = _TICKET.get()
        if ticket is None or ticket.endpoint != endpoint or n <= 0:
            return
        held = self._bytes.get(endpoint, 0)
        if held + n > self.max_inflight_bytes and held > ticket.bytes:
            raise self._refuse(
                endpoint,
                "inflight_bytes",
                429,
                f"request bodies in flight on this endpoint are over {self.max_inflight_bytes} bytes; retry later",
                {"Retry-After": "1"},
            )
        ticket.bytes += n
        self._bytes[endpoint] = held + n
        self._bytes_g.labels(endpoint).set(held + n)
