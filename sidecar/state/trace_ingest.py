"""How the trace store takes a batch of span records (``TraceStore.add``): grouped trace by trace, or, for a batch
of whole requests as a trace file brings them, three records a trace taken in one go.

A batch is taken trace by trace, in order of first appearance (each trace's spans in arrival order): ``group``
builds that order, ``add_groups`` stores it record by record. A trace-file batch is the same order already: each
request's ``InferRequest`` root, its model span and its ``compute`` span, one request after another, every trace
new (``sidecar.sources.trace_files.spans``; Triton's OTLP export in the order Triton sends it is too). ``trio_keys``
recognises such a batch with a few C-level list operations (no grouping dict), and ``add_trios`` stores each new
trace of that shape whole: its entry built with its three spans (``whole_entry``), its byte estimate and figures
written out, and the batch's whole requests handed to the stage pairing together (``on_trios``) instead of a call
per record. Any trace that is not of that shape or that would meet a limit (already stored, a repeated span id,
``max_spans_per_trace`` under 3, over ``max_trace_bytes``) goes through ``add_groups`` as in any batch. Same
entries, same order, same counts: tests/state/test_trace_hub_differential.py and test_trace_trios.py hold it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from operator import itemgetter
from typing import Any

from sidecar.records import END, EVENTS, FMT, FMT_JSON, MODEL, NAME, PARENT, RAW, SPAN, START, STATUS, TRACE, Record
from sidecar.state.trace_entry import (
    ENTRY_BYTES,
    EVENT_BYTES,
    RECORD_BYTES,
    TraceEntry,
    pairs_bytes,
    record_bytes,
    whole_entry,
)

__all__ = [
    "Limits",
    "OnStored",
    "OnTrios",
    "Taken",
    "add_groups",
    "add_records",
    "add_trios",
    "group",
    "plus",
    "trio_keys",
]

OnStored = Callable[[TraceEntry, Record], None]
# on_trios([(entry, root, model span, compute span), ...]): each three were just stored together as a new trace.
OnTrios = Callable[[list[tuple[TraceEntry, Record, Record, Record]]], None]
# (max spans per trace, max bytes per trace, the slow threshold in ns)
Limits = tuple[int, int, int]
# (stored, duplicates, over the span limit, over the byte limit, bytes added)
Taken = tuple[int, int, int, int, int]

_trace_of = itemgetter(TRACE)


def group(records: Iterable[Record]) -> dict[bytes, list[Record]]:
    """The records by trace id, in order of first appearance, each trace's in arrival order."""
    by_trace: dict[bytes, list[Record]] = {}
    last: bytes | None = None
    g: list[Record] = []
    for r in records:
        key = r[TRACE]
        if key == last:  # a trace's spans mostly come together (a trace file's request, an SDK's batch)
            g.append(r)
            continue
        found = by_trace.get(key)
        if found is None:
            g = by_trace[key] = [r]
        else:
            g = found
            g.append(r)
        last = key
    return by_trace


def trio_keys(records: Iterable[Record]) -> list[bytes] | None:
    """The trace ids of a batch made of consecutive runs of three records of one trace each, every trace in one
    run only (so the runs are already ``group``'s order); None for any other batch."""
    if not isinstance(records, list | tuple):
        return None
    n = len(records)
    if not n or n % 3:
        return None
    keys = list(map(_trace_of, records))
    k0 = keys[0::3]
    if k0 != keys[1::3] or k0 != keys[2::3] or len(set(k0)) != len(k0):
        return None
    return k0


