"""The canary's bounded per-version windows (fixed numpy rings per signal, Triton intervals) and a pair's result."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np

from sidecar.checks.canary.stats import AspectResult
from sidecar.checks.canary.triton import Interval

__all__ = ["PairResult", "Ring", "VersionWindows", "version_key"]


class Ring:
    """The newest ``cap`` (timestamp, value) pairs."""

    __slots__ = ("count", "pos", "ts", "vals")

    def __init__(self, cap: int) -> None:
        self.ts = np.zeros(cap)
        self.vals = np.zeros(cap)
        self.pos = 0
        self.count = 0

    def add(self, ts: float, v: float) -> None:
        i = self.pos
        self.ts[i] = ts
        self.vals[i] = v
        self.pos = (i + 1) % self.ts.size
        if self.count < self.ts.size:
            self.count += 1

    def since(self, t0: float) -> np.ndarray:
        n = self.count
        return self.vals[:n][self.ts[:n] >= t0].copy()


@dataclass
class VersionWindows:
    cap: int
    last_seen: float = 0.0
    rings: dict[str, Ring] = field(default_factory=dict)
    triton: deque[Interval] | None = None

    def add(self, signal: str, ts: float, v: float) -> None:
        r = self.rings.get(signal)
        if r is None:
            r = self.rings[signal] = Ring(self.cap)
        r.add(ts, v)
        self.last_seen = max(self.last_seen, ts)

    def add_interval(self, iv: Interval) -> None:
        if self.triton is None:
            self.triton = deque(maxlen=self.cap)
        self.triton.append(iv)
        self.last_seen = max(self.last_seen, iv.t)

    def intervals(self, t0: float) -> list[Interval]:
        if self.triton is None:
            return []
        while self.triton and self.triton[0].t < t0:  # in arrival order: what left the window goes first
            self.triton.popleft()
        return list(self.triton)

    def values(self, signal: str, t0: float) -> np.ndarray:
        r = self.rings.get(signal)
        return r.since(t0) if r is not None else np.empty(0)


@dataclass
class PairResult:
    model: str
    baseline: str
    candidate: str
    latency_source: str
    aspects: list[AspectResult]

    @property
    def verdict(self) -> str:
        if any(a.worse for a in self.aspects):
            return "worse"
        return "healthy" if any(a.tested for a in self.aspects) else "insufficient"


def version_key(v: str) -> tuple[int, int, str]:
    return (0, int(v), "") if v.isdigit() else (1, 0, v)
