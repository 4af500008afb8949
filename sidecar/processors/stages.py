"""Per model and version, the time each request spent in each Triton stage, as histograms with trace-id
exemplars.

Stages come from the events Triton puts on its spans (the same names in OTLP and in ``mode=triton`` files,
which
``tracefile`` turns into the same span shape):

=================  ===========================================================  ==============
stage              from -> to                                                   span
=================  ===========================================================  ==============
network_receive    HTTP_RECV_START -> HTTP_RECV_END (GRPC_WAITREAD_*)           InferRequest
queue              QUEUE_START (model span) -> COMPUTE_START (compute span)     model, compute
compute_input      COMPUTE_START -> COMPUTE_INPUT_END                           compute
compute_infer      COMPUTE_INPUT_END -> COMPUTE_OUTPUT_START                    compute
compute_output     COMPUTE_OUTPUT_START -> COMPUTE_END                          compute
send               HTTP_SEND_START -> HTTP_SEND_END (GRPC_SEND_*)               InferRequest
request            REQUEST_START -> REQUEST_END                                 model
=================  ===========================================================  ==============

Exemplars are only rendered in the OpenMetrics exposition; the app's /metrics route picks the format from the
scraper's Accept header (``sidecar.exposition.render_metrics``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

import numpy as np
from prometheus_client import CollectorRegistry, Counter
from prometheus_client.metrics_core import HistogramMetricFamily, Metric
from prometheus_client.samples import Exemplar
from prometheus_client.utils import floatToGoString

from sidecar.model import Span
from sidecar.processors.stage_batch import Cols, Jobs, apply, queue_values, stage_values
from sidecar.processors.stage_series import STAGES, Series, SeriesBook
from sidecar.processors.stage_trios import take, take_stamps
from sidecar.records import EVENTS, MODEL, NAME, PARENT, SPAN, Record, event_times
from sidecar.state.traces import TraceEntry

__all__ = ["STAGES", "StageHistograms", "stage_durations", "stage_seconds"]

_NAME = "sidecar_triton_stage_duration_seconds"
_HELP = "Time Triton requests spent in each stage, by model and version (from spans; exemplars carry trace_id)."


# Indexes into STAGES.
_NET, _QUEUE, _C_IN, _C_INFER, _C_OUT, _SEND, _REQUEST = range(7)

_Spec = tuple[tuple[int, str, str, str, str], ...]
# (stage, from event, to event, alternative from, alternative to) per stage group: the one table both the
# histograms and the trace page's stage table read.
_REQUEST_SPEC: _Spec = ((_REQUEST, "REQUEST_START", "REQUEST_END", "", ""),)
_PARENT_SPEC: _Spec = (
    (_NET, "HTTP_RECV_START", "HTTP_RECV_END", "GRPC_WAITREAD_START", "GRPC_WAITREAD_END"),
    (_SEND, "HTTP_SEND_START", "HTTP_SEND_END", "GRPC_SEND_START", "GRPC_SEND_END"),
)
# Batches of fewer spans are observed span by span (an OTLP body of 100 spans brings ~11 values per model and
# stage: the batch's fixed costs were more than they saved, 4.4 against 3.5 us a span).
BATCH_MIN = 1000
# The events each kind of job reads (the GRPC alternatives only when an HTTP one is missing).
_R_EVENTS = ("REQUEST_START", "REQUEST_END")
_C_EVENTS = ("QUEUE_START", "COMPUTE_START", "COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START", "COMPUTE_END")
_P_EVENTS = ("HTTP_RECV_START", "HTTP_RECV_END", "HTTP_SEND_START", "HTTP_SEND_END")
# A stage's place among its job's observations (request; queue, then the compute spec; the parent spec).
_OFFSET = {_REQUEST: 0, _QUEUE: 0, _C_IN: 1, _C_INFER: 2, _C_OUT: 3, _NET: 0, _SEND: 1}
_COMPUTE_SPEC: _Spec = (
    (_C_IN, "COMPUTE_START", "COMPUTE_INPUT_END", "", ""),
    (_C_INFER, "COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START", "", ""),
    (_C_OUT, "COMPUTE_OUTPUT_START", "COMPUTE_END", "", ""),
)


def _queue_secs(m: Mapping[str, int], c: Mapping[str, int]) -> float | None:
    # As if the model and compute spans' events were one dict with the compute span's winning.
    q = c.get("QUEUE_START", m.get("QUEUE_START"))
    cs = c.get("COMPUTE_START", m.get("COMPUTE_START"))
    return (cs - q) / 1e9 if q is not None and cs is not None and cs >= q else None


def stage_durations(model_span: Span, compute: Span | None, request: Span | None) -> dict[str, float]:
    """Seconds per stage for one model span and its compute child and request parent (missing ones skipped)."""
    return stage_seconds(
        {e.name: e.time_unix_nano for e in model_span.events},
        None if compute is None else {e.name: e.time_unix_nano for e in compute.events},
        None if request is None else {e.name: e.time_unix_nano for e in request.events},
    )


def stage_seconds(m: Mapping[str, int], c: Mapping[str, int] | None, r: Mapping[str, int] | None) -> dict[str, float]:
    """``stage_durations`` from the spans' event name -> time maps (``sidecar.records.event_times``)."""
    secs: dict[int, float] = {}
    _spec_into(m, _REQUEST_SPEC, secs)
    if c is not None:
        q = _queue_secs(m, c)
        if q is not None:
            secs[_QUEUE] = q
        _spec_into(c, _COMPUTE_SPEC, secs)
    if r is not None:
        _spec_into(r, _PARENT_SPEC, secs)
    return {STAGES[i]: v for i, v in secs.items()}