def add_trios(
    keys: list[bytes],
    records: Sequence[Record],
    plain: dict[bytes, TraceEntry],
    kept: dict[bytes, TraceEntry],
    now: float,
    limits: Limits,
    on_stored: OnStored | None,
    on_trios: OnTrios | None,
) -> Taken:
    """Store a batch that ``trio_keys`` accepted (see the module docstring); the caller holds the store's lock.

    ``on_trios`` gets the traces stored whole, as (entry, root, model span, compute span), where ``add_groups``
    would call ``on_stored`` for each one's model and compute spans; a run of them is handed over before the
    next trace taken record by record (``add_groups``, whose spans go to ``on_stored``) and a run of those is
    stored before the next whole one, so every call keeps arrival order.
    Without ``on_trios`` only a store with no ``on_stored`` takes traces whole."""
    limit, byte_limit, slow = limits
    pairing = on_trios is not None
    whole_ok = limit >= 3 and (pairing or on_stored is None)
    whole: list[tuple[TraceEntry, Record, Record, Record]] = []
    # Traces taken record by record (``add_groups``), gathered while they come one after another.
    rest: dict[bytes, list[Record]] = {}
    # (stored, duplicates, full, too big, bytes added) of the traces taken record by record; whole ones only
    # store and add bytes.
    by_record: Taken = (0, 0, 0, 0, 0)
    whole_stored = whole_added = 0
    # The byte estimate of model spans' first two attributes by the first's identity (checked, and both held
    # here): a trace file's reader shares one (name, model) and one (version) pair per (model, version) between
    # a batch's model spans. At most 64 kept.
    shared: dict[int, tuple[object, object, int]] = {}
    for key, r0, r1, r2 in zip(keys, records[0::3], records[1::3], records[2::3], strict=True):
        if whole_ok and key not in plain and key not in kept:
            s0, s1, s2 = r0[SPAN], r1[SPAN], r2[SPAN]
            mv = r1[MODEL]
            if (
                mv is not None
                and r0[PARENT] is None
                and r0[MODEL] is None
                and r0[NAME] != "compute"
                and r1[PARENT] == s0
                and r2[PARENT] == s1
                and r2[MODEL] is None
                and r2[NAME] == "compute"
                and s0 != s1
                and s0 != s2
                and s1 != s2
            ):
                # record_bytes of each, written out for the commonest records (JSON, an event dict; no
                # attributes but the model span's)
                ev, raw = r0[EVENTS], r0[RAW]
                if r0[FMT] == FMT_JSON and type(ev) is dict and not raw[0]:
                    nbytes = ENTRY_BYTES + RECORD_BYTES + len(r0[NAME]) + len(raw[1]) + EVENT_BYTES * len(ev)
                else:
                    nbytes = ENTRY_BYTES + record_bytes(r0)
                ev, raw = r2[EVENTS], r2[RAW]
                if r2[FMT] == FMT_JSON and type(ev) is dict and not raw[0]:
                    nbytes += RECORD_BYTES + len(r2[NAME]) + len(raw[1]) + EVENT_BYTES * len(ev)
                else:
                    nbytes += record_bytes(r2)
                ev, raw = r1[EVENTS], r1[RAW]
                attrs: tuple[Any, ...] = raw[0] if r1[FMT] == FMT_JSON else ()
                if type(ev) is dict and len(attrs) >= 2:
                    a0, a1 = attrs[0], attrs[1]
                    c = shared.get(id(a0))
                    if c is None or c[0] is not a0 or c[1] is not a1:
                        c = (a0, a1, pairs_bytes((a0, a1)))
                        if len(shared) < 64:
                            shared[id(a0)] = c
                    nbytes += RECORD_BYTES + len(r1[NAME]) + len(raw[1]) + EVENT_BYTES * len(ev) + c[2]
                    if len(attrs) > 2:
                        nbytes += pairs_bytes(attrs[2:])
                else:
                    nbytes += record_bytes(r1)
                if nbytes <= byte_limit:
                    if rest:  # the traces before it first, record by record
                        by_record = plus(by_record, add_groups(rest, plain, kept, now, limits, on_stored))
                        rest = {}
                    start, end = r0[START], r0[END]
                    t = r1[START]
                    if t < start:
                        start = t
                    t = r2[START]
                    if t < start:
                        start = t
                    t = r1[END]
                    if t > end:
                        end = t
                    t = r2[END]
                    if t > end:
                        end = t
                    e = whole_entry(key, now, {s0: r0, s1: r1, s2: r2}, nbytes, start, end, mv)
                    if r0[STATUS] == 2 or r1[STATUS] == 2 or r2[STATUS] == 2:
                        e.error = True
                    if e.error or end - start >= slow:
                        kept[key] = e
                    else:
                        plain[key] = e
                    if pairing:
                        whole.append((e, r0, r1, r2))
                    whole_stored += 3
                    whole_added += nbytes
                    continue
        if whole and on_trios is not None:
            on_trios(whole)
            whole = []
        rest[key] = [r0, r1, r2]
    if whole and on_trios is not None:
        on_trios(whole)
    if rest:
        by_record = plus(by_record, add_groups(rest, plain, kept, now, limits, on_stored))
    stored, dups, full, too_big, added = by_record
    return stored + whole_stored, dups, full, too_big, added + whole_added


