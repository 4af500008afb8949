"""Bounded time windows of one feature's values: exact while small, a KLL sketch once large.

A window is a ring of time buckets (``bucket_secs`` each, keyed by the event timestamp). A numeric bucket
keeps up to ``exact_cap`` raw values; past that its values are folded into a KLL sketch, so memory per bucket
is at most ``8 * exact_cap`` bytes plus one sketch (~5 KB at k=400, float items) whatever the traffic. A categorical
bucket keeps
counts for at most ``max_categories`` names; the rest are counted under ``__other__``. Missing values (None,
NaN, wrong type) are counted per bucket and never enter a statistic.

Windows serialize to bytes (``to_bytes`` / ``from_bytes``) so the check can persist them in the store.
"""

from __future__ import annotations

import math
import struct
from array import array
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

import numpy as np
import orjson

from sidecar.checks.stats.core import Ecdf
from sidecar.checks.stats.sketch import ITEMS, kll_from_bytes, kll_to_ecdf, kll_update, new_kll

__all__ = ["OTHER", "FeatureKind", "FeatureWindow", "WindowSnapshot", "pack", "unpack"]

FeatureKind = Literal["numeric", "categorical"]
OTHER = "__other__"


def pack(header: dict[str, object], blobs: list[bytes]) -> bytes:
    """A JSON header followed by raw binary blobs (no pickle: the store must never execute what it reads)."""
    head = orjson.dumps({"h": header, "b": [len(b) for b in blobs]})
    return struct.pack("<I", len(head)) + head + b"".join(blobs)


def unpack(data: bytes) -> tuple[dict[str, Any], list[bytes]]:
    (hlen,) = struct.unpack_from("<I", data, 0)
    meta = orjson.loads(data[4 : 4 + hlen])
    blobs: list[bytes] = []
    off = 4 + hlen
    for ln in meta["b"]:
        blobs.append(bytes(data[off : off + ln]))
        off += ln
    return meta["h"], blobs


@dataclass
class _Bucket:
    index: int
    total: int = 0
    missing: int = 0
    values: array = field(default_factory=lambda: array("d"))
    sketch: object | None = None
    counts: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class WindowSnapshot:
    """A window's merged content. An exact numeric window hands out its values unsorted (``raw``): taking the
    snapshot happens under the drift check's lock, sorting (``distribution()``) outside it, in parallel."""

    kind: FeatureKind
    total: int
    missing: int
    ecdf: Ecdf | None = None
    counts: dict[str, int] | None = None
    raw: np.ndarray | None = None

    @cached_property
    def _sorted(self) -> Ecdf | None:
        if self.ecdf is not None:
            return self.ecdf
        if self.raw is None:
            return None
        arr = self.raw.copy() if not self.raw.flags.writeable else self.raw
        arr.sort()  # in place: raw is this snapshot's own concatenated copy
        return Ecdf(values=arr, n=int(arr.shape[0]))

    def distribution(self) -> Ecdf | None:
        """The numeric distribution (sorted once, then cached); None for a categorical window."""
        return self._sorted

    @property
    def n(self) -> int:
        return self.total - self.missing

    @property
    def missing_ratio(self) -> float:
        return self.missing / self.total if self.total else math.nan


