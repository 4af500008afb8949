"""The drift check's observe of a whole batch, one column per feature, for the steady state.

A model/version is in the steady state when it already holds a name slot, no pinned reference is still being
collected for it, its reference is not rolling, and every feature of its events (and the score or class, when
monitored) already has a kind and a current window. Then no slot, series, kind or reference can change, and
its events in bulk give what they give one by one: each window takes the same values in the same order (numbers as one
array per bucket, folded into the sketch at the same points), the same series are marked dirty and last
seen, and the same counts move (``observed``, ``late``, type and category drops). The events of any other
model/version are handed back, in batch order, and the caller takes them one by one
(``DriftCheck._observe_one``), which is the one statement of the rules; this module only restates them in
bulk, and ``tests/sources/events/test_events_differential.py`` holds the two to the same result.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import chain
from typing import Any

import numpy as np
from prometheus_client import Counter

from sidecar.checks.drift.config import DriftConfig, ReferenceConfig
from sidecar.checks.drift.metrics import DriftMetrics
from sidecar.checks.drift.refs import References
from sidecar.checks.drift.registry import CLASS, SCORE, ModelKey, WindowRegistry
from sidecar.checks.stats.windows import FeatureKind, FeatureWindow
from sidecar.model import Event, EventColumns

__all__ = ["observe_batch", "observe_blocks"]

_ABSENT = object()  # the event has no such feature (not even null): no value, not even a missing one


def _groups(items: Sequence[Event]) -> dict[ModelKey, list[Event]]:
    first = items[0]
    m, v = first.model, first.version
    if all(e.model == m and e.version == v for e in items):
        return {(m, v): list(items)}
    out: dict[ModelKey, list[Event]] = {}
    for e in items:
        out.setdefault((e.model, e.version), []).append(e)
    return out


def _columns(reg: WindowRegistry, model: str, evs: list[Event], monitor_score: bool) -> dict[str, Any] | None:
    """Each feature's values over the events (``_ABSENT`` where an event lacks it), or None when not steady: a
    list, or a float64 array when every value of every feature is a float."""
    feats = [e.features for e in evs]
    keys0 = feats[0].keys()
    cols: dict[str, Any] = {}
    names = list(keys0)
    if all(list(f) == names for f in feats):  # the same features in the same order: one matrix when all floats
        rows = [list(f.values()) for f in feats]
        if set(map(type, chain.from_iterable(rows))) == {float}:
            mat = np.array(rows, dtype=np.float64)
            for j, name in enumerate(names):
                cols[name] = mat[:, j]
        else:
            for j, name in enumerate(names):
                cols[name] = [r[j] for r in rows]
    elif all(f.keys() == keys0 for f in feats):
        for name in keys0:
            cols[name] = [f[name] for f in feats]
    else:
        for name in set().union(*feats):
            cols[name] = [f.get(name, _ABSENT) for f in feats]
    if monitor_score:
        return _with_score(reg, model, cols, [e.score for e in evs], [e.prediction_class for e in evs])
    return cols


def _with_score(
    reg: WindowRegistry, model: str, cols: dict[str, Any], score: Any, pclass: list[Any]
) -> dict[str, Any] | None:
    """``cols`` with the score and class columns the check monitors; None when one would make a new series."""
    for name, col in ((SCORE, score), (CLASS, pclass)):
        if (model, name) in reg.kinds:
            cols[name] = col
        elif any(v is not None for v in col):
            return None  # its first value would make a series
    return cols


def _steady(reg: WindowRegistry, refs: References, spec: ReferenceConfig, mv: ModelKey) -> bool:
    """The model/version holds a slot, its reference is not rolling and not still being collected."""
    model, version = mv
    if mv not in reg.models or spec.mode == "rolling":
        return False
    if spec.mode == "pinned":
        pin_ver = spec.pinned_version or version
        if pin_ver == version and (model, pin_ver, "") not in refs.refs:
            return False  # still collecting the reference
    return True


def _plan(
    reg: WindowRegistry, mv: ModelKey, cols: dict[str, Any] | None
) -> list[tuple[str, FeatureKind, FeatureWindow, Any]] | None:
    """The series one model/version's columns go to, or None when they are not in the steady state."""
    model, version = mv
    if cols is None:
        return None
    series = []
    for name, col in cols.items():
        kind = reg.kinds.get((model, name))
        if kind is None:
            if any(v is not _ABSENT and reg.kind(model, name, v) is not None for v in col):
                return None  # a new series
            continue  # no value tells the kind yet: skipped, as one by one
        win = reg.windows.get((model, version, name))
        if win is None:
            return None
        series.append((name, kind, win, col))
    return series


