"""Drift references: a frozen distribution per feature (from a file, a pinned window or last week's hours).

A numeric reference is a sorted sample (at most ``max_rows`` values: a larger file is subsampled with a fixed
seed, which adds a KS error of about 1.36 / sqrt(max_rows) at 95%) or a KLL sketch's CDF; a categorical
reference is exact category counts. References serialize to bytes for the embedded store.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sidecar.checks.stats.core import Ecdf
from sidecar.checks.stats.windows import FeatureKind, WindowSnapshot, pack, unpack

__all__ = ["Reference"]


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
        header: dict[str, object] = {
            "kind": self.kind,
            "total": self.total,
            "missing": self.missing,
            "source": self.source,
            "created_at": self.created_at,
            "counts": self.counts,
        }
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
        return cls(
            h["kind"],
            int(h["total"]),
            int(h["missing"]),
            str(h["source"]),
            float(h["created_at"]),
            ecdf,
            {str(k): int(v) for k, v in counts.items()} if isinstance(counts, dict) else None,
        )
