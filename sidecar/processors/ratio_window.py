"""Counter increases of the last ``window_s`` seconds, summed, for the ratios that must hold still.

A ratio over one scrape interval swings with a handful of requests (one failure in ten reads 0.1, the next
interval 0); summed over a window of intervals it is what an operator means by "the error ratio now". Each entry
is one interval's increases, kept while the interval ended within the window; the newest is always kept, so a
scrape interval longer than the window still gives a value. Bounded by ``max_entries`` per model version.
"""

from __future__ import annotations

from collections import deque

__all__ = ["FIELDS", "RatioWindow"]

FIELDS = ("success", "failed", "inferences", "executions", "cache_hits", "cache_misses")


class RatioWindow:
    def __init__(self, window_s: float, max_entries: int = 1000) -> None:
        self.window_s = window_s
        self.max_entries = max_entries
        self._entries: deque[tuple[float, tuple[float, ...]]] = deque()
        # Running sums, so a scrape costs O(fields) however many intervals the window holds. Triton's counts are
        # integers, which a float holds exactly, so adding and taking away leaves no drift.
        self._sums = [0.0] * len(FIELDS)

    def add(self, t: float, values: tuple[float, ...]) -> list[float]:
        """Record one interval ending at ``t`` (values in FIELDS order); returns the sums over the window."""
        entries, sums = self._entries, self._sums
        entries.append((t, values))
        for i, v in enumerate(values):
            sums[i] += v
        while len(entries) > 1 and (entries[0][0] <= t - self.window_s or len(entries) > self.max_entries):
            _t, old = entries.popleft()
            for i, v in enumerate(old):
                sums[i] -= v
        return sums
