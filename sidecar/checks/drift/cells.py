"""One column of a data file, cell by cell class: missing, a number, or text; its kind decided from all of them.

A cell is missing when it is null, empty, one of ``MISSING_TOKENS`` (``NA``, ``n/a``, ``null``, ...) or a
non-finite number. A column is numeric when at least ``NUMERIC_SHARE`` of its other cells are numbers, so one
stray word in a numeric column is counted (``non_numeric``, and as missing), not a change of kind; a column
with more text than that is categorical and every cell, numbers included, is a category. A declared kind wins.
Numbers keep their file order, so a seeded subsample picks the same rows as before.
"""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sidecar.checks.drift.references import Reference
from sidecar.checks.stats.core import Ecdf
from sidecar.checks.stats.windows import FeatureKind

__all__ = ["MISSING_TOKENS", "NUMERIC_SHARE", "ColumnCells", "Decided"]

MISSING_TOKENS = ("", "NA", "N/A", "n/a", "NaN", "nan", "null", "NULL", "None", "-")
NUMERIC_SHARE = 0.95  # a column is numeric when at least this share of its non-missing cells are numbers
# What a CSV cell that is a number looks like (after trimming blanks): decimal, exponent, inf, nan.
_NUMBER_RE = r"^[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|(?i:inf|infinity|nan))$"
_MISSING_SET = pa.array(MISSING_TOKENS, type=pa.string())


def _key(v: object) -> str:
    """A category name for a cell that was read as a value (the live check's rule: 7.0 -> "7")."""
    if isinstance(v, str):
        return v
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def _is_numeric_type(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t) or pa.types.is_decimal(t)


@dataclass(frozen=True)
class Decided:
    """A column once all its cells are in: the reference, and how many non-missing cells were not numbers."""

    reference: Reference
    non_numeric: int  # cells that are text (in a numeric column they also count as missing)
    cells: int  # non-missing cells (numbers and text)

    @property
    def non_numeric_share(self) -> float | None:
        return self.non_numeric / self.cells if self.cells else None


class ColumnCells:
    """The cells of one column, added chunk by chunk (Arrow arrays or Python values)."""

    def __init__(self, declared: FeatureKind | None = None) -> None:
        self.declared = declared
        self.total = 0
        self.missing = 0
        self.numbers: list[pa.Array] = []  # the cells that are numbers, as read (CSV text or Arrow numbers)
        self.n_numbers = 0
        self.texts: dict[str, int] = {}
        self.n_texts = 0

    def add_arrow(self, arr: pa.Array, *, parse_text: bool) -> None:
        """An Arrow chunk. ``parse_text``: its strings are CSV cells (missing tokens already null), so text
        that is a number is a number; otherwise strings are text and missing tokens are dropped here."""
        t = arr.type
        n = len(arr)
        if _is_numeric_type(t):
            self.total += n
            self.missing += arr.null_count
            self.numbers.append(arr)
            self.n_numbers += n - arr.null_count
            return
        if pa.types.is_null(t):
            self.total += n
            self.missing += n
            return
        if not (pa.types.is_string(t) or pa.types.is_large_string(t)):
            self.add_values(arr.to_pylist())
            return
        self.total += n
        # Distinct values first: a categorical column has few, so the number test runs on those, not per cell.
        vc = pc.value_counts(arr.drop_null())
        uniq, counts = vc.field("values"), vc.field("counts")
        n_nums = 0
        if parse_text and self.declared != "categorical":
            # The CSV reader converts a column of numbers itself: text here has cells that are not numbers, or
            # numbers with blanks around them. (Casting it to float would try, at ~1.6 us a cell.)
            num_u = pc.match_substring_regex(pc.utf8_trim_whitespace(uniq), _NUMBER_RE)
            if pc.any(num_u).as_py():
                nums = pc.utf8_trim_whitespace(arr.filter(pc.is_in(arr, value_set=uniq.filter(num_u))))
                n_nums = len(nums)
                self.numbers.append(nums)  # in file order
                self.n_numbers += n_nums
                uniq, counts = uniq.filter(pc.invert(num_u)), counts.filter(pc.invert(num_u))
        else:
            text = pc.invert(pc.is_in(uniq, value_set=_MISSING_SET))
            uniq, counts = uniq.filter(text), counts.filter(text)
        n_text = 0
        for k, c in zip(uniq.to_pylist(), counts.to_pylist(), strict=True):
            self.texts[k] = self.texts.get(k, 0) + c
            n_text += c
        self.n_texts += n_text
        self.missing += n - n_nums - n_text

    def add_values(self, values: list[object]) -> None:
        """Cells read as Python values (JSON Lines, Arrow types without a columnar rule)."""
        nums = array("d")
        for v in values:
            self.total += 1
            if v is None or (isinstance(v, str) and v in MISSING_TOKENS):
                self.missing += 1
            elif isinstance(v, int | float):
                nums.append(float(v))
            else:
                k = _key(v)
                self.texts[k] = self.texts.get(k, 0) + 1
                self.n_texts += 1
        if nums:
            self.numbers.append(pa.array(np.frombuffer(nums, dtype=np.float64)))
            self.n_numbers += len(nums)

    def kind(self) -> FeatureKind | None:
        if self.declared is not None:
            return self.declared
        cells = self.n_numbers + self.n_texts
        if cells == 0:
            return None
        return "numeric" if self.n_numbers >= NUMERIC_SHARE * cells else "categorical"

    def _floats(self) -> np.ndarray:
        parts = [np.asarray(pc.cast(a, pa.float64()).to_numpy(zero_copy_only=False)) for a in self.numbers if len(a)]
        return np.concatenate(parts) if parts else np.empty(0, dtype=np.float64)

    def decide(self, source: str, created_at: float, max_rows: int, rng: np.random.Generator) -> Decided | None:
        """The column's reference (None: not one value in it), a numeric one subsampled above ``max_rows``."""
        kind = self.kind()
        if kind is None:
            return None
        cells = self.n_numbers + self.n_texts
        if kind == "numeric":
            vals = self._floats()
            vals = vals[np.isfinite(vals)]  # Arrow nulls come out as NaN; NaN and inf cells are missing
            missing = self.missing + (self.n_numbers - vals.shape[0]) + self.n_texts
            if vals.shape[0] > max_rows:
                vals = rng.choice(vals, size=max_rows, replace=False)
            ref = Reference("numeric", self.total, missing, source, created_at, Ecdf.from_values(vals))
            return Decided(ref, self.n_texts, cells)
        counts = dict(self.texts)
        missing = self.missing
        for a in self.numbers:
            for item in pc.value_counts(a).to_pylist():
                v, c = item["values"], int(item["counts"])
                if v is None:
                    continue
                if isinstance(v, float) and not math.isfinite(v):
                    missing += c
                else:
                    counts[_key(v)] = counts.get(_key(v), 0) + c
        ref = Reference("categorical", self.total, missing, source, created_at, counts=counts)
        return Decided(ref, self.n_texts, cells)
