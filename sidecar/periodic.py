"""The one periodic runner every polling component uses (scrapes, file tails, repository polls, expiry).

It calls an async job every ``interval_secs`` on the event loop until stopped. A run that raises is handed to
``on_error`` (the component counts and logs it) and never ends the loop: after start-up, components fail open.
Tests do not run the loop; they call the component's ``*_once`` method with a fake clock.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

__all__ = ["Periodic"]


class Periodic:
    def __init__(
        self,
        name: str,
        job: Callable[[], Awaitable[object]],
        interval_secs: float,
        *,
        on_error: Callable[[Exception], None],
        delay_first: bool = False,
    ) -> None:
        self.name = name
        self._job = job
        self._interval = interval_secs
        self._on_error = on_error
        self._delay_first = delay_first
        self._task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        """Idempotent; must be called with a running event loop."""
        if self._task is None:
            self._task = asyncio.create_task(self._loop(), name=self.name)

    async def _loop(self) -> None:
        if self._delay_first:
            await asyncio.sleep(self._interval)
        while True:
            try:
                await self._job()
            except Exception as exc:
                self._on_error(exc)
            await asyncio.sleep(self._interval)

    async def stop(self) -> None:
        """Idempotent and safe without ``start``; waits for the run in progress to be cancelled."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
