"""One (server, model, version)'s token-length state: the reference capture, the open window's increase per
direction, the recent verdicts, and one window's test (chi-square and PSI from ``sidecar.checks.stats``)."""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

from sidecar.checks.stats.core import chi_square
from sidecar.checks.tokens.hist import Bins, merge_for_test
from sidecar.checks.tokens.reference import DIRECTIONS, TokenReference

__all__ = ["Direction", "Look", "Series", "test_window"]

SeriesKey = tuple[str, str, str]  # (server, model, version)


@dataclass(frozen=True, slots=True)
class Look:
    """One window's outcome. ``state``: tested | few_requests | no_reference | bucket_edges_changed."""

    state: str
    n_cur: float
    n_ref: float
    statistic: float | None = None
    p: float = math.nan
    psi: float | None = None
    bins: int = 0
    mean_cur: float | None = None
    mean_ref: float | None = None
    ref_edges: tuple[float, ...] = ()
    cur_edges: tuple[float, ...] = ()
    q: float = math.nan
    drifted: bool = False


@dataclass
class Direction:
    """One direction (input or output tokens) of a series."""

    looks: deque[bool]
    pin: Bins | None = None  # the own reference being captured (mode pinned; once complete: PinnedRefs)
    block: Bins | None = None  # the open window's increase
    block_edges_changed: bool = False  # the open window saw other edges than its first increase's
    last: Look | None = None
    seen: bool = False


@dataclass
class Series:
    block_end: float
    last_at: float
    dirs: dict[str, Direction] = field(default_factory=dict)

    @classmethod
    def new(cls, now: float, window_secs: float, sustained_of: int) -> Series:
        end = (math.floor(now / window_secs) + 1) * window_secs
        return cls(end, now, {d: Direction(deque(maxlen=sustained_of)) for d in DIRECTIONS})


def _mean(b: Bins) -> float | None:
    n = b.n
    return b.sum / n if n > 0 and b.sum > 0 else None


def test_window(
    cur: Bins | None, edges_changed: bool, ref: TokenReference | None, cfg_min: int, min_expected: float
) -> Look:
    """The window's test against the reference, or why there is none (the test is refused when the edges differ:
    a chi-square over other buckets compares other things)."""
    n_cur = cur.n if cur is not None else 0.0
    n_ref = ref.bins.n if ref is not None else 0.0
    if ref is None:
        return Look("no_reference", n_cur, n_ref)
    if cur is not None and (edges_changed or cur.edges != ref.bins.edges):
        return Look("bucket_edges_changed", n_cur, n_ref, ref_edges=ref.bins.edges, cur_edges=cur.edges)
    if cur is None or n_cur < cfg_min or n_ref < cfg_min:
        return Look("few_requests", n_cur, n_ref, mean_ref=ref.mean)
    r, c = merge_for_test(ref.bins.counts, cur.counts, ref.bins.edges, min_expected)
    res = chi_square(r, c)
    return Look(
        "tested",
        n_cur,
        n_ref,
        statistic=res.statistic,
        p=res.p,
        psi=res.psi,
        bins=len(r),
        mean_cur=_mean(cur),
        mean_ref=ref.mean,
    )
