"""Reading a data file (Parquet, CSV, JSON Lines) into one frozen reference per column.

Used by file references of the live drift check and by the offline report (``sidecar drift``). Every error
names the file, its role (reference or current) and what is wrong with it: empty, a header without rows,
not UTF-8, a line that is not JSON. CSV delimiters are sniffed (``,`` ``;`` tab ``|``) and a UTF-8 byte order
mark is dropped, so the first column keeps its name.
"""

from __future__ import annotations

import csv
import datetime as dt
import math
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from sidecar.checks.drift.references import Reference
from sidecar.checks.stats.core import Ecdf
from sidecar.checks.stats.windows import FeatureKind
from sidecar.errors import DataFileError

__all__ = ["DataFileError", "hours_covered", "load_columns", "load_reference_file"]

_SNIFF_BYTES = 64 * 1024


def _is_parquet(path: Path) -> bool:
    return path.suffix.lower() in (".parquet", ".pq")


def _csv_value(v: str | None) -> object:
    if v is None or v == "":
        return None
    try:
        return float(v)
    except ValueError:
        return v


def _hour_of(v: object) -> int | None:
    """UTC hour of day of a time value: Unix seconds, or an ISO 8601 string (no zone = UTC)."""
    if isinstance(v, int | float) and not isinstance(v, bool):
        if not math.isfinite(v):
            return None
        return int((v // 3600) % 24)
    if isinstance(v, str):
        try:
            t = dt.datetime.fromisoformat(v.strip().replace("Z", "+00:00"))
        except ValueError:
            return None
        if t.tzinfo is not None:
            t = t.astimezone(dt.UTC)
        return t.hour
    return None


class _Rows:
    """Rows of a CSV or JSON Lines file as dicts, with errors that name the file."""

    def __init__(self, path: Path, role: str) -> None:
        self.path, self.role = path, role

    def fail(self, what: str) -> DataFileError:
        return DataFileError(f"{self.role} file {self.path}: {what}")

    def __iter__(self) -> Iterator[dict[str, object]]:
        suffix = self.path.suffix.lower()
        try:
            if self.path.stat().st_size == 0:
                raise self.fail("is empty")
            if suffix in (".csv", ".tsv", ".txt"):
                yield from self._csv()
            elif suffix in (".jsonl", ".ndjson", ".json"):
                yield from self._jsonl()
            else:
                raise self.fail(f"unsupported file type {suffix!r} (use .parquet, .csv or .jsonl)")
        except UnicodeDecodeError as exc:
            raise self.fail(f"is not UTF-8 text (byte {exc.start}: {exc.reason})") from None
        except OSError as exc:
            raise self.fail(f"cannot be read ({exc.strerror or exc})") from None

    def _csv(self) -> Iterator[dict[str, object]]:
        with self.path.open(newline="", encoding="utf-8-sig") as f:
            sample = f.read(_SNIFF_BYTES)
            f.seek(0)
            if f.read(1) != "\ufeff":  # utf-8-sig drops a BOM on read, not on seek(0): skip it again
                f.seek(0)
            try:
                dialect: type[csv.Dialect] | csv.Dialect = csv.Sniffer().sniff(sample, delimiters=",;\t|")
            except csv.Error:
                dialect = csv.excel
            reader = csv.DictReader(f, dialect=dialect)
            if not reader.fieldnames:
                raise self.fail("has no header line")
            n = 0
            for row in reader:
                n += 1
                yield {k: _csv_value(v) for k, v in row.items() if k is not None}
            if n == 0:
                raise self.fail(f"has a header ({', '.join(reader.fieldnames)}) but no rows")

    def _jsonl(self) -> Iterator[dict[str, object]]:
        n = 0
        with self.path.open("rb") as f:
            for lineno, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    doc = orjson.loads(line)
                except orjson.JSONDecodeError as exc:
                    raise self.fail(f"line {lineno} is not JSON ({exc})") from None
                if not isinstance(doc, dict):
                    raise self.fail(f"line {lineno} is not a JSON object")
                n += 1
                yield doc
        if n == 0:
            raise self.fail("has no rows")


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
            key = v if isinstance(v, str) else (str(int(v)) if isinstance(v, float) and v.is_integer() else str(v))
            self.counts[key] = self.counts.get(key, 0) + 1


def _parquet_columns(
    path: Path,
    role: str,
    wanted: set[str] | None,
    kinds: dict[str, FeatureKind],
    time_column: str | None,
    hours: frozenset[int] | None,
) -> dict[str, _Column]:
    """Column by column, batch by batch: numeric Arrow columns go to numpy without a Python object per
    value (a 1M-row reference loads in well under a second); string columns are counted with
    ``value_counts``; any other type, or a declared kind that does not match the Arrow type, falls back to
    the per-value rules of CSV and JSON Lines."""
    try:
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq
    except ImportError as exc:  # pyarrow built for another numpy fails at import, not at install
        raise DataFileError(f"{role} file {path}: reading Parquet needs a working pyarrow ({exc})") from None
    try:
        pf = pq.ParquetFile(path)
        names = [n for n in pf.schema_arrow.names if wanted is None or n in wanted]
        read = names + ([time_column] if hours is not None and time_column and time_column not in names else [])
        cols: dict[str, _Column] = {}
        for batch in pf.iter_batches(batch_size=65536, columns=read):
            if hours is not None and time_column:
                keep = [_hour_of(v) in hours for v in _time_values(batch.column(time_column))]
                batch = batch.filter(pa.array(keep, type=pa.bool_()))
            for name, arr in zip(batch.schema.names, batch.columns, strict=True):
                if name not in names:
                    continue
                col = cols.get(name)
                if col is None:
                    col = cols[name] = _Column(kinds.get(name))
                t = arr.type
                numeric_type = (
                    pa.types.is_integer(t)
                    or pa.types.is_floating(t)
                    or pa.types.is_boolean(t)
                    or pa.types.is_decimal(t)
                )
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
        raise DataFileError(f"{role} file {path}: not a readable Parquet file ({exc})") from None
    return cols


def _time_values(arr: Any) -> list[object]:
    import pyarrow as pa

    if pa.types.is_timestamp(arr.type):
        return [None if v is None else v.timestamp() for v in arr.cast(pa.timestamp("us", tz="UTC")).to_pylist()]
    return list(arr.to_pylist())


def hours_covered(path: str | Path, time_column: str, *, role: str = "current") -> frozenset[int]:
    """The UTC hours of day (0..23) the rows of a file fall in, read from ``time_column``."""
    p = Path(path)
    found: set[int] = set()
    if _is_parquet(p):
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            pf = pq.ParquetFile(p)
            if time_column not in pf.schema_arrow.names:
                raise DataFileError(f"{role} file {p}: has no column {time_column!r}")
            for batch in pf.iter_batches(batch_size=65536, columns=[time_column]):
                found.update(h for h in map(_hour_of, _time_values(batch.column(0))) if h is not None)
        except (OSError, pa.ArrowException) as exc:
            raise DataFileError(f"{role} file {p}: not a readable Parquet file ({exc})") from None
    else:
        seen_column = False
        for row in _Rows(p, role):
            if time_column in row:
                seen_column = True
                h = _hour_of(row[time_column])
                if h is not None:
                    found.add(h)
        if not seen_column:
            raise DataFileError(f"{role} file {p}: has no column {time_column!r}")
    if not found:
        raise DataFileError(
            f"{role} file {p}: column {time_column!r} holds no readable time (Unix seconds or ISO 8601)"
        )
    return frozenset(found)


def load_columns(
    path: str | Path,
    *,
    created_at: float,
    max_rows: int,
    seed: int = 0,
    kinds: dict[str, FeatureKind] | None = None,
    columns: list[str] | None = None,
    role: str = "reference",
    keep_empty: bool = False,
    time_column: str | None = None,
    hours: frozenset[int] | None = None,
) -> dict[str, Reference]:
    """One reference per column of a Parquet, CSV or JSON Lines file.

    A column's kind is declared (``kinds``) or decided by its first non-missing value (a number -> numeric,
    a string -> categorical); later values of the other kind count as missing. Numeric columns longer than
    ``max_rows`` are subsampled with a fixed seed. ``keep_empty`` keeps a column without a single value (as
    a numeric reference with no distribution) so a report can say so instead of leaving it out. With
    ``hours``, only rows whose ``time_column`` falls in those UTC hours of day are read.
    """
    if max_rows < 1:
        raise ValueError(f"max_rows must be at least 1, not {max_rows}")
    p = Path(path)
    kinds = kinds or {}
    wanted = set(columns) if columns else None
    if not p.exists():
        raise DataFileError(f"{role} file {p}: does not exist")
    if _is_parquet(p):
        cols = _parquet_columns(p, role, wanted, kinds, time_column, hours)
    else:
        cols = {}
        for row in _Rows(p, role):
            if hours is not None and time_column and _hour_of(row.get(time_column)) not in hours:
                continue
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
            if keep_empty:
                out[name] = Reference("numeric", col.total, col.total, source, created_at)
            continue
        if col.kind == "numeric":
            arr = np.frombuffer(col.numbers, dtype=np.float64)
            if arr.shape[0] > max_rows:
                arr = rng.choice(arr, size=max_rows, replace=False)
            out[name] = Reference("numeric", col.total, col.missing, source, created_at, Ecdf.from_values(arr))
        else:
            out[name] = Reference("categorical", col.total, col.missing, source, created_at, counts=col.counts)
    return out


def load_reference_file(
    path: str | Path,
    *,
    created_at: float,
    max_rows: int,
    seed: int = 0,
    kinds: dict[str, FeatureKind] | None = None,
    columns: list[str] | None = None,
) -> dict[str, Reference]:
    """One reference per column of a Parquet, CSV or JSON Lines file."""
    return load_columns(path, created_at=created_at, max_rows=max_rows, seed=seed, kinds=kinds, columns=columns)
