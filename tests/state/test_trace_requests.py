"""A ``span_requests`` batch (a trace file's requests whole) taken by the trace hub, the canary and the readers by
span name as their request paths take it, against the same batch's span records (``as_spans``) taken as before:
the same store (entries, order, classes, byte estimates, span records once built, pairing state), the same stage
observations and counters, the same canary values; and a whole request's spans are built only when read."""

from __future__ import annotations

from typing import Any
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry
from span_requests_helpers import HTTP, OFFSET, PATH, T0, span_request_batches, span_requests_batch
from traces_helpers import store_and_stage_samples

import sidecar.processors.stages as stages_mod
from sidecar.checks.canary.check import CanaryCheck
from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.model import Batch, SpanRequests
from sidecar.records import TRITON_COMPUTE_EVENTS, TRITON_MODEL_EVENTS, Record
from sidecar.sources.trace_files.requests import Request
from sidecar.sources.trace_files.spans import span_records, whole_of
from sidecar.state.trace_hub import TraceHub
from sidecar.state.trace_requests import RequestEntry
from sidecar.wiring.span_subs import as_spans, by_name, named_in


def _state(reg: CollectorRegistry, hub: TraceHub) -> dict[str, Any]:
    store = hub.store
    summaries = store.summaries(limit=10**6)  # before any entry is built: an unbuilt one answers as a built one
    traces = [
        (
            cls,
            e.trace_id,
            e.key,
            e.first_seen,
            list(e.by_id.items()),  # built here for a whole request's entry
            e.start_ns,
            e.end_ns,
            e.nbytes,
            e.error,
            e.model,
            e.version,
            (e.stage_compute, e.stage_waiting, e.stage_times),
        )
        for cls, od in (("plain", store._plain), ("kept", store._kept))
        for e in od.values()
    ]
    ingested = [s.value for f in reg.collect() if f.name == "sidecar_traces_spans_ingested" for s in f.samples[:1]]
    return {
        "samples": store_and_stage_samples(reg),
        "summaries": summaries,
        "traces": traces,
        "bytes": store.nbytes,
        "ingested": ingested,
    }


def _hubs(batches: list[Batch], **cfg: Any) -> tuple[dict[str, Any], dict[str, Any], list[TraceHub]]:
    tcfg = parse_config({"traces": {"enabled": True, **cfg}}).traces
    regs = [CollectorRegistry(), CollectorRegistry()]
    clock = FakeClock(start=1_796_218_366.0)
    hubs = [TraceHub(tcfg, registry=r, clock=clock) for r in regs]
    for b in batches:
        clock.advance(0.5)
        hubs[0].on_span_requests(b)
        hubs[1].on_spans(as_spans(b))
    return _state(regs[0], hubs[0]), _state(regs[1], hubs[1]), hubs


CONFIGS = [
    {},
    {"max_traces": 7},  # evicts by count, whole requests and records alike
    {"max_spans_per_trace": 2},  # no request fits whole
    {"slow_threshold_ms": 0.1},  # some requests are slow: kept
    {"max_model_versions": 1},  # the first (model, version) observed gets the series
    {"store": {"max_bytes_mib": 0.02, "max_trace_bytes_mib": 0.004}},  # evicts by bytes; the largest go by record
]


@settings(max_examples=60, deadline=None)
@given(batches=span_request_batches(), cfg=st.sampled_from(CONFIGS), batch_min=st.sampled_from((6, 1_000_000)))
def test_requests_are_stored_and_observed_as_their_spans_are(batches, cfg, batch_min):
    """``batch_min`` 6: each batch is observed at once (the request path); 1,000,000: span by span (the hub takes
    the batch's span records)."""
    with mock.patch.object(stages_mod, "BATCH_MIN", batch_min):
        new, old, _ = _hubs(batches, **cfg)
    assert new == old


