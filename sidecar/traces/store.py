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
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge

from sidecar.model import Span
from sidecar.traces.records import (
    END,
    MODEL,
    MODEL_ATTR,
    PARENT,
    SPAN,
    START,
    STATUS,
    TRACE,
    VERSION_ATTR,
    Record,
    to_span,
)

__all__ = ["MODEL_ATTR", "VERSION_ATTR", "TraceEntry", "TraceStore", "TraceSummary"]


@dataclass(eq=False)
class TraceEntry:
    trace_id: str
    first_seen: float
    key: bytes = b""
    # Span records by span id, in arrival order; a span id seen again (a re-sent export) is not stored twice.
    by_id: dict[bytes, Record] = field(default_factory=dict)
    start_ns: int = 0
    end_ns: int = 0
    model: str = ""
    version: str = ""
    error: bool = False
    # Set by the failure join (Triton's counters), never by Triton's spans, which carry no error status.
    failure_note: str = ""
    # Stage derivation's pairing state (sidecar.traces.stages), None until a Triton model span arrives.
    stage_state: Any = None
    _spans: list[Span] | None = field(default=None, repr=False)

    @property
    def spans(self) -> list[Span]:
        """The spans as frozen ``Span`` objects, built on first read (pages, forwarding), not at ingest."""
        spans = self._spans
        if spans is None or len(spans) != len(self.by_id):
            spans = self._spans = [to_span(r) for r in list(self.by_id.values())]
        return spans

    @property
    def duration_ns(self) -> int:
        return max(0, self.end_ns - self.start_ns)

    def root(self) -> Span | None:
        recs = list(self.by_id.values())
        roots = [r for r in recs if r[PARENT] is None or r[PARENT] not in self.by_id]
        if not roots:
            return None
        return to_span(min(roots, key=lambda r: r[START]))


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


def _key(trace_id: str) -> bytes | None:
    try:
        key = bytes.fromhex(trace_id)
    except ValueError:
        return None
    return key if len(key) == 16 else None


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
        # Keyed by the 16 trace-id bytes: protobuf ids need no hex conversion, and JSON and protobuf spans of
        # one trace (Triton's and an SDK caller's) meet under the same key.
        self._plain: OrderedDict[bytes, TraceEntry] = OrderedDict()
        self._kept: OrderedDict[bytes, TraceEntry] = OrderedDict()
        self._lock = threading.Lock()
        self._evicted = Counter(
            "sidecar_traces_evicted",
            "Traces dropped from the in-memory store, by reason.",
            ["reason"],
            registry=registry,
        )
        self._span_drops = Counter(
            "sidecar_traces_spans_dropped",
            "Spans not stored, by reason (trace_full: over max_spans_per_trace; duplicate: a span id the "
            "trace already holds, e.g. a re-sent export).",
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
        return e.error or bool(e.failure_note) or e.end_ns - e.start_ns >= self.slow_threshold_ns

    def add(self, records: Iterable[Record], now: float) -> list[tuple[TraceEntry, Record]]:
        """Store span records; returns (entry, record) for each record stored (the stage deriver pairs them)."""
        new: list[tuple[TraceEntry, Record]] = []
        append = new.append
        touched: dict[bytes, TraceEntry] = {}
        dups = full = 0
        limit = self.max_spans_per_trace
        plain, kept = self._plain, self._kept
        with self._lock:
            for r in records:
                key = r[TRACE]
                e = touched.get(key) or plain.get(key) or kept.get(key)
                if e is None:
                    e = TraceEntry(key.hex(), now, key, start_ns=r[START], end_ns=r[END])
                    plain[key] = e
                by_id = e.by_id
                sid = r[SPAN]
                if sid in by_id:
                    dups += 1
                    continue
                if len(by_id) >= limit:
                    full += 1
                    continue
                by_id[sid] = r
                if r[START] < e.start_ns:
                    e.start_ns = r[START]
                if r[END] > e.end_ns:
                    e.end_ns = r[END]
                if r[STATUS] == 2:
                    e.error = True
                if not e.model and r[MODEL] is not None:
                    e.model, e.version = r[MODEL]
                touched[key] = e
                append((e, r))
            for key, e in touched.items():
                if key in plain and self._is_kept(e):
                    del plain[key]
                    kept[key] = e
            self._evict_locked(now)
        if dups:
            self._span_drops.labels("duplicate").inc(dups)
        if full:
            self._span_drops.labels("trace_full").inc(full)
        return new

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
        key = _key(trace_id)
        if key is None:
            return None
        with self._lock:
            return self._plain.get(key) or self._kept.get(key)

    def spans_of(self, trace_id: str) -> list[Span] | None:
        e = self.get(trace_id)
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
                if e.key in self._plain:
                    del self._plain[e.key]
                    self._kept[e.key] = e
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
                    len(e.by_id),
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
