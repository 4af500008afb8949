"""Drift references: a frozen distribution per feature (from a file, a pinned window or last week's hours).

A numeric reference is a sorted sample (at most ``max_rows`` values: a larger file is subsampled with a fixed
seed, which adds a KS error of about 1.36 / sqrt(max_rows) at 95%) or a KLL sketch's CDF; a categorical
reference is exact category counts. References serialize to bytes for the embedded store.
"""

from __future__ import annotations

import csv
import math
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import orjson

from sidecar.checks.stats import Ecdf
from sidecar.checks.windows import FeatureKind, WindowSnapshot, pack, unpack

__all__ = ["Reference", "load_reference_file"]


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
        return cls(snap.kind, snap.total, snap.missing, source, created_at, snap.distribution(), snap.counts)

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


def _iter_rows(path: Path) -> Iterator[dict[str, object]]:
    suffix = path.suffix.lower()
    if suffix == ".csv":
        with path.open(newline="") as f:
            for row in csv.DictReader(f):
                yield {k: _csv_value(v) for k, v in row.items() if k is not None}
    elif suffix in (".jsonl", ".ndjson", ".json"):
        with path.open("rb") as f:
            for lineno, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    doc = orjson.loads(line)
                except orjson.JSONDecodeError as exc:
                    raise ValueError(f"{path}:{lineno}: not JSON ({exc})") from None
                if not isinstance(doc, dict):
                    raise ValueError(f"{path}:{lineno}: each line must be a JSON object")
                yield doc
    else:
        raise ValueError(f"{path}: unsupported reference file type {suffix!r} (use .parquet, .csv or .jsonl)")


def _csv_value(v: str | None) -> object:
    if v is None or v == "":
        return None
    try:
        return float(v)
    except ValueError:
        return v


def _is_parquet(path: Path) -> bool:
    return path.suffix.lower() in (".parquet", ".pq")


def _parquet_columns(path: Path, wanted: set[str] | None, kinds: dict[str, FeatureKind]) -> dict[str, _Column]:
    """Column by column, batch by batch: numeric Arrow columns go to numpy without a Python object per
    value (a 1M-row reference loads in well under a second); string columns are counted with
    ``value_counts``; any other type, or a declared kind that does not match the Arrow type, falls back to
    the per-value rules of CSV and JSON Lines."""
    try:
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq
    except ImportError as exc:  # pyarrow built for another numpy fails at import, not at install
        raise ValueError(f"{path}: reading Parquet needs a working pyarrow ({exc})") from None
    try:
        pf = pq.ParquetFile(path)
        names = [n for n in pf.schema_arrow.names if wanted is None or n in wanted]
        cols: dict[str, _Column] = {}
        for batch in pf.iter_batches(batch_size=65536, columns=names):
            for name, arr in zip(batch.schema.names, batch.columns, strict=True):
                col = cols.get(name)
                if col is None:
                    col = cols[name] = _Column(kinds.get(name))
                t = arr.type
                numeric_type = pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t) \
                    or pa.types.is_decimal(t)
                string_type = pa.types.is_string(t) or pa.types.is_large_string(t)
                if col.kind is None and numeric_type:
                    col.kind = "numeric"
                elif col.kind is None and string_type:
                    col.kind = "categorical"
                if col.kind == "numeric" and numeric_type:
                    vals = arr.cast(pa.float64()).to_numpy(zero_copy_only=False)  # nulls -> NaN
                    finite = vals[np.isfinite(vals)]
                    col.total += len(vals)
                    col.missing += len(vals) - len(finite)
                    col.numbers.frombytes(np.ascontiguousarray(finite, dtype=np.float64).tobytes())
                elif col.kind == "categorical" and string_type:
                    col.total += len(arr)
                    col.missing += arr.null_count
                    for item in pc.value_counts(arr).to_pylist():
                        if item["values"] is not None:
                            key = str(item["values"])
                            col.counts[key] = col.counts.get(key, 0) + int(item["counts"])
                else:
                    for v in arr.to_pylist():
                        col.add(v)
    except (OSError, pa.ArrowException) as exc:
        raise ValueError(f"{path}: not a readable Parquet file ({exc})") from None
    return cols


class _Column:
    def __init__(self, kind: FeatureKind | None) -> None:
        self.kind = kind
        self.numbers = array("d")
        self.counts: dict[str, int] = {}
        self.total = 0
        self.missing = 0

    def add(self, v: object) -> None:
        self.total += 1
        if v is None or (isinstance(v, float) and not math.isfinite(v)):
            self.missing += 1
            return
        if self.kind is None:  # the first value decides, as for live events
            self.kind = "numeric" if isinstance(v, int | float) else "categorical"
        if self.kind == "numeric":
            if isinstance(v, int | float):
                self.numbers.append(float(v))
            else:
                self.missing += 1
        else:
            key = v if isinstance(v, str) else (str(int(v)) if isinstance(v, float) and v.is_integer()
                                                else str(v))
            self.counts[key] = self.counts.get(key, 0) + 1


def load_reference_file(path: str | Path, *, created_at: float, max_rows: int, seed: int = 0,
                        kinds: dict[str, FeatureKind] | None = None,
                        columns: list[str] | None = None) -> dict[str, Reference]:
    """One reference per column of a Parquet, CSV or JSON Lines file.

    A column's kind is declared (``kinds``) or decided by its first non-missing value (a number -> numeric,
    a string -> categorical); later values of the other kind count as missing. Numeric columns longer than
    ``max_rows`` are subsampled with a fixed seed.
    """
    p = Path(path)
    kinds = kinds or {}
    cols: dict[str, _Column] = {}
    wanted = set(columns) if columns else None
    if _is_parquet(p):
        cols = _parquet_columns(p, wanted, kinds)
    else:
        for row in _iter_rows(p):
            for name, v in row.items():
                if wanted is not None and name not in wanted:
                    continue
                col = cols.get(name)
                if col is None:
                    col = cols[name] = _Column(kinds.get(name))
                col.add(v)
    out: dict[str, Reference] = {}
    source = f"file:{p.name}"
    rng = np.random.default_rng(seed)
    for name, col in cols.items():
        if col.kind is None:
            continue
        if col.kind == "numeric":
            arr = np.frombuffer(col.numbers, dtype=np.float64)
            if arr.shape[0] > max_rows:
                arr = rng.choice(arr, size=max_rows, replace=False)
            out[name] = Reference("numeric", col.total, col.missing, source, created_at,
                                  Ecdf.from_values(arr))
        else:
            out[name] = Reference("categorical", col.total, col.missing, source, created_at,
                                  counts=col.counts)
    return out