def test_a_whole_requests_spans_are_built_when_read_and_once():
    reqs = [
        Request(
            i,
            {n: T0 + i * 1000 + k for k, n in enumerate(HTTP + TRITON_MODEL_EVENTS + TRITON_COMPUTE_EVENTS)},
            "ctr",
            "1",
            f"r{i}",
        )
        for i in range(400)
    ]
    built: list[int] = []

    def build(rs: Any, offset: int, path: str) -> list[Record]:
        built.append(len(rs))
        return span_records(rs, offset, path)

    whole, spans = whole_of(reqs, OFFSET, PATH)
    assert spans == 1200 and all(w is not None for w in whole)
    batch = Batch(
        "span_requests",
        "trace_file",
        (SpanRequests(tuple(reqs), tuple(whole), OFFSET, PATH, build, spans, "InferRequest"),),
    )
    hub = TraceHub(parse_config({"traces": {"enabled": True}}).traces, registry=CollectorRegistry(), clock=FakeClock())
    hub.on_span_requests(batch)
    assert built == [1]  # one example, for the byte estimate of the batch's (ctr, 1) requests with an id
    listed = hub.store.summaries(limit=1000)
    assert len(listed) == 400 and {(t.span_count, t.root_name) for t in listed} == {(3, "InferRequest")}
    assert built == [1]  # the trace list built none
    entries = list(hub.store._plain.values())
    assert len(entries) == 400 and all(type(e) is RequestEntry for e in entries)
    e = entries[-1]
    first = e.by_id
    assert built == [1, 1] and [r[3] for r in first.values()] == ["InferRequest", "ctr", "compute"]
    assert e.by_id is first and e.spans and built == [1, 1]  # built once
    assert list(first.values()) == span_records([reqs[-1]], OFFSET, PATH)
    summary = hub.store.summaries(limit=1)[0]
    assert summary.span_count == 3 and summary.root_name == "InferRequest"


def test_the_canary_takes_model_spans_from_requests_as_from_spans():
    reqs = [
        Request(
            i,
            {
                n: T0 + i * 7_000 + k * (i % 5 + 1) * 1000
                for k, n in enumerate(HTTP + TRITON_MODEL_EVENTS + TRITON_COMPUTE_EVENTS)
            },
            "ctr",
            str(1 + i % 2),
            "",
        )
        for i in range(300)
    ]
    reqs.append(Request(999, {"REQUEST_START": T0, "REQUEST_END": T0 + 5_000_000}, "ctr", "2", ""))  # not whole
    whole, n = whole_of(reqs, OFFSET, PATH)
    assert whole[-1] is None
    batch = Batch(
        "span_requests",
        "trace_file",
        (SpanRequests(tuple(reqs), tuple(whole), OFFSET, PATH, span_records, n, "InferRequest"),),
    )
    cfg = parse_config({"checks": {"canary": {"enabled": True}}}).checks.canary
    clock = FakeClock(start=(T0 + OFFSET) / 1e9 + 60)
    got = []
    for observe_as in ("requests", "spans"):
        c = CanaryCheck(cfg, registry=CollectorRegistry(), clock=clock)
        c.observe(batch if observe_as == "requests" else as_spans(batch))
        got.append(
            {(m, v): w.values("latency_spans", 0.0).tolist() for m, vs in c.models.items() for v, w in vs.items()}
        )
    assert got[0] == got[1] and sum(map(len, got[0].values())) == 301


def test_readers_by_span_name_skip_requests_that_cannot_carry_their_names():
    reqs = (Request(1, {"REQUEST_START": T0, "REQUEST_END": T0 + 9}, "llm", "1", ""),)
    batch = Batch(
        "span_requests", "trace_file", (SpanRequests(reqs, (None,), OFFSET, PATH, span_records, 1, "InferRequest"),)
    )
    seen: list[Batch] = []
    assert not named_in(batch, {"llm_request"})
    by_name(seen.append, {"llm_request"})(batch)
    assert seen == []
    assert named_in(batch, {"llm"}) and named_in(batch, {"compute"})
    by_name(seen.append, {"llm"})(batch)
    assert [r[3] for r in seen[0].items] == ["llm"]


def test_a_request_after_a_partial_read_of_its_trace_joins_the_stored_spans():
    """A trace's partial request (not whole, taken as span records) and then its whole request in one batch: the
    whole one finds the trace stored and goes as span records too (duplicates counted), as the records would."""
    names = (*HTTP, *TRITON_MODEL_EVENTS, *TRITON_COMPUTE_EVENTS)
    full = {n: T0 + k * 100 for k, n in enumerate(names)}
    partial = Request(7, {n: t for n, t in full.items() if n in (*HTTP, *TRITON_MODEL_EVENTS)}, "ctr", "1", "")
    reqs = [Request(i, {n: T0 + i * 10_000 + k for k, n in enumerate(names)}, "ctr", "1", "") for i in range(8, 400)]
    batch = span_requests_batch([[partial, Request(7, full, "ctr", "1", ""), *reqs]])
    with mock.patch.object(stages_mod, "BATCH_MIN", 6):
        new, old, hubs = _hubs([batch])
    assert new == old
    (e,) = [e for e in hubs[0].store._plain.values() if e.trace_id == batch.items[0].whole[1][0].hex()]
    assert type(e) is not RequestEntry and len(e.by_id) == 3
