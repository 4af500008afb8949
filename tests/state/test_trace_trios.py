"""The trace hub's whole-request path (sidecar/state/trace_ingest.py ``add_trios``, sidecar/processors/stage_trios.py:
a batch of root, model and compute spans, three a trace, stored and paired a request at a time) against the frozen
one-by-one hub of ae3dd55 (hub_before.py): on batches of that shape with every way a request can fall out of it
(a trace already stored, a repeated span id, a span out of place, a missing or out-of-order event, GRPC events,
an error status, events as a list, attributes, a model refused, per-trace span and byte limits, a stray record
that breaks the shape), with stages observed span by span, in batches, one by one or through numpy, every stored
span, trace figure, pairing state, stage sample and counter is the same."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any
from unittest import mock

from hub_before import HubBefore
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry
from trace_files_before import replicated, templates_of
from tracefile_helpers import published_span_batches
from traces_helpers import DATA, store_and_stage_samples

import sidecar.processors.stage_batch as batch_mod
import sidecar.processors.stages as stages_mod
import sidecar.state.trace_ingest as ingest_mod
from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.records import FMT_JSON, MODEL_ATTR, VERSION_ATTR, Record, from_span, to_span
from sidecar.state.trace_entry import TraceEntry, whole_entry
from sidecar.state.trace_hub import TraceHub

T0 = 1_796_218_366_000_000_000
ROOT_EVENTS = (
    "HTTP_RECV_START",
    "HTTP_RECV_END",
    "HTTP_SEND_START",
    "HTTP_SEND_END",
    "GRPC_WAITREAD_START",
    "GRPC_WAITREAD_END",
    "GRPC_SEND_START",
    "GRPC_SEND_END",
)
MODEL_EVENTS = ("REQUEST_START", "QUEUE_START", "REQUEST_END", "COMPUTE_START")
COMPUTE_EVENTS = ("QUEUE_START", "COMPUTE_START", "COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START", "COMPUTE_END")
MODELS = (("ctr", "1"), ("ctr", "2"), ("", "1"), ("rank", "3"))
# How a request may differ from a trace file's: each breaks one condition of the whole-request path.
FLAWS = (
    "root_has_parent",
    "root_has_model",
    "root_named_compute",
    "model_without_model",
    "model_not_under_root",
    "compute_renamed",
    "compute_not_under_model",
    "compute_has_model",
    "same_ids_01",
    "same_ids_02",
    "same_ids_12",
    "events_as_list",
    "root_attributes",
    "compute_attributes",
    "built_spans",
)


def _ordered_events(draw: Any, names: tuple[str, ...], whole: bool) -> dict[str, int]:
    """A span's events: in order and complete (as Triton writes them), or any subset at any times."""
    if whole:
        base = T0 + draw(st.integers(0, 10**9))
        steps = draw(st.lists(st.integers(0, 5_000_000), min_size=len(names), max_size=len(names)))
        out, t = {}, base
        for n, dt in zip(names, steps, strict=True):
            t += dt
            out[n] = t
        return out
    return draw(st.dictionaries(st.sampled_from(names), st.integers(T0, T0 + 2 * 10**9), max_size=len(names)))


