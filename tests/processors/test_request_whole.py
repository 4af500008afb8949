"""The request join's path for a trace file's requests whole (``RequestRecords.on_span_requests``,
``request_whole.finished``) against the same batches' span records taken by ``on_spans``: the same audit rows in
the same order, the same counters, the same joins left waiting; and a request that leaves at once unkept is
finished without its spans being built."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry
from span_requests_helpers import HTTP, T0, span_request_batches, span_requests_batch

from sidecar.clock import FakeClock
from sidecar.model import Batch, Event
from sidecar.processors.request_records import RequestRecords
from sidecar.processors.request_records_config import RequestRecordsConfig
from sidecar.records import TRITON_COMPUTE_EVENTS, TRITON_MODEL_EVENTS
from sidecar.sources.trace_files.requests import Request
from sidecar.wiring.span_subs import as_spans


def _state(rr: RequestRecords, reg: CollectorRegistry, rows: list[Any]) -> dict[str, Any]:
    samples = sorted(
        (s.name, tuple(sorted(s.labels.items())), s.value)
        for fam in reg.collect()
        if fam.name.startswith(("sidecar_requests", "sidecar_request_records"))
        for s in fam.samples
        if not s.name.endswith("_created")
    )
    return {"rows": rows, "samples": samples, "pending": list(rr._pending), "alias": dict(rr._alias)}


def _both(batches: list[Batch], events: list[Event], **cfg: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    out = []
    for whole in (True, False):
        reg = CollectorRegistry()
        clock = FakeClock(start=1_796_218_366.0)
        rows: list[Any] = []
        rr = RequestRecords(RequestRecordsConfig(enabled=True, **cfg), sink=rows.extend, registry=reg, clock=clock)
        for b in batches:
            clock.advance(1.0)
            rr.on_span_requests(b) if whole else rr.on_spans(as_spans(b))
        rr.on_events(Batch(kind="events", source="http", items=tuple(events)))
        out.append(_state(rr, reg, rows))
    return out[0], out[1]


@settings(max_examples=60, deadline=None)
@given(
    batches=span_request_batches(),
    cfg=st.sampled_from(
        [
            {},
            {"sample_rate": 1.0},  # every record kept: all go as span records
            {"sample_rate": 0.3},  # a share kept by the trace id's hash
            {"slow_ms": 0.1},  # the slow ones kept
        ]
    ),
)
def test_requests_join_as_their_spans_do(batches, cfg):
    # An event for some of the requests that carry a request id: they were waiting for it.
    ids = [q.request_id for b in batches for i in b.items for q in i.requests if q.request_id]
    events = [
        Event(model="ctr", version="1", timestamp=0.0, request_id=r, fields={"http_status": 200}) for r in ids[::2]
    ]
    new, old = _both(batches, events, **cfg)
    assert new == old


def test_a_request_leaving_at_once_unkept_is_not_built_into_spans():
    names = (*HTTP, *TRITON_MODEL_EVENTS, *TRITON_COMPUTE_EVENTS)
    reqs = [Request(i, {n: T0 + i * 10_000 + k * 100 for k, n in enumerate(names)}, "ctr", "1", "") for i in range(50)]
    reqs.append(Request(99, {n: T0 + k * 100 for k, n in enumerate(names)}, "ctr", "1", "rid-99"))  # waits for its id
    batch = span_requests_batch([reqs])
    built: list[int] = []
    item = batch.items[0]
    real = item.build
    object.__setattr__(item, "build", lambda rs, o, p: built.append(len(rs)) or real(rs, o, p))
    reg = CollectorRegistry()
    rows: list[Any] = []
    rr = RequestRecords(
        RequestRecordsConfig(enabled=True, sample_rate=0.0), sink=rows.extend, registry=reg, clock=FakeClock()
    )
    rr.on_span_requests(batch)
    assert built == [1]  # the request with a request id, as span records
    assert list(rr._pending) == [item.whole[-1][0].hex()] and rows == []
    assert reg.get_sample_value("sidecar_requests_total", {"model": "ctr", "version": "1", "outcome": "ok"}) == 50
    assert reg.get_sample_value("sidecar_request_records_unjoined_total", {"side": "triton"}) == 50


def test_a_request_after_a_partial_read_of_its_trace_joins_with_it():
    """A trace read in part (not whole) and then whole in one batch is one join, as the span records make it."""
    names = (*HTTP, *TRITON_MODEL_EVENTS, *TRITON_COMPUTE_EVENTS)
    full = {n: T0 + k * 100 for k, n in enumerate(names)}
    partial = Request(7, {n: t for n, t in full.items() if n in (*HTTP, *TRITON_MODEL_EVENTS)}, "ctr", "1", "")
    batch = span_requests_batch([[partial, Request(7, full, "ctr", "1", ""), Request(8, full, "ctr", "1", "")]])
    new, old = _both([batch], [])
    assert new == old
    assert ("sidecar_requests_total", (("model", "ctr"), ("outcome", "ok"), ("version", "1")), 2.0) in new["samples"]
