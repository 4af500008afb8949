"""The trace-file reader against a frozen copy of how it built spans and joined records before they were made
cheaper (tests/helpers/trace_files_before.py): on the recorded Triton 2.51 files and on larger files made from
them, every span (as a ``Span``, its event times and its record fields), every stage observation (histogram
buckets, sums, counts and exemplars) and every tensor event is the same."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry
from trace_files_before import AssemblerBefore, records_before, replicated, scan_before, templates_of
from tracefile_helpers import scan_figures
from traces_helpers import DATA

import sidecar.sources.trace_files.source as source_mod
from sidecar.clock import FakeClock
from sidecar.component import Bus
from sidecar.config import parse_config
from sidecar.model import Batch
from sidecar.records import END, MODEL, NAME, PARENT, SPAN, START, STATUS, TRACE, event_times, to_span
from sidecar.sources.events.config import TensorMapping
from sidecar.sources.trace_files.metrics import TraceFileMetrics
from sidecar.sources.trace_files.settings import TraceFileSettings
from sidecar.state.trace_hub import TraceHub
from sidecar.store import Store
from sidecar.wiring.span_subs import subscribe_spans

TIMESTAMPS = (DATA / "trace-file-triton-mode.json").read_bytes()  # 1 request, level=TIMESTAMPS, over HTTP
TENSORS = (DATA / "trace-file-tensors.json").read_bytes()  # 5 requests with TIMESTAMPS and TENSORS records
MAPPING = {
    "ctr": TensorMapping.model_validate({"inputs": {"x": ["age", "income", "", "dwell"]}, "score": {"tensor": "score"}})
}


def _run(tmp: Path, files: list[bytes], before: bool, max_read_bytes: int, monkeypatch: Any) -> dict[str, Any]:
    with monkeypatch.context() as m:
        if before:
            m.setattr(source_mod, "span_records", records_before)
            m.setattr(source_mod, "Assembler", AssemblerBefore)
            m.setattr(source_mod, "scan", scan_before)
        reg = CollectorRegistry()
        clock = FakeClock(start=1_800_000_000.0, monotonic=8400.0)
        hub = TraceHub(parse_config({"traces": {"enabled": True}}).traces, registry=reg, clock=clock)
        bus = Bus(reg)
        got: list[Batch] = []
        subscribe_spans(bus, "capture", got.append)
        bus.subscribe("events", "capture", got.append)
        subscribe_spans(bus, hub.name, hub.on_spans, requests=None if before else hub.on_span_requests)
        base = tmp / "run" / "trace.json"  # the same path for both runs: span ids derive from it
        if base.parent.exists():
            shutil.rmtree(base.parent)
        base.parent.mkdir()
        for i, data in enumerate(files):
            (base.parent / f"trace.json.{i}").write_bytes(data)
        settings = TraceFileSettings(path=str(base), tensors=MAPPING, max_read_bytes=max_read_bytes, settle_secs=0.0)
        src = source_mod.TraceFileSource(
            settings, bus=bus, metrics=TraceFileMetrics(reg), clock=clock, store=Store(":memory:")
        )
        for _ in range(10_000):
            if not src.poll_once():
                break
        src.poll_once()
    spans = [r for b in got if b.kind == "spans" for r in b.items]
    stages = [
        (s.name, s.labels, s.value, s.exemplar)
        for fam in reg.collect()
        if fam.name == "sidecar_triton_stage_duration_seconds"
        for s in fam.samples
    ]
    counters = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in reg.collect()
        if fam.name.startswith(("sidecar_trace_file", "sidecar_traces"))
        for s in fam.samples
        # The store's byte estimate differs by design: a record no longer holds a built ``Span`` besides it.
        if not s.name.endswith("_created") and s.name != "sidecar_traces_stored_bytes"
    }
    return {
        "spans": spans,
        "events": [e for b in got if b.kind == "events" for e in b.items],
        "stages": stages,
        "counters": counters,
    }


CASES = {
    "timestamps": [TIMESTAMPS],
    "tensors": [TENSORS],
    "both_rotated": [TIMESTAMPS, TENSORS],
    "replicated": [replicated(templates_of(TIMESTAMPS, TENSORS), 400)],
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("max_read_bytes", [16 << 20, 3000])  # whole files, and requests straddling reads
def test_same_spans_stages_and_events_as_before(tmp_path, monkeypatch, case, max_read_bytes):
    old = _run(tmp_path, CASES[case], True, max_read_bytes, monkeypatch)
    new = _run(tmp_path, CASES[case], False, max_read_bytes, monkeypatch)
    assert old["spans"], "the case must produce spans"
    assert len(new["spans"]) == len(old["spans"])
    fields = (TRACE, SPAN, PARENT, NAME, START, END, STATUS, MODEL)
    for a, b in zip(old["spans"], new["spans"], strict=True):
        assert to_span(b) == to_span(a)
        assert dict(event_times(b)) == dict(event_times(a))
        assert list(event_times(b)) == list(event_times(a))  # event order too
        assert [b[i] for i in fields] == [a[i] for i in fields]
    assert new["stages"] == old["stages"]
    assert any(v for name, _, v, _ in old["stages"] if name.endswith("_count"))
    assert new["events"] == old["events"]
    if case != "timestamps":
        assert old["events"], "the case must produce tensor events"
    assert new["counters"] == old["counters"]


def test_records_to_spans_is_the_old_span_list():
    """The public ``records_to_spans`` still gives the frozen ``Span`` list, attributes and events included."""
    from trace_files_before import spans_before

    from sidecar.sources.trace_files.requests import Assembler, Request
    from sidecar.sources.trace_files.spans import records_to_spans

    asm = Assembler(1 << 20, 256)
    grouped: dict[int, Request] = {}
    import orjson

    asm.add(orjson.loads(replicated(templates_of(TIMESTAMPS, TENSORS), 60)), grouped)
    reqs = list(grouped.values())
    assert records_to_spans(reqs, 123, "/t.json") == spans_before(reqs, 123, "/t.json")


_ids = st.one_of(st.integers(-2, 5), st.booleans(), st.none(), st.just(1 << 63), st.text(max_size=2))
_stamp = st.one_of(
    st.fixed_dictionaries(
        {"name": st.one_of(st.sampled_from(["REQUEST_START", "REQUEST_END", "X" * 65]), st.integers()), "ns": _ids}
    ),
    st.integers(),
    st.dictionaries(st.sampled_from(["name", "ns"]), st.integers(0, 9)),
)
_record = st.one_of(
    st.fixed_dictionaries({"id": _ids, "timestamps": st.one_of(st.lists(_stamp, max_size=3), st.none(), st.text())}),
    st.fixed_dictionaries(
        {"id": _ids, "timestamps": st.lists(_stamp, min_size=1, max_size=1), "model_name": st.just("m")}
    ),
    st.fixed_dictionaries({"id": _ids, "model_name": st.text(max_size=3), "request_id": st.text(max_size=3)}),
    st.fixed_dictionaries({"id": _ids, "tensor": st.fixed_dictionaries({"name": st.text(max_size=3)})}),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_record, max_size=40))
def test_assembler_folds_records_as_before(records):
    """Odd records too (bool or negative ids, bad times, long names, many names): the same requests and the same
    refusals as the frozen assembler."""
    from sidecar.sources.trace_files.requests import Assembler, Request

    old, new = AssemblerBefore(4, 2), Assembler(4, 2)
    a: dict[int, Request] = {}
    b: dict[int, Request] = {}
    old.add(records, a)
    new.add(records, b)
    assert b == a
    assert new.refused == old.refused
    assert [type(k) for k in b] == [type(k) for k in a]


_TEXT_RECORDS = st.sampled_from(
    [
        b'{"id":1,"timestamps":[{"name":"REQUEST_START","ns":5}]}',
        b'{"id":2,"timestamps":[{"name":"REQUEST_END","ns":9223372036854775807}]}',
        b'{"id":3,"timestamps":[{"name":"QUEUE_START","ns":9223372036854775808}]}',  # past int64: refused
        b'{"id":9999999999999999999,"timestamps":[{"name":"X","ns":1}]}',  # past int64: refused
        b'{"id":01,"timestamps":[{"name":"X","ns":1}]}',  # not JSON
        b'{"id":1,"timestamps":[{"name":"REQUEST_START","ns":-5}]}',
        b'{"id": 1, "timestamps": [{"name": "COMPUTE_START", "ns": 7}]}',
        b'{"id":1,"timestamps":[{"name":"A","ns":1},{"name":"B","ns":2}]}',
        b'{"id":1,"model_name":"ctr","model_version":1,"request_id":"r"}',
        b'{"id":1,"x":{"id":4,"timestamps":[{"name":"Y","ns":1}]}}',  # one inside another record
        b'{"id":1,"x":[{"id":4,"timestamps":[{"name":"Y","ns":1}]}]}',
        b'{"id":1,"s":"{\\"id\\":4,\\"timestamps\\":[]}"}',
        b'{"id":1,"timestamps":[{"name":"' + b"N" * 65 + b'","ns":1}]}',
        b"[1]",
        b"NaN",
        b'{"id":1,"timestamps":[{"name":"REQUEST_END","ns":3}',  # cut short
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_TEXT_RECORDS, max_size=12), st.sampled_from([b",", b", ", b"", b",,"]), st.booleans())
def test_lean_scan_folds_to_the_same_requests(parts, sep, closed):
    """Reading with the one-timestamp records taken from the text (``lean``) gives the same requests, refusals,
    offsets and counts as decoding every record, whatever else the text holds."""
    from sidecar.sources.trace_files.records import scan
    from sidecar.sources.trace_files.requests import Assembler, Request

    buf = b"[" + sep.join(parts) + (b"]\n" if closed else b"")
    old, new = scan(buf), scan(buf, lean=True)
    assert scan_figures(new) == scan_figures(old)
    a_asm, b_asm = AssemblerBefore(100, 256), Assembler(100, 256)
    a: dict[int, Request] = {}
    b: dict[int, Request] = {}
    a_asm.add(old.records, a)
    b_asm.add(new.records, b)
    assert b == a
    assert list(b) == list(a)
    assert b_asm.refused == a_asm.refused
