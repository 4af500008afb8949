"""The scenario as ``sidecar demo`` plays it: traffic second by second, each scenario step printed when it
happens, the alerts read every ``poll_every_secs`` and printed as they change, and, when it stops (the duration
ran out, Ctrl-C, SIGTERM), the promise table.

Time comes from the ticker: real time in the demo, a fake clock in tests/demo/test_demo_accelerated.py, which
plays the whole twelve minutes through this same code in seconds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

import httpx

from sidecar.demo.promises import promise_table
from sidecar.demo.scenario import DemoScenario
from sidecar.demo.story import EXPECTED, DemoAlert
from sidecar.demo.timeline import ScenarioSteps, Ticker
from sidecar.demo.traffic import Traffic
from sidecar.demo.watch import AlertWatcher

__all__ = ["ScenarioRun"]


class ScenarioRun:
    def __init__(
        self,
        traffic: Traffic,
        *,
        sidecar_url: str,
        alertmanager_url: str | None,
        ticker: Ticker,
        out: Callable[[str], None],
        poll_every_secs: float = 2.0,
        promises: Sequence[DemoAlert] = EXPECTED,
    ) -> None:
        self.traffic = traffic
        self.ticker = ticker
        self.out = out
        self.poll_every = poll_every_secs
        self.promises = promises
        self.steps = ScenarioSteps(DemoScenario.timeline(), out)
        self.watcher = AlertWatcher(sidecar_url, alertmanager_url, out=out, clock=ticker.elapsed)
        self.ended_secs: float | None = None
        self._next_poll = 0.0

    async def run(self, stop: asyncio.Event, client: httpx.AsyncClient) -> list[str]:
        """Play until ``stop``; print and return the promise table."""

        async def on_tick(at_secs: float) -> None:
            self.steps.tick(at_secs)
            if at_secs >= self._next_poll:
                self._next_poll = at_secs + self.poll_every
                await self.watcher.poll(client)

        try:
            await self.traffic.run(stop, ticker=self.ticker, client=client, on_tick=on_tick)
        finally:
            await self.watcher.poll(client)  # the state at the end, so the table sees it
            self.ended_secs = self.ticker.elapsed()
        table = promise_table(self.promises, self.watcher, self.ended_secs)
        for ln in table:
            self.out(ln)
        return table
