"""The frozen data types that flow between sources, checks and exporters.

Sources publish ``Batch`` objects on the ``Bus``; checks observe them and produce ``Finding`` objects; the alert
book turns findings into ``Alert`` lifecycles; ``Change`` records annotate alerts.

This module depends on nothing of ours but ``sidecar.facts`` (the typed evidence a finding carries;
``tests/test_import_rules.py`` holds it to that): every other layer may import it, and it stays the one
vocabulary they share.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, Protocol, get_args

import numpy as np

from sidecar.facts import NO_FACTS, Facts

__all__ = [
    "BATCH_ITEM_TYPES",
    "BATCH_KINDS",
    "Batch",
    "BatchKind",
    "Change",
    "Event",
    "EventColumns",
    "Finding",
    "GpuIdentity",
    "GpuMemoryReading",
    "GpuProcess",
    "GpuSnapshot",
    "Sample",
    "SeriesSnapshot",
    "Span",
    "SpanEvent",
    "SpanRecord",
    "SpanRequest",
    "SpanRequests",
]

FeatureValue = float | str | None


@dataclass(frozen=True, slots=True)
class Event:
    """One prediction as the model served it (from /v1/events, a JSONL file or a TENSORS trace file).

    ``features`` maps a feature name to a number, a category string, or None (missing). NaN stays NaN: checks
    count it as missing on purpose, they never drop it silently.
    """

    model: str
    version: str
    timestamp: float
    features: Mapping[str, FeatureValue] = field(default_factory=dict)
    score: float | None = None
    prediction_class: str | None = None
    label: float | str | None = None
    trace_id: str | None = None
    request_id: str | None = None
    user_id: str | None = None
    # Extra numeric fields a business check may aggregate (e.g. ``wer``, ``clicked``).
    fields: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class EventColumns:
    """Prediction events of one model/version as columns (an ``event_columns`` batch): what a push source
    publishes for a batch of the common shape (numeric features, the same names in every event, a numeric time
    and score, nothing else), so a check appends arrays instead of touching one ``Event`` per prediction.

    Row i of every array is the i-th of these events in the order received; every value already passed the
    door (finite, bounded). ``timestamps`` and each ``features`` column are float64 arrays of length ``n``;
    ``score`` is one too (NaN where an event had none), or None when no event had one. ``events()`` gives the
    same events as ``Event`` objects, for a reader without a columnar path.
    """

    model: str
    version: str
    timestamps: Any  # numpy float64 array, shape (n,)
    features: Mapping[str, Any] = field(default_factory=dict)  # name -> numpy float64 array, shape (n,)
    score: Any = None  # numpy float64 array (NaN: no score), or None
    # Where each row stood in the batch its source received (numpy int array), when that batch held several
    # model/versions; None: rows 0..n-1. A reader that mixes blocks (a check over every version) orders by it.
    positions: Any = None

    @property
    def n(self) -> int:
        return len(self.timestamps)

    def rows(self) -> Any:
        """``positions``, or 0..n-1."""
        return np.arange(self.n) if self.positions is None else self.positions

    def events(self) -> list[Event]:
        """The same events, one ``Event`` each (what the per-event path would have published)."""
        names = list(self.features)
        rows = list(zip(*(c.tolist() for c in self.features.values()), strict=True)) if names else None
        scores = [None] * self.n if self.score is None else [None if s != s else s for s in self.score.tolist()]
        m, v = self.model, self.version
        return [
            Event(m, v, ts, dict(zip(names, rows[i], strict=True)) if rows else {}, scores[i])
            for i, ts in enumerate(self.timestamps.tolist())
        ]


@dataclass(frozen=True, slots=True)
class SpanEvent:
    name: str
    time_unix_nano: int
    attributes: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Span:
    """One span, ids as lowercase hex (trace id 32 chars, span id 16 chars)."""

    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    start_unix_nano: int
    end_unix_nano: int
    service_name: str = ""
    attributes: Mapping[str, object] = field(default_factory=dict)
    events: tuple[SpanEvent, ...] = ()
    status_code: int = 0  # OTLP: 0 unset, 1 ok, 2 error
    status_message: str = ""
    kind: int = 0

    @property
    def duration_ns(self) -> int:
        return max(0, self.end_unix_nano - self.start_unix_nano)

    @property
    def is_error(self) -> bool:
        return self.status_code == 2


# The receiver's span record (``sidecar.records``): a plain tuple, cheap to build at ingest; ``records.to_span``
# turns one into a ``Span`` for a reader that needs the whole span.
SpanRecord = tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class Sample:
    """One value of one series (a scraped or sampled metric); ``labels`` are sorted (name, value) pairs."""

    name: str
    labels: tuple[tuple[str, str], ...]
    value: float


@dataclass(frozen=True, slots=True)
class SeriesSnapshot:
    """One good scrape of a Prometheus target, whole (a ``scrapes`` batch with ``complete=True``).

    ``samples`` are ``(name, raw label string, value)`` as the exposition parser yields them (label strings are
    parsed once per distinct string, not per sample); ``parsed`` maps each raw label string of this scrape to
    its labels. A scrape that failed is published as a complete batch with no snapshot: the target's current
    view is unknown, so values derived from it are withdrawn until the next good one.
    """

    target: str
    samples: tuple[tuple[str, str, float], ...]
    parsed: Mapping[str, Mapping[str, str]]
    types: Mapping[str, str]
    taken_at: float  # monotonic seconds: what rates divide by

    def labels(self, raw: str) -> Mapping[str, str]:
        return self.parsed.get(raw, _NO_LABELS)


_NO_LABELS: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class GpuSnapshot:
    """What a GPU source (NVML, dcgm-exporter) saw in one sample (a ``gpu_snapshots`` batch from that source).

    ``sampled`` False carries only ``detail`` (a failed scrape, a source starting): readiness text changes,
    the data the source last sent stays until it goes stale.
    """

    samples: tuple[Any, ...]  # processors.gpu_series.GpuSample
    gpus: Mapping[str, Any]  # uuid -> state.gpus.GpuIdentity (index, name)
    visible: int
    detail: str = ""
    sampled: bool = True


@dataclass(frozen=True, slots=True)
class GpuProcess:
    """One NVML compute-process row joined to its command line (``cmdline`` empty when unreadable)."""

    gpu_uuid: str
    pid: int
    used_bytes: float
    cmdline: Sequence[str] = ()


@dataclass(frozen=True, slots=True)
class GpuMemoryReading:
    """The memory view of one NVML sample, published as a ``gpu_memory`` batch right after its ``GpuSnapshot``.

    ``used`` is the memory used per GPU (uuid -> bytes); ``processes`` the compute processes of every GPU read.
    ``processes_complete`` is False when the process table of some GPU could not be read (or reading it is
    off): the rows are then partial and must not replace figures derived from a whole table.
    """

    used: Mapping[str, float]
    processes: tuple[GpuProcess, ...] = ()
    processes_complete: bool = False


@dataclass(frozen=True, slots=True)
class GpuIdentity:
    """Which GPU a UUID is, as a GPU source sees it (joins Triton's ``nv_gpu_*`` series to NVML's view)."""

    uuid: str
    index: str
    name: str
    source: str


# One item type per kind (``BATCH_ITEM_TYPES``, after ``Change`` below, is the table ``Bus.publish`` holds
# publishers to): a subscriber takes a kind and never filters its items by type.
BatchKind = Literal[
    "events",
    "event_columns",
    "spans",
    "span_requests",
    "samples",
    "scrapes",
    "gpu_snapshots",
    "gpu_memory",
    "changes",
    "gpus",
]
BATCH_KINDS: tuple[BatchKind, ...] = get_args(BatchKind)


@dataclass(frozen=True, slots=True)
class Batch:
    """What a source publishes: items of one kind, with the source's name for self-telemetry.

    ``complete`` says the batch is the source's whole current view (a GPU snapshot: series absent from it are
    gone), rather than new items to add.
    """

    kind: BatchKind
    source: str
    items: tuple[Any, ...]
    received_at: float = 0.0
    complete: bool = False


@dataclass(frozen=True, slots=True)
class Finding:
    """One evaluation result of a check.

    ``labels`` identify the series (model, version, feature or check name); ``active`` is whether the check's
    condition holds right now (before any hold duration, which the alert book applies).
    """

    check: str
    kind: str  # drift | business | slo | probe
    labels: Mapping[str, str]
    active: bool
    value: float | None
    threshold: float | None = None
    baseline: float | None = None
    p_value: float | None = None
    effect_size: float | None = None
    window_secs: float | None = None
    severity: str = "warning"
    summary: str = ""
    description: str = ""
    evaluated_at: float = 0.0
    insufficient_data: bool = False
    # The hold the check asks for before its finding fires (None: the alert book's default); carried here so
    # the book never has to look the check up.
    for_secs: float | None = None
    trace_id: str | None = None
    annotations: Mapping[str, str] = field(default_factory=dict)
    # The evidence, typed per kind (``sidecar.facts``): numbers and short tokens the one renderer
    # (sidecar/alerting/render/) turns into every sentence a person reads; a check writes no prose.
    facts: Facts = field(default_factory=lambda: NO_FACTS)


@dataclass(frozen=True, slots=True)
class Change:
    """A deploy or model-version event used to annotate alerts."""

    what: str
    at: float
    who: str = ""
    model: str | None = None
    version: str | None = None
    link: str | None = None
    source: str = "api"  # api | triton_repository
    id: str = ""


class SpanRequest(Protocol):
    """A traced request as a trace-file reader holds it (``sidecar.sources.trace_files.requests.Request``)."""

    tid: int
    stamps: dict[str, int]  # event name -> Triton's own ns
    model: str
    version: str
    request_id: str


@dataclass(frozen=True, slots=True)
class SpanRequests:
    """Requests whose spans are built only when something reads them: what a ``span_requests`` batch carries.

    A trace file's request becomes three spans (``InferRequest``, the model's span, ``compute``), and most of
    them are evicted from the trace store unread. A reader with a request path (the trace store, the stage
    histograms, the canary) takes the requests as they are; any other gets ``spans()``, the span records the
    source would have published (sidecar/wiring/span_subs.py hands those to it, built once per batch).
    ``whole[i]`` is request ``i``'s (trace id, start, end) in Unix ns when its spans are exactly a root, a model
    span under it and a ``compute`` span under that (every event one of Triton's), else None.
    """

    requests: tuple[SpanRequest, ...]
    whole: tuple[tuple[bytes, int, int] | None, ...]
    offset_ns: int  # added to a request's ns to give Unix ns
    path: str  # the file path the trace ids are derived from
    build: Callable[[Sequence[Any], int, str], list[tuple[Any, ...]]]  # (requests, offset, path) -> span records
    span_count: int  # how many spans the requests make
    root_name: str  # the name of a whole request's root span

    def spans(self, requests: Sequence[SpanRequest] | None = None) -> list[tuple[Any, ...]]:
        """The span records of ``requests`` (default: all of them), in order."""
        return self.build(self.requests if requests is None else requests, self.offset_ns, self.path)


# What each batch kind carries: a closed set, one item type per kind (``Bus.publish`` refuses a batch whose
# items are of another type, so no subscriber filters with ``isinstance``).
BATCH_ITEM_TYPES: Mapping[BatchKind, type] = MappingProxyType(
    {
        "events": Event,
        "event_columns": EventColumns,  # events of one model/version as numpy columns (a push of the common shape)
        "spans": tuple,  # span records (``SpanRecord``, built and read by sidecar/records.py)
        "span_requests": SpanRequests,  # a trace source's requests whole, their spans built when read
        "samples": Sample,  # the Triton model API's poll (model states, statistics, configs)
        "scrapes": SeriesSnapshot,  # one good Prometheus scrape of Triton, whole; a failed scrape: no item
        "gpu_snapshots": GpuSnapshot,  # what one GPU source (NVML, dcgm-exporter) saw in one sample
        "gpu_memory": GpuMemoryReading,  # the memory view of one NVML sample, published after its snapshot
        "changes": Change,
        "gpus": GpuIdentity,  # the GPU state's merged view, whole
    }
)
