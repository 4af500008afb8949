"""A bounded in-memory trace store: spans assembled into traces, bounded by count, age, spans and bytes.

Eviction keeps what on-call needs: traces are held in two insertion-ordered maps, *plain* and *kept* (slow or
failed). Over ``max_traces`` or ``max_bytes`` the oldest plain trace goes first; kept traces go only when no
plain one is left. Age eviction applies to both. A span that would take its trace over ``max_spans_per_trace``
or ``max_trace_bytes`` is not stored. ``shed`` evicts the same way down to a fraction of the bytes held, for
the memory limiter (``sidecar.admission``). Bytes are estimated per record at ingest (``record_bytes``).
Every eviction and every refused span moves a counter.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge

from sidecar.model import Span, SpanRequests
from sidecar.records import MODEL_ATTR, VERSION_ATTR, Record
from sidecar.state.trace_entry import TraceEntry, TraceSummary, trace_key
from sidecar.state.trace_ingest import OnStored, OnTrios, add_records
from sidecar.state.trace_requests import OnRequests, add_requests

__all__ = ["MODEL_ATTR", "VERSION_ATTR", "TraceEntry", "TraceStore", "TraceSummary"]

# Eviction reasons (the label values of sidecar_traces_evicted_total): a fixed set.
EVICTION_REASONS = ("age", "count_plain", "count_kept", "bytes_plain", "bytes_kept", "memory_pressure")


class TraceStore:
    def __init__(
        self,
        registry: CollectorRegistry,
        *,
        max_traces: int,
        max_age_secs: float,
        max_spans_per_trace: int,
        slow_threshold_ns: int,
        max_bytes: int = 128 * 1024 * 1024,
        max_trace_bytes: int = 4 * 1024 * 1024,
    ) -> None:
        self.max_traces = max_traces
        self.max_bytes = max_bytes
        self.max_trace_bytes = max_trace_bytes
        # The bytes the store may fill up to now: max_bytes, or less after ``shed`` until ``restore`` raises it
        # back (so a store shed for memory does not refill into the same pressure).
        self.budget = max_bytes
        # Estimated bytes of every stored trace (``TraceEntry.nbytes`` summed); changed under the lock only.
        self._bytes = 0
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
        self._evicted_by = {r: self._evicted.labels(r) for r in EVICTION_REASONS}
        self._span_drops = Counter(
            "sidecar_traces_spans_dropped",
            "Spans not stored, by reason (trace_full: over max_spans_per_trace; trace_bytes: over "
            "traces.store.max_trace_bytes_mib; duplicate: a span id the trace already holds, e.g. a re-sent export).",
            ["reason"],
            registry=registry,
        )
        self._dup_drops = self._span_drops.labels("duplicate")
        self._full_drops = self._span_drops.labels("trace_full")
        self._bytes_drops = self._span_drops.labels("trace_bytes")
        g = Gauge(
            "sidecar_traces_stored",
            "Traces held in the in-memory store, by class.",
            ["class"],
            registry=registry,
        )
        g.labels("plain").set_function(lambda: len(self._plain))
        g.labels("kept").set_function(lambda: len(self._kept))
        Gauge(
            "sidecar_traces_stored_bytes",
            "Estimated bytes the in-memory trace store holds (at most traces.store.max_bytes_mib).",
            registry=registry,
        ).set_function(lambda: self._bytes)
        Gauge(
            "sidecar_traces_store_budget_bytes",
            "Estimated bytes the trace store may fill up to now: traces.store.max_bytes_mib, or less while the "
            "memory limiter holds it down (server.memory_limit_mib).",
            registry=registry,
        ).set_function(lambda: self.budget)

    @property
    def nbytes(self) -> int:
        """Estimated bytes held now."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._plain) + len(self._kept)

    def add(
        self,
        records: Iterable[Record],
        now: float,
        on_stored: OnStored | None = None,
        on_trios: OnTrios | None = None,
    ) -> int:
        """Store span records; returns how many were stored.

        ``on_stored(entry, record)`` (stage derivation) is called right after a record is stored, in arrival
        order, for the records it can use: Triton model and ``compute`` spans, and any span of a trace that
        has model spans waiting for their parent. Calling it here rather than after the batch lets it pair
        spans by "already stored" without a second pass or an index of the batch. ``on_trios`` is called instead
        with the traces a trace file's batch brings whole (``trace_ingest.add_trios``).

        A batch is taken trace by trace, in order of first appearance (each trace's spans in arrival order),
        so the order in which traces' stages are observed (and so which (model, version) gets a series slot
        when ``max_model_versions`` runs out) does not depend on how a client interleaves traces in a body.
        """
        limits = (self.max_spans_per_trace, self.max_trace_bytes, self.slow_threshold_ns)
        with self._lock:
            taken = add_records(records, self._plain, self._kept, now, limits, on_stored, on_trios)
            self._bytes += taken[4]
            evicted = self._evict_locked(now)
        self._count_drops(taken[1], taken[2], taken[3])
        self._count_evictions(evicted)
        return taken[0]

    def add_requests(
        self,
        items: Sequence[SpanRequests],
        now: float,
        on_stored: OnStored | None = None,
        on_trios: OnTrios | None = None,
        on_requests: OnRequests | None = None,
    ) -> int:
        """Store a ``span_requests`` batch's requests (``trace_requests.add_requests``: whole ones as entries that
        build their spans when read, the others as their span records, as ``add`` takes them); returns how many
        spans the requests stand for (stored or refused: what ``add`` of their span records would have been
        handed)."""
        limits = (self.max_spans_per_trace, self.max_trace_bytes, self.slow_threshold_ns)
        with self._lock:
            taken = add_requests(items, self._plain, self._kept, now, limits, on_stored, on_trios, on_requests)
            self._bytes += taken[4]
            evicted = self._evict_locked(now)
        self._count_drops(taken[1], taken[2], taken[3])
        self._count_evictions(evicted)
        return taken[0] + taken[1] + taken[2] + taken[3]

    def _count_drops(self, dups: int, full: int, too_big: int) -> None:
        # Outside the lock: a labelled inc() takes a lock of its own.
        if dups:
            self._dup_drops.inc(dups)
        if full:
            self._full_drops.inc(full)
        if too_big:
            self._bytes_drops.inc(too_big)

    def _count_evictions(self, evicted: dict[str, int]) -> None:
        for reason, n in evicted.items():
            if n:
                self._evicted_by[reason].inc(n)

    def _pop_oldest(self) -> str:
        """Remove the oldest plain trace, else the oldest kept one; the caller holds the lock and the store is
        not empty. Returns which class went."""
        od, cls = (self._plain, "plain") if self._plain else (self._kept, "kept")
        _, e = od.popitem(last=False)
        self._bytes -= e.nbytes
        return cls

    def _evict_locked(self, now: float) -> dict[str, int]:
        """Evict by age, count and bytes; the evictions by reason (counted by the caller, outside the lock: at
        full store every new trace evicts one, and a labelled inc() per eviction cost more than storing it)."""
        horizon = now - self.max_age_secs
        out = dict.fromkeys(EVICTION_REASONS, 0)
        for od in (self._plain, self._kept):
            while od:
                e = next(iter(od.values()))
                if e.first_seen >= horizon:
                    break
                del od[e.key]
                self._bytes -= e.nbytes
                out["age"] += 1
        over = len(self._plain) + len(self._kept) - self.max_traces
        while over > 0:
            out["count_" + self._pop_oldest()] += 1
            over -= 1
        pressed = self.budget < self.max_bytes
        while self._bytes > self.budget and (self._plain or self._kept):
            cls = self._pop_oldest()
            out["memory_pressure" if pressed else "bytes_" + cls] += 1
        return out

    def shed(self, keep_fraction: float) -> int:
        """The memory limiter's relief when the process is over ``server.memory_limit_mib``: evict oldest-plain-
        first until at most ``keep_fraction`` of the bytes held now remain, and hold the budget there (never below
        one trace's ``max_trace_bytes``) until ``restore``; returns the bytes freed."""
        with self._lock:
            before = self._bytes
            target = int(before * keep_fraction)
            self.budget = min(self.budget, max(target, min(self.max_trace_bytes, self.max_bytes)))
            n = 0
            while self._bytes > target and (self._plain or self._kept):
                self._pop_oldest()
                n += 1
            freed = before - self._bytes
        if n:
            self._evicted_by["memory_pressure"].inc(n)
        return freed

    def restore(self, headroom: int) -> bool:
        """Raise a budget ``shed`` lowered by half the ``headroom`` the process has under its memory limit, up to
        ``max_bytes``; returns whether it is still below ``max_bytes``."""
        with self._lock:
            if headroom > 0:
                self.budget = min(self.max_bytes, self.budget + headroom // 2)
            return self.budget < self.max_bytes

    def expire(self, now: float) -> None:
        with self._lock:
            evicted = self._evict_locked(now)
        self._count_evictions(evicted)

    def get(self, trace_id: str) -> TraceEntry | None:
        key = trace_key(trace_id)
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
            out.append(
                TraceSummary(
                    e.trace_id,
                    e.start_ns,
                    e.duration_ns,
                    e.span_count(),  # neither builds a whole request's spans (trace_requests.RequestEntry)
                    e.model,
                    e.version,
                    e.error,
                    e.duration_ns >= self.slow_threshold_ns,
                    e.failure_note,
                    e.root_name(),
                )
            )
        out.sort(key=lambda t: t.start_ns, reverse=True)
        return out[:limit]

    def models(self) -> list[tuple[str, str]]:
        with self._lock:
            pairs = {(e.model, e.version) for od in (self._plain, self._kept) for e in od.values() if e.model}
        return sorted(pairs)
