"""A CSV file read columnar by pyarrow: numbers as numbers, any other cell as text (the kind is decided later
from all the cells: a column with one word among its numbers comes as text), common missing tokens read as
null, the delimiter sniffed (``,`` ``;`` tab ``|``), a UTF-8 byte order mark dropped.

A line with more or fewer fields than the header is skipped and counted (``skipped``), not fatal; every other
problem is a ``DataFileError`` naming the file, its role and what is wrong.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv

from sidecar.checks.drift.cells import MISSING_TOKENS
from sidecar.errors import DataFileError

__all__ = ["CsvTable", "read_csv_table"]

_SNIFF_BYTES = 64 * 1024
_SNIFF_LINES = 20


@dataclass(frozen=True)
class CsvTable:
    table: pa.Table  # one column per header name read: integers, floats, text or all null
    skipped: int  # lines with another number of fields than the header


def _dialect(sample: str) -> tuple[str, str]:
    # The first lines only: the sniffer's quote search is a regex over the whole sample that takes ~0.7 s on
    # 64 KiB of quoted cells, and 20 lines say as much about the delimiter.
    head = "\n".join(sample.splitlines()[:_SNIFF_LINES])
    try:
        d = csv.Sniffer().sniff(head, delimiters=",;\t|")
    except csv.Error:
        return ",", '"'
    return d.delimiter, d.quotechar or '"'


def _plain(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_string(t) or pa.types.is_null(t)


def read_csv_table(path: Path, role: str, *, wanted: set[str] | None = None) -> CsvTable:
    """The columns of ``path`` named in ``wanted`` (all when None)."""

    def fail(what: str) -> DataFileError:
        return DataFileError(f"{role} file {path}: {what}")

    try:
        with path.open("rb") as f:
            raw = f.read(_SNIFF_BYTES)
    except OSError as exc:
        raise fail(f"cannot be read ({exc.strerror or exc})") from None
    if not raw:
        raise fail("is empty")
    sample = raw.decode("utf-8", errors="replace").removeprefix("\ufeff")
    delimiter, quote = _dialect(sample)
    header = next(csv.reader(io.StringIO(sample), delimiter=delimiter, quotechar=quote), [])
    names = [h for h in header if h]
    if not names:
        raise fail("has no header line")
    # include_columns=[] would read every column: with none wanted, read the first to count the rows
    read = list(dict.fromkeys(n for n in names if wanted is None or n in wanted)) or names[:1]
    skipped = [0]

    def skip(row: Any) -> str:
        skipped[0] += 1
        return "skip"

    def read_as(text: list[str]) -> pa.Table:
        skipped[0] = 0
        return pacsv.read_csv(
            path,
            parse_options=pacsv.ParseOptions(delimiter=delimiter, quote_char=quote, invalid_row_handler=skip),
            convert_options=pacsv.ConvertOptions(
                column_types={n: pa.string() for n in text},
                include_columns=read,
                null_values=list(MISSING_TOKENS),
                strings_can_be_null=True,
                quoted_strings_can_be_null=True,
            ),
        )

    try:
        # Numbers are converted by the reader itself (in parallel: a cast of text afterwards costs ~4x more);
        # a column it takes for a date, a time or a boolean is read again as the text it is.
        table = read_as([])
        odd = [f.name for f in table.schema if not _plain(f.type)]
        if odd:  # also bytes that are not UTF-8 (binary): read as text, they fail here with what is wrong
            table = read_as(odd)
    except pa.ArrowInvalid as exc:
        msg = str(exc)
        if "UTF8" in msg or "UTF-8" in msg:
            raise fail(f"is not UTF-8 text ({msg})") from None
        raise fail(f"cannot be read as CSV ({msg})") from None
    except OSError as exc:
        raise fail(f"cannot be read ({exc.strerror or exc})") from None
    if table.num_rows == 0 and skipped[0] == 0:
        raise fail(f"has a header ({', '.join(names)}) but no rows")
    return CsvTable(table, skipped[0])
