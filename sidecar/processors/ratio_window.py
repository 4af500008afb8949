"""Counter increases of the last ``window_s`` seconds, summed, for the ratios that must hold still.

A ratio over one scrape interval swings with a handful of requests (one failure in ten reads 0.1, the next
interval 0); summed over a window of intervals it is what an operator means by "the error ratio now". Each entry
is one interval's increases, kept while the interval ended within the window; the newest is always kept, so a
scrape interval longer than the window still gives a value. Bounded by ``max_entries`` per model version.
"""

from __future__ import annotations

from collections import deque

__all__ = ["RatioWindow"]

FIELDS = ("success", "failed", "inferences", "executions", "cache_hits", "cache_misses")


class RatioWindow:
    def __init__(self, window_s: float, max_entries: int = 1000) -> None:
        self.window_s = window_s
        self._entries: deque[tuple[float, tuple[float, ...]]] = deque(maxlen=max_entries)

    def add(self, t: float, increases: dict[str, float]) -> dict[str, float]:
        """Record one interval ending at ``t``; returns the sums over the window ending at ``t``."""
        self._entries.append((t, tuple(increases.get(f, 0.0) for f in FIELDS)))
        while len(self._entries) > 1 and self._entries[0][0] <= t - self.window_s:
            self._entries.popleft()
        sums = [0.0] * len(FIELDS)
        for _t, values in self._entries:
            for i, v in enumerate(values):
                sums[i] += v
        return dict(zip(FIELDS, sums, strict=True))
