"""Triton TENSORS trace files as events: columns to features and score, read once, also across a restart."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from drift_testutil import DATA, make_ctx
from prometheus_client import CollectorRegistry
from tracefile_helpers import tensor_source

from sidecar.clock import FakeClock
from sidecar.model import Event
from sidecar.sources.events.metrics import EventsMetrics
from sidecar.sources.trace_files import TraceFileSource

_REGISTRIES: dict[int, CollectorRegistry] = {}


def reg(r: TraceFileSource) -> CollectorRegistry:
    return _REGISTRIES[id(r)]


def _reader(
    tmp_path: Path, clock: FakeClock, trace: Path, models: dict[str, Any]
) -> tuple[TraceFileSource, list[Event]]:
    ctx = make_ctx(
        tmp_path / "state.sqlite",
        clock,
        {"events": {"triton_trace": {"enabled": True, "path": str(trace), "models": models}}},
    )
    got: list[Event] = []
    ctx.bus.subscribe("events", "t", lambda b: got.extend(b.items))  # type: ignore[arg-type]
    r = tensor_source(
        ctx.config.events.triton_trace, ctx.bus, ctx.registry, clock, ctx.store, EventsMetrics(ctx.registry)
    )
    _REGISTRIES[id(r)] = ctx.registry
    return r, got


def test_triton_tensors_fixture_maps_columns_to_features_and_score(tmp_path: Path, clock: FakeClock) -> None:
    trace = tmp_path / "trace.json"
    shutil.copy(DATA / "trace-file-tensors.json", tmp_path / "trace.json.0")
    r, got = _reader(
        tmp_path, clock, trace, {"ctr": {"inputs": {"x": ["f0", "f1", "", "f3"]}, "score": {"tensor": "score"}}}
    )
    assert r.poll_once() == 10  # 5 requests x batch of 2
    first, second = got[0], got[1]
    assert (first.model, first.version, first.request_id) == ("ctr", "2", "req-1")
    assert first.features == {"f0": 1.0, "f1": 2.0, "f3": 4.0} and first.score == 1.0
    assert second.features == {"f0": 0.5, "f1": 0.1, "f3": -1.0} and second.score == 0.310026
    assert {e.version for e in got} == {"1", "2"}
    assert r.poll_once() == 0  # each file is read once
    # A restart does not replay it either.
    r.store.close()
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
    assert (
        reg(r).get_sample_value("sidecar_events_rejected_total", {"source": "triton_trace", "reason": "unmapped_model"})
        == 5
    )
    assert (
        reg(r).get_sample_value("sidecar_events_source_errors_total", {"source": "triton_trace", "reason": "parse"})
        is None
    )
