"""A batch's stage observations, taken together: per (model, version) and stage, one pass over the batch's
pairs of event times and one bucket count for all of them (``numpy.searchsorted`` + ``numpy.bincount``) instead
of an observation per value.

``StageHistograms.on_stored`` (``sidecar.processors.stages``) only pairs spans while the store takes a batch; each
pairing is a *job* kept here: ``request`` (a model span's own events), ``compute`` (a model span and its compute
child) or ``parent`` (a model span's parent, the request span). When the batch is stored the jobs are observed
stage by stage. A series is only ever fed by one kind of job, in job order, so every series sees the same values
in the same order as when each was observed on the spot: the same bucket counts, the same sum (added in order:
``numpy.add.accumulate`` is sequential) and the same exemplars (the last value of each bucket).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from sidecar.processors.stage_trios import Trios

if TYPE_CHECKING:
    from sidecar.state.trace_entry import TraceEntry

__all__ = ["VECTOR_MIN", "Cols", "Jobs", "apply", "diffs", "queue_values", "stage_values"]

# Fewer values than this in a series are observed one by one: numpy's fixed cost per call (a few us) is more
# than a bisect per value below it (an OTLP body of 100 spans brings ~11 per model and stage).
VECTOR_MIN = 48

Times = Mapping[str, int]


class Jobs:
    """One (model, version)'s pairings in the batch, each with its arrival number (``seq``: the order in which
    the spot observations would have run, for series creation and the max_model_versions slots), and before
    them its whole requests' values (``trio``, ``stage_trios``)."""

    __slots__ = ("compute", "parent", "request", "trio")

    def __init__(self) -> None:
        self.request: list[tuple[int, Times, TraceEntry]] = []
        self.compute: list[tuple[int, Times, Times, TraceEntry]] = []
        self.parent: list[tuple[int, Times, TraceEntry]] = []
        self.trio: Trios | None = None


class Cols:
    """The event-time columns of one kind of job's spans, each event read once (a stage's two events are often
    another stage's too), and as int64 arrays when large enough to be worth it."""

    __slots__ = ("_arrays", "_cols", "ts")

    def __init__(self, ts: Sequence[Times]) -> None:
        self.ts = ts
        self._cols: dict[str, list[Any]] = {}
        self._arrays: dict[str, np.ndarray | None] = {}

    def prefetch(self, names: tuple[str, ...]) -> Cols:
        """Read the columns of ``names`` in one pass over the spans (a span's events are then read while its
        dict is in the cache, not once per column); two to five names."""
        ts = self.ts
        if not ts:
            return self
        if len(names) == 2:
            a, b = names
            rows: list[tuple[Any, ...]] = [(t.get(a), t.get(b)) for t in ts]
        elif len(names) == 4:
            a, b, c, d = names
            rows = [(t.get(a), t.get(b), t.get(c), t.get(d)) for t in ts]
        else:
            a, b, c, d, f = names
            rows = [(t.get(a), t.get(b), t.get(c), t.get(d), t.get(f)) for t in ts]
        for name, col in zip(names, zip(*rows, strict=True), strict=True):
            self._cols[name] = list(col)
        return self

    def get(self, ev: str) -> list[Any]:
        c = self._cols.get(ev)
        if c is None:
            c = self._cols[ev] = [t.get(ev) for t in self.ts]
        return c

    def either(self, ev: str, alt: str) -> list[Any]:
        """``ev``'s time, else ``alt``'s, as ``stages._spec_into`` takes them."""
        a = self.get(ev)
        if alt and None in a:
            key = ev + "|" + alt
            c = self._cols.get(key)
            if c is None:
                c = self._cols[key] = [x if x is not None else y for x, y in zip(a, self.get(alt), strict=True)]
            return c
        return a

    def array(self, key: str, col: list[Any]) -> np.ndarray | None:
        """``col`` as int64 when every value is there and in 0..2**63 (so a difference cannot overflow)."""
        if key in self._arrays:
            return self._arrays[key]
        arr = None
        if len(col) >= VECTOR_MIN and None not in col:
            try:
                arr = np.array(col, dtype=np.int64)
            except (OverflowError, TypeError, ValueError):
                arr = None
            if arr is not None and arr.min() < 0:
                arr = None
        self._arrays[key] = arr
        return arr


