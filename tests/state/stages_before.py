# A frozen copy of sidecar/processors/stages.py at ae3dd55 (stage observations one by one), the baseline
# of tests/state/test_trace_hub_differential.py. Do not edit.
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
from bisect import bisect_left
from collections.abc import Iterator, Mapping, Sequence

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.metrics_core import HistogramMetricFamily, Metric
from prometheus_client.samples import Exemplar
from prometheus_client.utils import floatToGoString

from sidecar.model import Span
from sidecar.records import MODEL, NAME, PARENT, SPAN, Record, event_times
from sidecar.state.traces import TraceEntry

__all__ = ["STAGES", "StageHistograms", "stage_durations", "stage_seconds"]

STAGES = ("network_receive", "queue", "compute_input", "compute_infer", "compute_output", "send", "request")
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
_COMPUTE_SPEC: _Spec = (
    (_C_IN, "COMPUTE_START", "COMPUTE_INPUT_END", "", ""),
    (_C_INFER, "COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START", "", ""),
    (_C_OUT, "COMPUTE_OUTPUT_START", "COMPUTE_END", "", ""),
)


def _spec_secs(t: Mapping[str, int], spec: _Spec) -> Iterator[tuple[int, float]]:
    """(stage, seconds) for each stage of ``spec`` whose two events ``t`` holds in order."""
    for i, ea, eb, alt_a, alt_b in spec:
        a = t.get(ea)
        if a is None and alt_a:
            a = t.get(alt_a)
        b = t.get(eb)
        if b is None and alt_b:
            b = t.get(alt_b)
        if a is not None and b is not None and b >= a:
            yield i, (b - a) / 1e9


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
    """``_spec_secs`` written into ``secs`` (no generator: the request join runs it per request)."""
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


class _Series:
    __slots__ = ("counts", "exemplars", "sum")

    def __init__(self, n: int) -> None:
        self.counts = [0] * n
        self.exemplars: list[tuple[str, float, float] | None] = [None] * n
        self.sum = 0.0