@st.composite
def _request(draw: Any) -> list[Record]:
    trace = bytes([draw(st.integers(0, 255))]) * 16
    ids = [trace[:6] + bytes([k, draw(st.integers(0, 1))]) for k in range(3)]
    flaws = set(draw(st.lists(st.sampled_from(FLAWS), max_size=2))) if draw(st.booleans()) else set()
    for a, b in (("same_ids_01", (0, 1)), ("same_ids_02", (0, 2)), ("same_ids_12", (1, 2))):
        if a in flaws:
            ids[b[1]] = ids[b[0]]
    whole = draw(st.booleans())
    root_names = ROOT_EVENTS[:4] if draw(st.booleans()) else ROOT_EVENTS[4:]
    evs = [
        _ordered_events(draw, root_names if whole else ROOT_EVENTS, whole),
        _ordered_events(draw, MODEL_EVENTS[:3] if whole else MODEL_EVENTS, whole),
        _ordered_events(draw, COMPUTE_EVENTS[1:] if whole else COMPUTE_EVENTS, whole),
    ]
    mv = draw(st.sampled_from(MODELS))
    attrs: tuple[tuple[str, object], ...] = ((MODEL_ATTR, mv[0]), (VERSION_ATTR, mv[1]), ("triton.trace_id", 7))
    if draw(st.booleans()):
        attrs += (("triton.request_id", "req-" + "x" * draw(st.integers(0, 30))),)

    def rec(k: int, parent: bytes | None, name: str, model: Any, a: tuple[Any, ...] = ()) -> Record:
        ev: Any = evs[k]
        times = list(ev.values()) or [T0]
        if "events_as_list" in flaws and k == 1:
            ev = [(n, t, ()) for n, t in ev.items()]
        status = draw(st.sampled_from((0, 0, 0, 0, 1, 2)))  # 2: an error, and the trace is kept
        return (trace, ids[k], parent, name, min(times), max(times), status, model, ev, "svc", FMT_JSON, (a, "", 2))

    root = rec(
        0,
        ids[2] if "root_has_parent" in flaws else None,
        "compute" if "root_named_compute" in flaws else "InferRequest",
        mv if "root_has_model" in flaws else None,
        (("http.target", "/v2/models/x/infer"),) if "root_attributes" in flaws else (),
    )
    model = rec(
        1,
        None if "model_not_under_root" in flaws else ids[0],
        mv[0] or "model",
        None if "model_without_model" in flaws else mv,
        attrs,
    )
    compute = rec(
        2,
        ids[0] if "compute_not_under_model" in flaws else ids[1],
        "Compute" if "compute_renamed" in flaws else "compute",
        mv if "compute_has_model" in flaws else None,
        (("thread", 3),) if "compute_attributes" in flaws else (),
    )
    if "built_spans" in flaws:  # records of ``Span`` objects built elsewhere (as a test or an old reader makes)
        return [from_span(to_span(r)) for r in (root, model, compute)]
    return [root, model, compute]


@st.composite
def _batches(draw: Any) -> list[list[Record]]:
    out = []
    for _ in range(draw(st.integers(1, 4))):
        recs = [r for q in draw(st.lists(_request(), min_size=1, max_size=12)) for r in q]
        if draw(st.integers(0, 5)) == 0:  # a stray record: the batch is not whole requests any more
            recs.insert(draw(st.integers(0, len(recs))), draw(_request())[draw(st.integers(0, 2))])
        out.append(recs)
    return out


def _state(reg: CollectorRegistry, store: Any, pairing: bool) -> dict[str, Any]:
    samples = store_and_stage_samples(reg)
    traces = [
        (
            cls,
            e.trace_id,
            e.key,
            e.first_seen,
            list(e.by_id.items()),
            e.start_ns,
            e.end_ns,
            e.nbytes,
            e.error,
            e.model,
            e.version,
            e.failure_note,
            # The pairing state (what a later span of the trace is paired with) is the frozen hub's own shape
            # (it kept records where the hub keeps event times), so it is compared with the hub record by record.
            (e.stage_compute, e.stage_waiting, e.stage_times) if pairing else None,
        )
        for cls, od in (("plain", store._plain), ("kept", store._kept))
        for e in od.values()
    ]
    return {"samples": samples, "traces": traces, "bytes": store.nbytes}


def _three(batches: Sequence[Sequence[Record]], **cfg: Any) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The hub's end state, the same hub's with every batch taken record by record (no whole requests) and the
    frozen hub's."""
    tcfg = parse_config({"traces": {"enabled": True, **cfg}}).traces
    regs = [CollectorRegistry() for _ in range(3)]
    clock = FakeClock(start=1_796_218_366.0)
    hub = TraceHub(tcfg, registry=regs[0], clock=clock)
    by_record = TraceHub(tcfg, registry=regs[1], clock=clock)
    old = HubBefore(tcfg, regs[2])
    for b in batches:
        clock.advance(0.5)
        hub.ingest_records(b, "t")
        with mock.patch.object(ingest_mod, "trio_keys", lambda records: None):
            by_record.ingest_records(b, "t")
        old.ingest(b, clock.now())
    return (
        _state(regs[0], hub.store, True),
        _state(regs[1], by_record.store, True),
        _state(regs[2], old.store, False),
    )


