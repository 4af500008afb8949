"""Reading a data file (Parquet, CSV, JSON Lines) into one frozen reference per column.

Used by file references of the live drift check and by the offline report (``sidecar drift``). CSV and Parquet
are read columnar with pyarrow (``csvread``: every CSV cell as text, common missing tokens as null); JSON Lines
line by line. A column's kind is decided from all its cells (``cells``): numeric when at least 95% of the
non-missing ones are numbers, the others counted as ``non_numeric`` (and as missing). Every error names the
file, its role (reference or current) and what is wrong with it: empty, a header without rows, not UTF-8, a
line that is not JSON.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import orjson

from sidecar.checks.drift.references import Reference
from sidecar.checks.stats.windows import FeatureKind
from sidecar.errors import DataFileError

if TYPE_CHECKING:  # pyarrow is imported when a file is read: the drift check loads without a working one
    import pyarrow as pa

    from sidecar.checks.drift.cells import Decided

__all__ = ["DataFile", "DataFileError", "hours_covered", "load_columns", "load_reference_file", "read_data_file"]

_CSV = (".csv", ".tsv", ".txt")
_JSONL = (".jsonl", ".ndjson", ".json")


@dataclass(frozen=True)
class DataFile:
    """A file read into references, with what the references do not say."""

    columns: dict[str, Decided]
    rows_read: int  # rows in the file
    rows_kept: int  # rows left after the hours filter (== rows_read without one)
    rows_skipped: int = 0  # CSV lines with another number of fields than the header
    hours: frozenset[int] | None = None
    empty: list[str] = field(default_factory=list)  # columns without a single value

    def references(self) -> dict[str, Reference]:
        return {k: v.reference for k, v in self.columns.items()}


def _need_pyarrow(path: Path, role: str) -> None:
    """pyarrow built for another numpy fails at import, not at install: say so for the file, once."""
    try:
        import pyarrow.compute  # noqa: F401
    except ImportError as exc:
        raise DataFileError(f"{role} file {path}: reading data files needs a working pyarrow ({exc})") from None


def _is_parquet(path: Path) -> bool:
    return path.suffix.lower() in (".parquet", ".pq")


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


def _hours_of(arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """The UTC hour of day of each value (-1 when it is no readable time), columnar where the type allows."""
    import pyarrow as pa
    import pyarrow.compute as pc

    t = arr.type
    if pa.types.is_timestamp(t):
        us = pc.cast(pc.cast(arr, pa.timestamp("us", tz="UTC")), pa.int64())
        secs = np.asarray(pc.fill_null(us, -(2**62)).to_numpy(zero_copy_only=False), dtype=np.float64) / 1e6
        return np.where(secs < -1e12, -1, (secs // 3600) % 24).astype(np.int64)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        try:
            arr = pc.cast(arr, pa.float64())
        except pa.ArrowInvalid:  # ISO 8601 text
            return np.array([-1 if (h := _hour_of(v)) is None else h for v in arr.to_pylist()], dtype=np.int64)
        t = arr.type
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        secs = np.asarray(pc.cast(arr, pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64)
        with np.errstate(invalid="ignore"):
            hours = np.where(np.isfinite(secs), (secs // 3600) % 24, -1)
        return hours.astype(np.int64)
    return np.array([-1 if (h := _hour_of(v)) is None else h for v in arr.to_pylist()], dtype=np.int64)


def _jsonl_rows(path: Path, role: str) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    try:
        if path.stat().st_size == 0:
            raise DataFileError(f"{role} file {path}: is empty")
        with path.open("rb") as f:
            for lineno, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    doc = orjson.loads(line)
                except orjson.JSONDecodeError as exc:
                    if isinstance(exc.__cause__, UnicodeDecodeError) or "utf-8" in str(exc).lower():
                        raise DataFileError(f"{role} file {path}: is not UTF-8 text (line {lineno})") from None
                    raise DataFileError(f"{role} file {path}: line {lineno} is not JSON ({exc})") from None
                if not isinstance(doc, dict):
                    raise DataFileError(f"{role} file {path}: line {lineno} is not a JSON object")
                rows.append(doc)
    except OSError as exc:
        raise DataFileError(f"{role} file {path}: cannot be read ({exc.strerror or exc})") from None
    if not rows:
        raise DataFileError(f"{role} file {path}: has no rows")
    return rows


def _table(path: Path, role: str, wanted: set[str] | None) -> tuple[pa.Table, int, bool]:
    """(the columns as Arrow, CSV lines skipped, whether strings are CSV text)."""
    import pyarrow as pa

    from sidecar.checks.drift.csvread import read_csv_table

    suffix = path.suffix.lower()
    if _is_parquet(path):
        try:
            import pyarrow.parquet as pq

            pf = pq.ParquetFile(path)
            names = [n for n in pf.schema_arrow.names if wanted is None or n in wanted]
            return pf.read(columns=names), 0, False
        except (OSError, pa.ArrowException) as exc:
            raise DataFileError(f"{role} file {path}: not a readable Parquet file ({exc})") from None
    if path.stat().st_size == 0:
        raise DataFileError(f"{role} file {path}: is empty")
    if suffix in _CSV:
        t = read_csv_table(path, role, wanted=wanted)
        return t.table, t.skipped, True
    raise DataFileError(f"{role} file {path}: unsupported file type {suffix!r} (use .parquet, .csv or .jsonl)")


def read_data_file(
    path: str | Path,
    *,
    created_at: float,
    max_rows: int,
    seed: int = 0,
    kinds: dict[str, FeatureKind] | None = None,
    columns: list[str] | None = None,
    role: str = "reference",
    time_column: str | None = None,
    hours: frozenset[int] | None = None,
) -> DataFile:
    """Every column of a Parquet, CSV or JSON Lines file, its kind decided from all its cells.

    Numeric columns longer than ``max_rows`` are subsampled with a fixed seed (file order kept before it, so the
    same rows are picked whatever the format). With ``hours``, only rows whose ``time_column`` falls in those
    UTC hours of day are read.
    """
    if max_rows < 1:
        raise ValueError(f"max_rows must be at least 1, not {max_rows}")
    p = Path(path)
    if not p.exists():
        raise DataFileError(f"{role} file {p}: does not exist")
    _need_pyarrow(p, role)
    import pyarrow as pa

    from sidecar.checks.drift.cells import ColumnCells, Decided

    kinds = kinds or {}
    wanted = set(columns) if columns else None
    read = None if wanted is None else wanted | ({time_column} if hours is not None and time_column else set())
    cells: dict[str, ColumnCells] = {}
    skipped = 0
    if p.suffix.lower() in _JSONL:
        jrows = _jsonl_rows(p, role)
        rows_read = len(jrows)
        if hours is not None and time_column:
            jrows = [r for r in jrows if _hour_of(r.get(time_column)) in hours]
        for r in jrows:
            for name in r:
                if (wanted is None or name in wanted) and name not in cells:
                    cells[name] = ColumnCells(kinds.get(name))
        for name, col in cells.items():
            col.add_values([r.get(name) for r in jrows])
        rows_kept = len(jrows)
    else:
        table, skipped, csv_text = _table(p, role, read)
        rows_read = table.num_rows
        if hours is not None and time_column:
            if time_column not in table.column_names:
                raise DataFileError(f"{role} file {p}: has no column {time_column!r}")
            keep = np.isin(_hours_of(table.column(time_column)), np.fromiter(hours, dtype=np.int64))
            table = table.filter(pa.array(keep, type=pa.bool_()))
        rows_kept = table.num_rows
        for name, chunked in zip(table.column_names, table.columns, strict=True):
            if wanted is not None and name not in wanted:
                continue
            col = cells.setdefault(name, ColumnCells(kinds.get(name)))
            for chunk in chunked.chunks:
                col.add_arrow(chunk, parse_text=csv_text)
    source = f"file:{p.name}"
    rng = np.random.default_rng(seed)
    out: dict[str, Decided] = {}
    empty: list[str] = []
    for name, col in cells.items():
        decided = col.decide(source, created_at, max_rows, rng)
        if decided is None:
            empty.append(name)
            ref = Reference("numeric", col.total, col.total, source, created_at)
            out[name] = Decided(ref, 0, 0)
        else:
            out[name] = decided
    return DataFile(out, rows_read, rows_kept, skipped, hours, empty)


def hours_covered(path: str | Path, time_column: str, *, role: str = "current") -> frozenset[int]:
    """The UTC hours of day (0..23) the rows of a file fall in, read from ``time_column``."""
    p = Path(path)
    if not p.exists():
        raise DataFileError(f"{role} file {p}: does not exist")
    _need_pyarrow(p, role)
    if p.suffix.lower() in _JSONL:
        rows = _jsonl_rows(p, role)
        if not any(time_column in r for r in rows):
            raise DataFileError(f"{role} file {p}: has no column {time_column!r}")
        found = {h for r in rows if (h := _hour_of(r.get(time_column))) is not None}
    else:
        table = _table(p, role, {time_column})[0]
        if time_column not in table.column_names:
            raise DataFileError(f"{role} file {p}: has no column {time_column!r}")
        found = {int(h) for h in np.unique(_hours_of(table.column(time_column))) if h >= 0}
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
    """One reference per column (``read_data_file``). ``keep_empty`` keeps a column without a single value (as a
    numeric reference with no distribution) so a report can say so instead of leaving it out."""
    f = read_data_file(
        path,
        created_at=created_at,
        max_rows=max_rows,
        seed=seed,
        kinds=kinds,
        columns=columns,
        role=role,
        time_column=time_column,
        hours=hours,
    )
    return {k: v.reference for k, v in f.columns.items() if keep_empty or k not in f.empty}


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