class StageHistograms:
    """The stage histogram as a custom collector.

    ``prometheus_client.Histogram.labels(...).observe(v, exemplar=...)`` costs ~8 us (label lookup, lock,
    exemplar validation); a Triton request has seven stages, so at 100,000 spans/s that alone would take more
    than a core. Here an observation is a bisect and three list writes under one lock per batch; the
    exposition (buckets, ``_count``, ``_sum``, one exemplar per bucket, the most recent) is the same.
    """

    def __init__(self, registry: CollectorRegistry, *, buckets: Sequence[float], max_model_versions: int) -> None:
        self._bounds = [float(b) for b in buckets]
        self._les = [floatToGoString(b) for b in self._bounds] + ["+Inf"]
        # (model, version) -> the seven stages' series, and every series created with its labels, in order.
        self._by_mv: dict[tuple[str, str], list[_Series | None]] = {}
        self._keys: list[tuple[tuple[str, str, str], _Series]] = []
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

    def observing(self, now: float) -> threading.Lock:
        """The lock to hold while the store calls ``on_stored`` for one batch; ``now`` stamps its exemplars."""
        self._now = now
        return self._lock

    def _series_of(self, mv: tuple[str, str]) -> list[_Series | None] | None:
        series = self._by_mv.get(mv)
        if series is None and mv not in self._by_mv:
            if len(self._by_mv) >= self._max:
                return None  # refused; not remembered, so the map stays bounded
            series = self._by_mv[mv] = [None] * len(STAGES)
        return series

    def _new_series(self, series: list[_Series | None], mv: tuple[str, str], i: int) -> _Series:
        s = series[i] = _Series(len(self._les))
        self._keys.append(((mv[0], mv[1], STAGES[i]), s))
        return s

    def _put(self, mv: tuple[str, str], i: int, secs: float, trace_id: str) -> None:
        series = self._series_of(mv)
        if series is None:
            self._refused.inc()
            return
        s = series[i] or self._new_series(series, mv, i)
        j = bisect_left(self._bounds, secs)
        s.counts[j] += 1
        s.sum += secs
        # Only the latest exemplar of a bucket is kept: that is all the OpenMetrics exposition shows.
        s.exemplars[j] = (trace_id, secs, self._now)

    def _gaps(self, mv: tuple[str, str], t: Mapping[str, int], spec: _Spec, tid: str) -> None:
        """Observe each (stage, from event, to event) of ``spec`` that ``t`` holds both events of, in order.

        ``_spec_secs`` with the observation written out, not a call per stage: a Triton request makes seven
        observations, and a call each cost a tenth of the request's budget."""
        series: list[_Series | None] | None = None
        looked_up = False
        bounds = self._bounds
        now = self._now
        for i, ea, eb, alt_a, alt_b in spec:
            a = t.get(ea)
            if a is None and alt_a:
                a = t.get(alt_a)
            if a is None:
                continue
            b = t.get(eb)
            if b is None and alt_b:
                b = t.get(alt_b)
            if b is None or b < a:
                continue
            if not looked_up:
                # Only on an observation: a model that is never observed takes no max_model_versions slot.
                series = self._series_of(mv)
                looked_up = True
            if series is None:
                self._refused.inc()
                continue
            secs = (b - a) / 1e9
            s = series[i] or self._new_series(series, mv, i)
            j = bisect_left(bounds, secs)
            s.counts[j] += 1
            s.sum += secs
            s.exemplars[j] = (tid, secs, now)

    def _compute_group(self, mv: tuple[str, str], m: Mapping[str, int], c: Mapping[str, int], tid: str) -> None:
        q = _queue_secs(m, c)
        if q is not None:
            self._put(mv, _QUEUE, q, tid)
        self._gaps(mv, c, _COMPUTE_SPEC, tid)

    def on_stored(self, e: TraceEntry, r: Record) -> None:
        """Observe the stages that the just-stored record ``r`` completes (the store calls this, see
        ``TraceStore.add``, with the lock from ``observing`` held).

        Only Triton's spans take part: a model span (``triton.model_name``), its ``compute`` child and its
        parent (the request span). Each stage group is observed when the later of its spans is stored, whatever
        the order and batching: the model span alone (``request``), model + compute (queue and the three
        compute stages; the first compute span of a model span counts), model + parent (network and send). The
        store never holds a span id twice, so a re-sent batch never counts a stage twice.
        """
        tid = e.trace_id
        times: Mapping[str, int] | None = None
        mv = r[MODEL]
        if mv is not None:
            times = event_times(r)
            self._gaps(mv, times, _REQUEST_SPEC, tid)
            comp = e.stage_compute
            c = comp.get(r[SPAN]) if comp is not None else None
            if c is not None:
                self._compute_group(mv, times, event_times(c), tid)
            else:
                # Kept for the compute span (Triton's exporter sends it first, the bench and SDKs after):
                # reading a span's events is the costliest step of stage derivation.
                mt = e.stage_times
                if mt is None:
                    e.stage_times = {r[SPAN]: times}
                else:
                    mt[r[SPAN]] = times
            parent = r[PARENT]
            if parent is not None:
                pr = e.by_id.get(parent)
                if pr is not None:
                    self._gaps(mv, event_times(pr), _PARENT_SPEC, tid)
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
                comp[parent] = r
                m = e.by_id.get(parent)
                if m is not None and m[MODEL] is not None:
                    times = event_times(r)
                    mt = e.stage_times
                    m_times = mt.pop(parent, None) if mt is not None else None
                    self._compute_group(m[MODEL], event_times(m) if m_times is None else m_times, times, tid)
        waiting = e.stage_waiting
        if waiting is not None:
            kids = waiting.pop(r[SPAN], None)
            if not waiting:
                e.stage_waiting = None
            if kids:
                if times is None:
                    times = event_times(r)
                for k in kids:
                    self._gaps(k[MODEL], times, _PARENT_SPEC, tid)
