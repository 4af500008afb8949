"""Injected time: components never call ``time.time()`` themselves, so tests can move time by hand."""

from __future__ import annotations

import threading
import time
from typing import Protocol

__all__ = ["Clock", "FakeClock", "SystemClock"]


class Clock(Protocol):
    def now(self) -> float:
        """Wall time in Unix seconds."""

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (for durations and intervals)."""


class SystemClock:
    def now(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()


class FakeClock:
    """A clock tests advance by hand; wall and monotonic time move together."""

    def __init__(self, start: float = 1_700_000_000.0, monotonic: float = 1000.0) -> None:
        """``monotonic``: where the monotonic reading starts (a test replaying another host's monotonic times,
        such as Triton's trace files in seconds since its boot, starts it just after them)."""
        self._now = start
        self._mono = monotonic
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self._now

    def monotonic(self) -> float:
        with self._lock:
            return self._mono

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("a clock never goes back")
        with self._lock:
            self._now += seconds
            self._mono += seconds

    def set_wall(self, now: float) -> None:
        """Jump wall time (NTP step) without moving the monotonic clock."""
        with self._lock:
            self._now = now