def add_groups(
    by_trace: dict[bytes, list[Record]],
    plain: dict[bytes, TraceEntry],
    kept: dict[bytes, TraceEntry],
    now: float,
    limits: Limits,
    on_stored: OnStored | None,
) -> Taken:
    """Store ``group``'s traces record by record; the caller holds the store's lock and counts the drops. One
    look-up per trace; the trace's figures are kept in locals while its spans are taken and written back once."""
    stored = dups = full = too_big = 0
    added = 0
    limit, byte_limit, slow = limits
    for key, grp in by_trace.items():
        e = plain.get(key) or kept.get(key)
        if e is None:
            r0 = grp[0]
            e = plain[key] = TraceEntry(key.hex(), now, key, start_ns=r0[START], end_ns=r0[END])
            added += ENTRY_BYTES
        by_id = e.by_id
        nbytes = before = e.nbytes
        start, end = e.start_ns, e.end_ns
        n = 0
        for r in grp:
            sid = r[SPAN]
            if sid in by_id:
                dups += 1
                continue
            if len(by_id) >= limit:
                full += 1
                continue
            ev, raw = r[EVENTS], r[RAW]
            if r[FMT] == FMT_JSON and type(ev) is dict and not raw[0]:
                # ``record_bytes`` of the commonest record (Triton's spans from trace files: JSON, an
                # event dict, no attributes) without the call
                size = RECORD_BYTES + len(r[NAME]) + len(raw[1]) + EVENT_BYTES * len(ev)
            else:
                size = record_bytes(r)
            if nbytes + size > byte_limit:
                too_big += 1
                continue
            nbytes += size
            by_id[sid] = r
            n += 1
            if r[START] < start:
                start = r[START]
            if r[END] > end:
                end = r[END]
            if r[STATUS] == 2:
                e.error = True
            if r[MODEL] is not None:
                if not e.model:
                    e.model, e.version = r[MODEL]
                if on_stored is not None:
                    on_stored(e, r)
            elif on_stored is not None and (r[NAME] == "compute" or e.stage_waiting is not None):
                on_stored(e, r)
        if n:
            e.nbytes, e.start_ns, e.end_ns = nbytes, start, end
            added += nbytes - before
            stored += n
            if (e.error or e.failure_note or end - start >= slow) and key in plain:  # now a kept trace
                del plain[key]
                kept[key] = e
    return stored, dups, full, too_big, added


def add_records(
    records: Iterable[Record],
    plain: dict[bytes, TraceEntry],
    kept: dict[bytes, TraceEntry],
    now: float,
    limits: Limits,
    on_stored: OnStored | None,
    on_trios: OnTrios | None,
) -> Taken:
    """Store a batch of span records: whole requests at once where ``trio_keys`` accepts it, else trace by trace;
    the caller holds the store's lock and counts the drops."""
    keys = trio_keys(records)
    if keys is not None:
        assert isinstance(records, list | tuple)  # trio_keys said so
        return add_trios(keys, records, plain, kept, now, limits, on_stored, on_trios)
    return add_groups(group(records), plain, kept, now, limits, on_stored)


def plus(a: Taken, b: Taken) -> Taken:
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3], a[4] + b[4])
