"""The request join and Triton's trace files: a request read from a trace file without a request id cannot be
joined by anything (its trace id is the reader's own), so it leaves at once, with the record it would have had
after the window; one with a request id still waits for an event carrying that id."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry
from tracefile_helpers import published_span_batches

from sidecar.clock import FakeClock
from sidecar.model import Batch, Event
from sidecar.processors.request_records import RequestRecords
from sidecar.processors.request_records_config import RequestRecordsConfig
from sidecar.records import TRACE_FILE_SOURCE, Record

DATA = Path(__file__).resolve().parents[1] / "data" / "traces"
Rec = tuple[str, str, float, dict[str, Any]]


def _records(tmp: Path, name: str) -> tuple[Record, ...]:
    batches = published_span_batches(tmp, (DATA / name).read_bytes())
    return tuple(r for b in batches for r in b)


def _rr(reg: CollectorRegistry, clock: FakeClock, got: list[Rec]) -> RequestRecords:
    cfg = RequestRecordsConfig(enabled=True, sample_rate=1.0, join_window_secs=30)
    return RequestRecords(cfg, sink=got.extend, registry=reg, clock=clock)


def _unjoined(reg: CollectorRegistry) -> float:
    return reg.get_sample_value("sidecar_request_records_unjoined_total", {"side": "triton"}) or 0.0


def test_a_trace_file_request_without_a_request_id_leaves_at_once_as_it_would_after_the_window(tmp_path: Path) -> None:
    records = _records(tmp_path, "trace-file-triton-mode.json")
    assert len(records) == 3  # one request: InferRequest, the model span, compute

    reg, clock = CollectorRegistry(), FakeClock()
    got: list[Rec] = []
    rr = _rr(reg, clock, got)
    rr.on_spans(Batch(kind="spans", source=TRACE_FILE_SOURCE, items=records))
    assert len(got) == 1 and not rr._pending  # nothing held for a join that cannot happen
    assert _unjoined(reg) == 1

    # The same spans from a source whose trace ids a caller can know wait out the window, then leave with the
    # same record, counted the same way.
    reg2, clock2 = CollectorRegistry(), FakeClock()
    got2: list[Rec] = []
    rr2 = _rr(reg2, clock2, got2)
    rr2.on_spans(Batch(kind="spans", source="otlp", items=records))
    assert got2 == [] and len(rr2._pending) == 1
    clock2.advance(31)
    rr2.on_spans(Batch(kind="spans", source="otlp", items=()))
    assert got2 == got
    assert got[0][3]["model"] == "ctr" and not got[0][3]["joined"] and got[0][3]["outcome"] == "ok"
    assert _unjoined(reg2) == 1
    for r in (reg, reg2):
        assert r.get_sample_value("sidecar_requests_total", {"model": "ctr", "version": "1", "outcome": "ok"}) == 1


def test_a_trace_file_request_with_a_request_id_waits_for_an_event_with_that_id(tmp_path: Path) -> None:
    records = _records(tmp_path, "trace-file-tensors.json")  # five requests, request ids req-1 .. req-5
    reg, clock = CollectorRegistry(), FakeClock()
    got: list[Rec] = []
    rr = _rr(reg, clock, got)
    rr.on_spans(Batch(kind="spans", source=TRACE_FILE_SOURCE, items=records))
    assert got == [] and len(rr._pending) == 5

    event = Event(model="ctr", version="1", timestamp=1.7e9, request_id="req-2", fields={"http_status": 503.0})
    rr.on_events(Batch(kind="events", source="http", items=(event,)))
    assert len(got) == 1
    doc = got[0][3]
    assert doc["joined"] and doc["request_id"] == "req-2" and doc["outcome"] == "error"
    assert _unjoined(reg) == 0

    clock.advance(31)
    rr.on_spans(Batch(kind="spans", source=TRACE_FILE_SOURCE, items=()))
    assert len(got) == 5 and not rr._pending
    assert _unjoined(reg) == 4
