"""A read-only view of the drift check for the drift pages: per series the numbers of the last evaluation, the
reference it was tested against, and (for one series) both distributions as bounded arrays.

The numbers come from the check's own findings of the last round (handed in through ``record``), so the pages
show exactly what the gauges and the alerts were built from; the check itself is only read: its references
(``reference_for``, ``spec_for``) and a copy of one series' current window (``current_snapshot``). Nothing
here changes the check's state.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from sidecar.checks.drift.references import Reference
from sidecar.checks.drift.refs import NoReference
from sidecar.checks.stats.core import Ecdf
from sidecar.checks.stats.windows import OTHER
from sidecar.model import Finding

if TYPE_CHECKING:
    from sidecar.checks.drift.check import DriftCheck

__all__ = ["Bar", "DriftView", "SeriesDetail", "SeriesRow", "categorical_detail", "ks_location", "numeric_detail"]

MAX_POINTS = 240  # ECDF points per curve the detail page draws (a 1M-row reference is not sent to a browser)
MAX_BARS = 30  # categories drawn; the rest are pooled into one bar
MAX_NEW_LISTED = 50  # new category names listed on the detail page (the rest are counted)
_STATE_ORDER = {"drifting": 0, "condition": 1, "insufficient": 2, "ok": 3}

# The words of an insufficient-data reason and of multiscale evidence: the alerts' renderer's
# (sidecar/alerting/render/drift.py), handed in by wiring, so a page and an alert say the same thing. Without
# them (a test) the reason code and nothing are shown.
Words = Callable[[Mapping[str, object]], str]


def _code(facts: Mapping[str, object]) -> str:
    return str(facts.get("insufficient") or "")


def _nothing(facts: Mapping[str, object]) -> str:
    return ""


def _num(v: object) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) and not math.isnan(v) else None


@dataclass(frozen=True)
class SeriesRow:
    """One monitored feature of one model version, as the last evaluation left it."""

    model: str
    version: str
    feature: str
    kind: str  # numeric | categorical
    test: str  # ks | chi2
    state: str  # drifting | condition | insufficient | ok
    reason: str  # why insufficient (or why the state is what it is when missing values drive it)
    statistic: float | None
    p: float | None  # Benjamini-Hochberg adjusted
    p_raw: float | None
    effect: float | None
    floor: float | None
    psi: float | None
    held_secs: float | None  # how long the condition held (None: not holding); the missing test's if it marks the row
    sustained_secs: float | None  # how long it must hold
    evidence: str  # method multiscale: "2 of the last 3 60s blocks (need 2)"; "" for method window
    n_cur: int | None
    n_ref: int | None
    missing_cur: float | None
    missing_ref: float | None
    missing_state: str  # drifting | condition | ok | "" (not tested)
    missing_floor: float | None
    unseen_ratio: float | None
    unseen_count: int  # current values in new categories at the last evaluation
    new_categories: tuple[str, ...]
    method: str  # KS method (exact | asymp | sketch), chi-square: "dof N"
    ref_mode: str  # file | pinned | rolling
    ref_source: str  # file:<path> | pinned:<version> | rolling | ""
    ref_created_at: float | None
    ref_offset_secs: float | None  # rolling: how far back the reference lies
    evaluated_at: float
    # The findings' own facts (sidecar.facts.DriftFacts): the pages render the evidence and the "now" figures
    # from them with the alerts' renderer, so a page and an alert never tell two stories.
    facts: Mapping[str, object] = field(default_factory=dict)
    missing_facts: Mapping[str, object] = field(default_factory=dict)
    active: bool = False
    missing_active: bool = False

    @property
    def worst(self) -> tuple[int, float, float]:
        ratio = self.effect / self.floor if self.effect is not None and self.floor else 0.0
        return (_STATE_ORDER.get(self.state, 9), -ratio, self.p if self.p is not None else 2.0)


@dataclass(frozen=True)
class Bar:
    category: str
    ref_share: float
    cur_share: float
    new: bool  # in the current window, never in the reference


@dataclass(frozen=True)
class SeriesDetail:
    row: SeriesRow
    ref_reason: str  # why there is no reference distribution ("" when there is one)
    # Numeric: (x, F) points of each ECDF, x ascending; the KS D location (x, F_ref, F_cur) at that x.
    ref_points: tuple[tuple[float, float], ...] = ()
    cur_points: tuple[tuple[float, float], ...] = ()
    d_at: tuple[float, float, float] | None = None
    d_now: float | None = None  # D between the distributions drawn (= the statistic until new events arrive)
    x_range: tuple[float, float] | None = None
    # Categorical: bars, largest share first, at most MAX_BARS (+1 pooled).
    bars: tuple[Bar, ...] = ()
    new_categories: tuple[str, ...] = ()
    new_count: int = 0
    cur_total: int = 0
    ref_total: int = 0
    extra: dict[str, object] = field(default_factory=dict)


def _total(e: Ecdf) -> float:
    return float(e.n if e.cum is None else e.cum[-1])


def _cdf(e: Ecdf, x: np.ndarray, *, left: bool = False) -> np.ndarray:
    counts = e.count_lt(x) if left else e.count_le(x)
    return np.asarray(counts, dtype=np.float64) / _total(e)


def ks_location(ref: Ecdf, cur: Ecdf) -> tuple[float, float, float, float]:
    """(D, x, F_ref(x), F_cur(x)) at an x where |F_ref - F_cur| (both right-continuous) is largest.

    The supremum is reached at a current point, as the right values there or as the left limits just before
    it (see sidecar/checks/stats/core.py), so both are evaluated at every current point. A left limit is the right
    value at the largest point of either sample below that current point, which is the x reported then."""
    c = cur.values
    if c.size == 0 or _total(ref) == 0:
        return math.nan, math.nan, math.nan, math.nan
    right = np.abs(_cdf(cur, c) - _cdf(ref, c))
    left = np.abs(_cdf(ref, c, left=True) - _cdf(cur, c, left=True))
    i_r, i_l = int(np.argmax(right)), int(np.argmax(left))
    if right[i_r] >= left[i_l]:
        x = float(c[i_r])
    else:
        below = [float(v[k - 1]) for v in (ref.values, c) if (k := int(np.searchsorted(v, c[i_l], "left")))]
        x = max(below)  # not empty: a left limit of 0 - 0 never beats a right value
    at = np.array([x])
    f_ref, f_cur = float(_cdf(ref, at)[0]), float(_cdf(cur, at)[0])
    return abs(f_ref - f_cur), x, f_ref, f_cur


def _quantile(e: Ecdf, q: float) -> float:
    if e.cum is None:
        return float(e.values[min(e.n - 1, max(0, math.ceil(q * e.n) - 1))])
    i = int(np.searchsorted(e.cum, q * float(e.cum[-1]), side="left"))
    return float(e.values[min(i, len(e.values) - 1)])


def _points(e: Ecdf, lo: float, hi: float, extra_x: Sequence[float]) -> tuple[tuple[float, float], ...]:
    """At most MAX_POINTS (x, F(x)) steps of the ECDF inside [lo, hi], plus the left and right values at each
    of ``extra_x`` (so a curve passes exactly through the D marker's ends)."""
    vals = e.values[(e.values >= lo) & (e.values <= hi)]
    if vals.size > MAX_POINTS:
        vals = vals[np.linspace(0, vals.size - 1, MAX_POINTS).round().astype(int)]
    xs = np.unique(np.concatenate([vals, np.asarray(extra_x, dtype=np.float64)]))
    f_right, f_left = _cdf(e, xs), _cdf(e, xs, left=True)
    pts: list[tuple[float, float]] = [(lo, float(_cdf(e, np.array([lo]), left=True)[0]))]
    for x, fl, fr in zip(xs.tolist(), f_left.tolist(), f_right.tolist(), strict=True):
        pts.extend(((x, fl), (x, fr)))  # a vertical step at each point: the curve is a step function
    pts.append((hi, float(_cdf(e, np.array([hi]))[0])))
    return tuple(pts)


def _bars(ref: Mapping[str, int], cur: Mapping[str, int]) -> tuple[tuple[Bar, ...], list[str]]:
    rt, ct = sum(ref.values()) or 1, sum(cur.values()) or 1
    cats = set(ref) | set(cur)
    new = sorted((c for c in cur if c not in ref and c != OTHER and cur[c] > 0), key=lambda c: (-cur[c], c))
    order = sorted(cats, key=lambda c: (-max(ref.get(c, 0) / rt, cur.get(c, 0) / ct), c))
    bars = [Bar(c, ref.get(c, 0) / rt, cur.get(c, 0) / ct, c in new) for c in order[:MAX_BARS]]
    rest = order[MAX_BARS:]
    if rest:
        bars.append(
            Bar(
                f"{len(rest)} more categories",
                sum(ref.get(c, 0) for c in rest) / rt,
                sum(cur.get(c, 0) for c in rest) / ct,
                any(c in new for c in rest),
            )
        )
    return tuple(bars), new


def numeric_detail(row: SeriesRow, ref: Ecdf | None, cur: Ecdf | None) -> SeriesDetail:
    """Both ECDFs of one numeric series as bounded points, and where D lies (the detail page's drawing; the
    offline report draws its files with it too)."""
    if ref is None or cur is None or ref.n == 0 or cur.n == 0:
        return SeriesDetail(row, ref_reason="", extra={"empty": True})
    d, x, f_ref, f_cur = ks_location(ref, cur)
    lo = min(_quantile(ref, 0.005), _quantile(cur, 0.005), x)
    hi = max(_quantile(ref, 0.995), _quantile(cur, 0.995), x)
    if hi <= lo:
        lo, hi = lo - 0.5, hi + 0.5
    pad = (hi - lo) * 0.03
    lo, hi = lo - pad, hi + pad
    return SeriesDetail(
        row,
        ref_reason="",
        ref_points=_points(ref, lo, hi, [x]),
        cur_points=_points(cur, lo, hi, [x]),
        d_at=(x, f_ref, f_cur),
        d_now=d,
        x_range=(lo, hi),
        cur_total=cur.n,
        ref_total=ref.n,
    )


def categorical_detail(row: SeriesRow, ref: Mapping[str, int], cur: Mapping[str, int]) -> SeriesDetail:
    """The share per category of one categorical series, new categories marked."""
    bars, new = _bars(ref, cur)
    return SeriesDetail(
        row,
        ref_reason="",
        bars=bars,
        new_categories=tuple(new[:MAX_NEW_LISTED]),
        new_count=len(new),
        cur_total=sum(cur.values()),
        ref_total=sum(ref.values()),
    )


class DriftView:
    """What the drift pages read. ``record`` keeps the last round's drift findings (bounded by the check's own
    series limits: at most two findings per series it holds)."""

    def __init__(self, check: DriftCheck, *, reason_words: Words = _code, blocks_words: Words = _nothing) -> None:
        self._check = check
        self._reason, self._blocks = reason_words, blocks_words
        self._lock = threading.Lock()
        self._findings: dict[tuple[str, str, str], dict[str, Finding]] = {}
        self.evaluated_at: float | None = None

    def record(self, findings: Sequence[Finding], now: float) -> None:
        """Takes one evaluation round's findings (every check's; only the drift check's are kept)."""
        mine: dict[tuple[str, str, str], dict[str, Finding]] = {}
        for f in findings:
            if f.check != self._check.name or f.kind != "drift":
                continue
            key = (f.labels.get("model", ""), f.labels.get("version", ""), f.labels.get("feature", ""))
            mine.setdefault(key, {})[str(f.labels.get("test", ""))] = f
        if not mine and self._findings:
            # A round without drift findings: the check failed (counted by the service) or every series
            # expired. Keep the last numbers; the page shows when they were evaluated.
            return
        with self._lock:
            self._findings = mine
            self.evaluated_at = now

    def series(self, model: str = "") -> list[SeriesRow]:
        """Every monitored series (or one model's), worst first."""
        with self._lock:
            items = [(k, dict(v)) for k, v in self._findings.items() if not model or k[0] == model]
        rows = [r for k, tests in items if (r := self._row(k, tests)) is not None]
        return sorted(rows, key=lambda r: (r.worst, r.model, r.version, r.feature))

    def models(self) -> list[str]:
        with self._lock:
            return sorted({k[0] for k in self._findings})

    def detail(self, model: str, version: str, feature: str, now: float) -> SeriesDetail | None:
        """One series with both distributions, or None when the check does not monitor it."""
        with self._lock:
            tests = dict(self._findings.get((model, version, feature), {}))
        row = self._row((model, version, feature), tests)
        if row is None:
            return None
        ref = self._check.reference_for(model, version, feature, now)
        cur = self._check.current_snapshot(model, version, feature)
        if isinstance(ref, NoReference):
            return SeriesDetail(row, ref_reason=self._reason({**ref.facts, "insufficient": ref.reason}))
        if cur is None:
            return SeriesDetail(row, ref_reason="", extra={"no_current": True})
        if row.kind == "numeric":
            return numeric_detail(row, ref.ecdf, cur.distribution())
        return categorical_detail(row, ref.counts or {}, cur.counts or {})

    def _row(self, key: tuple[str, str, str], tests: dict[str, Finding]) -> SeriesRow | None:
        main = next((tests[t] for t in ("ks", "chi2") if t in tests), None)
        miss = tests.get("missing")
        f = main or miss
        if f is None:
            return None
        facts = f.facts
        model, version, feature = key
        if main is None:
            state = "insufficient"
        elif main.active:
            state = "drifting"
        elif main.annotations.get("condition") == "true":
            state = "condition"
        elif main.insufficient_data:
            state = "insufficient"
        else:
            state = "ok"
        missing_state = ""
        if miss is not None:
            missing_state = (
                "drifting" if miss.active else "condition" if miss.annotations.get("condition") == "true" else "ok"
            )
            if _STATE_ORDER[missing_state] < _STATE_ORDER[state]:
                state = missing_state
        reason = self._reason(facts) if facts.get("insufficient") else ""
        if missing_state in ("drifting", "condition"):
            reason = "missing values rose" + (f"; {reason}" if reason else "")
        spec = self._check.spec_for(model)
        ref_source, ref_created = "", None
        if spec.mode != "rolling":  # a rolling reference is built from history on demand: not for a list
            ref = self._check.reference_for(model, version, feature, f.evaluated_at)
            if isinstance(ref, Reference):
                ref_source, ref_created = ref.source, ref.created_at
        else:
            ref_source = "rolling"
        mf = miss.facts if miss is not None else {}
        unseen = str(facts.get("unseen") or "")
        test = str(facts.get("test") or (main.labels.get("test", "") if main else ""))
        return SeriesRow(
            model=model,
            version=version,
            feature=feature,
            kind="numeric" if test == "ks" else "categorical",
            test=test,
            state=state,
            reason=reason,
            statistic=main.value if main else None,
            p=main.p_value if main else None,
            p_raw=_num(facts.get("p_raw")) if main else None,
            effect=main.effect_size if main else None,
            floor=_num(facts.get("floor")) if main else None,
            psi=_num(facts.get("psi")) if main else None,
            # The hold of the test that marks the row: the missing-values test's when only it holds.
            held_secs=(
                _num(mf.get("held_secs"))
                if missing_state in ("drifting", "condition") and state == missing_state
                else _num(facts.get("held_secs"))
                if main
                else None
            ),
            sustained_secs=_num(facts.get("sustained_secs")),
            evidence=self._blocks(facts),
            n_cur=_int(facts.get("n_cur")),
            n_ref=_int(facts.get("n_ref")),
            missing_cur=_num(facts.get("missing_ratio")),
            missing_ref=_num(facts.get("ref_missing_ratio")),
            missing_state=missing_state,
            missing_floor=_num(mf.get("floor")),
            unseen_ratio=_num(facts.get("unseen_ratio")),
            unseen_count=_int(facts.get("unseen_count")) or 0,
            new_categories=tuple(c for c in unseen.split(", ") if c),
            method=(
                str(facts.get("method") or "")
                if test == "ks"
                else f"dof {facts.get('dof')}"
                if facts.get("dof") is not None
                else ""
            ),
            ref_mode=spec.mode,
            ref_source=ref_source,
            ref_created_at=ref_created,
            ref_offset_secs=spec.rolling_offset_secs if spec.mode == "rolling" else None,
            evaluated_at=f.evaluated_at,
            facts=facts,
            missing_facts=mf,
            active=main is not None and main.active,
            missing_active=miss is not None and miss.active,
        )


def _int(v: object) -> int | None:
    return int(v) if isinstance(v, int | float) and not isinstance(v, bool) and not math.isnan(v) else None
