"""The JSONL tailer (rotation, truncation, restart) and the Triton TENSORS trace-file mapper."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import orjson
from drift_testutil import DATA, make_ctx

from sidecar.clock import FakeClock
from sidecar.model import Batch, Event
from sidecar.sources.events.jsonl import JsonlTailer
from sidecar.sources.events.metrics import EventsMetrics
from sidecar.sources.trace_tensors import TensorTraceReader


def _line(i: int, ts: float) -> bytes:
    return orjson.dumps({"model": "m", "version": "1", "timestamp": ts, "features": {"i": i}}) + b"\n"


def _tailer(tmp_path: Path, clock: FakeClock, path: Path, **kw: Any) -> tuple[JsonlTailer, list[Event]]:
    ctx = make_ctx(tmp_path / "state.sqlite", clock, {"events": {"jsonl": [{"path": str(path), **kw}]}})
    got: list[Event] = []

    def take(b: Batch) -> None:
        got.extend(b.items)  # type: ignore[arg-type]

    ctx.bus.subscribe("events", "t", take)
    cfg = ctx.config.events
    return JsonlTailer(ctx, cfg.jsonl[0], cfg, EventsMetrics(ctx.registry)), got


def test_jsonl_tail_survives_rotation_truncation_and_partial_lines(tmp_path: Path, clock: FakeClock) -> None:
    path = tmp_path / "events.jsonl"
    t, got = _tailer(tmp_path, clock, path)
    assert t.poll_once() == 0  # no file yet
    with path.open("ab") as f:
        f.write(_line(0, clock.now()) + _line(1, clock.now()) + _line(2, clock.now())[:10])
    assert t.poll_once() == 2
    with path.open("ab") as f:
        f.write(_line(2, clock.now())[10:] + _line(3, clock.now()))
    os.rename(path, tmp_path / "events.jsonl.1")  # rotation: the old file still gets its last line read
    with path.open("ab") as f:
        f.write(_line(4, clock.now()))
    t.poll_once()
    t.poll_once()
    assert [e.features["i"] for e in got] == [0.0, 1.0, 2.0, 3.0, 4.0]
    path.write_bytes(b"")  # copytruncate: truncated in place (same inode, smaller)
    t.poll_once()
    with path.open("ab") as f:
        f.write(_line(5, clock.now()))
    t.poll_once()
    assert got[-1].features["i"] == 5.0


def test_jsonl_resumes_after_restart_and_counts_bad_lines(tmp_path: Path, clock: FakeClock) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(_line(0, clock.now()) + b"garbage\n" + b'{"model": 3}\n' + b"x" * 5000 + b"\n"
                     + _line(1, clock.now()))
    t, _got = _tailer(tmp_path, clock, path, max_line_bytes=1000)
    assert t.poll_once() == 2
    reg = t.ctx.registry
    for reason in ("not_json", "invalid", "line_too_long"):
        assert reg.get_sample_value("sidecar_events_rejected_total", {"source": "jsonl", "reason": reason}) == 1
    t.ctx.store.close()
    with path.open("ab") as f:
        f.write(_line(2, clock.now()))
    t2, got2 = _tailer(tmp_path, clock, path, max_line_bytes=1000)
    assert t2.poll_once() == 1 and got2[0].features["i"] == 2.0  # nothing re-read, nothing skipped


def _reader(tmp_path: Path, clock: FakeClock, trace: Path, models: dict[str, Any]) -> tuple[TensorTraceReader,
                                                                                           list[Event]]:
    ctx = make_ctx(tmp_path / "state.sqlite", clock,
                   {"events": {"triton_trace": {"enabled": True, "path": str(trace), "models": models}}})
    got: list[Event] = []
    ctx.bus.subscribe("events", "t", lambda b: got.extend(b.items))  # type: ignore[arg-type]
    return TensorTraceReader(ctx, ctx.config.events.triton_trace, EventsMetrics(ctx.registry)), got


def test_triton_tensors_fixture_maps_columns_to_features_and_score(tmp_path: Path, clock: FakeClock) -> None:
    trace = tmp_path / "trace.json"
    shutil.copy(DATA / "trace-file-tensors.json", tmp_path / "trace.json.0")
    r, got = _reader(tmp_path, clock, trace, {"ctr": {"inputs": {"x": ["f0", "f1", "", "f3"]},
                                                      "score": {"tensor": "score"}}})
    assert r.poll_once() == 10  # 5 requests x batch of 2
    first, second = got[0], got[1]
    assert (first.model, first.version, first.request_id) == ("ctr", "2", "req-1")
    assert first.features == {"f0": 1.0, "f1": 2.0, "f3": 4.0} and first.score == 1.0
    assert second.features == {"f0": 0.5, "f1": 0.1, "f3": -1.0} and second.score == 0.310026
    assert {e.version for e in got} == {"1", "2"}
    assert r.poll_once() == 0  # each file is read once
    # A restart does not replay it either.
    r.ctx.store.close()
    r2, _got2 = _reader(tmp_path, clock, trace, {"ctr": {"inputs": {"x": ["f0"]}}})
    assert r2.poll_once() == 0


def test_triton_tensors_unmapped_model_and_partial_file(tmp_path: Path, clock: FakeClock) -> None:
    trace = tmp_path / "trace.json"
    data = (DATA / "trace-file-tensors.json").read_bytes()
    (tmp_path / "trace.json.0").write_bytes(data[: len(data) // 2])  # still being written
    r, _got = _reader(tmp_path, clock, trace, {"fraud": {"map_unlisted": True}})
    assert r.poll_once() == 0
    (tmp_path / "trace.json.0").write_bytes(data)
    assert r.poll_once() == 0
    assert r.ctx.registry.get_sample_value("sidecar_events_rejected_total",
                                           {"source": "triton_trace", "reason": "unmapped_model"}) == 5
    assert r.ctx.registry.get_sample_value("sidecar_events_source_errors_total",
                                           {"source": "triton_trace", "reason": "parse"}) is None
