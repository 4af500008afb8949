from __future__ import annotations

import asyncio

from sidecar.periodic import Periodic


async def test_runs_until_stopped_and_survives_errors() -> None:
    runs: list[int] = []
    errors: list[str] = []
    done = asyncio.Event()

    async def job() -> None:
        runs.append(len(runs))
        if len(runs) == 2:
            raise RuntimeError("boom")
        if len(runs) >= 4:
            done.set()

    p = Periodic("t", job, 0.0, on_error=lambda e: errors.append(str(e)))
    await p.stop()  # safe before start
    p.start()
    p.start()  # idempotent
    await asyncio.wait_for(done.wait(), timeout=5)
    assert p.running
    await p.stop()
    await p.stop()
    assert not p.running
    assert errors == ["boom"] and len(runs) >= 4


async def test_delay_first_waits_one_interval() -> None:
    runs: list[int] = []

    async def job() -> None:
        runs.append(1)

    p = Periodic("t", job, 3600.0, on_error=lambda e: None, delay_first=True)
    p.start()
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    await p.stop()
    assert runs == []
