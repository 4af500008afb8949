"""Triton mode=triton trace files: rotation, files still being written, the monotonic -> wall mapping."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry
from tracefile_helpers import span_source
from traces_helpers import DATA, sample
from waiting import wait_until

from sidecar.clock import FakeClock
from sidecar.component import Bus
from sidecar.config import parse_config
from sidecar.demo.tritonserver import TritonServer, demo_model_repository
from sidecar.sources.trace_files import parse_records
from sidecar.state.trace_hub import TraceHub
from sidecar.wiring.span_subs import subscribe_spans

FIXTURE = DATA / "trace-file-triton-mode.json"
FIRST_NS = 8040649493778  # HTTP_RECV_START of the fixture's only request
LAST_NS = 8040651111310  # its HTTP_SEND_END


def _make(tmp_path: Path, clock: FakeClock, registry: CollectorRegistry, **file_cfg: object):
    cfg = parse_config({"traces": {"enabled": True, "file": {"path": str(tmp_path / "trace.json"), **file_cfg}}})
    hub = TraceHub(cfg.traces, registry=registry, clock=clock)
    bus = Bus(registry)
    subscribe_spans(bus, hub.name, hub.on_spans, requests=hub.on_span_requests)
    assert cfg.traces.file.path is not None
    return hub, span_source(cfg.traces.file, bus, registry, clock)


def _clock_at_mono(mono_s: float) -> FakeClock:
    return FakeClock(start=1_800_000_000.0, monotonic=mono_s)


def test_fixture_becomes_triton_shaped_spans_with_wall_times(tmp_path):
    reg = CollectorRegistry()
    clock = _clock_at_mono(8100.0)  # read ~60 s after the request, on the same monotonic clock
    hub, tailer = _make(tmp_path, clock, reg)
    shutil.copy(FIXTURE, tmp_path / "trace.json.0")
    assert tailer.poll_once() == 3
    (summary,) = hub.store.summaries()
    e = hub.store.get(summary.trace_id)
    assert e is not None
    by_name = {s.name: s for s in e.spans}
    assert set(by_name) == {"InferRequest", "ctr", "compute"}
    offset = int(clock.now() * 1e9) - int(clock.monotonic() * 1e9)
    assert by_name["InferRequest"].start_unix_nano == FIRST_NS + offset
    assert by_name["InferRequest"].end_unix_nano == LAST_NS + offset
    assert by_name["ctr"].parent_span_id == by_name["InferRequest"].span_id
    assert by_name["compute"].parent_span_id == by_name["ctr"].span_id
    assert by_name["ctr"].attributes["triton.model_version"] == "1"
    assert e.model == "ctr" and e.version == "1"
    # compute_infer = COMPUTE_OUTPUT_START - COMPUTE_INPUT_END = 555832 ns
    assert sample(
        reg,
        "sidecar_triton_stage_duration_seconds_sum",
        {"model": "ctr", "version": "1", "stage": "compute_infer"},
    ) == pytest.approx(555832e-9)
    assert tailer.poll_once() == 0  # a file is read once


def test_file_still_being_written_is_read_when_complete(tmp_path):
    reg = CollectorRegistry()
    clock = _clock_at_mono(8100.0)
    _, tailer = _make(tmp_path, clock, reg, settle_secs=30)
    text = FIXTURE.read_bytes()
    target = tmp_path / "trace.json.0"
    target.write_bytes(text[: len(text) // 2])
    assert tailer.poll_once() == 0
    clock.advance(5)
    target.write_bytes(text)
    assert tailer.poll_once() == 3
    assert sample(reg, "sidecar_trace_files_read_total", {"how": "complete"}) == 1


def test_truncated_file_is_read_leniently_after_settling(tmp_path):
    reg = CollectorRegistry()
    clock = _clock_at_mono(8100.0)
    _, tailer = _make(tmp_path, clock, reg, settle_secs=10)
    text = FIXTURE.read_bytes()
    (tmp_path / "trace.json.0").write_bytes(text[:-40])  # cut inside the last record
    assert tailer.poll_once() == 0
    clock.advance(11)
    n = tailer.poll_once()
    assert n == 3  # the request minus its last timestamp is still emitted
    assert sample(reg, "sidecar_trace_file_errors_total", {"reason": "truncated"}) == 1
    assert sample(reg, "sidecar_trace_files_read_total", {"how": "lenient"}) == 1


def test_parse_records_cuts_at_last_complete_record():
    recs, complete = parse_records(b'[{"id":1,"timestamps":[{"name":"A","ns":5}]},{"id":1,"model_na')
    assert not complete and recs == [{"id": 1, "timestamps": [{"name": "A", "ns": 5}]}]
    assert parse_records(b"garbage") == ([], False)


def test_request_split_across_rotation_is_joined(tmp_path):
    reg = CollectorRegistry()
    clock = _clock_at_mono(8100.0)
    hub, tailer = _make(tmp_path, clock, reg)
    import orjson

    recs = orjson.loads(FIXTURE.read_bytes())
    (tmp_path / "trace.json.0").write_bytes(orjson.dumps(recs[:5]))
    (tmp_path / "trace.json.1").write_bytes(orjson.dumps(recs[5:]))
    assert tailer.poll_once() == 3
    assert len(hub.store) == 1


def test_a_file_written_again_under_the_same_name_is_read_again(tmp_path):
    import orjson

    reg = CollectorRegistry()
    clock = _clock_at_mono(8100.0)
    hub, tailer = _make(tmp_path, clock, reg)
    target = tmp_path / "trace.json.0"
    shutil.copy(FIXTURE, target)
    assert tailer.poll_once() == 3
    assert tailer.poll_once() == 0  # unchanged: not read again
    # A restarted Triton starts over at trace.json.0, in place (same inode), with its own requests.
    recs = orjson.loads(FIXTURE.read_bytes())
    for r in recs:
        for ts in r.get("timestamps") or ():
            ts["ns"] += 5_000_000_000
    ino = target.stat().st_ino
    with open(target, "r+b") as f:
        f.truncate(0)
        f.write(orjson.dumps(recs))
    st = target.stat()
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert target.stat().st_ino == ino
    assert tailer.poll_once() == 3
    assert len(hub.store) == 2
    assert sample(reg, "sidecar_trace_files_rewritten_total") == 1
    # Only the mtime moved (the same bytes written again): the same records are not taken twice, so the
    # tensor events from them are not doubled either.
    st = target.stat()
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert tailer.poll_once() == 0
    assert len(hub.store) == 2
    assert not sample(reg, "sidecar_traces_spans_dropped_total", {"reason": "duplicate"})
    assert sample(reg, "sidecar_trace_files_rewritten_total") == 1


def test_foreign_clock_falls_back_to_mtime(tmp_path):
    reg = CollectorRegistry()
    clock = _clock_at_mono(50.0)  # our monotonic clock is far behind the file's: another host
    hub, tailer = _make(tmp_path, clock, reg)
    p = tmp_path / "trace.json"
    shutil.copy(FIXTURE, p)
    os.utime(p, ns=(1_799_999_000_000_000_000, 1_799_999_000_000_000_000))
    assert tailer.poll_once() == 3
    assert sample(reg, "sidecar_trace_file_clock_fallbacks_total") == 1
    (summary,) = hub.store.summaries()
    assert summary.start_ns + summary.duration_ns == 1_799_999_000_000_000_000


@pytest.fixture(scope="module")
def triton_files(tmp_path_factory):
    work = tmp_path_factory.mktemp("triton-file")
    trace = work / "trace.json"
    server = TritonServer(
        demo_model_repository(),
        work / "run",
        extra_args=[
            "--trace-config",
            "mode=triton",
            "--trace-config",
            f"triton,file={trace}",
            "--trace-config",
            "triton,log-frequency=1",
            "--trace-config",
            "rate=1",
            "--trace-config",
            "level=TIMESTAMPS",
        ],
    )
    try:
        server.start()
        sent: list[tuple[float, float]] = []
        with httpx.Client(timeout=10) as c:
            for i in range(5):
                t0 = time.time()
                r = c.post(
                    f"{server.http_url}/v2/models/ctr/versions/2/infer",
                    json={"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, float(i)]}]},
                )
                sent.append((t0, time.time()))
                assert r.status_code == 200, r.text
        wait_until(lambda: len(list(work.glob("trace.json.*"))) >= 5, 20)
        yield trace, sent
    finally:
        server.stop()


@pytest.mark.triton
def test_real_triton_trace_files(triton_files, tmp_path):
    trace, sent = triton_files
    reg = CollectorRegistry()
    from sidecar.clock import SystemClock

    cfg = parse_config({"traces": {"enabled": True, "file": {"path": str(trace), "settle_secs": 2}}})
    hub = TraceHub(cfg.traces, registry=reg, clock=SystemClock())
    bus = Bus(reg)
    subscribe_spans(bus, hub.name, hub.on_spans, requests=hub.on_span_requests)
    assert cfg.traces.file.path is not None
    tailer = span_source(cfg.traces.file, bus, reg, SystemClock())

    def all_read() -> bool:
        tailer.poll_once()
        return len(hub.store) >= 5

    wait_until(all_read, 15, interval_s=0.2)
    items = sorted(hub.store.summaries(), key=lambda t: t.start_ns)
    assert len(items) == 5, [str(p) for p in trace.parent.iterdir()]
    assert all(t.model == "ctr" and t.version == "2" and t.span_count == 3 for t in items)
    # Honest mapping: each mapped request lies inside the wall-clock window the client saw (1 ms slack).
    for t, (t0, t1) in zip(items, sent, strict=True):
        assert t0 * 1e9 - 1e6 <= t.start_ns <= t.start_ns + t.duration_ns <= t1 * 1e9 + 1e6
    assert (
        sample(
            reg,
            "sidecar_triton_stage_duration_seconds_count",
            {"model": "ctr", "version": "2", "stage": "compute_infer"},
        )
        == 5
    )
    assert sample(reg, "sidecar_trace_file_clock_fallbacks_total") == 0
    assert sample(reg, "sidecar_trace_files_read_total", {"how": "complete"}) >= 5
