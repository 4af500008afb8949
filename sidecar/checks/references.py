"""Drift references: a frozen distribution per feature (from a file, a pinned window or last week's hours).

A numeric reference is a sorted sample (at most ``max_rows`` values: a larger file is subsampled with a fixed
seed, which adds a KS error of about 1.36 / sqrt(max_rows) at 95%) or a KLL sketch's CDF; a categorical
reference is exact category counts. References serialize to bytes for the embedded store.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from sidecar.checks.stats import Ecdf
from sidecar.checks.windows import FeatureKind, WindowSnapshot, pack, unpack

__all__ = ["Reference", "load_reference_file", "read_table"]


@dataclass(frozen=True)
class Reference:
    kind: FeatureKind
    total: int
    missing: int
    source: str  # file:<path> | pinned:<version> | rolling
    created_at: float
    ecdf: Ecdf | None = None
    counts: dict[str, int] | None = None

    @property
    def n(self) -> int:
        return self.total - self.missing

    @property
    def missing_ratio(self) -> float:
        return self.missing / self.total if self.total else math.nan

    @classmethod
    def from_snapshot(cls, snap: WindowSnapshot, source: str, created_at: float) -> Reference:
        return cls(snap.kind, snap.total, snap.missing, source, created_at, snap.ecdf, snap.counts)

    def to_bytes(self) -> bytes:
        header: dict[str, object] = {"kind": self.kind, "total": self.total, "missing": self.missing,
                                     "source": self.source, "created_at": self.created_at,
                                     "counts": self.counts}
        blobs: list[bytes] = []
        if self.ecdf is not None:
            header.update(n=self.ecdf.n, err=self.ecdf.approx_error, weighted=self.ecdf.cum is not None)
            blobs.append(self.ecdf.values.astype(np.float64).tobytes())
            if self.ecdf.cum is not None:
                blobs.append(self.ecdf.cum.astype(np.float64).tobytes())
        return pack(header, blobs)

    @classmethod
    def from_bytes(cls, data: bytes) -> Reference:
        h, blobs = unpack(data)
        ecdf = None
        if blobs:
            vals = np.frombuffer(blobs[0], dtype=np.float64).copy()
            cum = np.frombuffer(blobs[1], dtype=np.float64).copy() if h.get("weighted") else None
            ecdf = Ecdf(values=vals, n=int(h["n"]), cum=cum, approx_error=float(h["err"]))
        counts = h.get("counts")
        return cls(h["kind"], int(h["total"]), int(h["missing"]), str(h["source"]),
                   float(h["created_at"]), ecdf,
                   {str(k): int(v) for k, v in counts.items()} if isinstance(counts, dict) else None)


def read_table(path: str | Path) -> pa.Table:
    """Parquet, CSV or JSON Lines, chosen by the file's extension."""
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix in (".parquet", ".pq"):
        import pyarrow.parquet as pq

        return pq.read_table(p)
    if suffix == ".csv":
        import pyarrow.csv as pcsv

        return pcsv.read_csv(p)
    if suffix in (".jsonl", ".ndjson", ".json"):
        import pyarrow.json as pjson

        return pjson.read_json(p)
    raise ValueError(f"{p}: unsupported reference file type {suffix!r} (use .parquet, .csv or .jsonl)")


def _column_kind(col: pa.ChunkedArray) -> FeatureKind | None:
    t = col.type
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t):
        return "numeric"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_dictionary(t):
        return "categorical"
    return None


def load_reference_file(path: str | Path, *, created_at: float, max_rows: int, seed: int = 0,
                        kinds: dict[str, FeatureKind] | None = None,
                        columns: list[str] | None = None) -> dict[str, Reference]:
    """One reference per usable column (numeric or string); other column types are skipped."""
    table = read_table(path)
    kinds = kinds or {}
    out: dict[str, Reference] = {}
    source = f"file:{Path(path).name}"
    rng = np.random.default_rng(seed)
    for name in columns or table.column_names:
        if name not in table.column_names:
            continue
        col = table.column(name)
        kind = kinds.get(name) or _column_kind(col)
        if kind is None:
            continue
        total = len(col)
        if kind == "numeric":
            if not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type)
                    or pa.types.is_boolean(col.type)):
                continue
            arr = col.cast(pa.float64()).to_numpy(zero_copy_only=False)
            arr = np.asarray(arr, dtype=np.float64)
            finite = arr[np.isfinite(arr)]
            missing = total - int(finite.shape[0])
            if finite.shape[0] > max_rows:
                finite = rng.choice(finite, size=max_rows, replace=False)
            out[name] = Reference("numeric", total, missing, source, created_at, Ecdf.from_values(finite))
        else:
            values = col.cast(pa.string()).to_pylist()
            counts: dict[str, int] = {}
            missing = 0
            for v in values:
                if v is None:
                    missing += 1
                else:
                    counts[v] = counts.get(v, 0) + 1
            out[name] = Reference("categorical", total, missing, source, created_at, counts=counts)
    return out
