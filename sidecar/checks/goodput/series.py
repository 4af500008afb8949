"""Good and total requests of one (model, version) in bounded time buckets (a ring of the longest window)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

__all__ = ["GoodSeries", "WindowCounts"]


@dataclass
class WindowCounts:
    good: int = 0
    total: int = 0
    misses: dict[str, int] = field(default_factory=dict)


class GoodSeries:
    """Buckets ``[start, good, total, {slo: misses}]``, oldest first; at most ``keep_secs / bucket_secs + 1``."""

    def __init__(self, bucket_secs: float, keep_secs: float) -> None:
        self.bucket_secs = bucket_secs
        self.keep_secs = keep_secs
        self.buckets: deque[tuple[float, list[int], dict[str, int]]] = deque()
        self.last_at = 0.0

    def add(self, at: float, good: bool, missed: tuple[str, ...]) -> None:
        start = (at // self.bucket_secs) * self.bucket_secs
        if not self.buckets or self.buckets[-1][0] < start:
            self.buckets.append((start, [0, 0], {}))
            self._trim(at)
        # An event older than the newest bucket (clock stepped back) counts in the newest: still bounded.
        _, counts, misses = self.buckets[-1]
        counts[0] += int(good)
        counts[1] += 1
        for m in missed:
            misses[m] = misses.get(m, 0) + 1
        self.last_at = max(self.last_at, at)

    def _trim(self, now: float) -> None:
        while self.buckets and self.buckets[0][0] + self.bucket_secs <= now - self.keep_secs:
            self.buckets.popleft()

    def windows(self, now: float, secs: list[float]) -> dict[float, WindowCounts]:
        """``window`` for each of ``secs`` (ascending) in one pass over the buckets, newest first."""
        out: dict[float, WindowCounts] = {}
        acc = WindowCounts()
        todo = list(secs)
        b = self.bucket_secs
        for start, counts, misses in reversed(self.buckets):
            while todo and start + b <= now - todo[0]:
                out[todo.pop(0)] = WindowCounts(acc.good, acc.total, dict(acc.misses))
            if not todo:
                break
            acc.good += counts[0]
            acc.total += counts[1]
            for k, v in misses.items():
                acc.misses[k] = acc.misses.get(k, 0) + v
        for x in todo:
            out[x] = WindowCounts(acc.good, acc.total, dict(acc.misses))
        return out

    def window(self, now: float, secs: float) -> WindowCounts:
        """Counts of the buckets that overlap the ``secs`` before ``now``: the current, partial one and every
        bucket that ends after ``now - secs`` (so a window covers at least ``secs`` and less than ``secs`` plus one
        bucket). Counting only the buckets that *start* within it covered as little as ``secs`` minus a bucket:
        a window one bucket wide held only the current bucket's first seconds, and the alert flapped there."""
        out = WindowCounts()
        since = now - secs
        for start, counts, misses in reversed(self.buckets):
            if start + self.bucket_secs <= since:
                break
            out.good += counts[0]
            out.total += counts[1]
            for k, v in misses.items():
                out.misses[k] = out.misses.get(k, 0) + v
        return out
