"""The stage histograms' series (bucket counts, sum, the latest exemplar per bucket) and their observation one
value at a time, for a small batch (``StageHistograms.observing``), where a batch's values taken together
(``sidecar.processors.stage_batch``) would cost more in numpy's fixed cost than they save."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping
from typing import Any

from prometheus_client import Counter

__all__ = ["STAGES", "Series", "SeriesBook"]

STAGES = ("network_receive", "queue", "compute_input", "compute_infer", "compute_output", "send", "request")

Spec = tuple[tuple[int, str, str, str, str], ...]


class Series:
    __slots__ = ("counts", "exemplars", "sum")

    def __init__(self, n: int) -> None:
        self.counts = [0] * n
        self.exemplars: list[tuple[str, float, float] | None] = [None] * n
        self.sum = 0.0


class SeriesBook:
    """Series by (model, version), bounded by max_model_versions, in order of creation; observing one value."""

    _bounds: list[float]
    _les: list[str]
    _by_mv: dict[tuple[str, str], list[Series | None]]
    _keys: list[tuple[tuple[str, str, str], Series]]
    _max: int
    _now: float
    _refused: Counter

    def _series_of(self, mv: tuple[str, str]) -> list[Series | None] | None:
        series = self._by_mv.get(mv)
        if series is None and mv not in self._by_mv:
            if len(self._by_mv) >= self._max:
                return None  # refused; not remembered, so the map stays bounded
            series = self._by_mv[mv] = [None] * len(STAGES)
        return series

    def _new_series(self, series: list[Series | None], mv: tuple[str, str], i: int) -> Series:
        s = series[i] = Series(len(self._les))
        self._keys.append(((mv[0], mv[1], STAGES[i]), s))
        return s

    def _put(self, mv: tuple[str, str], i: int, secs: float, trace_id: str) -> None:
        series = self._series_of(mv)
        if series is None:
            self._refused.inc()
            return
        s = series[i] or self._new_series(series, mv, i)
        j = bisect_left(self._bounds, secs)
        s.counts[j] += 1
        s.sum += secs
        # Only the latest exemplar of a bucket is kept: that is all the OpenMetrics exposition shows.
        s.exemplars[j] = (trace_id, secs, self._now)

    def _gaps(self, mv: tuple[str, str], t: Mapping[str, int], spec: Spec, tid: str) -> None:
        """Observe each (stage, from event, to event) of ``spec`` that ``t`` holds both events of, in order
        (written out, not a call per stage: a Triton request makes seven observations)."""
        series: Any = None
        looked_up = False
        bounds = self._bounds
        now = self._now
        for i, ea, eb, alt_a, alt_b in spec:
            a = t.get(ea)
            if a is None and alt_a:
                a = t.get(alt_a)
            if a is None:
                continue
            b = t.get(eb)
            if b is None and alt_b:
                b = t.get(alt_b)
            if b is None or b < a:
                continue
            if not looked_up:
                # Only on an observation: a model that is never observed takes no max_model_versions slot.
                series = self._series_of(mv)
                looked_up = True
            if series is None:
                self._refused.inc()
                continue
            secs = (b - a) / 1e9
            s = series[i] or self._new_series(series, mv, i)
            j = bisect_left(bounds, secs)
            s.counts[j] += 1
            s.sum += secs
            s.exemplars[j] = (tid, secs, now)
