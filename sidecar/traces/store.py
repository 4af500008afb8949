"""A bounded in-memory trace store: spans assembled into traces, bounded by count, age and spans per trace.

Eviction keeps what on-call needs: traces are held in two insertion-ordered maps, *plain* and *kept* (slow or
failed). Over ``max_traces`` the oldest plain trace goes first; kept traces go only when no plain one is left.
Age eviction applies to both. Every eviction and every refused span moves a counter.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge

from sidecar.model import Span

__all__ = ["TraceEntry", "TraceStore", "TraceSummary"]

MODEL_ATTR = "triton.model_name"
VERSION_ATTR = "triton.model_version"


@dataclass
class TraceEntry:
    trace_id: str
    first_seen: float
    spans: list[Span] = field(default_factory=list)
    start_ns: int = 0
    end_ns: int = 0
    model: str = ""
    version: str = ""
    error: bool = False
    # Set by the failure join (Triton's counters), never by Triton's spans, which carry no error status.
    failure_note: str = ""
    # Stages already observed for this trace, so a late span never counts a stage twice.
    observed: set[str] = field(default_factory=set)

    @property
    def duration_ns(self) -> int:
        return max(0, self.end_ns - self.start_ns)

    def root(self) -> Span | None:
        ids = {s.span_id for s in self.spans}
        roots = [s for s in self.spans if s.parent_span_id is None or s.parent_span_id not in ids]
        return min(roots, key=lambda s: s.start_unix_nano) if roots else None


@dataclass(frozen=True)
class TraceSummary:
    trace_id: str
    start_ns: int
    duration_ns: int
    span_count: int
    model: str
    version: str
    error: bool
    slow: bool
    failure_note: str
    root_name: str


class TraceStore:
    def __init__(
        self,
        registry: CollectorRegistry,
        *,
        max_traces: int,
        max_age_secs: float,
        max_spans_per_trace: int,
        slow_threshold_ns: int,
    ) -> None:
        self.max_traces = max_traces
        self.max_age_secs = max_age_secs
        self.max_spans_per_trace = max_spans_per_trace
        self.slow_threshold_ns = slow_threshold_ns
        self._plain: OrderedDict[str, TraceEntry] = OrderedDict()
        self._kept: OrderedDict[str, TraceEntry] = OrderedDict()
        self._lock = threading.Lock()
        self._evicted = Counter(
            "sidecar_traces_evicted",
            "Traces dropped from the in-memory store, by reason.",
            ["reason"],
            registry=registry,
        )
        self._span_drops = Counter(
            "sidecar_traces_spans_dropped",
            "Spans not stored, by reason (too many in one trace).",
            ["reason"],
            registry=registry,
        )
        g = Gauge(
            "sidecar_traces_stored",
            "Traces held in the in-memory store, by class.",
            ["class"],
            registry=registry,
        )
        g.labels("plain").set_function(lambda: len(self._plain))
        g.labels("kept").set_function(lambda: len(self._kept))

    def __len__(self) -> int:
        return len(self._plain) + len(self._kept)

    def _is_kept(self, e: TraceEntry) -> bool:
        return e.error or bool(e.failure_note) or e.duration_ns >= self.slow_threshold_ns

    def add(self, spans: Iterable[Span], now: float) -> list[TraceEntry]:
        """Store spans; returns the entries that changed (the stage deriver looks at them)."""
        changed: dict[str, TraceEntry] = {}
        with self._lock:
            for s in spans:
                tid = s.trace_id
                e = changed.get(tid) or self._plain.get(tid) or self._kept.get(tid)
                if e is None:
                    e = TraceEntry(tid, now, start_ns=s.start_unix_nano, end_ns=s.end_unix_nano)
                    self._plain[tid] = e
                if len(e.spans) >= self.max_spans_per_trace:
                    self._span_drops.labels("trace_full").inc()
                    continue
                e.spans.append(s)
                if s.start_unix_nano < e.start_ns:
                    e.start_ns = s.start_unix_nano
                if s.end_unix_nano > e.end_ns:
                    e.end_ns = s.end_unix_nano
                if s.status_code == 2:
                    e.error = True
                if not e.model:
                    m = s.attributes.get(MODEL_ATTR)
                    if m is not None:
                        e.model = str(m)
                        e.version = str(s.attributes.get(VERSION_ATTR, ""))
                changed[tid] = e
            for tid, e in changed.items():
                if tid in self._plain and self._is_kept(e):
                    del self._plain[tid]
                    self._kept[tid] = e
            self._evict_locked(now)
        return list(changed.values())

    def _evict_locked(self, now: float) -> None:
        horizon = now - self.max_age_secs
        for od in (self._plain, self._kept):
            while od:
                tid, e = next(iter(od.items()))
                if e.first_seen >= horizon:
                    break
                del od[tid]
                self._evicted.labels("age").inc()
        while len(self._plain) + len(self._kept) > self.max_traces:
            if self._plain:
                self._plain.popitem(last=False)
                self._evicted.labels("count_plain").inc()
            else:
                self._kept.popitem(last=False)
                self._evicted.labels("count_kept").inc()

    def expire(self, now: float) -> None:
        with self._lock:
            self._evict_locked(now)

    def get(self, trace_id: str) -> TraceEntry | None:
        with self._lock:
            return self._plain.get(trace_id) or self._kept.get(trace_id)

    def spans_of(self, trace_id: str) -> list[Span] | None:
        with self._lock:
            e = self._plain.get(trace_id) or self._kept.get(trace_id)
            return list(e.spans) if e is not None else None

    def mark_failures(self, model: str, version: str, since_ns: int, until_ns: int, failed: int) -> int:
        """Join Triton's failure counter into traces (see docs/traces.md for what this can and cannot say).

        ``failed`` requests of model/version failed in [since_ns, until_ns). When every trace of that model
        and
        version in the interval must have failed (failed >= traces), they are marked failed; otherwise each is
        annotated as a possible failure. Returns how many traces were annotated.
        """
        with self._lock:
            hits = [
                e
                for od in (self._plain, self._kept)
                for e in od.values()
                if e.model == model and e.version == version and since_ns <= e.start_ns < until_ns
            ]
            if not hits or failed <= 0:
                return 0
            certain = failed >= len(hits)
            note = (
                "failed (Triton counted a failure for every traced request of this model and version in "
                "this interval)"
                if certain
                else f"possibly failed: Triton counted {failed} failure(s) among {len(hits)} "
                f"traced request(s) "
                "of this model and version in this interval"
            )
            for e in hits:
                e.failure_note = note
                if certain:
                    e.error = True
                if e.trace_id in self._plain:
                    del self._plain[e.trace_id]
                    self._kept[e.trace_id] = e
            return len(hits)

    def summaries(
        self,
        *,
        model: str | None = None,
        version: str | None = None,
        only_interesting: bool = False,
        limit: int = 200,
    ) -> Sequence[TraceSummary]:
        with self._lock:
            entries = list(self._kept.values())
            if not only_interesting:
                entries += list(self._plain.values())
        out = []
        for e in entries:
            if model and e.model != model:
                continue
            if version and e.version != version:
                continue
            root = e.root()
            out.append(
                TraceSummary(
                    e.trace_id,
                    e.start_ns,
                    e.duration_ns,
                    len(e.spans),
                    e.model,
                    e.version,
                    e.error,
                    e.duration_ns >= self.slow_threshold_ns,
                    e.failure_note,
                    root.name if root else "",
                )
            )
        out.sort(key=lambda t: t.start_ns, reverse=True)
        return out[:limit]

    def models(self) -> list[tuple[str, str]]:
        with self._lock:
            pairs = {(e.model, e.version) for od in (self._plain, self._kept) for e in od.values() if e.model}
        return sorted(pairs)
