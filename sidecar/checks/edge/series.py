"""What the edge checks read from the edge processor (handed over by wiring), and the SLA period's bounds."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

__all__ = ["EdgeSeries", "period_bounds"]

DAY = 86_400.0


class EdgeSeries(Protocol):
    def groups(self) -> list[str]: ...

    def hits(self, group: str, start: float, end: float) -> tuple[int, int]: ...

    def latency_quantiles(
        self, group: str, hop: str, start: float, end: float, qs: Sequence[float] = ...
    ) -> tuple[int, list[float | None]]: ...


def period_bounds(now: float, period: str) -> tuple[float, float]:
    """(start, end) of the UTC calendar day, or ISO week (Monday first), holding ``now``."""
    days = int(now // DAY)
    if period == "week":
        days -= (days + 3) % 7  # 1970-01-01 was a Thursday
        return days * DAY, (days + 7) * DAY
    return days * DAY, (days + 1) * DAY
