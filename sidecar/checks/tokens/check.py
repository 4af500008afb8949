"""Token-length drift without payloads: prompt and generation token lengths per (server, model, version) tested
against a reference, window by window, so an LLM's input shift is seen with no request logging.

Input: the per-request token histograms the configured model servers already export (``histograms``: read at
each evaluation, their increase since the last reading, reset-safe), and per-request token counts in events'
fields ``tokens_in``/``tokens_out`` or LLM request spans, binned into ``edges`` (server label ``events``), for
a server that exports no histogram.

Each ``window_secs`` window's increase is tested once, when it ends: chi-square (``sidecar.checks.stats``) over
the reference's buckets, adjacent buckets merged until each expects ``min_expected`` requests, and PSI. As
feature drift's multiscale method does (``sidecar.checks.drift.multiscale.look_level``, with this check's one
window length as its one scale), the per-window level comes from ``checks.drift``'s false-alarm budget and
sustain rule; a series' two directions are Benjamini-Hochberg-adjusted together; a window drifted when its
adjusted p is below the level and its PSI at least ``psi_effect_floor``; a finding is active once
``sustained_looks`` of the last ``sustained_of`` windows drifted. A window whose bucket edges are not the
reference's is not tested (state ``bucket_edges_changed``), never compared bucket by bucket across edges.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import threading
from collections.abc import Callable, Iterable, Sequence

from prometheus_client import CollectorRegistry

from sidecar.checks.drift.config import DriftConfig
from sidecar.checks.drift.multiscale import look_level
from sidecar.checks.stats.core import benjamini_hochberg
from sidecar.checks.tokens.config import TokenReferenceConfig, TokensConfig
from sidecar.checks.tokens.findings import finding
from sidecar.checks.tokens.hist import Bins, TokenHistogram, Tracker, bin_of
from sidecar.checks.tokens.metrics import TokenMetrics
from sidecar.checks.tokens.persist import PinnedRefs
from sidecar.checks.tokens.reference import DIRECTIONS, TokenReference, load_reference_file
from sidecar.checks.tokens.series import Look, Series, SeriesKey, test_window
from sidecar.component import Passive, Role
from sidecar.model import Batch, Event, Finding
from sidecar.records import NAME, to_span
from sidecar.store import Store

__all__ = ["EVENTS_SERVER", "FIELDS", "TokenDriftCheck"]

EVENTS_SERVER = "events"
FIELDS = {"input": "tokens_in", "output": "tokens_out"}
_SPAN_ATTRS = {
    "input": ("gen_ai.usage.prompt_tokens", "gen_ai.usage.input_tokens"),
    "output": ("gen_ai.usage.completion_tokens", "gen_ai.usage.output_tokens"),
}


def _count(v: object) -> float | None:
    if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v >= 0:
        return float(v)
    return None


class TokenDriftCheck(Passive):
    name = "tokens"
    role = Role.CHECK

    def __init__(
        self,
        cfg: TokensConfig,
        *,
        budget: DriftConfig,
        registry: CollectorRegistry,
        histograms: Callable[[], Iterable[TokenHistogram]] | None = None,
        store: Store | None = None,
        logger: logging.Logger | None = None,
    ) -> None:
        self.cfg = cfg
        self.budget = budget
        self.histograms = histograms
        self.level = look_level(budget.model_copy(update={"scales_secs": [cfg.window_secs]}), cfg.window_secs)
        self.m = TokenMetrics(registry)
        self.m.level.set(self.level)
        self.series: dict[SeriesKey, Series] = {}
        self.tracker = Tracker(max_keys=4 * cfg.max_series)
        log = logger or logging.getLogger("sidecar.tokens")
        self.pinned = PinnedRefs(store, max_refs=4 * cfg.max_series, errors=self.m.references_dropped, log=log)
        self._lock = threading.Lock()
        # Reference files are read once, at start: a bad one fails start-up naming the file and field.
        self._files: dict[str, dict[str, TokenReference]] = {}
        for name, spec in [("*", cfg.reference), *cfg.models.items()]:
            if spec.mode == "file" and spec.path:
                self._files[name] = load_reference_file(spec.path)

    def spec_for(self, model: str) -> tuple[str, TokenReferenceConfig]:
        return (model, self.cfg.models[model]) if model in self.cfg.models else ("*", self.cfg.reference)

    # -- input -----------------------------------------------------------------------------------------------
    def observe(self, batch: Batch) -> None:
        """Events carrying ``tokens_in`` and/or ``tokens_out``; others are not LLM requests and are skipped."""
        if batch.kind != "events" or not self.cfg.events:
            return
        self._observe_events(batch.items, batch.received_at)

    def observe_spans(self, batch: Batch) -> None:
        names = self.cfg.span_names
        if batch.kind != "spans" or not names:
            return
        events: list[Event] = []
        for rec in batch.items:
            if rec[NAME] not in names:
                continue
            attrs = to_span(rec).attributes
            model = attrs.get("gen_ai.response.model") or attrs.get("gen_ai.request.model")
            if not isinstance(model, str) or not model:
                self.m.dropped.labels("no_model").inc()
                continue
            fields: dict[str, float] = {}
            for d, names_ in _SPAN_ATTRS.items():
                v = next((_count(attrs.get(a)) for a in names_ if _count(attrs.get(a)) is not None), None)
                if v is not None:
                    fields[FIELDS[d]] = v
            events.append(Event(model=model, version="", timestamp=batch.received_at, fields=fields))
        if events:
            self._observe_events(events, batch.received_at)

    def _observe_events(self, items: Sequence[Event], at: float) -> None:
        edges = tuple(self.cfg.edges)
        per: dict[tuple[str, str, str], Bins] = {}  # (model, version, direction) -> this batch's counts
        bad = 0
        for ev in items:
            for d, fname in FIELDS.items():
                raw = ev.fields.get(fname)
                if raw is None:
                    continue
                v = _count(raw)
                if v is None:
                    bad += 1
                    continue
                b = per.get((ev.model, ev.version, d))
                if b is None:
                    b = per[(ev.model, ev.version, d)] = Bins.empty(edges)
                b.counts[bin_of(edges, v)] += 1
                b.sum += v
        if bad:
            self.m.dropped.labels("bad_value").inc(bad)
        with self._lock:
            for (model, version, d), b in per.items():
                self._take((EVENTS_SERVER, model, version), d, b, at)

    def _read_histograms(self, now: float) -> None:
        if self.histograms is None or not self.cfg.histograms:
            return
        for h in self.histograms():
            inc, why = self.tracker.increase(h)
            if why in ("malformed", "key_limit"):
                self.m.dropped.labels(why).inc()
            elif why:
                self.m.restarts.labels(h.server, why).inc()
            if inc is not None and inc.n > 0:
                self._take((h.server, h.model, h.version), h.tokens, inc, now)

    def _take(self, key: SeriesKey, d: str, b: Bins, now: float) -> None:
        """Route an increase: into the own reference while it is captured, else into the open window."""
        s = self.series.get(key)
        if s is None:
            if len(self.series) >= self.cfg.max_series:
                self.m.dropped.labels("series_limit").inc(round(b.n))
                return
            s = self.series[key] = Series.new(now, self.cfg.window_secs, self.budget.sustained_of)
        s.last_at = max(s.last_at, now)
        dr = s.dirs[d]
        dr.seen = True
        labels = (*key, d)
        _, spec = self.spec_for(key[1])
        own = spec.pinned_version is None or spec.pinned_version == key[2]
        ref = self.pinned.get((*key, d)) if spec.mode == "pinned" and own else None
        if ref is not None and ref.bins.edges != b.edges and spec.repin_on_edge_change:
            self.pinned.drop((*key, d))  # asked for: the new edges get a new reference, captured from here
            self.m.repins.labels(*labels).inc()
            ref = None
        if spec.mode == "pinned" and own and ref is None:
            if dr.pin is None or dr.pin.edges != b.edges:
                dr.pin = Bins.empty(b.edges)  # edges changed while capturing: the capture starts again
            dr.pin.add(b)
            self.m.requests.labels(*labels, "reference").inc(b.n)
            if dr.pin.n >= spec.pinned_requests:
                self.pinned.put((*key, d), TokenReference(dr.pin, "pinned", f"v{key[2]}"))
                dr.pin = None
            return
        self.m.requests.labels(*labels, "window").inc(b.n)
        if dr.block is None:
            dr.block = Bins(b.edges, list(b.counts), b.sum)
        elif dr.block.edges != b.edges:
            dr.block_edges_changed = True
            dr.block = Bins(b.edges, list(b.counts), b.sum)  # the newest edges; the window is not tested
        else:
            dr.block.add(b)

    def reference_for(self, key: SeriesKey, d: str) -> TokenReference | None:
        name, spec = self.spec_for(key[1])
        if spec.mode == "file":
            return self._files.get(name, {}).get(d)
        version = key[2] if spec.pinned_version is None else spec.pinned_version
        return self.pinned.get((key[0], key[1], version, d))

    # -- evaluate --------------------------------------------------------------------------------------------
    def evaluate(self, now: float) -> Sequence[Finding]:
        with self._lock:
            self._read_histograms(now)
            out: list[Finding] = []
            for key in [k for k, s in self.series.items() if s.last_at < now - self.cfg.series_idle_secs]:
                self._forget(key)
            for key, s in self.series.items():
                if now >= s.block_end:
                    self._look(key, s)
                    s.block_end = (math.floor(now / self.cfg.window_secs) + 1) * self.cfg.window_secs
                for d in DIRECTIONS:
                    dr = s.dirs[d]
                    if not dr.seen:
                        continue
                    look = dr.last or self._pending(key, d)
                    active = sum(dr.looks) >= self.budget.sustained_looks
                    self.m.export((*key, d), look, active)
                    ref = self.reference_for(key, d)
                    out.append(finding(self.cfg, self.budget, self.level, key, d, look, dr, ref, active, now))
            return out

    def _pending(self, key: SeriesKey, d: str) -> Look:
        """Before the first window ends: the reference's capture, or the window so far."""
        dr = self.series[key].dirs[d]
        ref = self.reference_for(key, d)
        if ref is None:
            return Look("no_reference", dr.block.n if dr.block else 0.0, dr.pin.n if dr.pin else 0.0)
        return Look("few_requests", dr.block.n if dr.block else 0.0, ref.bins.n, mean_ref=ref.mean)

    def _look(self, key: SeriesKey, s: Series) -> None:
        """Test the window that ended, both directions, BH-adjusted together at the budget's level."""
        looks: dict[str, Look] = {}
        for d in DIRECTIONS:
            dr = s.dirs[d]
            if not dr.seen:
                continue
            ref = self.reference_for(key, d)
            looks[d] = test_window(dr.block, dr.block_edges_changed, ref, self.cfg.min_requests, self.cfg.min_expected)
            dr.block, dr.block_edges_changed = None, False
        tested = [d for d, lk in looks.items() if lk.state == "tested" and not math.isnan(lk.p)]
        qs = dict(zip(tested, benjamini_hochberg([looks[d].p for d in tested]), strict=True))
        for d, lk in looks.items():
            dr = s.dirs[d]
            if d in qs:
                drifted = qs[d] < self.level and (lk.psi or 0.0) >= self.cfg.psi_effect_floor
                lk = dataclasses.replace(lk, q=qs[d], drifted=drifted)
                dr.looks.append(drifted)  # a window without a test takes no place in the last n
                result = "drifted" if drifted else "quiet"
            else:
                result = lk.state
            dr.last = lk
            self.m.looks.labels(*key, d, result).inc()

    def _forget(self, key: SeriesKey) -> None:
        del self.series[key]
        self.tracker.forget(*key)
        for d in DIRECTIONS:
            self.m.forget((*key, d))
