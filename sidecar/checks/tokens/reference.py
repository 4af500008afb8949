"""Token-length references: pinned from a version's first requests, or read from a reference file.

A reference file (``checks.tokens.reference.mode: file``) is JSON, one per model::

    {"id": "chat-2026-w48",
     "input":  {"edges": [1, 2, 5, 10, ...], "counts": [0, 0, 3, 10, ...], "sum": 612345},
     "output": {"edges": [...], "counts": [...]}}

``counts`` are per bucket (not cumulative), one more than ``edges`` (the last is the open bucket above the last
edge); ``sum`` (tokens) is optional and gives the reference's mean. Either direction may be left out. The ``id``
names the reference in findings and metrics (without one: the first 12 hex digits of the file's SHA-256).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from pathlib import Path

import orjson

from sidecar.checks.tokens.hist import Bins
from sidecar.errors import DataFileError

__all__ = ["DIRECTIONS", "TokenReference", "load_reference_file"]

DIRECTIONS = ("input", "output")


@dataclass(frozen=True, slots=True)
class TokenReference:
    bins: Bins
    mode: str  # pinned | file
    id: str  # pinned: "v<version>"; file: the file's id

    @property
    def mean(self) -> float | None:
        n = self.bins.n
        return self.bins.sum / n if n > 0 and self.bins.sum > 0 else None


def _bins(where: str, raw: object) -> Bins:
    if not isinstance(raw, dict):
        raise DataFileError(f"{where}: an object with edges and counts is required")
    edges, counts, total = raw.get("edges"), raw.get("counts"), raw.get("sum", 0.0)

    def numbers(x: object) -> bool:
        return isinstance(x, list) and all(
            isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in x
        )

    if not numbers(edges) or not numbers(counts) or not edges:
        raise DataFileError(f"{where}: edges and counts must be lists of finite numbers")
    assert isinstance(edges, list) and isinstance(counts, list)
    if sorted(set(edges)) != edges or edges[0] <= 0:
        raise DataFileError(f"{where}.edges: must be positive, distinct and ascending")
    if len(counts) != len(edges) + 1:
        raise DataFileError(f"{where}.counts: {len(counts)} counts for {len(edges)} edges (one more is needed)")
    if any(c < 0 for c in counts) or sum(counts) <= 0:
        raise DataFileError(f"{where}.counts: must be non-negative, and not all zero")
    if not isinstance(total, int | float) or isinstance(total, bool) or not math.isfinite(total) or total < 0:
        raise DataFileError(f"{where}.sum: must be a non-negative number")
    return Bins(tuple(float(e) for e in edges), [float(c) for c in counts], float(total))


def load_reference_file(path: str) -> dict[str, TokenReference]:
    """{direction: reference} of one file; a bad file is a DataFileError naming the file and the field (raised
    at start)."""
    try:
        data = Path(path).read_bytes()
        doc = orjson.loads(data)
    except (OSError, orjson.JSONDecodeError) as exc:
        raise DataFileError(f"token-length reference file {path}: {exc}") from exc
    if not isinstance(doc, dict):
        raise DataFileError(f"token-length reference file {path}: a JSON object is required")
    ref_id = doc.get("id")
    if not isinstance(ref_id, str) or not ref_id:
        ref_id = hashlib.sha256(data).hexdigest()[:12]
    out = {d: TokenReference(_bins(f"{path}: {d}", doc[d]), "file", ref_id[:64]) for d in DIRECTIONS if d in doc}
    if not out:
        raise DataFileError(f"token-length reference file {path}: neither input nor output is given")
    return out
