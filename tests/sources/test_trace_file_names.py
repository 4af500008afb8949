"""What the trace file tailer remembers about file names: only files that still exist."""

from __future__ import annotations

from pathlib import Path

import orjson
from prometheus_client import CollectorRegistry
from tracefile_helpers import span_source
from traces_helpers import DATA, sample

from sidecar.clock import FakeClock
from sidecar.component import Bus
from sidecar.config import parse_config
from sidecar.sources.trace_files import TraceFileSource
from sidecar.state.trace_hub import TraceHub
from sidecar.wiring.span_subs import subscribe_spans

FIXTURE = DATA / "trace-file-triton-mode.json"


def _tailer(tmp_path: Path, clock: FakeClock, reg: CollectorRegistry, **file_cfg: object) -> TraceFileSource:
    cfg = parse_config({"traces": {"enabled": True, "file": {"path": str(tmp_path / "trace.json"), **file_cfg}}})
    assert cfg.traces.file.path is not None
    bus = Bus(reg)
    hub = TraceHub(cfg.traces, registry=reg, clock=clock)
    subscribe_spans(bus, hub.name, hub.on_spans, requests=hub.on_span_requests)
    return span_source(cfg.traces.file, bus, reg, clock)


def _shifted(by_ns: int) -> bytes:
    """The fixture as a restarted Triton would write it: same trace id, later timestamps."""
    recs = orjson.loads(FIXTURE.read_bytes())
    for r in recs:
        for ts in r.get("timestamps", ()):
            ts["ns"] += by_ns
    return orjson.dumps(recs)


def test_a_deleted_file_name_written_again_is_read_again(tmp_path):
    reg = CollectorRegistry()
    clock = FakeClock(start=1_800_000_000.0, monotonic=8100.0)
    tailer = _tailer(tmp_path, clock, reg, delete_after_read=True)
    target = tmp_path / "trace.json.0"
    target.write_bytes(FIXTURE.read_bytes())
    assert tailer.poll_once() == 3
    assert not target.exists()
    # Triton restarted with the same --trace-config and starts over at PATH.0.
    target.write_bytes(_shifted(10_000_000_000))
    clock.advance(20)
    assert tailer.poll_once() == 3
    assert sample(reg, "sidecar_trace_files_read_total", {"how": "complete"}) == 2


def test_files_that_vanish_unread_are_forgotten(tmp_path):
    reg = CollectorRegistry()
    clock = FakeClock(start=1_800_000_000.0, monotonic=8100.0)
    tailer = _tailer(tmp_path, clock, reg, settle_secs=30)
    text = FIXTURE.read_bytes()
    for i in range(20):
        (tmp_path / f"trace.json.{i}").write_bytes(text[: len(text) // 2])  # still being written
    assert tailer.poll_once() == 0
    for i in range(20):
        (tmp_path / f"trace.json.{i}").unlink()
    assert tailer.poll_once() == 0
    assert tailer._state().marks == {}  # the per-file state is the bounded map under test
