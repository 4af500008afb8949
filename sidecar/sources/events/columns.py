"""A batch of events of the common shape, straight into columns (``EventColumns``), checked as arrays.

The common shape: every document an object with only ``model``, ``version``, ``timestamp``, ``features`` and
``score``; per model/version, the same feature names in the same order in every event, every feature value a
number (not a bool, not null, not a string); a numeric or absent time; a numeric, null or absent score. For
such a batch the door's rules (``parse.py``: names within bounds, finite numbers, times inside
``max_age_secs`` .. ``max_future_skew_secs`` and 2000..2100) are applied once per distinct name or key set and
as numpy comparisons over each column, and no ``Event`` is built.

Like ``plain_event``, this path only ever accepts: a batch it is not sure of, in any event (a string time, a
null feature, a refused value, an unknown key, a bound reached), gives None and the caller hands the whole batch
to ``parse_events``, which is the one statement of the rules and the only one that words a refusal (per index
and field). ``tests/sources/events/test_events_columns.py`` holds the two to the same events on generated
batches, and the differential test holds the checks' state to the per-event path's.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain
from typing import Any

import numpy as np

from sidecar.model import EventColumns
from sidecar.sources.events.config import EventsConfig
from sidecar.timerange import MAX_AT, MIN_AT

__all__ = ["good_names", "parse_columns", "times_in_range"]

_SHAPE = frozenset({"model", "version", "timestamp", "features", "score"})
_NUM = {float, int}
_NUM_NONE = {float, int, type(None)}
_VERSION_TYPES = {str, int, type(None)}


def good_names(names: Any, cfg: EventsConfig) -> bool:
    """Every name a non-empty string of at most ``max_name_length`` (checked once per distinct name)."""
    limit = cfg.max_name_length
    return all(type(n) is str and 0 < len(n) <= limit for n in names)


def times_in_range(ts: np.ndarray, cfg: EventsConfig, now: float) -> bool:
    """Every time (no NaN left) inside ``max_age_secs`` .. ``max_future_skew_secs`` and 2000..2100."""
    lo, hi = max(now - cfg.max_age_secs, MIN_AT), min(now + cfg.max_future_skew_secs, MAX_AT)
    return bool(ts.min() >= lo and ts.max() <= hi)


def _floats(values: list[Any], *, none_ok: bool) -> np.ndarray | None:
    """float64 of a list of JSON numbers (NaN for a null when ``none_ok``); None when any value is something
    else (a bool, a string, an int beyond float range) or not finite."""
    types = set(map(type, values))
    if not types <= (_NUM_NONE if none_ok else _NUM):
        return None
    try:
        arr = np.array(values, dtype=np.float64)
    except (OverflowError, TypeError, ValueError):
        return None
    finite = np.isfinite(arr)
    if finite.all():
        return arr
    if type(None) not in types or np.isinf(arr).any():
        return None
    # Every NaN must be a null: a NaN sent as a number (only possible from a caller that is not JSON) is refused.
    return arr if int((~finite).sum()) == values.count(None) else None


def _matrix(feats: list[dict[Any, Any]], names: list[Any], cfg: EventsConfig) -> np.ndarray | None:
    """The events' feature values as an (n, k) float64 matrix in ``names``' order; None unless every event has
    exactly these names in this order and every value is a finite number (not a bool)."""
    if len(names) > cfg.max_features_per_event or not good_names(names, cfg):
        return None
    if [*chain.from_iterable(feats)] != names * len(feats):  # one comparison of every event's names, in order
        return None
    rows = [[*f.values()] for f in feats]
    try:
        mat = np.array(rows)
    except (OverflowError, ValueError):
        return None
    if mat.dtype.kind == "i":
        mat = mat.astype(np.float64)  # what float() gives each, as one by one
    elif mat.dtype != np.float64:
        return None  # a string, a null or an int beyond 64 bits somewhere
    if not np.isfinite(mat).all():
        return None
    # A bool hides in a float or int matrix as 0.0 or 1.0: those cells are looked at one by one.
    for i, j in zip(*np.nonzero((mat == 0.0) | (mat == 1.0)), strict=True):
        if type(rows[i][j]) is bool:
            return None
    return mat


def _group(
    docs: Sequence[dict[str, Any]], idx: list[int] | None, model: str, version: str, cfg: EventsConfig, now: float
) -> EventColumns | None:
    sel = docs if idx is None else [docs[i] for i in idx]
    raw_ts = [d.get("timestamp") for d in sel]
    ts = _floats(raw_ts, none_ok=True)
    if ts is None:
        return None
    if np.isnan(ts).any():
        ts[np.isnan(ts)] = now  # no time: when received
    if not times_in_range(ts, cfg, now):
        return None
    feats = [d.get("features", _EMPTY) for d in sel]
    if set(map(type, feats)) != {dict}:
        return None
    names = [*feats[0]]
    features: dict[str, np.ndarray] = {}
    if names:
        mat = _matrix(feats, names, cfg)
        if mat is None:
            return None
        features = dict(zip(names, np.ascontiguousarray(mat.T), strict=True))
    elif any(feats):
        return None
    score = None
    raw_score = [d.get("score") for d in sel]
    if raw_score.count(None) != len(raw_score):
        score = _floats(raw_score, none_ok=True)
        if score is None:
            return None
    rows = None if idx is None else np.array(idx)
    return EventColumns(model=model, version=version, timestamps=ts, features=features, score=score, positions=rows)


_EMPTY: dict[str, Any] = {}


def parse_columns(docs: list[Any], cfg: EventsConfig, now: float) -> list[EventColumns] | None:
    """The batch as one ``EventColumns`` per model/version (in order of first appearance), when every document
    has the common shape and passes every door check; None otherwise (``parse_events`` then decides)."""
    if not docs or set(map(type, docs)) != {dict} or not all(map(_SHAPE.issuperset, docs)):
        return None
    models = [d.get("model") for d in docs]
    versions = [d.get("version") for d in docs]
    if not set(map(type, versions)) <= _VERSION_TYPES:  # a bool, a float, an object: one by one says why
        return None
    try:
        distinct = dict.fromkeys(zip(models, versions, strict=True))
    except TypeError:  # an unhashable model (a list, an object)
        return None
    norm: dict[tuple[Any, Any], tuple[str, str]] = {}
    for m, v in distinct:
        version = cfg.default_version if v is None else str(v) if type(v) is int else v
        if not good_names((m, version), cfg):
            return None
        norm[(m, v)] = (m, version)
    if len(set(norm.values())) == 1:
        ((model, version),) = set(norm.values())
        got = _group(docs, None, model, version, cfg, now)
        return None if got is None else [got]
    groups: dict[tuple[str, str], list[int]] = {}
    for i, key in enumerate(zip(models, versions, strict=True)):
        groups.setdefault(norm[key], []).append(i)
    out = []
    for (model, version), idx in groups.items():
        if (got := _group(docs, idx, model, version, cfg, now)) is None:
            return None
        out.append(got)
    return out
