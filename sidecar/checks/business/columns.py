"""The business checks' observe of an ``event_columns`` batch: the per-event rules of ``check._observe_many``
restated over arrays, giving the same buckets bit for bit.

Each value is added in event order (a running sum, ``np.add.accumulate``, not numpy's pairwise ``sum``, so
every total rounds as ``total += value`` one by one); buckets are made in order of their first event; the drop
reasons are tested in the same order (missing field, future, too old, series limit). A series fed by several
blocks of one batch (a check that does not group by version, two versions in one batch) takes their events in
batch order, by the blocks' ``positions``. An ``event_columns`` event has no trace id, no label and no
``fields``, and every number in it is finite, so a reference to those is a missing field and ``not_numeric``
cannot happen. ``tests/sources/events/test_events_columns.py`` holds this to the per-event path.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from datasketches import kll_floats_sketch

from sidecar.checks.business.series import KLL_K, Bucket, CheckState, Series
from sidecar.model import EventColumns

__all__ = ["observe_blocks"]


def _column(block: EventColumns, head: str, key: str) -> np.ndarray:
    """The values a field reference reads, NaN where an event has none."""
    if head == "count":
        return np.ones(block.n)
    col = block.score if head == "score" else block.features.get(key) if head == "features" else None
    return np.full(block.n, np.nan) if col is None else col


def _running(start: float, values: np.ndarray) -> float:
    """``start`` plus each value in turn, rounded after every addition as a Python loop would."""
    return float(np.add.accumulate(np.concatenate(([start], values)))[-1])


def _add(
    buckets: dict[float, Bucket], width: float, ts: np.ndarray, vals: np.ndarray, dens: np.ndarray, q: bool
) -> None:
    at = ts - np.remainder(ts, width)  # what ``ts - ts % width`` gives (the same IEEE remainder for ts > 0)
    first = float(at[0])
    keys = [first] if (at == first).all() else list(dict.fromkeys(at.tolist()))
    for k in keys:
        sel = slice(None) if len(keys) == 1 else at == k
        v, d = vals[sel], dens[sel]
        if (b := buckets.get(k)) is None:
            b = buckets[k] = Bucket()
        b.count += len(v)
        b.total = _running(b.total, v)
        b.den = _running(b.den, d)
        if q:
            if b.sketch is None:
                b.sketch = kll_floats_sketch(KLL_K)
            b.sketch.update(np.asarray(v, dtype=np.float32))  # each value in order, as one by one
        b.dirty = True


def _series_key(chk: CheckState, model: str, version: str) -> tuple[str, ...]:
    return tuple(model if x == "model" else version for x in chk.cfg.group_by)


def observe_blocks(
    chk: CheckState, blocks: Sequence[EventColumns], now: float, max_future_skew_secs: float
) -> dict[str, int]:
    """Takes the check's events of every block into its series; returns how many were taken ("") and how many
    were dropped, by reason (as ``_observe_many``)."""
    cfg = chk.cfg
    latest, oldest = now + max_future_skew_secs, now - chk.horizon
    by_series: dict[tuple[str, ...], list[EventColumns]] = {}
    for block in blocks:
        if cfg.model is None or block.model == cfg.model:
            by_series.setdefault(_series_key(chk, block.model, block.version), []).append(block)
    reasons: dict[str, int] = {}
    for skey, group in by_series.items():
        ts = np.concatenate([b.timestamps for b in group])
        value = np.concatenate([_column(b, chk.head, chk.key) for b in group])
        den = np.zeros(len(ts)) if chk.den_ref is None else np.concatenate([_column(b, *chk.den_ref) for b in group])
        if len(group) > 1:  # several blocks: back to batch order
            order = np.argsort(np.concatenate([b.rows() for b in group]), kind="stable")
            ts, value, den = ts[order], value[order], den[order]
        missing = np.isnan(value) | np.isnan(den)
        future = ~missing & (ts > latest)
        too_old = ~missing & ~future & (ts < oldest)
        ok = ~(missing | future | too_old)
        for reason, mask in (("missing_field", missing), ("future", future), ("too_old", too_old)):
            if n := int(mask.sum()):
                reasons[reason] = reasons.get(reason, 0) + n
        if not (n_ok := int(ok.sum())):
            continue
        s = chk.series.get(skey)
        if s is None:
            if len(chk.series) >= cfg.max_series:
                reasons["series_limit"] = reasons.get("series_limit", 0) + n_ok
                continue
            s = chk.series[skey] = Series(labels=skey)
        reasons[""] = reasons.get("", 0) + n_ok
        if n_ok < len(ok):
            ts, value, den = ts[ok], value[ok], den[ok]
        _add(s.cur, cfg.bucket_secs, ts, value, den, chk.quantile)
        if cfg.baseline_secs is not None:
            _add(s.base, cfg.baseline_bucket_secs, ts, value, den, chk.quantile)
    return reasons
