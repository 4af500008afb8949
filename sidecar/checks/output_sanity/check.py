"""Output sanity: a model's live outputs must not be NaN/inf, all zeros, outside their declared range, or
collapsed onto one value. Each is its own test and its own finding (kind ``output_sanity``), with example
trace or request ids.

Outputs come off the events bus: the ``score`` of an event (the caller's /v1/events, a JSONL file) or named
features/fields (an output tensor of a Triton TENSORS trace mapped to features keeps NaN and inf as they
were). State per (model, version) is a ring of time buckets of counts, with at most ``max_distinct_values``
distinct values per bucket, so memory does not grow with traffic.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
from collections import Counter as Tally
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge

from sidecar.checks.output_sanity.config import ModelOutputsConfig, OutputSanityConfig
from sidecar.clock import Clock
from sidecar.component import Passive, Role
from sidecar.facts import OutputSanityFacts
from sidecar.model import Batch, Event, Finding

__all__ = ["ALERTNAME", "TESTS", "OutputSanityCheck"]

ALERTNAME = "ModelOutputSuspect"
TESTS = ("nonfinite", "all_zero", "out_of_range", "collapsed")
_DEFAULT = ModelOutputsConfig()


@dataclass
class _Bucket:
    total: int = 0
    hits: Tally[str] = field(default_factory=Tally)
    values: Tally[tuple[float, ...]] = field(default_factory=Tally)
    finite: int = 0  # events whose outputs are all finite: the collapse test's population


@dataclass
class _Series:
    buckets: dict[int, _Bucket] = field(default_factory=dict)
    # (timestamp, trace id, request id) of recent events that failed each test, newest last.
    examples: dict[str, deque[tuple[float, str | None, str | None]]] = field(default_factory=dict)


def _value(ev: Event, name: str) -> float | None:
    if name == "score":
        return ev.score
    head, _, key = name.partition(".")
    v = (ev.features if head == "features" else ev.fields).get(key)
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


class OutputSanityCheck(Passive):
    name = "output_sanity"
    role = Role.CHECK

    def __init__(
        self,
        cfg: OutputSanityConfig,
        *,
        registry: CollectorRegistry,
        clock: Clock,
        logger: logging.Logger | None = None,
    ) -> None:
        self.cfg = cfg
        self.clock = clock
        self.log = logger or logging.getLogger("sidecar.output_sanity")
        self._lock = threading.Lock()
        self._bucket_secs = cfg.window_secs / cfg.bucket_count
        self.series: dict[tuple[str, str], _Series] = {}
        self._versions: Tally[str] = Tally()
        self._taken = Counter("sidecar_output_sanity_events", "Events whose outputs were checked.", registry=registry)
        self._dropped = Counter(
            "sidecar_output_sanity_events_dropped",
            "Events the output sanity check could not use, by reason (no_output, too_old, model_limit, version_limit).",
            ["reason"],
            registry=registry,
        )
        lbl = ["model", "version", "test"]
        self._ratio = Gauge(
            "sidecar_output_sanity_ratio",
            "Share of the window's outputs failing a test (for collapsed: the share of the most common value).",
            lbl,
            registry=registry,
        )
        self._condition = Gauge(
            "sidecar_output_sanity_condition",
            "1 while a test's condition holds (before its hold duration), 0 while it does not.",
            lbl,
            registry=registry,
        )
        self._exported: set[tuple[str, str, str]] = set()

    # -- observe ---------------------------------------------------------------------------------------------
    def observe(self, batch: Batch) -> None:
        if batch.kind != "events":
            return
        now = self.clock.now()
        with self._lock:
            for ev in batch.items:
                if isinstance(ev, Event):
                    reason = self._observe_one(ev, now)
                    if reason:
                        self._dropped.labels(reason).inc()

    def _get_series(self, model: str, version: str) -> tuple[_Series | None, str]:
        key = (model, version)
        s = self.series.get(key)
        if s is not None:
            return s, ""
        if model not in self._versions and len(self._versions) >= self.cfg.max_models:
            return None, "model_limit"
        if self._versions[model] >= self.cfg.max_versions_per_model:
            return None, "version_limit"
        self._versions[model] += 1
        s = self.series[key] = _Series()
        return s, ""

    def _observe_one(self, ev: Event, now: float) -> str:
        mcfg = self.cfg.models.get(ev.model, _DEFAULT)
        vals = [v for v in (_value(ev, n) for n in mcfg.outputs) if v is not None]
        if not vals:
            return "no_output"
        if ev.timestamp < now - self.cfg.window_secs:
            return "too_old"
        s, reason = self._get_series(ev.model, ev.version)
        if s is None:
            return reason
        idx = int(ev.timestamp // self._bucket_secs)
        b = s.buckets.get(idx)
        if b is None:
            b = s.buckets[idx] = _Bucket()
        b.total += 1
        failed = []
        finite = all(math.isfinite(v) for v in vals)
        if not finite:
            failed.append("nonfinite")
        if all(v == 0 for v in vals):
            failed.append("all_zero")
        rng = mcfg.range
        if rng is not None and any(
            math.isfinite(v) and ((rng.min is not None and v < rng.min) or (rng.max is not None and v > rng.max))
            for v in vals
        ):
            failed.append("out_of_range")
        if finite:
            b.finite += 1
            key = tuple(round(v, 9) for v in vals)
            if key in b.values or len(b.values) < self.cfg.max_distinct_values:
                b.values[key] += 1
        for test in failed:
            b.hits[test] += 1
            ex = s.examples.get(test)
            if ex is None:
                ex = s.examples[test] = deque(maxlen=self.cfg.sample_ids)
            if ev.trace_id or ev.request_id:
                ex.append((ev.timestamp, ev.trace_id, ev.request_id))
        self._taken.inc()
        return ""

    # -- evaluate --------------------------------------------------------------------------------------------
    def evaluate(self, now: float) -> Sequence[Finding]:
        oldest = int((now - self.cfg.window_secs) // self._bucket_secs) + 1
        out: list[Finding] = []
        seen: set[tuple[str, str, str]] = set()
        with self._lock:
            for key in list(self.series):
                s = self.series[key]
                for idx in [i for i in s.buckets if i < oldest]:
                    del s.buckets[idx]
                if not s.buckets:
                    del self.series[key]
                    self._versions[key[0]] -= 1
                    if self._versions[key[0]] <= 0:
                        del self._versions[key[0]]
                    continue
                for f in self._series_findings(key, s, now):
                    out.append(f)
                    lbl = (key[0], key[1], f.labels["test"])
                    seen.add(lbl)
                    if not f.insufficient_data and f.value is not None:
                        self._ratio.labels(*lbl).set(f.value)
                        self._condition.labels(*lbl).set(1.0 if f.active else 0.0)
                    else:
                        seen.discard(lbl)
        for lbl in self._exported - seen:
            for g in (self._ratio, self._condition):
                with contextlib.suppress(KeyError):
                    g.remove(*lbl)
        self._exported = seen
        return out

    def _series_findings(self, key: tuple[str, str], s: _Series, now: float) -> list[Finding]:
        cfg = self.cfg
        mcfg = cfg.models.get(key[0], _DEFAULT)
        total = sum(b.total for b in s.buckets.values())
        hits: Tally[str] = Tally()
        values: Tally[tuple[float, ...]] = Tally()
        finite = 0
        for b in s.buckets.values():
            hits.update(b.hits)
            values.update(b.values)
            finite += b.finite
        t0 = now - cfg.window_secs
        out = []
        for test in TESTS:
            if test == "out_of_range" and mcfg.range is None:
                continue
            dominant_text: str | None = None
            if test == "collapsed":
                dominant, count = values.most_common(1)[0] if values else ((), 0)
                n, threshold, need = finite, cfg.collapsed_ratio, cfg.min_samples
                dominant_text = ",".join(f"{v:g}" for v in dominant)
            else:
                count, n = hits[test], total
                need = cfg.min_samples if test == "all_zero" else 1
                threshold = {
                    "nonfinite": cfg.nonfinite_max_ratio,
                    "all_zero": cfg.zero_max_ratio,
                    "out_of_range": cfg.out_of_range_max_ratio,
                }[test]
            rng = mcfg.range if test == "out_of_range" else None
            ratio = count / n if n else None
            examples = [e for e in s.examples.get(test, ()) if e[0] >= t0] if test != "collapsed" else []
            traces = [t for _, t, _ in examples if t]
            facts = OutputSanityFacts(
                test=test,
                total=total,
                n=n,
                count=count,
                ratio=ratio,
                outputs=",".join(mcfg.outputs),
                min_samples=cfg.min_samples,
                runbook=f"{ALERTNAME}.md",
                dominant=dominant_text,
                range_min=rng.min if rng is not None else None,
                range_max=rng.max if rng is not None else None,
                sample_trace_ids=",".join(traces),
                sample_request_ids=",".join(r for _, _, r in examples if r),
            )
            insufficient = n < need
            out.append(
                Finding(
                    check=self.name,
                    kind="output_sanity",
                    labels={"alertname": ALERTNAME, "model": key[0], "version": key[1], "test": test},
                    active=not insufficient and ratio is not None and ratio > threshold,
                    value=ratio,
                    threshold=threshold,
                    window_secs=cfg.window_secs,
                    severity=cfg.severity,
                    evaluated_at=now,
                    insufficient_data=insufficient,
                    for_secs=cfg.for_secs,
                    trace_id=traces[-1] if traces else None,
                    facts=facts,
                )
            )
        return out
