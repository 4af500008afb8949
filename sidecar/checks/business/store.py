"""Persistence of the business checks' buckets in the embedded store, so a restart does not blind a check whose
baseline is a week long.

Every bucket touched since the last write is written at each evaluation (``dirty``); a failed write leaves its
buckets dirty for the next round. Rows of a check whose measured field changed (another fingerprint), of a
check no longer configured, or older than the check's horizon are pruned.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Mapping
from typing import Any

from datasketches import kll_floats_sketch
from prometheus_client import Counter

from sidecar.checks.business.series import Bucket, CheckState, Series
from sidecar.store import Store

__all__ = ["TABLE", "BucketStore"]

TABLE = "business_buckets"


class BucketStore:
    def __init__(self, store: Store, *, errors: Counter, lock: threading.Lock, log: logging.Logger) -> None:
        self.store = store
        self.errors = errors
        self.lock = lock
        self.log = log
        # ``version`` is kept for rows written by older releases; series keys carry the version when it matters.
        self.store.execute(
            f"CREATE TABLE IF NOT EXISTS {TABLE} (chk TEXT, fp TEXT, series TEXT, tier TEXT, start REAL, "
            "count INTEGER, total REAL, den REAL, sketch BLOB, version TEXT, "
            "PRIMARY KEY (chk, fp, series, tier, start))"
        )

    def persist(self, checks: Mapping[str, CheckState]) -> None:
        with self.lock:
            rows, touched = self._dirty_rows(checks)
        if not rows:
            return
        try:
            self.store.executemany(
                f"INSERT OR REPLACE INTO {TABLE} (chk, fp, series, tier, start, count, total, den, sketch, "
                "version) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
        except Exception:
            self.errors.inc()
            self.log.exception("could not persist business-check buckets")
            with self.lock:
                for b in touched:
                    b.dirty = True  # written next round

    @staticmethod
    def _dirty_rows(checks: Mapping[str, CheckState]) -> tuple[list[tuple[Any, ...]], list[Bucket]]:
        """Rows for every bucket changed since the last write, marked clean (call with the lock held)."""
        rows: list[tuple[Any, ...]] = []
        touched: list[Bucket] = []
        for chk in checks.values():
            for s in chk.series.values():
                skey = json.dumps(list(s.labels))
                for tier, buckets in (("cur", s.cur), ("base", s.base)):
                    for start, b in buckets.items():
                        if not b.dirty:
                            continue
                        blob = b.sketch.serialize() if b.sketch is not None else None
                        rows.append((chk.name, chk.fp, skey, tier, start, b.count, b.total, b.den, blob, ""))
                        touched.append(b)
                        b.dirty = False
        return rows, touched

    def prune(self, checks: Mapping[str, CheckState], now: float) -> None:
        for chk in checks.values():
            try:
                self.store.execute(
                    f"DELETE FROM {TABLE} WHERE chk = ? AND (fp != ? OR start < ?)",
                    (chk.name, chk.fp, now - chk.horizon - chk.cfg.baseline_bucket_secs),
                )
            except Exception:
                self.errors.inc()
        if checks:
            marks = ",".join("?" * len(checks))
            try:
                self.store.execute(f"DELETE FROM {TABLE} WHERE chk NOT IN ({marks})", tuple(checks))
            except Exception:
                self.errors.inc()

    def load(self, checks: Mapping[str, CheckState], now: float) -> None:
        for chk in checks.values():
            try:
                rows = self.store.query(
                    f"SELECT series, tier, start, count, total, den, sketch FROM {TABLE} "
                    "WHERE chk = ? AND fp = ? AND start >= ? ORDER BY start",
                    (chk.name, chk.fp, now - chk.horizon - chk.cfg.baseline_bucket_secs),
                )
            except Exception:
                self.errors.inc()
                self.log.exception("could not load business-check buckets for %s", chk.name)
                continue
            for skey, tier, start, count, total, den, blob in rows:
                key = tuple(json.loads(skey))
                if len(key) != len(chk.cfg.group_by):
                    continue  # written under another group_by: a different series
                s = chk.series.get(key)
                if s is None:
                    if len(chk.series) >= chk.cfg.max_series:
                        continue
                    s = chk.series[key] = Series(labels=key)
                sketch = kll_floats_sketch.deserialize(blob) if blob is not None else None
                b = Bucket(count=count, total=total, den=den, sketch=sketch, dirty=False)
                (s.cur if tier == "cur" else s.base)[start] = b
