"""The canary's figures from Triton's own metrics: its per-version counters and, where on, its summaries.

Each published Triton scrape (a ``SeriesSnapshot`` on the bus, kind ``scrapes``) is grouped by model/version
(``processors.triton_snapshot``) and fed to a ``processors.derive.Deriver``, the one that makes the SLI
gauges: it owns the reset handling (a counter lower than before is a reset and counts from zero, a failed
scrape keeps the last good one so the next derives over the gap). Every scrape interval of a version becomes
one ``Interval``: requests served (successes, failures of every reason), their mean latency (delta
``nv_inference_request_duration_us`` / delta ``nv_inference_request_success``), its queue and compute parts,
and Triton's p50/p99 (``nv_inference_request_summary_us``) when summaries are on. An interval in which a
version's counters reset (Triton restarted, the version was reloaded) is dropped: what it covers is only
partly known, and the first requests after a load are the slow ones.

The tests, one-sided ("the candidate is worse"):

- ``latency_triton``: the mean latencies of the two versions in the same scrape intervals, paired, by a
  Wilcoxon signed-rank test on log(candidate / baseline). Only means are known per interval, so a test on
  requests is not possible; pairing by interval removes what both versions share (load, a noisy neighbour),
  and the log makes a busy interval weigh as much as a quiet one. Intervals are disjoint in time, so their
  means are independent enough for a rank test; it needs ``min_intervals`` pairs (with fewer the exact test
  cannot reach a small p).
- ``p50_triton``, ``p99_triton``: Triton's summary quantiles cover a sliding window of recent requests
  (``triton_summary_window_secs``), so consecutive scrapes share most of their requests and are not
  independent. Only readings at least one summary window apart are used (they cover disjoint requests), each
  with enough requests behind it for the quantile (``min_tail_samples`` above it), paired by scrape and tested
  like the means.
- ``errors_triton``: Fisher's exact test on (failures, successes) x (candidate, baseline), summed over the
  window: Triton's counters give counts, so the exact two-proportion test applies.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np
import scipy.stats as sps

from sidecar.checks.canary.stats import AspectResult
from sidecar.model import Batch, SeriesSnapshot
from sidecar.processors.derive import Deriver
from sidecar.processors.triton_snapshot import Key, snapshot_models

__all__ = ["TRITON_ASPECTS", "Interval", "TritonIntake", "triton_tests", "window_counts"]

TRITON_ASPECTS = ("latency_triton", "p50_triton", "p99_triton", "errors_triton")
_SUMMARY_Q = {"p50_triton": ("0.5", 0.5), "p99_triton": ("0.99", 0.99)}
_COMPUTE = ("compute_input", "compute_infer", "compute_output")


class Interval(NamedTuple):
    seq: int  # the scrape it ended at: pairs the two versions
    t: float  # wall time the scrape was published
    success: float
    failed: float
    mean_ms: float | None  # per successful request
    queue_ms: float | None
    compute_ms: float | None
    p50_ms: float | None  # Triton's summary at that scrape
    p99_ms: float | None


class TritonIntake:
    """Turns the Triton source's scrapes into per-version intervals; holds only the Deriver's last scrape."""

    def __init__(self, source: str, *, max_versions: int, window_secs: float) -> None:
        self.source = source
        self.max_versions = max_versions
        self.deriver = Deriver(ratio_window_s=window_secs, max_models=max_versions)
        self._resets: dict[Key, int] = {}
        self.seq = 0

    def take(self, batch: Batch) -> tuple[list[tuple[Key, Interval]], int, int]:
        """(intervals, versions refused above the cap, intervals dropped for a counter reset)."""
        if batch.source != self.source:
            return [], 0, 0
        if not batch.items:
            if batch.complete:  # the scrape failed: the next good one derives over the gap
                self.deriver.mark_stale()
            return [], 0, 0
        scrape: SeriesSnapshot = batch.items[-1]  # a "scrapes" batch carries SeriesSnapshot only (Bus.publish)
        models, _, refused = snapshot_models(scrape, self.max_versions)
        self.deriver.update(models, [], scrape.taken_at)
        self.seq += 1
        out: list[tuple[Key, Interval]] = []
        dropped = 0
        resets = self.deriver.model_resets
        for key in [k for k in self._resets if k not in resets]:
            del self._resets[key]  # gone from Triton; the Deriver remembers its resets if it comes back
        for key, snap in models.items():
            n_resets, before = resets.get(key, 0), self._resets.get(key, 0)
            self._resets[key] = n_resets
            got = self.deriver.interval(*key)
            if got is None:
                continue
            _dt, success, failed, stage_s = got
            success, failed = round(success), round(failed)
            if success + failed <= 0:
                continue  # no traffic: nothing to compare, and an idle version should leave the window
            if n_resets > before:
                dropped += 1
                continue
            mean = stage_s.get("request")
            queue = stage_s.get("queue")
            compute = sum(stage_s[s] for s in _COMPUTE) if all(s in stage_s for s in _COMPUTE) else None
            q = snap.quantiles
            out.append(
                (
                    key,
                    Interval(
                        self.seq,
                        batch.received_at,
                        float(success),
                        float(failed),
                        None if mean is None else mean * 1e3,
                        None if queue is None else queue * 1e3,
                        None if compute is None else compute * 1e3,
                        _ms(q.get(("request", "0.5"))),
                        _ms(q.get(("request", "0.99"))),
                    ),
                )
            )
        return out, refused, dropped


def _ms(s: float | None) -> float | None:
    return None if s is None or not math.isfinite(s) else s * 1e3


def _paired_p(base: Sequence[float], cand: Sequence[float]) -> float:
    """One-sided Wilcoxon signed-rank p of log(cand / base) > 0: the exact distribution up to 50 pairs without
    ties, else the normal approximation with its tie correction. Chosen here, because scipy's ``auto`` falls
    back to a permutation test on ties, which took seconds a pair (summary readings tie often: Triton
    reports whole microseconds)."""
    d = np.log(np.asarray(cand) / np.asarray(base))
    d = d[d != 0]
    if d.size == 0:
        return 1.0  # identical in every pair: nothing says the candidate is slower
    exact = d.size <= 50 and np.unique(np.abs(d)).size == d.size
    return float(sps.wilcoxon(d, alternative="greater", method="exact" if exact else "asymptotic").pvalue)


def _weighted(ivs: Sequence[Interval], attr: str) -> float | None:
    pairs = [(getattr(i, attr), i.success) for i in ivs if getattr(i, attr) is not None and i.success > 0]
    n = sum(w for _, w in pairs)
    return sum(v * w for v, w in pairs) / n if n > 0 else None


def _latency(base: Sequence[Interval], cand: Sequence[Interval], min_samples: int, min_intervals: int) -> AspectResult:
    nb, nc = int(sum(i.success for i in base)), int(sum(i.success for i in cand))
    r = AspectResult("latency_triton", nb, nc)
    by_seq = {i.seq: i for i in base if i.success > 0 and i.mean_ms}
    pairs = [(by_seq[i.seq].mean_ms, i.mean_ms) for i in cand if i.success > 0 and i.mean_ms and i.seq in by_seq]
    r.detail["intervals"] = len(pairs)
    for side, ivs in (("base", base), ("cand", cand)):
        for part in ("queue", "compute"):
            v = _weighted(ivs, f"{part}_ms")
            if v is not None:
                r.detail[f"{part}_{side}"] = v
    if nb < min_samples or nc < min_samples or len(pairs) < min_intervals:
        return r
    b, c = _weighted(base, "mean_ms"), _weighted(cand, "mean_ms")
    if b is None or c is None:
        return r
    r.base, r.cand = b, c
    r.diff = (c - b) / b if b > 0 else (math.inf if c > b else 0.0)
    r.p = _paired_p([p[0] for p in pairs if p[0] is not None], [p[1] for p in pairs if p[1] is not None])
    return r


class _Behind:
    """Successful requests of a version in (t - span, t], by prefix sums: O(log n) a reading."""

    def __init__(self, ivs: Sequence[Interval]) -> None:
        srt = sorted(ivs, key=lambda i: i.t)
        self.t = [i.t for i in srt]
        self.cum = [0.0, *itertools.accumulate(i.success for i in srt)]

    def __call__(self, t: float, span: float) -> float:
        return self.cum[bisect.bisect_right(self.t, t)] - self.cum[bisect.bisect_right(self.t, t - span)]


def _summary(
    aspect: str,
    base: Sequence[Interval],
    cand: Sequence[Interval],
    *,
    min_samples: int,
    min_intervals: int,
    min_tail: int,
    summary_window: float,
) -> AspectResult:
    attr = "p50_ms" if aspect == "p50_triton" else "p99_ms"
    q = _SUMMARY_Q[aspect][1]
    need = math.ceil(min_tail / (1 - q) - 1e-9)  # requests behind a reading for its quantile to mean anything
    by_seq = {i.seq: i for i in base if getattr(i, attr)}
    readings: list[tuple[float, float]] = []
    nb = nc = 0.0
    last = -math.inf
    behind_b, behind_c = _Behind(base), _Behind(cand)
    for i in sorted(cand, key=lambda x: x.t):
        j = by_seq.get(i.seq)
        if j is None or not getattr(i, attr) or i.t < last + summary_window:
            continue
        rb, rc = behind_b(j.t, summary_window), behind_c(i.t, summary_window)
        if rb < need or rc < need:
            continue
        readings.append((getattr(j, attr), getattr(i, attr)))
        nb, nc, last = nb + rb, nc + rc, i.t
    r = AspectResult(aspect, int(nb), int(nc))
    r.detail["intervals"] = len(readings)
    if nb < min_samples or nc < min_samples or len(readings) < min_intervals:
        return r
    b, c = float(np.median([x[0] for x in readings])), float(np.median([x[1] for x in readings]))
    r.base, r.cand = b, c
    r.diff = (c - b) / b if b > 0 else (math.inf if c > b else 0.0)
    r.p = _paired_p([x[0] for x in readings], [x[1] for x in readings])
    return r


def _errors(base: Sequence[Interval], cand: Sequence[Interval], min_samples: int) -> AspectResult:
    bs, bf = int(sum(i.success for i in base)), int(sum(i.failed for i in base))
    cs, cf = int(sum(i.success for i in cand)), int(sum(i.failed for i in cand))
    r = AspectResult("errors_triton", bs + bf, cs + cf)
    r.detail["intervals"] = len(cand)
    if bs + bf < min_samples or cs + cf < min_samples:
        return r
    r.base, r.cand = bf / (bs + bf), cf / (cs + cf)
    r.diff = r.cand - r.base
    r.p = float(sps.fisher_exact([[cf, cs], [bf, bs]], alternative="greater").pvalue)
    return r


def triton_tests(
    base: Sequence[Interval],
    cand: Sequence[Interval],
    *,
    min_samples: int,
    min_intervals: int,
    min_tail: int,
    summary_window: float,
) -> list[AspectResult]:
    """The four Triton aspects of a pair, in ``TRITON_ASPECTS`` order (p-values not yet adjusted)."""
    out = [_latency(base, cand, min_samples, min_intervals)]
    out += [
        _summary(
            a,
            base,
            cand,
            min_samples=min_samples,
            min_intervals=min_intervals,
            min_tail=min_tail,
            summary_window=summary_window,
        )
        for a in ("p50_triton", "p99_triton")
    ]
    out.append(_errors(base, cand, min_samples))
    return out


def window_counts(ivs: Sequence[Interval]) -> Mapping[str, float]:
    """What ``sidecar_canary_samples`` shows of a version's Triton intervals."""
    return {"triton_requests": sum(i.success + i.failed for i in ivs), "triton_intervals": float(len(ivs))}