def _spec_into(t: Mapping[str, int], spec: _Spec, secs: dict[int, float]) -> None:
    """(stage, seconds) for each stage of ``spec`` whose two events ``t`` holds in order, into ``secs``."""
    get = t.get
    for i, ea, eb, alt_a, alt_b in spec:
        a = get(ea)
        if a is None and alt_a:
            a = get(alt_a)
        b = get(eb)
        if b is None and alt_b:
            b = get(alt_b)
        if a is not None and b is not None and b >= a:
            secs[i] = (b - a) / 1e9


class StageHistograms(SeriesBook):
    """The stage histogram as a custom collector.

    ``prometheus_client.Histogram.labels(...).observe(v, exemplar=...)`` costs ~8 us (label lookup, lock,
    exemplar validation); a Triton request has seven stages, so at 100,000 spans/s that alone would take more
    than a core. Here the store's ``on_stored`` calls only pair spans while it takes a batch (``observing``),
    and the batch's values are observed together when it is stored (``sidecar.processors.stage_batch``: one
    bucket count per model, version and stage, a bisect per value for a few). Series and max_model_versions
    slots are made in the order of each one's first value, as if every value had been observed on arrival. The
    exposition (buckets, ``_count``, ``_sum``, one exemplar per bucket, the most recent) is the same.
    """

    def __init__(self, registry: CollectorRegistry, *, buckets: Sequence[float], max_model_versions: int) -> None:
        self._bounds = [float(b) for b in buckets]
        self._bounds_arr = np.array(self._bounds, dtype=np.float64)
        # The batch being stored: its pairings by (model, version), numbered in arrival order.
        self._pending: dict[tuple[str, str], Jobs] = {}
        self._seq = 0
        self._direct = True
        self._les = [floatToGoString(b) for b in self._bounds] + ["+Inf"]
        # (model, version) -> the seven stages' series, and every series created with its labels, in order.
        self._by_mv: dict[tuple[str, str], list[Series | None]] = {}
        self._keys: list[tuple[tuple[str, str, str], Series]] = []
        self._lock = threading.Lock()
        self._refused = Counter(
            "sidecar_traces_stage_series_refused",
            "Stage observations dropped because max_model_versions was reached.",
            registry=registry,
        )
        self._max = max_model_versions
        self._now = 0.0
        registry.register(self)

    # ------------------------------------------------------------ collector

    def describe(self) -> list[Metric]:
        return [HistogramMetricFamily(_NAME, _HELP, labels=["model", "version", "stage"])]

    def collect(self) -> list[Metric]:
        fam = HistogramMetricFamily(_NAME, _HELP, labels=["model", "version", "stage"])
        with self._lock:
            snap = [(k, list(s.counts), list(s.exemplars), s.sum) for k, s in self._keys]
        for key, counts, exemplars, total in snap:
            buckets: list[tuple[str, float] | tuple[str, float, Exemplar]] = []
            acc = 0
            for le, n, ex in zip(self._les, counts, exemplars, strict=True):
                acc += n
                if ex is None:
                    buckets.append((le, acc))
                else:
                    buckets.append((le, acc, Exemplar({"trace_id": ex[0]}, ex[1], ex[2])))
            fam.add_metric(list(key), buckets, total)
        return [fam]

    # ------------------------------------------------------------ observing

    @contextmanager
    def observing(self, now: float, size: int = 0) -> Iterator[None]:
        """Hold the lock while the store calls ``on_stored`` for one batch of ``size`` spans, then observe the
        batch (a batch under ``BATCH_MIN`` spans is observed span by span); ``now`` stamps its exemplars."""
        with self._lock:
            self._now = now
            self._direct = size < BATCH_MIN
            try:
                yield
            finally:
                pending, self._pending = self._pending, {}
                if pending:
                    self._flush(pending)

    def _flush(self, pending: dict[tuple[str, str], Jobs]) -> None:
        plan: list[tuple[Series, list[int] | np.ndarray, Sequence[TraceEntry]]] = []
        new = []
        by_mv = self._by_mv
        for mv, jobs in pending.items():
            series = by_mv.get(mv)
            for i, ns, es, seq in _values(jobs):
                if not len(ns):
                    continue
                s = series[i] if series is not None else None
                if s is None:
                    new.append((seq, _OFFSET[i], mv, i, ns, es))
                else:
                    plan.append((s, ns, es))
        if new:
            # Series (and max_model_versions slots) are made in the order of their first observation, as if
            # each value had been observed on arrival; a refused model's values are counted, not kept.
            new.sort(key=lambda c: (c[0], c[1]))
            refused = 0
            for _, _, mv, i, ns, es in new:
                got = self._series_of(mv)
                if got is None:
                    refused += len(ns)
                else:
                    plan.append((got[i] or self._new_series(got, mv, i), ns, es))
            if refused:
                self._refused.inc(refused)
        bounds, arr, now = self._bounds, self._bounds_arr, self._now
        for s, ns, es in plan:
            apply(s, ns, es, bounds, arr, now)

    def _jobs(self, mv: tuple[str, str]) -> Jobs:
        j = self._pending.get(mv)
        if j is None:
            j = self._pending[mv] = Jobs()
        return j

    def _compute_group(self, mv: tuple[str, str], m: Mapping[str, int], c: Mapping[str, int], tid: str) -> None:
        q = _queue_secs(m, c)
        if q is not None:
            self._put(mv, _QUEUE, q, tid)
        self._gaps(mv, c, _COMPUTE_SPEC, tid)

    def on_trios(self, whole: list[tuple[TraceEntry, Record, Record, Record]]) -> None:
        """``on_stored`` of the model span and then the compute span of each trace the store took whole
        (``TraceStore.add``): (entry, root, model span under it, its ``compute`` child), new traces in arrival
        order. In a batch, their stage values are taken at once (``stage_trios.take``), the same jobs numbered the
        same; a trace whose events are not dicts is paired span by span."""
        if self._direct:
            for e, _, r1, r2 in whole:
                self.on_stored(e, r1)
                self.on_stored(e, r2)
            return
        k, n = 0, len(whole)
        while k < n:
            k, self._seq = take(whole, k, self._jobs, self._seq)
            if k < n:
                e, _, r1, r2 = whole[k]
                self.on_stored(e, r1)
                self.on_stored(e, r2)
                k += 1

    def on_requests(self, whole: list[tuple[TraceEntry, Mapping[str, int], tuple[str, str]]]) -> None:
        """``on_trios`` of whole requests the store took from a ``span_requests`` batch: (entry, the request's
        event times, its (model, version)), paired as their root, model and compute spans would be
        (``stage_trios.take_stamps``). Only for a batch observed at once (``batched``): span by span needs the
        spans."""
        self._seq = take_stamps(whole, self._jobs, self._seq)

    def batched(self, spans: int) -> bool:
        """Whether a batch of ``spans`` spans is observed at once (else span by span, as they are stored)."""
        return spans >= BATCH_MIN

    def on_stored(self, e: TraceEntry, r: Record) -> None:
        """Pair the just-stored record ``r`` with its trace's stored spans, for the stages it completes (the
        store calls this, see ``TraceStore.add``, inside ``observing``).

        Only Triton's spans take part: a model span (``triton.model_name``), its ``compute`` child and its
        parent (the request span). Each stage group is observed when the later of its spans is stored, whatever
        the order and batching: the model span alone (``request``), model + compute (queue and the three
        compute stages; the first compute span of a model span counts), model + parent (network and send). The
        store never holds a span id twice, so a re-sent batch never counts a stage twice.
        """
        times: Mapping[str, int] | None = None
        seq = self._seq
        self._seq = seq + 3
        mv = r[MODEL]
        if mv is not None:
            ev = r[EVENTS]
            times = ev if type(ev) is dict else event_times(r)
            direct = self._direct
            if direct:
                self._gaps(mv, times, _REQUEST_SPEC, e.trace_id)
            else:
                jobs = self._jobs(mv)
                jobs.request.append((seq, times, e))
            comp = e.stage_compute
            c = comp.get(r[SPAN]) if comp is not None else None
            if c is not None:
                if direct:
                    self._compute_group(mv, times, c, e.trace_id)
                else:
                    jobs.compute.append((seq + 1, times, c, e))
            elif type(ev) is not dict:
                # Kept for the compute span (Triton's exporter sends it first, the bench and SDKs after):
                # reading a span's events is the costliest step of stage derivation (a dict is read as it is).
                mt = e.stage_times
                if mt is None:
                    e.stage_times = {r[SPAN]: times}
                else:
                    mt[r[SPAN]] = times
            parent = r[PARENT]
            if parent is not None:
                pr = e.by_id.get(parent)
                if pr is not None:
                    if direct:
                        self._gaps(mv, event_times(pr), _PARENT_SPEC, e.trace_id)
                    else:
                        jobs.parent.append((seq + 2, event_times(pr), e))
                else:
                    waiting = e.stage_waiting
                    if waiting is None:
                        e.stage_waiting = {parent: [r]}
                    elif parent in waiting:
                        waiting[parent].append(r)
                    else:
                        waiting[parent] = [r]
        elif r[NAME] == "compute" and r[PARENT] is not None:
            parent = r[PARENT]
            comp = e.stage_compute
            if comp is None:
                comp = e.stage_compute = {}
            if parent not in comp:
                ev = r[EVENTS]
                times = ev if type(ev) is dict else event_times(r)
                # The compute span's event times, not the record: a dict of names and ints is no work for the
                # garbage collector.
                comp[parent] = times
                m = e.by_id.get(parent)
                if m is not None and m[MODEL] is not None:
                    mt = e.stage_times
                    m_times = mt.pop(parent, None) if mt is not None else None
                    if m_times is None:
                        m_times = event_times(m)
                    if self._direct:
                        self._compute_group(m[MODEL], m_times, times, e.trace_id)
                    else:
                        self._jobs(m[MODEL]).compute.append((seq, m_times, times, e))
        waiting = e.stage_waiting
        if waiting is not None:
            kids = waiting.pop(r[SPAN], None)
            if not waiting:
                e.stage_waiting = None
            if kids:
                if times is None:
                    times = event_times(r)
                base = self._seq
                self._seq = base + len(kids)
                for k, kid in enumerate(kids):
                    if self._direct:
                        self._gaps(kid[MODEL], times, _PARENT_SPEC, e.trace_id)
                    else:
                        self._jobs(kid[MODEL]).parent.append((base + k, times, e))


