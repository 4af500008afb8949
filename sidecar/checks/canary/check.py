"""Canary verdict: while two versions of a model serve side by side, is the candidate worse than the baseline?

Values come off the bus: events (``fields.latency_ms``, ``fields.error``, ``score``) and model spans (their
duration, and their status when one is set: Triton's own spans set none, so they never count as successes
that would dilute the caller's errors). Each version keeps the newest ``max_samples`` values per signal in
fixed numpy rings, so memory is bounded whatever the traffic. Every round each pair is tested on p50, p99,
error ratio and score distribution (``canary_stats``), Benjamini-Hochberg across those aspects; the verdict
is exported per aspect and returned as one finding per pair (kind ``canary``).

With the Triton scrape wired in (``triton_source``), each version also keeps its newest ``max_samples`` scrape
intervals of Triton's own counters and summaries (``canary_triton``), tested as four more aspects
(``latency_triton``, ``p50_triton``, ``p99_triton``, ``errors_triton``) inside the same Benjamini-Hochberg.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
from collections.abc import Sequence

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Gauge

from sidecar.checks.canary.config import CanaryConfig
from sidecar.checks.canary.stats import error_test, quantile_tests, score_test
from sidecar.checks.canary.triton import Interval, TritonIntake, triton_tests, window_counts
from sidecar.checks.canary.windows import PairResult, VersionWindows, version_key
from sidecar.checks.stats.core import benjamini_hochberg
from sidecar.clock import Clock
from sidecar.component import Passive, Role
from sidecar.facts import CanaryFacts
from sidecar.model import Batch, Event, Finding, SpanRequests
from sidecar.records import END, MODEL, NAME, START, STATUS, TRITON_MODEL_EVENTS

__all__ = ["ALERTNAME", "SIGNALS", "CanaryCheck", "PairResult"]

ALERTNAME = "CanaryVersionWorse"
SIGNALS = ("latency_events", "latency_spans", "errors", "scores")


class _LeftOut:
    """``model in left_out``: True for a model ``checks.canary.models`` / ``exclude_models`` leaves out (sets)."""

    def __init__(self, cfg: CanaryConfig) -> None:
        self.only = set(cfg.models) if cfg.models is not None else None
        self.excluded = set(cfg.exclude_models)

    def __contains__(self, model: str) -> bool:
        return model in self.excluded or (self.only is not None and model not in self.only)


class CanaryCheck(Passive):
    name = "canary"
    role = Role.CHECK

    def __init__(
        self,
        cfg: CanaryConfig,
        *,
        registry: CollectorRegistry,
        clock: Clock,
        logger: logging.Logger | None = None,
        triton_source: str | None = None,
    ) -> None:
        self.cfg = cfg
        # Only the scrapes of the named source; the wiring names it.
        self.triton = (
            TritonIntake(
                triton_source, max_versions=cfg.max_models * cfg.max_versions_per_model, window_secs=cfg.window_secs
            )
            if triton_source and cfg.triton
            else None
        )
        self.clock = clock
        self.log = logger or logging.getLogger("sidecar.canary")
        self._lock = threading.Lock()
        self.models: dict[str, dict[str, VersionWindows]] = {}
        self.results: list[PairResult] = []
        self._taken = Counter(
            "sidecar_canary_values",
            "Values taken into the canary comparison, by signal.",
            ["signal"],
            registry=registry,
        )
        self._dropped = Counter(
            "sidecar_canary_values_dropped",
            "Values the canary comparison could not keep, by reason (too_old, model_limit, version_limit; "
            "counter_reset: a Triton scrape interval in which the version's counters reset).",
            ["reason"],
            registry=registry,
        )
        pair = ["model", "baseline", "candidate"]
        lbl = [*pair, "aspect"]
        self._verdict = Gauge(
            "sidecar_canary_verdict",
            "1 while the candidate is worse than the baseline on this aspect (p50, p99, errors, scores), 0 while "
            "it is not; absent while the aspect has too few values to decide.",
            lbl,
            registry=registry,
        )
        self._base = Gauge(
            "sidecar_canary_baseline_value",
            "The baseline's figure of an aspect (latency ms, error ratio, mean score).",
            lbl,
            registry=registry,
        )
        self._cand = Gauge(
            "sidecar_canary_candidate_value",
            "The candidate's figure of an aspect (latency ms, error ratio, mean score).",
            lbl,
            registry=registry,
        )
        self._diff = Gauge(
            "sidecar_canary_difference",
            "Candidate vs baseline: relative for p50/p99, absolute for the error ratio, the KS distance for scores.",
            lbl,
            registry=registry,
        )
        self._q = Gauge(
            "sidecar_canary_q_value", "Benjamini-Hochberg q-value of an aspect's test.", lbl, registry=registry
        )
        self._insufficient = Gauge(
            "sidecar_canary_insufficient_data",
            "1 while no aspect of the pair has enough values to decide.",
            pair,
            registry=registry,
        )
        self._samples = Gauge(
            "sidecar_canary_samples",
            "Values of a version in the comparison window, by signal.",
            ["model", "version", "signal"],
            registry=registry,
        )
        self._left_out = _LeftOut(cfg)
        self._exported: set[tuple[str, ...]] = set()
        self._exported_samples: set[tuple[str, ...]] = set()

    # -- observe ---------------------------------------------------------------------------------------------
    def observe(self, batch: Batch) -> None:
        if batch.kind == "events":
            self._take_events(batch.items)
        elif batch.kind == "spans" and self.cfg.spans:
            self._take_spans(batch.items)
        elif batch.kind == "span_requests" and self.cfg.spans:
            self._take_requests(batch.items)
        elif batch.kind == "scrapes" and self.triton is not None:
            self._take_triton(batch)

    def _take_triton(self, batch: Batch) -> None:
        now = self.clock.now()
        with self._lock:
            got, refused, resets = self.triton.take(batch) if self.triton is not None else ([], 0, 0)
            if refused:
                self._dropped.labels("model_limit").inc(refused)
            if resets:
                self._dropped.labels("counter_reset").inc(resets)
            for (model, version), iv in got:
                v = self._version(model, version, iv.t, now)
                if v is not None:
                    v.add_interval(iv)
                    self._taken.labels("triton").inc()

    def _version(self, model: str, version: str, ts: float, now: float) -> VersionWindows | None:
        if model in self._left_out:  # checks.canary.models / exclude_models: configured out, not a drop
            return None
        if ts < now - self.cfg.window_secs:
            self._dropped.labels("too_old").inc()
            return None
        versions = self.models.get(model)
        if versions is None:
            if len(self.models) >= self.cfg.max_models:
                self._dropped.labels("model_limit").inc()
                return None
            versions = self.models[model] = {}
        v = versions.get(version)
        if v is None:
            if len(versions) >= self.cfg.max_versions_per_model:
                self._dropped.labels("version_limit").inc()
                return None
            v = versions[version] = VersionWindows(self.cfg.max_samples)
        return v

    def _take_events(self, items: Sequence[object]) -> None:
        now = self.clock.now()
        lat_f, err_f = self.cfg.latency_field, self.cfg.error_field
        with self._lock:
            for ev in items:
                if not isinstance(ev, Event):
                    continue
                lat, err = ev.fields.get(lat_f), ev.fields.get(err_f)
                if lat is None and err is None and ev.score is None:
                    continue
                v = self._version(ev.model, ev.version, ev.timestamp, now)
                if v is None:
                    continue
                for signal, x in (("latency_events", lat), ("scores", ev.score)):
                    if x is not None and math.isfinite(x):
                        v.add(signal, ev.timestamp, x)
                        self._taken.labels(signal).inc()
                if err is not None:
                    v.add("errors", ev.timestamp, 1.0 if err else 0.0)
                    self._taken.labels("errors").inc()

    def _take_spans(self, items: Sequence[object]) -> None:
        now = self.clock.now()
        taken = [0, 0, 0]  # by what _take_model_span returns: nothing, a latency, a latency and an error value
        with self._lock:
            for r in items:
                taken[self._take_record(r, now)] += 1
        self._count_taken(taken)

    def _take_requests(self, items: Sequence[SpanRequests]) -> None:
        """A trace file's requests whole: each one's model span, its first and last model event (the spans of a
        request that is not whole, ``SpanRequests.whole``, are built and taken as spans)."""
        now = self.clock.now()
        names = TRITON_MODEL_EVENTS
        taken = [0, 0, 0]
        with self._lock:
            for item in items:
                off = item.offset_ns
                for q, w in zip(item.requests, item.whole, strict=True):
                    if w is None:
                        for r in item.spans((q,)):
                            taken[self._take_record(r, now)] += 1
                        continue
                    t = [x for x in map(q.stamps.get, names) if x is not None]
                    taken[self._take_model_span(q.model, q.version, min(t) + off, max(t) + off, 0, now)] += 1
        self._count_taken(taken)

    def _take_record(self, r: object, now: float) -> int:
        """``_take_model_span`` of a span record that is a model span: Triton's span named after the model carries
        its name and version; its compute child and the InferRequest root do not, or would double the request."""
        if not isinstance(r, tuple) or r[MODEL] is None or r[NAME] == "compute":
            return 0
        model, version = r[MODEL]
        return self._take_model_span(str(model), str(version), r[START], r[END], r[STATUS], now)

    def _take_model_span(self, model: str, version: str, start: int, end: int, status: int, now: float) -> int:
        """Take a model span's latency, and its error value when it has a status: 0 neither taken, 1 latency, 2 both."""
        ts = end / 1e9
        v = self._version(model, version, ts, now)
        if v is None:
            return 0
        v.add("latency_spans", ts, max(0, end - start) / 1e6)
        if not status:  # unset (0) says nothing about success
            return 1
        v.add("errors", ts, 1.0 if status == 2 else 0.0)
        return 2

    def _count_taken(self, taken: list[int]) -> None:
        """Count a batch's taken values, one increment a signal (a labelled inc() a span cost as much as taking it)."""
        if taken[1] + taken[2]:
            self._taken.labels("latency_spans").inc(taken[1] + taken[2])
        if taken[2]:
            self._taken.labels("errors").inc(taken[2])

    # -- evaluate --------------------------------------------------------------------------------------------
    def _pairs(self, model: str, versions: Sequence[str]) -> list[tuple[str, str]]:
        p = self.cfg.pairs.get(model)
        if p is not None:
            return [(p.baseline, p.candidate)] if {p.baseline, p.candidate} <= set(versions) else []
        order = sorted(versions, key=version_key)
        return [(order[0], v) for v in order[1:]]

    def evaluate(self, now: float) -> Sequence[Finding]:
        t0 = now - self.cfg.window_secs
        data: dict[tuple[str, str], dict[str, np.ndarray]] = {}
        ivs: dict[tuple[str, str], list[Interval]] = {}
        pairs: list[tuple[str, str, str]] = []
        with self._lock:  # copy out under the lock; the statistics run outside it
            for model, versions in list(self.models.items()):
                for ver in [k for k, v in versions.items() if v.last_seen < t0]:
                    del versions[ver]  # gone from traffic: frees its slot for the next version
                if not versions:
                    del self.models[model]
                    continue
                for ver, v in versions.items():
                    data[(model, ver)] = {s: v.values(s, t0) for s in SIGNALS}
                    ivs[(model, ver)] = v.intervals(t0)
                pairs += [(model, b, c) for b, c in self._pairs(model, list(versions))]
        results = [self._compare(m, b, c, data[(m, b)], data[(m, c)], ivs[(m, b)], ivs[(m, c)]) for m, b, c in pairs]
        self._export(results, data, ivs)
        self.results = results
        return [self._finding(r, now) for r in results]

    def _compare(
        self,
        model: str,
        b: str,
        c: str,
        base: dict[str, np.ndarray],
        cand: dict[str, np.ndarray],
        base_iv: list[Interval],
        cand_iv: list[Interval],
    ) -> PairResult:
        cfg = self.cfg
        n = cfg.min_samples
        source = "spans" if min(base["latency_spans"].size, cand["latency_spans"].size) >= n else "events"
        lat = f"latency_{source}"
        aspects = quantile_tests(base[lat], cand[lat], min_samples=n, min_tail=cfg.min_tail_samples)
        aspects.append(error_test(base["errors"], cand["errors"], min_samples=n))
        aspects.append(score_test(base["scores"], cand["scores"], min_samples=n))
        if self.triton is not None:
            aspects += triton_tests(
                base_iv,
                cand_iv,
                min_samples=n,
                min_intervals=cfg.min_intervals,
                min_tail=cfg.min_tail_samples,
                summary_window=cfg.triton_summary_window_secs,
            )
        for a, q in zip(aspects, benjamini_hochberg([a.p for a in aspects]), strict=True):
            a.q = q
            floor = {
                "errors": cfg.min_error_ratio_diff,
                "errors_triton": cfg.min_error_ratio_diff,
                "scores": cfg.min_ks_d,
            }.get(a.aspect, cfg.min_relative_diff)
            a.worse = a.tested and q < cfg.alpha and a.diff is not None and a.diff >= floor
        return PairResult(model, b, c, source, aspects)

    def _export(
        self,
        results: list[PairResult],
        data: dict[tuple[str, str], dict[str, np.ndarray]],
        ivs: dict[tuple[str, str], list[Interval]],
    ) -> None:
        seen: set[tuple[str, ...]] = set()
        for r in results:
            pair = (r.model, r.baseline, r.candidate)
            self._insufficient.labels(*pair).set(1.0 if r.verdict == "insufficient" else 0.0)
            seen.add(pair)
            for a in r.aspects:
                if not a.tested:
                    continue
                lbl = (*pair, a.aspect)
                seen.add(lbl)
                self._verdict.labels(*lbl).set(1.0 if a.worse else 0.0)
                self._base.labels(*lbl).set(math.nan if a.base is None else a.base)
                self._cand.labels(*lbl).set(math.nan if a.cand is None else a.cand)
                self._diff.labels(*lbl).set(math.nan if a.diff is None else a.diff)
                self._q.labels(*lbl).set(a.q)
        for gone in self._exported - seen:
            gauges = (
                [self._insufficient] if len(gone) == 3 else [self._verdict, self._base, self._cand, self._diff, self._q]
            )
            for g in gauges:
                with contextlib.suppress(KeyError):
                    g.remove(*gone)
        self._exported = seen
        samples = {(m, v, s): float(arr.size) for (m, v), sig in data.items() for s, arr in sig.items()}
        if self.triton is not None:
            samples |= {(m, v, s): n for (m, v), iv in ivs.items() for s, n in window_counts(iv).items()}
        for key, n in samples.items():
            self._samples.labels(*key).set(n)
        for old in self._exported_samples - set(samples):
            with contextlib.suppress(KeyError):
                self._samples.remove(*old)
        self._exported_samples = set(samples)

    def _finding(self, r: PairResult, now: float) -> Finding:
        per_aspect: dict[str, float | int | str | None] = {}
        for a in r.aspects:
            per_aspect |= {
                f"{a.aspect}.base": a.base,
                f"{a.aspect}.cand": a.cand,
                f"{a.aspect}.diff": a.diff,
                f"{a.aspect}.q": None if math.isnan(a.q) else a.q,
                f"{a.aspect}.n_base": a.n_base,
                f"{a.aspect}.n_cand": a.n_cand,
            }
            per_aspect |= {f"{a.aspect}.{k}": x for k, x in a.detail.items()}
        facts = CanaryFacts(
            verdict=r.verdict,
            worse=",".join(a.aspect for a in r.aspects if a.worse),
            latency_source=r.latency_source,
            min_samples=self.cfg.min_samples,
            alpha=self.cfg.alpha,
            min_intervals=self.cfg.min_intervals,
            runbook=f"{ALERTNAME}.md",
            extra=per_aspect,
        )
        tested = [a for a in r.aspects if a.tested]
        return Finding(
            check=self.name,
            kind="canary",
            labels={"alertname": ALERTNAME, "model": r.model, "baseline": r.baseline, "candidate": r.candidate},
            active=self.cfg.alert and r.verdict == "worse",
            value=max((a.diff for a in r.aspects if a.worse and a.diff is not None), default=None),
            threshold=self.cfg.alpha,
            p_value=min((a.q for a in tested), default=None),
            window_secs=self.cfg.window_secs,
            severity=self.cfg.severity,
            evaluated_at=now,
            insufficient_data=r.verdict == "insufficient",
            for_secs=self.cfg.for_secs,
            facts=facts,
        )
