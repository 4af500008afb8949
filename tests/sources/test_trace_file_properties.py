"""Property-based tests of the trace-file parser and source (hypothesis): arbitrary JSON-ish records, cuts at any
byte, huge numbers and out-of-range timestamps never raise, each record is taken once, and what is refused is
counted."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from sidecar.clock import FakeClock
from sidecar.component import Bus
from sidecar.model import Event
from sidecar.sources.events.config import TensorMapping
from sidecar.sources.events.metrics import EventsMetrics
from sidecar.sources.trace_files import TraceFileSettings, TraceFileSource, scan
from sidecar.sources.trace_files.metrics import TraceFileMetrics
from sidecar.store import Store
from sidecar.wiring.span_subs import subscribe_spans

INT64 = (1 << 63) - 1
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Ints an int64 or uint64 holds: beyond that a trace file's int reads as a float (as orjson reads it).
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(1 << 63), max_value=(1 << 64) - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
# Numbers a record may carry where a time, an id or an array size is expected: in range, out of range, huge.
wild_ints = st.one_of(
    st.integers(min_value=0, max_value=10**13),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, -1, INT64, INT64 + 1, 2**64, 10**40]),
)
stamp_names = st.sampled_from(
    [
        "HTTP_RECV_START",
        "HTTP_RECV_END",
        "REQUEST_START",
        "QUEUE_START",
        "COMPUTE_START",
        "COMPUTE_INPUT_END",
        "COMPUTE_OUTPUT_START",
        "COMPUTE_END",
        "REQUEST_END",
        "INFER_RESPONSE_COMPLETE",
        "HTTP_SEND_START",
        "HTTP_SEND_END",
        "GRPC_WAITREAD_START",
        "GRPC_SEND_END",
    ]
) | st.text(max_size=80)
shapes = st.lists(wild_ints, max_size=3).map(lambda xs: ",".join(map(str, xs))) | json_values
tensor_data = (
    st.lists(st.floats() | wild_ints | st.text(max_size=5), max_size=12).map(lambda xs: ",".join(map(str, xs)))
    | json_values
)
ids = st.integers(min_value=0, max_value=6) | wild_ints | json_values


def _record() -> st.SearchStrategy[dict[str, Any]]:
    ts = st.fixed_dictionaries(
        {
            "id": ids,
            "timestamps": st.lists(
                st.fixed_dictionaries({"name": stamp_names | json_values, "ns": wild_ints | json_values}), max_size=3
            )
            | json_values,
        }
    )
    model = st.fixed_dictionaries(
        {
            "id": ids,
            "model_name": st.text(max_size=300) | json_values,
            "model_version": st.integers(0, 3) | json_values,
            "request_id": st.text(max_size=10),
        },
        optional={"parent_id": wild_ints | json_values},
    )
    tensor = st.fixed_dictionaries(
        {
            "id": ids,
            "activity": st.just("TENSOR_QUEUE_INPUT"),
            "tensor": st.fixed_dictionaries(
                {"name": st.sampled_from(["x", "score"]) | json_values, "data": tensor_data, "shape": shapes}
            ),
        }
    )
    return ts | model | tensor | st.dictionaries(st.text(max_size=8), json_values, max_size=4)


@SETTINGS
@given(st.binary(max_size=2000))
def test_scan_of_any_bytes_never_raises_and_accounts_for_every_byte(data: bytes) -> None:
    s = scan(data)
    assert 0 <= s.consumed <= len(data)
    assert s.consumed + s.held <= len(data)
    assert all(isinstance(r, dict) for r in s.records)


@SETTINGS
@given(st.lists(st.dictionaries(st.text(max_size=6), json_values, max_size=5), max_size=12), st.data())
def test_records_read_in_pieces_are_the_records_read_whole_each_once(
    recs: list[dict[str, Any]], data: st.DataObject
) -> None:
    body = json.dumps(recs, ensure_ascii=False, separators=(",", ":")).encode()
    cuts = sorted(data.draw(st.lists(st.integers(0, len(body)), max_size=6)))
    got: list[dict[str, Any]] = []
    offset = 0
    for cut in [*cuts, len(body)]:
        if cut < offset:
            continue
        s = scan(body[offset:cut], at_start=offset == 0)
        assert s.damaged == 0  # a prefix of valid JSON is never taken for damage
        got += s.records
        offset += s.consumed
    assert offset == len(body)
    assert got == recs


class _Harness:
    def __init__(self, root: Path, max_read_bytes: int = 4096) -> None:
        self.reg = CollectorRegistry()
        self.clock = FakeClock(start=1_800_000_000.0)
        self.store = Store(root / "state.sqlite")
        self.bus = Bus(self.reg)
        self.spans: list[Any] = []
        self.events: list[Event] = []
        subscribe_spans(self.bus, "t", lambda b: self.spans.extend(b.items))
        self.bus.subscribe("events", "t", lambda b: self.events.extend(b.items))  # type: ignore[arg-type]
        mapping = {"ctr": TensorMapping(inputs={"x": ["a", "b"]}, map_unlisted=True)}
        cfg = TraceFileSettings(
            path=str(root / "trace.json"),
            tensors=mapping,
            max_read_bytes=max_read_bytes,
            max_pending_requests=8,
            settle_secs=1.0,
        )
        self.src = TraceFileSource(
            cfg,
            bus=self.bus,
            metrics=TraceFileMetrics(self.reg),
            clock=self.clock,
            store=self.store,
            events_metrics=EventsMetrics(self.reg),
        )

    def refused(self) -> float:
        return sum(
            s.value
            for m in self.reg.collect()
            if m.name == "sidecar_trace_file_records_refused"
            for s in m.samples
            if s.name.endswith("_total")
        )


@SETTINGS
@given(st.lists(_record(), max_size=25), st.data())
def test_the_source_survives_any_records_cut_anywhere_and_keeps_times_in_range(
    recs: list[dict[str, Any]], data: st.DataObject
) -> None:
    body = json.dumps(recs).encode()  # the standard library writes ints of any size, as Triton could
    cut = data.draw(st.integers(0, len(body)))
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        h = _Harness(root)
        (root / "trace.json").write_bytes(body[:cut])
        h.src.poll_once()
        (root / "trace.json").write_bytes(body)
        h.src.poll_once()
        h.clock.advance(5)
        h.src.poll_once()
        for sp in h.spans:
            assert 0 <= sp[4] <= sp[5] <= INT64  # start and end: Unix ns an int64 can hold
        for e in h.events:
            assert len(e.features) <= 256
        bad = any(isinstance(r.get("id"), int) and not 0 <= r["id"] <= INT64 for r in recs)
        if bad:
            assert h.refused() > 0  # an out-of-range id is refused and counted, never taken
        h.store.close()


@SETTINGS
@given(st.binary(max_size=3000))
def test_the_source_survives_any_bytes(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        h = _Harness(root)
        (root / "trace.json.0").write_bytes(data)
        h.src.poll_once()
        h.clock.advance(5)
        h.src.poll_once()
        h.store.close()


def test_hostile_records_are_refused_and_counted_not_raised(tmp_path: Path) -> None:
    h = _Harness(tmp_path, max_read_bytes=1 << 20)
    ok = {"id": 1, "timestamps": [{"name": "REQUEST_START", "ns": 5}, {"name": "REQUEST_END", "ns": 9}]}
    hostile = [
        b'{"id":2,"timestamps":[{"name":"REQUEST_START","ns":' + b"9" * 5000 + b"}]}",  # past int()'s digit limit
        b'{"id":3,"x":' + b"[" * 100_000 + b"]" * 100_000 + b"}",  # nesting past the recursion limit
        b'{"id":4,"timestamps":[{"name":"REQUEST_START","ns":-1},{"name":"REQUEST_END","ns":'
        + str(2**64).encode()
        + b"}]}",  # out of int64 range
        b'{"id":5,"timestamps":[{"name":"REQUEST_START","ns":0},{"name":"REQUEST_END","ns":9000000000000000000}]}',
        b'{"id":6,"model_name":"' + b"m" * 10_000 + b'"}',  # a 10 kB model name
        b'{"id":-7}',
        b"NaN",
        b'{"id":1e999}',
    ]
    (tmp_path / "trace.json.0").write_bytes(b"[" + b",".join([orjson.dumps(ok), *hostile]) + b"]")
    h.src.poll_once()
    h.clock.advance(5)
    h.src.poll_once()
    names = {sp[3] for sp in h.spans}
    assert names == {"model"}  # only request 1 became spans
    reg = h.reg
    refused = {
        s.labels["reason"]: s.value
        for m in reg.collect()
        if m.name == "sidecar_trace_file_records_refused"
        for s in m.samples
        if s.name.endswith("_total")
    }
    assert refused["bad_timestamp"] >= 3  # 5000 digits (read as inf), -1 and 2**64
    assert refused["implausible_time"] == 1  # a request 285 years long
    assert refused["string_too_long"] == 1
    assert refused["bad_id"] >= 2  # -7 and 1e999 (a float)
    assert refused["not_object"] == 1  # NaN
    assert reg.get_sample_value("sidecar_trace_file_errors_total", {"reason": "damaged"}) == 1  # the nesting
    h.store.close()


def test_a_record_larger_than_a_read_is_skipped_and_counted(tmp_path: Path) -> None:
    h = _Harness(tmp_path)  # max_read_bytes=4096
    big = b'{"id":1,"model_name":"ctr","pad":"' + b"p" * 10_000 + b'"}'
    after = b'{"id":2,"timestamps":[{"name":"REQUEST_START","ns":5},{"name":"REQUEST_END","ns":9}]}'
    (tmp_path / "trace.json.0").write_bytes(b"[" + big + b"," + after + b"]")
    h.src.poll_once()
    h.src.poll_once()
    assert h.reg.get_sample_value("sidecar_trace_file_errors_total", {"reason": "record_too_large"}) == 1
    assert len(h.spans) == 1  # the record after it is still taken
    h.store.close()


@SETTINGS
@given(st.lists(st.dictionaries(st.text(max_size=6), json_values, max_size=5) | json_values, max_size=10), st.data())
def test_the_one_call_fast_path_takes_what_the_record_by_record_path_takes(
    recs: list[Any], data: st.DataObject
) -> None:
    body = json.dumps(recs, ensure_ascii=False, separators=(",", data.draw(st.sampled_from([":", ": "])))).encode()
    cut = data.draw(st.integers(0, len(body)))
    for piece, at_start in ((body, True), (body[:cut], True), (body[cut:], False)):
        fast, slow = scan(piece, at_start), scan(piece, at_start, fast=False)
        assert (fast.records, fast.consumed, fast.closed, fast.held, fast.not_objects, fast.damaged) == (
            slow.records,
            slow.consumed,
            slow.closed,
            slow.held,
            slow.not_objects,
            slow.damaged,
        ), piece


def test_a_bracket_after_the_first_value_is_a_value_wherever_the_read_starts() -> None:
    """Found by the fuzzer: a read resuming after a non-object element took the next ``[`` for the array's
    opening bracket, so the same bytes gave different records read in two pieces than read whole."""
    body = b'8[{"id":4,"timestamps":[{"name":"A","ns":5}]},{"id":4'
    whole = scan(body)
    first = scan(body[:20])
    second = scan(body[first.consumed :], at_start=first.consumed == 0)
    assert first.consumed == 1  # the 8
    assert first.records + second.records == whole.records == []