def _values(jobs: Jobs) -> Iterator[tuple[int, list[int] | np.ndarray, Sequence[TraceEntry], int]]:
    """(stage, ns values, their traces, the arrival number of the first) of one model's jobs, stage by stage: its
    whole requests' values first (``stage_trios``: they came before any queued job), then the queued jobs'."""
    if jobs.trio is not None:
        yield from jobs.trio.values()
    if jobs.request:
        cols = Cols([t for _, t, _ in jobs.request]).prefetch(_R_EVENTS)
        es = [e for _, _, e in jobs.request]
        for i, ea, eb, alt_a, alt_b in _REQUEST_SPEC:
            ns, kept, k = stage_values(cols, es, ea, eb, alt_a, alt_b)
            yield i, ns, kept, jobs.request[k][0]
    if jobs.compute:
        es = [e for *_, e in jobs.compute]
        cols = Cols([c for _, _, c, _ in jobs.compute]).prefetch(_C_EVENTS)
        ns, kept, k = queue_values(Cols([m for _, m, _, _ in jobs.compute]), cols, es)
        yield _QUEUE, ns, kept, jobs.compute[k][0]
        for i, ea, eb, alt_a, alt_b in _COMPUTE_SPEC:
            ns, kept, k = stage_values(cols, es, ea, eb, alt_a, alt_b)
            yield i, ns, kept, jobs.compute[k][0]
    if jobs.parent:
        cols = Cols([t for _, t, _ in jobs.parent]).prefetch(_P_EVENTS)
        es = [e for _, _, e in jobs.parent]
        for i, ea, eb, alt_a, alt_b in _PARENT_SPEC:
            ns, kept, k = stage_values(cols, es, ea, eb, alt_a, alt_b)
            yield i, ns, kept, jobs.parent[k][0]
