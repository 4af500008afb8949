"""The series registry of the business checks: per check, its series and their two tiers of time buckets.

A bucket keeps a count, a sum, a denominator sum and, for quantile checks, a KLL sketch (mergeable, so a window
is the merge of its buckets). A fine bucket also keeps the trace of its worst event (the lowest value for a
check that fires on ``direction: down``, the highest for ``up``), so an alert can link one of the requests that
made its value bad instead of whichever event came last.

A check evaluates per version only when its ``group_by`` says ``version``; otherwise its series span every
version and are labelled ``version="all"``: labelling them with one version seen would name a version the
value does not belong to.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import Any

from datasketches import kll_floats_sketch

from sidecar.checks.business.config import BusinessCheckConfig, parse_field_ref
from sidecar.model import Event

__all__ = ["ALL_VERSIONS", "KLL_K", "Bucket", "CheckState", "Series", "extract"]

KLL_K = 200
ALL_VERSIONS = "all"
_MODEL, _MODEL_VERSION = ["model"], ["model", "version"]


@dataclass
class Bucket:
    count: int = 0
    total: float = 0.0
    den: float = 0.0
    sketch: Any = None
    dirty: bool = True
    # The worst value seen with a trace id, and that trace (not persisted: traces live in memory only).
    worst: float | None = None
    worst_trace: str | None = None

    def add(self, value: float, den: float, quantile: bool) -> None:
        self.count += 1
        self.total += value
        self.den += den
        if quantile:
            if self.sketch is None:
                self.sketch = kll_floats_sketch(KLL_K)
            self.sketch.update(value)
        self.dirty = True

    def offer_trace(self, value: float, trace_id: str, down: bool) -> None:
        if self.worst is None or (value < self.worst if down else value > self.worst):
            self.worst, self.worst_trace = value, trace_id


@dataclass
class Series:
    labels: tuple[str, ...]
    cur: dict[float, Bucket] = field(default_factory=dict)
    base: dict[float, Bucket] = field(default_factory=dict)
    exported: tuple[str, str, str] | None = None


def extract(ev: Event, head: str, key: str) -> float | None:
    """The event's value of a parsed field reference; None when absent, NaN when not a number."""
    raw: Any
    if head == "count":
        return 1.0
    if head == "score":
        raw = ev.score
    elif head == "label":
        raw = ev.label
    elif head == "fields":
        raw = ev.fields.get(key)
    else:
        raw = ev.features.get(key)
    if raw is None:
        return None
    if isinstance(raw, int | float):
        return float(raw)
    if isinstance(raw, str):
        try:
            return float(raw)
        except ValueError:
            return math.nan
    return math.nan


class CheckState:
    """One check's config, parsed once, and its series."""

    def __init__(self, name: str, cfg: BusinessCheckConfig) -> None:
        self.name = name
        self.cfg = cfg
        self.head, self.key = parse_field_ref(cfg.field)
        self.den_ref = parse_field_ref(cfg.denominator) if cfg.denominator else None
        self.quantile = cfg.aggregate == "quantile"
        self.per_version = "version" in cfg.group_by
        # Persisted buckets are only reused while the measured field stays the same.
        self.fp = hashlib.sha1(f"{cfg.field}|{cfg.denominator}|{cfg.aggregate}".encode()).hexdigest()[:12]
        self.series: dict[tuple[str, ...], Series] = {}
        self.horizon = cfg.window_secs + (cfg.baseline_secs or 0.0)

    def series_key(self, ev: Event) -> tuple[str, ...]:
        g = self.cfg.group_by
        if g == _MODEL:  # the default, and the other common one, without a generator per event
            return (ev.model,)
        if g == _MODEL_VERSION:
            return (ev.model, ev.version)
        return tuple(ev.model if x == "model" else ev.version for x in g)

    def model_version(self, s: Series) -> tuple[str, str]:
        """The (model, version) labels of a series: version ``all`` unless the check groups by version."""
        g = self.cfg.group_by
        model = s.labels[g.index("model")] if "model" in g else (self.cfg.model or "")
        version = s.labels[g.index("version")] if self.per_version else ALL_VERSIONS
        return model, version

    def add(self, s: Series, ev: Event, value: float, den: float) -> None:
        cfg = self.cfg
        ts = ev.timestamp
        at = ts - ts % cfg.bucket_secs
        if (b := s.cur.get(at)) is None:
            b = s.cur[at] = Bucket()
        b.add(value, den, self.quantile)
        if ev.trace_id:
            b.offer_trace(value, ev.trace_id, cfg.direction == "down")
        if cfg.baseline_secs is not None:
            at = ts - ts % cfg.baseline_bucket_secs
            if (base := s.base.get(at)) is None:
                base = s.base[at] = Bucket()
            base.add(value, den, self.quantile)
