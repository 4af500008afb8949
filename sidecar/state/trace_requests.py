"""How the trace store takes a ``span_requests`` batch (``TraceStore.add_requests``): each whole request stored as a
``RequestEntry``, its spans built the first time something reads them.

A trace file's request becomes three spans (root, model span, ``compute``), and at Triton's rates most traces leave
the store (``max_traces``) before anyone opens one. A whole request (``SpanRequests.whole``: exactly those three
spans, every event on one of them) is stored as an entry that holds the request's event times and names and
builds its span records with the source's own builder (``SpanRequests.build``) when ``by_id`` is first read (a
page, a later span of the trace, the failure join's listing does not): the same records, ids and order the
source would have published, and the same ``stage_compute`` that pairing them leaves. Its byte estimate is the
one its three records get (``record_bytes``), so the store's byte budget and eviction are those of the spans:
measured once per (model, version, with or without a request id) in a batch on a built example, and for the
others of the same kind, moved by ``EVENT_BYTES`` per event and a byte per request-id character, the only things
that differ between them (tests/state/test_trace_requests.py holds every entry to its records' estimate).

Requests that are not whole, that would meet a limit (already stored, ``max_spans_per_trace`` under 3, over
``max_trace_bytes``), or come while no stage pairing takes whole requests go as span records through
``add_records``, in order: the store's entries, counts and stage observations are those of the span records
(tests/state/test_trace_requests.py).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from sidecar.model import SpanRequest, SpanRequests
from sidecar.records import EVENTS, SPAN, Record
from sidecar.state.trace_entry import ENTRY_BYTES, EVENT_BYTES, TraceEntry, filled_entry, record_bytes
from sidecar.state.trace_ingest import Limits, OnStored, OnTrios, Taken, add_records, plus

__all__ = ["OnRequests", "RequestEntry", "add_requests"]

# on_requests([(entry, event times, (model, version)), ...]): whole requests just stored, in arrival order.
OnRequests = Callable[[list[tuple[TraceEntry, Mapping[str, int], tuple[str, str]]]], None]

_BY_ID: Any = TraceEntry.__dict__["by_id"]  # the base class's slot: unset in a RequestEntry until its spans are built
_BUILDING = threading.Lock()


class _Request(NamedTuple):
    """What the builder reads of a request (``SpanRequest``), without the rest the reader held (tensor rows)."""

    tid: int
    stamps: dict[str, int]
    model: str
    version: str
    request_id: str


class RequestEntry(TraceEntry):
    """A trace of one whole request, its span records built on first read of ``by_id`` (see the module
    docstring)."""

    __slots__ = ("_src",)

    # (builder, request, offset, path, root span's name) until built
    _src: tuple[Callable[[Sequence[Any], int, str], list[Record]], _Request, int, str, str] | None

    @property
    def by_id(self) -> dict[bytes, Record]:
        try:
            got: dict[bytes, Record] = _BY_ID.__get__(self, RequestEntry)
        except AttributeError:
            return self._build()
        return got

    @by_id.setter
    def by_id(self, value: dict[bytes, Record]) -> None:
        _BY_ID.__set__(self, value)

    def span_count(self) -> int:
        return 3 if self._src is not None else len(self.by_id)  # unbuilt: a whole request's three spans

    def root_name(self) -> str:
        src = self._src
        return src[4] if src is not None else super().root_name()  # unbuilt: its root's name

    def _build(self) -> dict[bytes, Record]:
        with _BUILDING:  # a page thread and the loop may both read it first: one builds, both get the same dict
            try:
                got: dict[bytes, Record] = _BY_ID.__get__(self, RequestEntry)
                return got
            except AttributeError:
                pass
            src = self._src
            assert src is not None
            build, q, offset, path, _ = src
            recs = build((q,), offset, path)
            # As ``stage_trios.take`` leaves a trace it took whole: the compute span's events by the model span's id.
            self.stage_compute = {recs[1][SPAN]: recs[2][EVENTS]}
            by_id = {r[SPAN]: r for r in recs}
            _BY_ID.__set__(self, by_id)
            self._src = None
            return by_id


def _entry(
    key: bytes, now: float, nbytes: int, start: int, end: int, q: SpanRequest, item: SpanRequests
) -> RequestEntry:
    e = filled_entry(RequestEntry, key, now, nbytes, start, end, (q.model, q.version))  # no status: no error
    e._src = (
        item.build,
        _Request(q.tid, q.stamps, q.model, q.version, q.request_id),
        item.offset_ns,
        item.path,
        item.root_name,
    )
    return e


def add_requests(
    items: Sequence[SpanRequests],
    plain: dict[bytes, TraceEntry],
    kept: dict[bytes, TraceEntry],
    now: float,
    limits: Limits,
    on_stored: OnStored | None,
    on_trios: OnTrios | None,
    on_requests: OnRequests | None,
) -> Taken:
    """Store a ``span_requests`` batch (see the module docstring); the caller holds the store's lock and counts the
    drops. ``on_requests`` gets the whole requests stored, a run of them before the next request taken as span
    records (whose spans go to ``on_stored``/``on_trios``), so every call keeps arrival order. Without
    ``on_requests`` only a store with no ``on_stored`` takes requests whole."""
    limit, byte_limit, slow = limits
    whole_ok = limit >= 3 and (on_requests is not None or on_stored is None)
    taken: Taken = (0, 0, 0, 0, 0)
    for item in items:
        reqs, wholes = item.requests, item.whole
        done: list[tuple[TraceEntry, Mapping[str, int], tuple[str, str]]] = []
        rest: list[SpanRequest] = []  # requests taken as span records, gathered while they come one after another
        # (model, version, has a request id) -> (bytes, events, request-id length) of a built example
        sizes: dict[tuple[str, str, bool], tuple[int, int, int]] = {}
        stored = added = 0
        for q, w in zip(reqs, wholes, strict=True):
            if w is not None and whole_ok:
                if rest:  # the requests before it first, as span records (one may be of its trace)
                    got = add_records(item.spans(rest), plain, kept, now, limits, on_stored, on_trios)
                    taken, rest = plus(taken, got), []
                key, start, end = w
                if key not in plain and key not in kept:
                    rid = q.request_id
                    kind = (q.model, q.version, bool(rid))
                    size = sizes.get(kind)
                    if size is None:
                        size = sizes[kind] = (
                            ENTRY_BYTES + sum(map(record_bytes, item.spans((q,)))),
                            len(q.stamps),
                            len(rid),
                        )
                    nbytes = size[0] + EVENT_BYTES * (len(q.stamps) - size[1]) + len(rid) - size[2]
                    if nbytes <= byte_limit:
                        e = _entry(key, now, nbytes, start, end, q, item)
                        if end - start >= slow:
                            kept[key] = e
                        else:
                            plain[key] = e
                        done.append((e, q.stamps, (q.model, q.version)))
                        stored += 3
                        added += nbytes
                        continue
            if done and on_requests is not None:
                on_requests(done)
                done = []
            rest.append(q)
        if done and on_requests is not None:
            on_requests(done)
        if rest:
            taken = plus(taken, add_records(item.spans(rest), plain, kept, now, limits, on_stored, on_trios))
        taken = plus(taken, (stored, 0, 0, 0, added))
    return taken
