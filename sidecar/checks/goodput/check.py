"""Goodput: the share of LLM requests meeting every configured SLO, per (model, version), with multi-window
burn-rate findings (burn rate = bad share over a window / (1 - objective); a pair fires when its long and its
short window both exceed its factor and both hold ``min_requests``, the SRE workbook's multiwindow alert).

Input: events (``POST /v1/events``, JSONL, trace files) whose ``fields`` carry the request's figures
(``sidecar.checks.goodput.figures``). Each judged request moves ``sidecar_goodput_requests_total{model, version,
good}``; the per-request figures go to histograms named after the OpenTelemetry GenAI metrics
(``gen_ai.server.time_to_first_token``, ``gen_ai.server.time_per_output_token``) with bucket edges at the SLO
bounds, so a goodput figure Prometheus computes from them is exact at those edges. Every request not judged is
counted in ``sidecar_goodput_dropped_total{reason}``.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from sidecar.checks.goodput.config import GoodputBurnWindow, GoodputConfig, RequestSlo
from sidecar.checks.goodput.figures import figures, judge, span_fields
from sidecar.checks.goodput.series import GoodSeries, WindowCounts
from sidecar.component import Passive, Role
from sidecar.facts_llm import GoodputFacts
from sidecar.model import Batch, Event, Finding
from sidecar.records import NAME, to_span

__all__ = ["RUNBOOK", "GoodputCheck"]

RUNBOOK = "GoodputBurn.md"
_BASE_EDGES_S = (0.01, 0.025, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0)
_TOKEN_EDGES = (1, 16, 64, 256, 1024, 4096, 16384)


def _edges(extra_ms: list[float | None]) -> tuple[float, ...]:
    return tuple(sorted({*_BASE_EDGES_S, *(x / 1000 for x in extra_ms if x is not None)}))


def _burn(c: WindowCounts, objective: float) -> float | None:
    return None if c.total == 0 else (1.0 - c.good / c.total) / (1.0 - objective)


class GoodputCheck(Passive):
    name = "goodput"
    role = Role.CHECK

    def __init__(self, cfg: GoodputConfig, *, registry: CollectorRegistry) -> None:
        self.cfg = cfg
        self._lock = threading.Lock()
        self.series: dict[tuple[str, str], GoodSeries] = {}
        self._hist: dict[tuple[str, str], tuple[Any, Any, Any]] = {}  # each series' histogram children
        self._keep = max(w.long_secs for w in cfg.burn_windows)
        self._windows = sorted({x for w in cfg.burn_windows for x in (w.long_secs, w.short_secs)})
        lbl = ["model", "version"]
        slos = list(cfg.slos.values())
        self._requests = Counter(
            "sidecar_goodput_requests",
            "LLM requests judged against the goodput SLOs (good: met every configured bound).",
            [*lbl, "good"],
            registry=registry,
        )
        self._missed = Counter(
            "sidecar_goodput_slo_missed",
            "Judged requests that missed one SLO bound (slo: ttft | inter_token | e2e).",
            [*lbl, "slo"],
            registry=registry,
        )
        self._dropped = Counter(
            "sidecar_goodput_dropped",
            "Events and spans not judged (reason: no_slo | no_llm_fields | missing_field | series_limit | no_model).",
            ["reason"],
            registry=registry,
        )
        self._ttft = Histogram(
            "sidecar_gen_ai_server_time_to_first_token_seconds",
            "Time to first token per request (gen_ai.server.time_to_first_token), from events.",
            lbl,
            buckets=_edges([s.ttft_ms for s in slos]),
            registry=registry,
        )
        self._itl = Histogram(
            "sidecar_gen_ai_server_time_per_output_token_seconds",
            "Mean inter-token latency per request (gen_ai.server.time_per_output_token), from events.",
            lbl,
            buckets=_edges([s.inter_token_ms for s in slos]),
            registry=registry,
        )
        self._tokens = Histogram(
            "sidecar_gen_ai_output_tokens",
            "Output tokens per request (gen_ai.client.token.usage, type output), from events.",
            lbl,
            buckets=_TOKEN_EDGES,
            registry=registry,
        )
        self._objective = Gauge("sidecar_goodput_objective", "The goodput objective.", registry=registry)
        self._objective.set(cfg.objective)
        self._ratio = Gauge(
            "sidecar_goodput_ratio",
            "Good share of judged requests over a window.",
            [*lbl, "window_secs"],
            registry=registry,
        )
        self._burn_g = Gauge(
            "sidecar_goodput_burn_rate",
            "Bad share over a window divided by the error budget (1 - objective).",
            [*lbl, "window_secs"],
            registry=registry,
        )
        self._condition = Gauge(
            "sidecar_goodput_condition", "1 while a burn-rate pair fires (check goodput_burn).", lbl, registry=registry
        )

    def slo_for(self, model: str) -> RequestSlo | None:
        return self.cfg.slos.get(model) or self.cfg.slos.get("*")

    # -- observe ---------------------------------------------------------------------------------------------
    def observe(self, batch: Batch) -> None:
        if batch.kind != "events":
            return
        # Counted once per batch and label set: the same totals as one increment per event, far fewer look-ups.
        drops: dict[str, int] = {}
        judged: dict[tuple[str, str, str], int] = {}
        with self._lock:
            for ev in batch.items:
                reason = self._observe_one(ev, batch.received_at, judged)
                if reason:
                    drops[reason] = drops.get(reason, 0) + 1
        for reason, n in drops.items():
            self._dropped.labels(reason).inc(n)
        for (model, version, what), n in judged.items():
            if what in ("true", "false"):
                self._requests.labels(model, version, what).inc(n)
            else:
                self._missed.labels(model, version, what).inc(n)

    def observe_spans(self, batch: Batch) -> None:
        """LLM request spans (``span_names``): each judged as an event of its ``gen_ai.response.model`` (or
        ``gen_ai.request.model``), version "". Other spans are not LLM requests and are skipped by name before
        anything is decoded, so Triton's span rates cost one set look-up each."""
        names = self.cfg.span_names
        if batch.kind != "spans" or not names:
            return
        events: list[Event] = []
        no_model = 0
        for rec in batch.items:
            if rec[NAME] not in names:
                continue
            span = to_span(rec)
            model = span.attributes.get("gen_ai.response.model") or span.attributes.get("gen_ai.request.model")
            if not isinstance(model, str) or not model:
                no_model += 1
                continue
            ts = span.start_unix_nano / 1e9
            events.append(Event(model=model, version="", timestamp=ts, fields=span_fields(span.attributes)))
        if no_model:
            self._dropped.labels("no_model").inc(no_model)
        if events:
            self.observe(Batch(kind="events", source=batch.source, items=tuple(events), received_at=batch.received_at))

    def _observe_one(self, ev: Event, at: float, judged: dict[tuple[str, str, str], int]) -> str:
        slo = self.slo_for(ev.model)
        if slo is None:
            return "no_slo"
        fig = figures(ev.fields)
        if fig.ttft_ms is None and fig.inter_token_ms is None and fig.e2e_ms is None and fig.tokens_out is None:
            return "no_llm_fields"  # not an LLM request's event (a drift or business event of another model)
        verdict = judge(fig, slo)
        if verdict is None:
            return "missing_field"
        key = (ev.model, ev.version)
        s = self.series.get(key)
        if s is None:
            if len(self.series) >= self.cfg.max_series:
                return "series_limit"
            s = self.series[key] = GoodSeries(self.cfg.bucket_secs, self._keep)
        good, missed = verdict
        s.add(at, good, missed)
        for what in ("true" if good else "false", *missed):
            k3 = (*key, what)
            judged[k3] = judged.get(k3, 0) + 1
        hist = self._hist.get(key)
        if hist is None:
            hist = self._hist[key] = (self._ttft.labels(*key), self._itl.labels(*key), self._tokens.labels(*key))
        if fig.ttft_ms is not None:
            hist[0].observe(fig.ttft_ms / 1000)
        if fig.inter_token_ms is not None:
            hist[1].observe(fig.inter_token_ms / 1000)
        if fig.tokens_out is not None:
            hist[2].observe(fig.tokens_out)
        return ""

    # -- evaluate --------------------------------------------------------------------------------------------
    def evaluate(self, now: float) -> Sequence[Finding]:
        with self._lock:
            for key in [k for k, s in self.series.items() if s.last_at < now - self._keep]:
                self._forget(key)  # quiet for the longest window: its slot goes back (bounded by max_series)
            return [self._evaluate_one(key, s, now) for key, s in self.series.items()]

    def _forget(self, key: tuple[str, str]) -> None:
        del self.series[key]
        self._hist.pop(key, None)  # its counters and histograms stay: cumulative series Prometheus already has
        with contextlib.suppress(KeyError):
            self._condition.remove(*key)
        for pair in self.cfg.burn_windows:
            for secs in (pair.long_secs, pair.short_secs):
                for g in (self._burn_g, self._ratio):
                    with contextlib.suppress(KeyError):
                        g.remove(*key, f"{secs:g}")

    def _evaluate_one(self, key: tuple[str, str], s: GoodSeries, now: float) -> Finding:
        cfg = self.cfg
        fired: tuple[GoodputBurnWindow, float, float] | None = None
        counts = s.windows(now, self._windows)
        for pair in cfg.burn_windows:
            lc, sc = counts[pair.long_secs], counts[pair.short_secs]
            bl, bs = _burn(lc, cfg.objective), _burn(sc, cfg.objective)
            for secs, c, b in ((pair.long_secs, lc, bl), (pair.short_secs, sc, bs)):
                if b is not None:
                    self._burn_g.labels(*key, f"{secs:g}").set(b)
                    self._ratio.labels(*key, f"{secs:g}").set(c.good / c.total)
            enough = lc.total >= cfg.min_requests and sc.total >= cfg.min_requests
            if fired is None and enough and bl is not None and bs is not None and min(bl, bs) > pair.factor:
                fired = (pair, bl, bs)
        w = fired[0] if fired is not None else cfg.burn_windows[0]
        counts_w = counts[w.long_secs]
        worst = max(counts_w.misses.items(), key=lambda kv: (kv[1], kv[0]), default=("", 0))
        slo = self.slo_for(key[0])
        self._condition.labels(*key).set(1 if fired is not None else 0)
        return Finding(
            check="goodput_burn",
            kind="goodput",
            labels={"model": key[0], "version": key[1]},
            active=fired is not None,
            value=counts_w.good / counts_w.total if counts_w.total else None,
            threshold=cfg.objective,
            window_secs=w.long_secs,
            severity=w.severity if fired is not None else "warning",
            evaluated_at=now,
            insufficient_data=counts_w.total < cfg.min_requests,
            for_secs=0.0,
            facts=GoodputFacts(
                objective=cfg.objective,
                good=counts_w.good,
                requests=counts_w.total,
                long_secs=w.long_secs,
                short_secs=w.short_secs,
                factor=w.factor,
                min_requests=cfg.min_requests,
                runbook=RUNBOOK,
                burn_long=fired[1] if fired is not None else _burn(counts_w, cfg.objective),
                burn_short=fired[2] if fired is not None else None,
                ttft_ms=slo.ttft_ms if slo is not None else None,
                inter_token_ms=slo.inter_token_ms if slo is not None else None,
                e2e_ms=slo.e2e_ms if slo is not None else None,
                worst=worst[0],
                worst_misses=worst[1],
            ),
        )
