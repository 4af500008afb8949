"""One trace of the store (``TraceEntry``), its listing row (``TraceSummary``) and the byte estimate of a span
record (``record_bytes``) that the store's byte budgets count.

The estimate is what a record's strings and raw bytes add to a fixed cost per record, read from lengths the
decoders already produced: no object is walked except a composite attribute value (an array or map, rare),
and no ``sys.getsizeof``. Calibrated with ``tracemalloc`` on the decoders' own output (Triton-shaped JSON:
~1,180 bytes measured per record; protobuf ~870; a span with eight 4,000-character values ~33,800), the
estimate is within 10% of those; ``tests/state/test_trace_store_bytes.py`` holds it within 25%. Python keeps
a non-ASCII character in up to four bytes, which the estimate counts as one: a store of such text can hold up
to four times its budget in the worst case (text is cut to ``traces.limits.max_value_chars`` per value).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from sidecar.model import Span
from sidecar.records import EVENTS, FMT, FMT_JSON, FMT_PB, NAME, PARENT, RAW, START, Record, to_span

__all__ = [
    "ENTRY_BYTES",
    "ITEM_BYTES",
    "RAW_ITEM_BYTES",
    "RECORD_BYTES",
    "TraceEntry",
    "TraceSummary",
    "filled_entry",
    "pairs_bytes",
    "record_bytes",
    "trace_key",
    "whole_entry",
]

# Fixed costs, from tracemalloc: a record (its 12-slot tuple, ids, ints and raw tuple), one decoded attribute or
# event (its pair or dict entry and small values), one raw protobuf attribute or event (a bytes object in a
# tuple), one trace entry (the slotted object and its span dict).
RECORD_BYTES = 600
ITEM_BYTES = 100
RAW_ITEM_BYTES = 40
# One event of a name -> time dict (its key, a ~20-character name, its int value and the dict slot).
EVENT_BYTES = 115
ENTRY_BYTES = 600
_STR = 50  # a str or bytes object's header


def _value_bytes(v: Any) -> int:
    t = type(v)
    if t is str or t is bytes:
        return _STR + len(v)
    if t is tuple or t is list:
        return 56 + sum(_value_bytes(x) + 8 for x in v)
    if t is dict:
        return 232 + sum(ITEM_BYTES + len(k) + _value_bytes(x) for k, x in v.items())
    return 32


def _pairs_bytes(attrs: Any) -> int:
    n = 0
    for k, v in attrs:
        t = type(v)
        n += ITEM_BYTES + len(k) + (_STR + len(v) if t is str else 32 if t is int else _value_bytes(v))
    return n


pairs_bytes = _pairs_bytes


def _map_bytes(attrs: Mapping[str, object]) -> int:
    return _pairs_bytes(attrs.items()) if attrs else 0


def _span_bytes(s: Span) -> int:
    n = _map_bytes(s.attributes) + len(s.status_message) + len(s.service_name)
    for e in s.events:
        n += ITEM_BYTES + len(e.name) + _map_bytes(e.attributes)
    return n


def _json_events_bytes(ev: Any) -> int:
    n = 0
    for name, _, a in ev:
        n += ITEM_BYTES + len(name) + (_pairs_bytes(a) if a else 0)
    return n


def record_bytes(r: Record) -> int:
    """Estimated bytes a stored span record holds (see the module docstring).

    Written for speed (it runs once per stored span): events without attributes (a name -> time dict, the
    JSON form of Triton's spans) count a fixed ``EVENT_BYTES`` each, their names being short names
    (``traces.limits.max_name_chars``); everything that can hold long text is counted by its length.
    """
    ev = r[EVENTS]
    fmt = r[FMT]
    if fmt == FMT_JSON:
        attrs, message, _ = r[RAW]
        n = RECORD_BYTES + len(r[NAME]) + len(message)
        if ev:
            n += EVENT_BYTES * len(ev) if type(ev) is dict else _json_events_bytes(ev)
        return n + _pairs_bytes(attrs) if attrs else n
    if fmt == FMT_PB:
        attrs, status, _ = r[RAW]
        n = RECORD_BYTES + len(r[NAME])
        if attrs:
            n += sum(map(len, attrs)) + RAW_ITEM_BYTES * len(attrs)
        if ev:
            n += sum(map(len, ev)) + RAW_ITEM_BYTES * len(ev)
        return n + len(status) if status else n
    # A Span built elsewhere (trace files, tests); its event times dict is small and counted per event.
    return RECORD_BYTES + len(r[NAME]) + _span_bytes(r[RAW]) + EVENT_BYTES * len(ev)


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
        "nbytes",
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
        # Estimated bytes held (``record_bytes`` of each stored span plus ``ENTRY_BYTES``), kept by the store.
        self.nbytes = ENTRY_BYTES
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
        # Stage derivation's pairing state (sidecar.processors.stages), None until it needs any: compute spans'
        # event times by parent span id, and model spans waiting for their parent by the parent's span id.
        self.stage_compute: dict[bytes, Mapping[str, int]] | None = None
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

    def span_count(self) -> int:
        return len(self.by_id)

    def root_name(self) -> str:
        root = self.root()
        return root.name if root else ""

    def root(self) -> Span | None:
        recs = list(self.by_id.values())
        roots = [r for r in recs if r[PARENT] is None or r[PARENT] not in self.by_id]
        if not roots:
            return None
        return to_span(min(roots, key=lambda r: r[START]))


_new_entry = object.__new__
_E = TypeVar("_E", bound=TraceEntry)


def filled_entry(cls: type[_E], key: bytes, first_seen: float, nbytes: int, start_ns: int, end_ns: int, mv: Any) -> _E:
    """A new ``cls`` entry with every slot but ``by_id`` as ``TraceEntry(...)`` and then storing its spans one by one
    would leave it (``mv``: the model span's (model, version)), without the keyword call and the fields set twice:
    ``whole_entry`` adds its span records, a ``trace_requests.RequestEntry`` builds them when read."""
    e: _E = _new_entry(cls)
    e.trace_id = key.hex()
    e.first_seen = first_seen
    e.key = key
    e.nbytes = nbytes
    e.start_ns = start_ns
    e.end_ns = end_ns
    e.model, e.version = mv
    e.error = False
    e.failure_note = ""
    e.stage_compute = None
    e.stage_waiting = None
    e.stage_times = None
    e._spans = None
    return e


def whole_entry(
    key: bytes, first_seen: float, by_id: dict[bytes, Record], nbytes: int, start_ns: int, end_ns: int, mv: Any
) -> TraceEntry:
    """A new entry holding ``by_id``'s spans already (``filled_entry``), for the store's whole requests
    (``sidecar.state.trace_ingest``)."""
    e = filled_entry(TraceEntry, key, first_seen, nbytes, start_ns, end_ns, mv)
    e.by_id = by_id
    return e


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


def trace_key(trace_id: str) -> bytes | None:
    try:
        key = bytes.fromhex(trace_id)
    except ValueError:
        return None
    return key if len(key) == 16 else None
