"""Steady inference traffic for the demo: KServe v2 JSON requests to a real Triton.

``ctr`` gets requests at versions 1 and 2; ``fraud`` gets ~8% requests with a negative amount, which the model
rejects, so the failure SLIs have something to show. Rates are per second and deterministic for a seed.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import httpx

__all__ = ["Traffic", "TrafficStats"]


@dataclass
class TrafficStats:
    sent: dict[str, int] = field(default_factory=dict)
    ok: dict[str, int] = field(default_factory=dict)
    failed: dict[str, int] = field(default_factory=dict)

    def count(self, key: str, status: int) -> None:
        self.sent[key] = self.sent.get(key, 0) + 1
        bucket = self.ok if status == 200 else self.failed
        bucket[key] = bucket.get(key, 0) + 1


OnResult = Callable[[str, str, list[float], float | None, float], Awaitable[None]]


class Traffic:
    def __init__(self, triton_http_url: str, *, rate_per_s: float = 20.0, fraud_failure_ratio: float = 0.08,
                 seed: int = 7, on_result: OnResult | None = None) -> None:
        self.url = triton_http_url.rstrip("/")
        self.rate = rate_per_s
        self.fraud_failure_ratio = fraud_failure_ratio
        self.rng = random.Random(seed)
        self.stats = TrafficStats()
        self.on_result = on_result
        self.elapsed_s = 0.0

    def _request(self) -> tuple[str, str, list[float]]:
        r = self.rng.random()
        if r < 0.35:
            return "ctr", "1", [self.rng.gauss(1, 1) for _ in range(4)]
        if r < 0.7:
            return "ctr", "2", [self.rng.gauss(1, 1) for _ in range(4)]
        amount = self.rng.uniform(1, 500)
        if self.rng.random() < self.fraud_failure_ratio:
            amount = -amount
        return "fraud", "1", [amount, self.rng.random(), self.rng.random()]

    async def send_one(self, client: httpx.AsyncClient) -> int:
        model, version, x = self._request()
        body = {"inputs": [{"name": "x", "shape": [1, len(x)], "datatype": "FP32", "data": x}]}
        try:
            resp = await client.post(f"{self.url}/v2/models/{model}/versions/{version}/infer", json=body,
                                     timeout=10)
            status = resp.status_code
            score = None
            if status == 200:
                score = float(resp.json()["outputs"][0]["data"][0])
        except httpx.HTTPError:
            status, score = 0, None
        self.stats.count(f"{model}:{version}", status)
        if self.on_result is not None:
            await self.on_result(model, version, x, score, self.elapsed_s)
        return status

    async def run(self, stop: asyncio.Event) -> None:
        interval = 1.0 / self.rate
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        async with httpx.AsyncClient() as client:
            while not stop.is_set():
                self.elapsed_s = loop.time() - t0
                await self.send_one(client)
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=interval)