class FeatureWindow:
    """Not thread-safe on its own: the drift check serialises access with its lock."""

    def __init__(
        self,
        kind: FeatureKind,
        *,
        bucket_secs: float,
        n_buckets: int,
        exact_cap: int,
        kll_k: int = 400,
        max_categories: int = 100,
    ) -> None:
        self.kind = kind
        self.bucket_secs = float(bucket_secs)
        self.n_buckets = int(n_buckets)
        self.exact_cap = int(exact_cap)
        self.kll_k = int(kll_k)
        self.max_categories = int(max_categories)
        self._buckets: dict[int, _Bucket] = {}

    def _bucket(self, ts: float) -> _Bucket:
        idx = int(ts // self.bucket_secs)
        b = self._buckets.get(idx)
        if b is None:
            b = self._buckets[idx] = _Bucket(idx)
        return b

    def evict(self, now: float) -> None:
        oldest = int(now // self.bucket_secs) - self.n_buckets + 1
        for idx in [i for i in self._buckets if i < oldest]:
            del self._buckets[idx]

    def accepts(self, ts: float, now: float) -> bool:
        return int(ts // self.bucket_secs) > int(now // self.bucket_secs) - self.n_buckets

    def add_missing(self, ts: float) -> None:
        b = self._bucket(ts)
        b.total += 1
        b.missing += 1

    def add_number(self, ts: float, value: float) -> None:
        b = self._bucket(ts)
        b.total += 1
        if math.isnan(value) or math.isinf(value):
            b.missing += 1
            return
        b.values.append(value)
        if len(b.values) >= self.exact_cap:
            self._fold(b)

    def add_numbers(self, ts: float, values: np.ndarray, *, finite: bool = False) -> None:
        """Many values at one timestamp (a replay or a columnar batch); the same as ``add_number`` each.
        ``finite``: the caller knows every value is finite (an ``EventColumns`` column passed the door)."""
        b = self._bucket(ts)
        arr = np.asarray(values, dtype=np.float64)
        b.total += int(arr.shape[0])
        if finite:
            good = arr
        else:
            ok = np.isfinite(arr)
            if ok.all():  # the usual case (a columnar batch is finite): no copy
                good = arr
            else:
                b.missing += int(arr.shape[0] - int(ok.sum()))
                good = arr[ok]
        good = np.ascontiguousarray(good)
        if len(b.values) + good.shape[0] < self.exact_cap:  # no fold in this run: one copy in
            b.values.frombytes(good.tobytes())
            return
        # Folded at the same points as one by one (each time exact_cap values are held), so a bucket holds the
        # same raw values and its sketch took the same runs of values, whichever way they came in.
        start = 0
        while start < good.shape[0]:
            room = max(1, self.exact_cap - len(b.values))
            b.values.frombytes(good[start : start + room].tobytes())
            start += room
            if len(b.values) >= self.exact_cap:
                self._fold(b)

    def add_categories(self, ts: float, counts: dict[str, int], missing: int) -> int:
        """Counted categories at one timestamp; returns how many values went under ``__other__``."""
        b = self._bucket(ts)
        b.total += sum(counts.values()) + missing
        b.missing += missing
        other = 0
        for value, c in counts.items():
            if value not in b.counts and len(b.counts) >= self.max_categories:
                b.counts[OTHER] = b.counts.get(OTHER, 0) + c
                other += c
            else:
                b.counts[value] = b.counts.get(value, 0) + c
        return other

    def add_missing_many(self, ts: float, count: int) -> None:
        b = self._bucket(ts)
        b.total += count
        b.missing += count

    def _fold(self, b: _Bucket) -> None:
        if b.sketch is None:
            b.sketch = new_kll(self.kll_k)
        kll_update(b.sketch, np.frombuffer(b.values, dtype=np.float64))
        b.values = array("d")

    def add_category(self, ts: float, value: str) -> bool:
        """Returns False when the value was counted under ``__other__`` because of the category bound."""
        b = self._bucket(ts)
        b.total += 1
        if value not in b.counts and len(b.counts) >= self.max_categories:
            b.counts[OTHER] = b.counts.get(OTHER, 0) + 1
            return False
        b.counts[value] = b.counts.get(value, 0) + 1
        return True

    def covers(self, start: float, end: float) -> bool:
        """Whether every bucket overlapping [start, end) took at least one value."""
        lo, hi = math.floor(start / self.bucket_secs), math.ceil(end / self.bucket_secs)
        return all(i in self._buckets and self._buckets[i].total for i in range(lo, hi))

    def snapshot(self, start: float | None = None, end: float | None = None) -> WindowSnapshot:
        """The merged distribution of the buckets that overlap [start, end) (all buckets when omitted).

        Overlap, not "starts inside": a range shorter than a bucket (a 30-minute window over hourly history
        buckets) must still get the bucket it falls in, whatever the minute it starts at."""
        lo = -math.inf if start is None else math.floor(start / self.bucket_secs)
        hi = math.inf if end is None else math.ceil(end / self.bucket_secs)
        chosen = [b for i, b in sorted(self._buckets.items()) if lo <= i < hi]
        total = sum(b.total for b in chosen)
        missing = sum(b.missing for b in chosen)
        if self.kind == "categorical":
            counts: dict[str, int] = {}
            for b in chosen:
                for k, v in b.counts.items():
                    counts[k] = counts.get(k, 0) + v
            return WindowSnapshot(self.kind, total, missing, counts=counts)
        if all(b.sketch is None for b in chosen):
            vals = [np.frombuffer(b.values, dtype=np.float64) for b in chosen if len(b.values)]
            arr = np.concatenate(vals) if vals else np.empty(0)  # always a fresh, writeable copy
            return WindowSnapshot(self.kind, total, missing, raw=arr)
        merged = new_kll(self.kll_k)
        for b in chosen:
            if b.sketch is not None:
                merged.merge(b.sketch)
            if len(b.values):
                kll_update(merged, np.frombuffer(b.values, dtype=np.float64))
        return WindowSnapshot(self.kind, total, missing, ecdf=kll_to_ecdf(merged))

    def memory_bytes(self) -> int:
        """A rough upper bound of what the buckets hold (for docs and the memory gauge)."""
        out = 0
        for b in self._buckets.values():
            out += 8 * len(b.values) + 64
            if b.sketch is not None:
                out += 8 * int(b.sketch.num_retained) + 64  # type: ignore[attr-defined]
            out += sum(len(k) + 16 for k in b.counts)
        return out

    def to_bytes(self) -> bytes:
        header: dict[str, object] = {
            "kind": self.kind,
            "bucket_secs": self.bucket_secs,
            "n_buckets": self.n_buckets,
            "exact_cap": self.exact_cap,
            "kll_k": self.kll_k,
            "max_categories": self.max_categories,
            "kll_items": ITEMS,
            "buckets": [],
        }
        blobs: list[bytes] = []
        rows: list[dict[str, object]] = []
        for b in sorted(self._buckets.values(), key=lambda x: x.index):
            row: dict[str, object] = {"i": b.index, "t": b.total, "m": b.missing, "c": b.counts}
            row["v"] = len(blobs)
            blobs.append(b.values.tobytes())
            if b.sketch is not None:
                row["s"] = len(blobs)
                blobs.append(bytes(b.sketch.serialize()))  # type: ignore[attr-defined]
            rows.append(row)
        header["buckets"] = rows
        return pack(header, blobs)

    @classmethod
    def from_bytes(cls, data: bytes) -> FeatureWindow:
        h, blobs = unpack(data)
        w = cls(
            h["kind"],
            bucket_secs=float(h["bucket_secs"]),
            n_buckets=int(h["n_buckets"]),
            exact_cap=int(h["exact_cap"]),
            kll_k=int(h["kll_k"]),
            max_categories=int(h["max_categories"]),
        )
        for row in h["buckets"]:
            b = _Bucket(int(row["i"]), int(row["t"]), int(row["m"]))
            b.counts = {str(k): int(v) for k, v in row["c"].items()}
            b.values = array("d")
            b.values.frombytes(blobs[row["v"]])
            if "s" in row:
                b.sketch = kll_from_bytes(blobs[row["s"]], str(h.get("kll_items", "f64")))
            w._buckets[b.index] = b
        return w
