"""The evaluator of the business checks: a series' aggregate over its window, against a baseline or a threshold.

The baseline window ends where the current window starts (only buckets wholly before it), so a regression does
not dilute its own baseline. The result is numbers and short tokens only (``Finding.facts``); the words an
operator reads are written in ``sidecar/alerting/render/business.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

from datasketches import kll_floats_sketch

from sidecar.checks.business.series import KLL_K, Bucket, CheckState, Series
from sidecar.facts import BusinessFacts
from sidecar.model import Finding
from sidecar.naming import camel_alertname

__all__ = ["Result", "evaluate_series", "to_finding"]


@dataclass(frozen=True)
class Result:
    model: str
    version: str
    value: float | None
    baseline: float | None
    change: float | None
    active: bool
    events: int
    baseline_events: int | None
    baseline_coverage: float | None
    # "" when the check could decide; "min_events" or "baseline" (too little baseline) otherwise.
    insufficient: str
    trace_id: str | None


def aggregate(chk: CheckState, buckets: list[Bucket], span: float) -> tuple[float | None, int]:
    n = sum(b.count for b in buckets)
    if n == 0:
        return None, 0
    agg = chk.cfg.aggregate
    if agg == "mean":
        return sum(b.total for b in buckets) / n, n
    if agg == "rate":
        return sum(b.total for b in buckets) / span, n
    if agg == "ratio":
        den = sum(b.den for b in buckets)
        return (sum(b.total for b in buckets) / den if den else None), n
    merged = kll_floats_sketch(KLL_K)
    for b in buckets:
        if b.sketch is not None:
            merged.merge(b.sketch)
    return float(merged.get_quantile(chk.cfg.quantile or 0.5)), n


def _worst_trace(buckets: list[Bucket], down: bool) -> str | None:
    """The trace of the window's worst event: one of the requests that pulled the value the bad way."""
    best: Bucket | None = None
    for b in buckets:
        if b.worst is None or b.worst_trace is None:
            continue
        if best is None or best.worst is None or (b.worst < best.worst if down else b.worst > best.worst):
            best = b
    return best.worst_trace if best is not None else None


def evaluate_series(chk: CheckState, s: Series, now: float) -> Result | None:
    """Evaluates one series after dropping its expired buckets; None when the series holds no data at all."""
    cfg = chk.cfg
    lo = now - cfg.window_secs
    # A bucket belongs to the window when it starts inside it, so a rate divides by about window_secs.
    for start in [b for b in s.cur if b <= lo]:
        del s.cur[start]
    cur = [b for start, b in s.cur.items() if start <= now]
    if cfg.baseline_secs is not None:
        blo = lo - cfg.baseline_secs
        for start in [b for b in s.base if b < blo]:
            del s.base[start]
    if not s.cur and not s.base:
        return None
    value, n = aggregate(chk, cur, cfg.window_secs)
    baseline: float | None = None
    change: float | None = None
    bn: int | None = None
    coverage: float | None = None
    insufficient = "min_events" if n < cfg.min_events or value is None else ""
    if cfg.compare == "relative":
        base = [b for start, b in s.base.items() if start + cfg.baseline_bucket_secs <= lo]
        baseline, bn = aggregate(chk, base, cfg.baseline_secs or 1.0)
        coverage = min(len(base) * cfg.baseline_bucket_secs / (cfg.baseline_secs or 1.0), 1.0)
        if not insufficient and (
            bn < cfg.min_baseline_events or baseline is None or coverage < cfg.min_baseline_coverage
        ):
            insufficient = "baseline"
        if value is not None and baseline:
            change = (value - baseline) / abs(baseline)
    measured = change if cfg.compare == "relative" else value
    active = False
    if not insufficient and measured is not None:
        limit = cfg.threshold if cfg.compare == "absolute" or cfg.direction == "up" else -cfg.threshold
        active = measured > limit if cfg.direction == "up" else measured < limit
    model, version = chk.model_version(s)
    return Result(
        model=model,
        version=version,
        value=value,
        baseline=baseline,
        change=change,
        active=active,
        events=n,
        baseline_events=bn,
        baseline_coverage=coverage,
        insufficient=insufficient,
        trace_id=_worst_trace(cur, cfg.direction == "down"),
    )


def to_finding(chk: CheckState, r: Result, now: float) -> Finding:
    cfg = chk.cfg
    labels = {"alertname": camel_alertname(chk.name), "model": r.model, "version": r.version}
    if cfg.team:
        labels["team"] = cfg.team
    baseline_detail = r.insufficient == "baseline"
    facts = BusinessFacts(
        display_name=cfg.display_name or chk.name.replace("_", " "),
        aggregate=cfg.aggregate,
        quantile=cfg.quantile,
        compare=cfg.compare,
        direction=cfg.direction,
        events=r.events,
        window_secs=cfg.window_secs,
        baseline_secs=cfg.baseline_secs,
        change=r.change,
        version_scope="version" if chk.per_version else "all",
        insufficient=r.insufficient or None,
        min_events=cfg.min_events if r.insufficient else None,
        baseline_events=r.baseline_events if baseline_detail else None,
        baseline_coverage=r.baseline_coverage if baseline_detail else None,
        min_baseline_events=cfg.min_baseline_events if baseline_detail else None,
        min_baseline_coverage=cfg.min_baseline_coverage if baseline_detail else None,
    )
    return Finding(
        check=chk.name,
        kind="business",
        labels=labels,
        active=r.active,
        value=r.value,
        threshold=cfg.threshold,
        baseline=r.baseline,
        effect_size=r.change,
        window_secs=cfg.window_secs,
        severity=cfg.severity,
        evaluated_at=now,
        insufficient_data=bool(r.insufficient),
        for_secs=cfg.for_secs,
        trace_id=r.trace_id,
        annotations={"runbook": cfg.runbook},
        facts=facts,
    )
