"""The demo's time: a ticker the scenario waits on, and the scenario steps printed as they happen.

``LoopTicker`` is real time (the event loop's clock). Tests hand the scenario a ticker that moves a fake clock
instead, so the whole twelve-minute scenario runs in seconds with the same code: the traffic, the steps
printed here, the alert lines of ``watch.AlertWatcher`` and the promise table of ``promises``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Protocol

from sidecar.demo.story import clock_text

__all__ = ["LoopTicker", "ScenarioSteps", "Ticker", "line"]


class Ticker(Protocol):
    def elapsed(self) -> float:
        """Seconds since the scenario started."""

    async def sleep_until(self, at_secs: float, stop: asyncio.Event) -> None:
        """Return once ``at_secs`` since the start is reached, or as soon as ``stop`` is set."""


class LoopTicker:
    """Real time: the running event loop's clock, from the first call on."""

    def __init__(self) -> None:
        self._t0: float | None = None

    def elapsed(self) -> float:
        now = asyncio.get_running_loop().time()
        if self._t0 is None:
            self._t0 = now
        return now - self._t0

    async def sleep_until(self, at_secs: float, stop: asyncio.Event) -> None:
        wait = at_secs - self.elapsed()
        if wait > 0:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=wait)


def line(at_secs: float, what: str, subject: str) -> str:
    """One line of the demo's running commentary: ``  [+4:40] FIRING      FeatureDrifting ctr v2 clicks_7d``."""
    return f"  [{clock_text(at_secs)}] {what:<26} {subject}"


class ScenarioSteps:
    """Prints each step of the scenario's timeline once, at the first tick at or after its time."""

    def __init__(self, steps: list[tuple[float, str]], out: Callable[[str], None]) -> None:
        self._steps = sorted(steps)
        self._out = out
        self.printed: list[tuple[float, str]] = []  # (when printed, step text)

    def tick(self, at_secs: float) -> None:
        while self._steps and self._steps[0][0] <= at_secs:
            _, what = self._steps.pop(0)
            self.printed.append((at_secs, what))
            self._out(line(at_secs, "SCENARIO", what))
