"""Which series the drift check holds: feature kinds, current windows, and the model/version name slots.

Not thread-safe on its own: the check's lock guards every call (``observe`` on the event loop, ``evaluate`` in
the worker thread).
"""

from __future__ import annotations

import math
from collections import Counter as Counter_
from collections.abc import Callable
from typing import Any

import numpy as np
from prometheus_client import Counter

from sidecar.checks.drift.config import DriftConfig
from sidecar.checks.drift.persistence import DriftStore, key
from sidecar.checks.stats.windows import FeatureKind, FeatureWindow

__all__ = ["CLASS", "SCORE", "ModelKey", "SeriesKey", "WindowRegistry"]

SCORE, CLASS = "_score", "_class"
SeriesKey = tuple[str, str, str]
ModelKey = tuple[str, str]


class WindowRegistry:
    def __init__(self, cfg: DriftConfig, store: DriftStore, dropped: Counter) -> None:
        self.cfg = cfg
        self.store = store
        self.dropped = dropped
        self.kinds: dict[tuple[str, str], FeatureKind] = {}
        self.windows: dict[SeriesKey, FeatureWindow] = {}
        self.models: set[ModelKey] = set()
        self.dirty: set[SeriesKey] = set()
        # When each series last took an event (clock time); a series loaded from the store counts as seen
        # at load, so a restart gives it a full idle period.
        self.last_seen: dict[SeriesKey, float] = {}
        self._per_model: dict[ModelKey, int] = {}
        self._model_seen: dict[ModelKey, float] = {}

    # ---- name slots ------------------------------------------------------------------------------
    def admit_model(self, mv: ModelKey, now: float) -> bool | None:
        """True when the pair is new and got a slot, None when it already had one, False when refused."""
        if mv in self.models:
            self._model_seen[mv] = now
            return None
        if len(self.models) >= self.cfg.max_models and mv[0] not in self.cfg.models:
            self.dropped.labels("model_limit").inc()
            return False
        self.models.add(mv)
        self._model_seen[mv] = now
        return True

    def window(self, k: SeriesKey, kind: FeatureKind, now: float) -> FeatureWindow | None:
        """The series' current window, made on first sight unless a series limit refuses it (counted)."""
        win = self.windows.get(k)
        if win is None:
            if self._per_model.get((k[0], k[1]), 0) >= self.cfg.max_series_per_model:
                self.dropped.labels("model_series_limit").inc()
                return None
            if len(self.windows) >= self.cfg.max_series:
                self.dropped.labels("series_limit").inc()
                return None
            win = self.adopt(k, self.new_window(kind), now)
        self.last_seen[k] = now
        return win

    def adopt(self, k: SeriesKey, win: FeatureWindow, now: float) -> FeatureWindow:
        """Takes a series in (new, or loaded from the store)."""
        self.windows[k] = win
        self.models.add((k[0], k[1]))
        self._model_seen.setdefault((k[0], k[1]), now)
        self.last_seen[k] = now
        self._per_model[(k[0], k[1])] = self._per_model.get((k[0], k[1]), 0) + 1
        return win

    def expire(self, now: float, idle_secs: Callable[[str], float]) -> tuple[list[SeriesKey], list[ModelKey]]:
        """Drops the series idle longer than ``idle_secs(model)``; returns them and the model slots freed."""
        gone = [k for k, seen in self.last_seen.items() if now - seen > idle_secs(k[0])]
        for k in gone:
            del self.windows[k], self.last_seen[k]
            self.dirty.discard(k)
            self.store.delete("drift.window", key(*k))
            mv = (k[0], k[1])
            left = self._per_model[mv] - 1
            if left:
                self._per_model[mv] = left
            else:
                del self._per_model[mv]
        held = {(k[0], k[1]) for k in self.windows}
        freed = [mv for mv in self.models if mv not in held and now - self._model_seen.get(mv, now) > idle_secs(mv[0])]
        self.models.difference_update(freed)
        for mv in freed:
            self._model_seen.pop(mv, None)
        features = {(k[0], k[2]) for k in self.windows}
        # Kinds named in config (or read from a reference file) stay; inferred ones go with their last series.
        for mf in [
            mf
            for mf in {(k[0], k[2]) for k in gone}
            if mf not in features and mf in self.kinds and mf[0] not in self.cfg.models
        ]:
            del self.kinds[mf]
            self.store.delete("drift.kinds", key(*mf))
        return gone, freed

    # ---- kinds -----------------------------------------------------------------------------------
    def kind(self, model: str, feature: str, value: object) -> FeatureKind | None:
        k = self.kinds.get((model, feature))
        if k is not None:
            return k
        m = self.cfg.models.get(model)
        declared = m.features.get(feature) if m is not None else None
        if declared is None:
            if feature == SCORE:
                declared = "numeric"
            elif feature == CLASS:
                declared = "categorical"
            elif not self.cfg.infer_features:
                return None
            elif isinstance(value, bool | int | float) and not (isinstance(value, float) and math.isnan(value)):
                declared = "numeric"
            elif isinstance(value, str):
                declared = "categorical"
            else:
                return None  # a missing first value tells nothing about the kind; decide on the next one
        return declared

    def remember_kind(self, model: str, feature: str, kind: FeatureKind) -> None:
        """Fixes a feature's kind once it has a series (so the kinds map is bounded like the series are)."""
        if (model, feature) in self.kinds:
            return
        self.kinds[(model, feature)] = kind
        self.store.save("drift.kinds", key(model, feature), kind)

    # ---- windows ---------------------------------------------------------------------------------
    def new_window(self, kind: FeatureKind) -> FeatureWindow:
        c = self.cfg
        if c.method == "multiscale":
            # Buckets of the smallest block; enough of them for the largest block plus the one filling now.
            # The raw values of the whole window stay within max_exact_samples, as in method 'window'.
            n = round(c.scales_secs[-1] / c.scales_secs[0]) + 1
            return FeatureWindow(
                kind,
                bucket_secs=c.scales_secs[0],
                n_buckets=n,
                exact_cap=max(1, c.max_exact_samples // n),
                kll_k=c.kll_k,
                max_categories=c.max_categories,
            )
        return FeatureWindow(
            kind,
            bucket_secs=c.window_secs / c.bucket_count,
            n_buckets=c.bucket_count,
            exact_cap=max(1, c.max_exact_samples // c.bucket_count),
            kll_k=c.kll_k,
            max_categories=c.max_categories,
        )

    def add(self, win: FeatureWindow, kind: FeatureKind, ts: float, value: object, counted: bool = False) -> None:
        """Adds one value; only the current window's add counts drops, so one value is counted once."""
        if value is None:
            win.add_missing(ts)
        elif kind == "numeric":
            if isinstance(value, bool | int | float):
                win.add_number(ts, float(value))
            else:
                if counted:
                    self.dropped.labels("type_mismatch").inc()
                win.add_missing(ts)
        elif isinstance(value, str):
            # str(): a str subclass (numpy's str_ from a column) would not serialize as a key of the store.
            if not win.add_category(ts, str(value)) and counted:
                self.dropped.labels("category_limit").inc()
        elif isinstance(value, float) and math.isnan(value):
            win.add_missing(ts)
        elif isinstance(value, bool | int | float):
            win.add_category(ts, str(value))
        else:
            if counted:
                self.dropped.labels("type_mismatch").inc()
            win.add_missing(ts)

    def add_many(self, win: FeatureWindow, kind: FeatureKind, ts: float, values: Any, counted: bool = False) -> None:
        """A column of values at one timestamp; numeric columns go in as one array. As in ``add``, only the
        current window's add (``counted``) counts drops."""
        if kind == "numeric" and isinstance(values, np.ndarray) and values.dtype.kind in "fiu":
            win.add_numbers(ts, values)
            return
        if kind == "numeric":
            for v in values:
                self.add(win, kind, ts, v, counted=counted)
            return
        counts: Counter_[str] = Counter_()
        missing = 0
        for v in values:
            if isinstance(v, str):
                counts[str(v)] += 1
            elif v is None or (isinstance(v, float) and math.isnan(v)):
                missing += 1
            elif isinstance(v, bool | int | float):
                counts[str(v)] += 1
            else:
                if counted:
                    self.dropped.labels("type_mismatch").inc()
                missing += 1
        other = win.add_categories(ts, dict(counts), missing)
        if other and counted:
            self.dropped.labels("category_limit").inc(other)

    def persist_rows(self, force: bool) -> list[tuple[str, str, bytes]]:
        keys = list(self.windows) if force else list(self.dirty)
        self.dirty.clear()
        return [("drift.window", key(*k), self.windows[k].to_bytes()) for k in keys if k in self.windows]