def observe_batch(
    reg: WindowRegistry,
    refs: References,
    spec_for: Callable[[str], ReferenceConfig],
    items: Sequence[Event],
    now: float,
    cfg: DriftConfig,
    metrics: DriftMetrics,
) -> Sequence[Event]:
    """Takes the events of the model/versions in the steady state in bulk; returns the others, in batch order,
    for the caller to take one by one. Those can make slots, series and references; the bulk ones cannot, so
    taking them first changes nothing that one by one in batch order would give."""
    if not items:
        return items
    groups = _groups(items)
    rest: set[ModelKey] = set()
    for mv, evs in groups.items():
        steady = _steady(reg, refs, spec_for(mv[0]), mv)
        series = _plan(reg, mv, _columns(reg, mv[0], evs, cfg.monitor_score)) if steady else None
        if series is None:
            rest.add(mv)
        else:
            ts = np.fromiter((e.timestamp for e in evs), dtype=np.float64, count=len(evs))
            _take(reg, mv, ts, series, now, metrics.c_observed, metrics.c_dropped)
    if not rest:
        return ()
    if len(rest) == len(groups):
        return items
    return [e for e in items if (e.model, e.version) in rest]


def observe_blocks(
    reg: WindowRegistry,
    refs: References,
    spec_for: Callable[[str], ReferenceConfig],
    blocks: Sequence[EventColumns],
    now: float,
    cfg: DriftConfig,
    metrics: DriftMetrics,
) -> list[Event]:
    """``observe_batch`` for an ``event_columns`` batch: each block in the steady state taken as arrays; the
    events of the others returned, in batch order, for the caller to take one by one."""
    rest: list[Event] = []
    for block in blocks:
        mv = (block.model, block.version)
        series = None
        if _steady(reg, refs, spec_for(block.model), mv):
            cols: dict[str, Any] | None = dict(block.features)
            if cfg.monitor_score:
                n, sc = block.n, block.score
                score: Any = [None] * n if sc is None else sc
                if sc is not None and np.isnan(sc).any():  # NaN is an event without a score: None, as one by one
                    score = [None if v != v else v for v in sc.tolist()]
                pclass = [None] * n if (block.model, CLASS) in reg.kinds else []  # no event has a class
                cols = _with_score(reg, block.model, dict(block.features), score, pclass)
            series = _plan(reg, mv, cols)
        if series is None:
            rest.extend(block.events())
        else:
            _take(reg, mv, block.timestamps, series, now, metrics.c_observed, metrics.c_dropped, finite=True)
    return rest


def _take(
    reg: WindowRegistry,
    mv: ModelKey,
    ts: np.ndarray,
    series: list[tuple[str, FeatureKind, FeatureWindow, Any]],
    now: float,
    observed: Counter,
    dropped: Counter,
    *,
    finite: bool = False,
) -> None:
    """``finite``: every array column is finite (an ``EventColumns`` block's: the door checked them; its score
    column comes here as an array only when it has no NaN, an event without a score)."""
    reg.admit_model(mv, now)
    n = len(ts)
    observed.inc(n)
    ts = np.minimum(ts, now)
    late = np.zeros(n, dtype=bool)
    buckets: dict[tuple[float, int], tuple[np.ndarray, np.ndarray, list[tuple[float, Any]] | None]] = {}
    types: set[type]
    for name, kind, win, col in series:
        key = (mv[0], mv[1], name)
        if isinstance(col, np.ndarray):
            if kind != "numeric":
                col = col.tolist()  # Python floats, so a category's name is str() of one, as one by one
            types = {float}
        else:
            types = set(map(type, col))
        every = object not in types  # some events lack the feature (``_ABSENT`` is the one plain object)
        if every:
            present = None
        else:
            present = np.fromiter((v is not _ABSENT for v in col), dtype=bool, count=n)
            if not present.any():
                continue
        reg.window(key, kind, now)  # marks it seen
        shape = (win.bucket_secs, win.n_buckets)
        if (got := buckets.get(shape)) is None:
            idx = np.floor_divide(ts, win.bucket_secs)
            got = buckets[shape] = (idx, idx > int(now // win.bucket_secs) - win.n_buckets, None)
        idx, ok, runs = got
        if present is None:
            if runs is None:  # once per bucket shape: the late events, and the runs of the others
                late |= ~ok
                runs = _runs(ts, idx, ok) if ok.any() else []
                buckets[shape] = (idx, ok, runs)
            if not runs:
                continue
            take = ok
        else:
            late |= present & ~ok
            take = present & ok
            if not take.any():
                continue
        reg.dirty.add(key)
        if kind == "numeric" and types == {float}:
            values = np.asarray(col, dtype=np.float64)
            if present is None:  # the same runs for every such column of this bucket shape
                for at, sel in runs or ():
                    win.add_numbers(at, values[sel], finite=finite)
            else:
                for at, sel in _runs(ts, idx, take):
                    win.add_numbers(at, values[sel], finite=finite)
        else:
            for i in np.flatnonzero(take):
                reg.add(win, kind, float(ts[i]), col[i], counted=True)
    if (n_late := int(late.sum())) > 0:
        dropped.labels("late").inc(n_late)


def _runs(ts: np.ndarray, idx: np.ndarray, take: np.ndarray) -> list[tuple[float, Any]]:
    """Each bucket's events in event order, as (the time of its first event, their selector): one array per
    bucket, the bucket order that of their first event."""
    if take.all() and (idx == idx[0]).all():
        return [(float(ts[0]), slice(None))]
    sel_idx = idx[take]
    where = np.flatnonzero(take)
    out = []
    for u in dict.fromkeys(sel_idx.tolist()):
        at = where[sel_idx == u]
        out.append((float(ts[at[0]]), at))
    return out