def _both(batches: Sequence[Sequence[Record]], **cfg: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The hub's state and the frozen hub's, after checking the hub's against itself record by record."""
    new, by_record, old = _three(batches, **cfg)
    assert new == by_record
    new["traces"] = [(*t[:-1], None) for t in new["traces"]]
    return new, old


@settings(max_examples=150, deadline=None)
@given(
    _batches(),
    st.sampled_from([1, 6, 1000]),
    st.sampled_from([2, 48]),
    st.fixed_dictionaries(
        {
            "max_spans_per_trace": st.sampled_from([2, 3, 1000]),
            "max_model_versions": st.sampled_from([1, 2, 200]),
            "max_traces": st.sampled_from([4, 5000]),
            "slow_threshold_ms": st.sampled_from([1.0, 100.0]),
            "store": st.sampled_from([{}, {"max_trace_bytes_mib": 0.0035}]),
        }
    ),
)
def test_whole_requests_store_and_observe_as_the_frozen_hub(batches, batch_min, vector_min, cfg):
    with mock.patch.object(stages_mod, "BATCH_MIN", batch_min), mock.patch.object(batch_mod, "VECTOR_MIN", vector_min):
        new, old = _both(batches, **cfg)
    assert new == old


def _file_batches(tmp: Path, data: bytes) -> list[tuple[Record, ...]]:
    batches = published_span_batches(tmp, data)
    assert all(type(b) is tuple for b in batches)
    return batches


def test_a_trace_file_is_taken_a_request_at_a_time_and_again_record_by_record(tmp_path):
    """Every request of a trace file goes the whole-request way (stored whole, its stage values taken in one loop
    over the batch's requests); the same file read again goes record by record (every trace already stored: all
    duplicates); both end as the frozen hub ends."""
    file = replicated(templates_of((DATA / "trace-file-triton-mode.json").read_bytes()), 400)
    batches = _file_batches(tmp_path, file)
    assert sum(map(len, batches)) == 1200
    real_take, real_groups = stages_mod.take, ingest_mod.add_groups
    whole: list[int] = []
    grouped: list[int] = []

    def take(requests: list[Any], k: int, *a: Any) -> Any:
        whole.append(len(requests) - k)
        return real_take(requests, k, *a)

    def groups(by_trace: dict[bytes, list[Record]], *a: Any) -> Any:
        grouped.append(sum(map(len, by_trace.values())))
        return real_groups(by_trace, *a)

    with (
        mock.patch.object(stages_mod, "BATCH_MIN", 6),
        mock.patch.object(stages_mod, "take", take),
        mock.patch.object(ingest_mod, "add_groups", groups),
    ):
        new, old = _both(batches)
        assert new == old
        # The hub took every request whole; the 1200 grouped are its record-by-record twin's (``_three``).
        assert sum(whole) == 400 and sum(grouped) == 1200
        grouped.clear()
        new, old = _both(batches + batches)
    assert new == old
    # The second read: the hub's 1200 duplicates record by record, and its twin's 2400.
    assert sum(grouped) == 1200 + 2400 and sum(whole) == 800
    dups = [v for name, labels, v, _ in new["samples"] if labels.get("reason") == "duplicate"]
    assert dups == [1200.0]
    counts = [v for name, _, v, _ in new["samples"] if name.endswith("_count")]
    assert sum(counts) == 400 * 7


def test_an_entry_built_whole_is_the_entry_built_span_by_span():
    """``whole_entry`` sets every slot of ``TraceEntry`` as the constructor and the store's per-span updates do."""
    key = bytes(range(16))
    r = (key, b"s" * 8, None, "x", 5, 9, 0, ("m", "1"), {}, "svc", FMT_JSON, ((), "", 2))
    e = TraceEntry(key.hex(), 3.0, key, start_ns=5, end_ns=9)
    e.by_id[r[1]] = r
    e.nbytes, e.model, e.version = 1234, "m", "1"
    w = whole_entry(key, 3.0, {r[1]: r}, 1234, 5, 9, ("m", "1"))
    slots = TraceEntry.__slots__
    assert len(slots) == 15
    assert [getattr(w, n) for n in slots] == [getattr(e, n) for n in slots]
