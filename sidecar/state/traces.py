"""A bounded in-memory trace store: spans assembled into traces, bounded by count, age and spans per trace.

Eviction keeps what on-call needs: traces are held in two insertion-ordered maps, *plain* and *kept* (slow or
failed). Over ``max_traces`` the oldest plain trace goes first; kept traces go only when no plain one is left.
Age eviction applies to both. Every eviction and every refused span moves a counter.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge

from sidecar.model import Span
from sidecar.records import (
    END,
    MODEL,
    MODEL_ATTR,
    NAME,
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


class TraceEntry:
    """One trace in the store.

    A plain class with ``__slots__`` rather than a dataclass: one is built for every new trace (a third of
    the spans in Triton's traffic), and a slotted ``__init__`` costs a fraction of a dataclass with default
    factories; it is also smaller, and thousands are held.
    """

    __slots__ = (
        "_spans",
        "by_id",
        "end_ns",
        "error",
        "failure_note",
        "first_seen",
        "key",
        "model",
        "stage_compute",
        "stage_times",
        "stage_waiting",
        "start_ns",
        "trace_id",
        "version",
    )

    def __init__(
        self, trace_id: str, first_seen: float, key: bytes = b"", *, start_ns: int = 0, end_ns: int = 0
    ) -> None:
        self.trace_id = trace_id
        self.first_seen = first_seen
        self.key = key
        # Span records by span id, in arrival order; a span id seen again (a re-sent export) is not stored
        # twice.
        self.by_id: dict[bytes, Record] = {}
        self.start_ns = start_ns
        self.end_ns = end_ns
        self.model = ""
        self.version = ""
        self.error = False
        # Set by the failure join (Triton's counters), never by Triton's spans, which carry no error status.
        self.failure_note = ""
        # Stage derivation's pairing state (sidecar.processors.stages), None until it needs any: compute spans by
        # parent span id, and model spans waiting for their parent by the parent's span id.
        self.stage_compute: dict[bytes, Record] | None = None
        self.stage_waiting: dict[bytes, list[Record]] | None = None
        # Event times of model spans still waiting for their compute span, by span id.
        self.stage_times: dict[bytes, Mapping[str, int]] | None = None
        self._spans: list[Span] | None = None

    def __repr__(self) -> str:
        return f"TraceEntry({self.trace_id!r}, spans={len(self.by_id)}, model={self.model!r})"

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
        self._evicted_age = self._evicted.labels("age")
        self._evicted_plain = self._evicted.labels("count_plain")
        self._evicted_kept = self._evicted.labels("count_kept")
        self._span_drops = Counter(
            "sidecar_traces_spans_dropped",
            "Spans not stored, by reason (trace_full: over max_spans_per_trace; duplicate: a span id the "
            "trace already holds, e.g. a re-sent export).",
            ["reason"],
            registry=registry,
        )
        self._dup_drops = self._span_drops.labels("duplicate")
        self._full_drops = self._span_drops.labels("trace_full")
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

    def add(
        self,
        records: Iterable[Record],
        now: float,
        on_stored: Callable[[TraceEntry, Record], None] | None = None,
    ) -> int:
        """Store span records; returns how many were stored.

        ``on_stored(entry, record)`` (stage derivation) is called right after a record is stored, in arrival
        order, for the records it can use: Triton model and ``compute`` spans, and any span of a trace that
        has model spans waiting for their parent. Calling it here rather than after the batch lets it pair
        spans by "already stored" without a second pass or an index of the batch.

        A batch is taken trace by trace, in order of first appearance (each trace's spans in arrival order),
        so the order in which traces' stages are observed (and so which (model, version) gets a series slot
        when ``max_model_versions`` runs out) does not depend on how a client interleaves traces in a body.
        """
        by_trace: dict[bytes, list[Record]] = {}
        for r in records:
            g = by_trace.get(r[TRACE])
            if g is None:
                by_trace[r[TRACE]] = [r]
            else:
                g.append(r)
        if len(by_trace) > 1:
            records = [r for g in by_trace.values() for r in g]
        with self._lock:
            stored, dups, full = self._add_locked(records, now, on_stored)
            self._evict_locked(now)
        self._count_drops(dups, full)
        return stored

    def _add_locked(
        self,
        records: Iterable[Record],
        now: float,
        on_stored: Callable[[TraceEntry, Record], None] | None,
    ) -> tuple[int, int, int]:
        """(stored, duplicates, over the per-trace limit); the caller holds the lock and counts the drops."""
        stored = dups = full = 0
        touched: dict[bytes, TraceEntry] = {}
        limit = self.max_spans_per_trace
        plain, kept = self._plain, self._kept
        for r in records:
            key = r[TRACE]
            e = touched.get(key) or plain.get(key) or kept.get(key)
            if e is None:
                e = plain[key] = TraceEntry(key.hex(), now, key, start_ns=r[START], end_ns=r[END])
            by_id = e.by_id
            sid = r[SPAN]
            if sid in by_id:
                dups += 1
                continue
            if len(by_id) >= limit:
                full += 1
                continue
            by_id[sid] = r
            stored += 1
            if r[START] < e.start_ns:
                e.start_ns = r[START]
            if r[END] > e.end_ns:
                e.end_ns = r[END]
            if r[STATUS] == 2:
                e.error = True
            if r[MODEL] is not None:
                if not e.model:
                    e.model, e.version = r[MODEL]
                if on_stored is not None:
                    on_stored(e, r)
            elif on_stored is not None and (r[NAME] == "compute" or e.stage_waiting is not None):
                on_stored(e, r)
            touched[key] = e
        for key, e in touched.items():
            if key in plain and self._is_kept(e):
                del plain[key]
                kept[key] = e
        return stored, dups, full

    def _count_drops(self, dups: int, full: int) -> None:
        # Outside the lock: a labelled inc() takes a lock of its own.
        if dups:
            self._dup_drops.inc(dups)
        if full:
            self._full_drops.inc(full)

    def _evict_locked(self, now: float) -> None:
        horizon = now - self.max_age_secs
        aged = 0
        for od in (self._plain, self._kept):
            while od:
                e = next(iter(od.values()))
                if e.first_seen >= horizon:
                    break
                del od[e.key]
                aged += 1
        plain_n = kept_n = 0
        over = len(self._plain) + len(self._kept) - self.max_traces
        while over > 0:
            # Counted once per batch: at full store every new trace evicts one, and a labelled inc() per
            # eviction cost more than storing the trace.
            if self._plain:
                self._plain.popitem(last=False)
                plain_n += 1
            else:
                self._kept.popitem(last=False)
                kept_n += 1
            over -= 1
        if aged:
            self._evicted_age.inc(aged)
        if plain_n:
            self._evicted_plain.inc(plain_n)
        if kept_n:
            self._evicted_kept.inc(kept_n)

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
            # Traces already failed for certain (a caller span with an error status) explain that many of the
            # counted failures; only the rest can be pinned on the other traces.
            unexplained = failed - sum(1 for e in hits if e.error)
            candidates = [e for e in hits if not e.error]
            if unexplained <= 0 or not candidates:
                return 0
            certain = unexplained >= len(candidates)
            note = (
                "failed (Triton counted a failure for every traced request of this model and version in this interval)"
                if certain
                else f"possibly failed: Triton counted {unexplained} failure(s) not explained by known failed "
                f"traces, among {len(candidates)} other traced request(s) of this model and version in this "
                "interval"
            )
            for e in candidates:
                e.failure_note = note
                if certain:
                    e.error = True
                if e.key in self._plain:
                    del self._plain[e.key]
                    self._kept[e.key] = e
            return len(candidates)

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
