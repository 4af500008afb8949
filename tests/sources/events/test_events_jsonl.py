"""The JSONL tailer (rotation, truncation, restart); TENSORS trace files: tests/sources/test_trace_tensor_events.py."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson
from drift_testutil import make_ctx

from sidecar.clock import FakeClock
from sidecar.model import Batch, Event
from sidecar.sources.events.jsonl import JsonlTailer
from sidecar.sources.events.metrics import EventsMetrics
from sidecar.wiring.event_subs import subscribe_events


def _line(i: int, ts: float) -> bytes:
    return orjson.dumps({"model": "m", "version": "1", "timestamp": ts, "features": {"i": i}}) + b"\n"


def _tailer(tmp_path: Path, clock: FakeClock, path: Path, **kw: Any) -> tuple[JsonlTailer, list[Event]]:
    ctx = make_ctx(tmp_path / "state.sqlite", clock, {"events": {"jsonl": [{"path": str(path), **kw}]}})
    got: list[Event] = []

    def take(b: Batch) -> None:
        got.extend(b.items)  # type: ignore[arg-type]

    subscribe_events(ctx.bus, "t", take)  # both shapes: one by one, and columns (as events)
    cfg = ctx.config.events
    return JsonlTailer(
        cfg.jsonl[0],
        events_cfg=cfg,
        metrics=EventsMetrics(ctx.registry),
        bus=ctx.bus,
        clock=ctx.clock,
        store=ctx.store,
        registry=ctx.registry,
    ), got


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
    path.write_bytes(
        _line(0, clock.now()) + b"garbage\n" + b'{"model": 3}\n' + b"x" * 5000 + b"\n" + _line(1, clock.now())
    )
    t, _got = _tailer(tmp_path, clock, path, max_line_bytes=1000)
    assert t.poll_once() == 2
    reg = t.m.registry
    for reason in ("not_json", "invalid", "line_too_long"):
        assert reg.get_sample_value("sidecar_events_rejected_total", {"source": "jsonl", "reason": reason}) == 1
    t.store.close()
    with path.open("ab") as f:
        f.write(_line(2, clock.now()))
    t2, got2 = _tailer(tmp_path, clock, path, max_line_bytes=1000)
    assert t2.poll_once() == 1 and got2[0].features["i"] == 2.0  # nothing re-read, nothing skipped


def test_lines_with_the_learned_names_go_through_the_typed_door(tmp_path: Path, clock: FakeClock) -> None:
    """After a poll of the common shape, the next polls' lines are decoded typed (typed.py); a poll with one
    line the typed door is not sure of goes the per-line way, refusal counted, the good lines kept."""
    path = tmp_path / "events.jsonl"
    t, got = _tailer(tmp_path, clock, path)
    taken: list[int] = []
    real = t.typed.lines

    def spy(lines: list[bytes], now: float) -> Any:
        out = real(lines, now)
        taken.append(-1 if out is None else sum(b.n for b in out))
        return out

    t.typed.lines = spy  # type: ignore[method-assign]
    path.write_bytes(_line(0, clock.now()) + _line(1, clock.now()))
    assert t.poll_once() == 2 and taken == [-1]  # nothing learned yet: orjson, then columns.py
    with path.open("ab") as f:
        f.write(_line(2, clock.now()) + b"\n" + _line(3, clock.now()))
    assert t.poll_once() == 2 and taken[-1] == 2
    with path.open("ab") as f:
        f.write(_line(4, clock.now()) + b'{"model": "m", "features": {"i": true}}\n' + _line(5, clock.now()))
    assert t.poll_once() == 2 and taken[-1] == -1
    assert [e.features["i"] for e in got] == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    reg = t.m.registry
    assert reg.get_sample_value("sidecar_events_rejected_total", {"source": "jsonl", "reason": "invalid"}) == 1
    assert reg.get_sample_value("sidecar_events_received_total", {"source": "jsonl"}) == 6