Values = tuple["list[int] | np.ndarray", Sequence["TraceEntry"], int]


def stage_values(cols: Cols, es: Sequence[TraceEntry], ev_a: str, ev_b: str, alt_a: str, alt_b: str) -> Values:
    """The ns between two events of each span that holds both in order (as ``stages._spec_into`` takes
    them), the traces they came from, and the index of the first (-1: none)."""
    a, b = cols.either(ev_a, alt_a), cols.either(ev_b, alt_b)
    return diffs(a, b, es, cols.array(ev_a + "|" + alt_a, a), cols.array(ev_b + "|" + alt_b, b))


def queue_values(m: Cols, c: Cols, es: Sequence[TraceEntry]) -> Values:
    """``stages._queue_secs`` of each compute job, in ns (the compute span's events win over the model span's;
    event times are never None, so a present key is a value that is not None)."""
    q, cs = c.get("QUEUE_START"), c.get("COMPUTE_START")
    if None in q:
        q = [x if x is not None else y for x, y in zip(q, m.get("QUEUE_START"), strict=True)]
    if None in cs:
        cs = [x if x is not None else y for x, y in zip(cs, m.get("COMPUTE_START"), strict=True)]
    return diffs(q, cs, es, c.array("queue", q), c.array("compute_start", cs))


def diffs(a: list[Any], b: list[Any], es: Sequence[TraceEntry], a_arr: Any, b_arr: Any) -> Values:
    if a_arr is not None and b_arr is not None:
        d = b_arr - a_arr
        ok = d >= 0
        if ok.all():
            return d, es, 0
        keep = np.flatnonzero(ok).tolist()
        return d[ok], [es[k] for k in keep], keep[0] if keep else -1
    if None not in a and None not in b:
        dl = [y - x for x, y in zip(a, b, strict=True)]
        if dl and min(dl) >= 0:
            return dl, es, 0
    keep = [k for k, (x, y) in enumerate(zip(a, b, strict=True)) if x is not None and y is not None and y >= x]
    return [b[k] - a[k] for k in keep], [es[k] for k in keep], keep[0] if keep else -1


def apply(
    s: Any,
    ns: list[int] | np.ndarray,
    es: Sequence[TraceEntry],
    bounds: list[float],
    bounds_arr: np.ndarray,
    now: float,
) -> None:
    """Observe ``ns`` (as seconds, ``n / 1e9``) into the series ``s`` (``stages._Series``), in order."""
    counts, exemplars = s.counts, s.exemplars
    if len(ns) < VECTOR_MIN:
        if isinstance(ns, np.ndarray):
            ns = ns.tolist()
        total = s.sum
        last: dict[int, int] = {}
        secs = [n / 1e9 for n in ns]
        for k, v in enumerate(secs):
            j = bisect_left(bounds, v)
            counts[j] += 1
            total += v
            last[j] = k
        s.sum = total
    else:
        arr = np.asarray(ns, dtype=np.float64) / 1e9
        idx = np.searchsorted(bounds_arr, arr, side="left")
        for j, c in enumerate(np.bincount(idx, minlength=len(counts)).tolist()):
            if c:
                counts[j] += c
        s.sum = float(np.add.accumulate(np.concatenate(([s.sum], arr)))[-1])
        u, first = np.unique(idx[::-1], return_index=True)
        top = len(ns) - 1
        last = {j: top - f for j, f in zip(u.tolist(), first.tolist(), strict=True)}
        secs = arr.tolist()
    # Only the latest exemplar of a bucket is kept: that is all the OpenMetrics exposition shows.
    for j, k in last.items():
        exemplars[j] = (es[k].trace_id, secs[k], now)
