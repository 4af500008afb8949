"""A poll reads the trace files in passes of ``read_slice_bytes``, each published on its own, until nothing new is
left or ``max_read_bytes`` were read: the same spans as one pass over everything, a record longer than a slice
still read whole, and the per-poll bound still holding."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from prometheus_client import CollectorRegistry
from trace_files_before import replicated, templates_of

import sidecar.sources.trace_files.source as source_mod
from sidecar.clock import FakeClock
from sidecar.component import Bus
from sidecar.model import Batch
from sidecar.sources.trace_files.metrics import TraceFileMetrics
from sidecar.sources.trace_files.settings import TraceFileSettings
from sidecar.sources.trace_files.source import TraceFileSource
from sidecar.store import Store
from sidecar.wiring.span_subs import subscribe_spans

DATA = Path(__file__).resolve().parents[2] / "data" / "traces"


def _file(tmp: Path, n: int) -> Path:
    folder = tmp / "files"
    folder.mkdir(exist_ok=True)
    templates = templates_of(
        (DATA / "trace-file-triton-mode.json").read_bytes(), (DATA / "trace-file-tensors.json").read_bytes()
    )
    (folder / "trace.json.0").write_bytes(replicated(templates, n))
    return folder / "trace.json"


class _Reader:
    def __init__(self, path: Path, **settings: Any) -> None:
        self.reg = CollectorRegistry()
        bus = Bus(self.reg)
        self.batches: list[Batch] = []
        subscribe_spans(bus, "capture", self.batches.append)
        s = TraceFileSettings(path=str(path), settle_secs=0.0, **settings)
        clock = FakeClock(start=1_800_000_000.0, monotonic=8400.0)  # just after the recorded files' times
        self.src = TraceFileSource(s, bus=bus, metrics=TraceFileMetrics(self.reg), clock=clock, store=Store(":memory:"))

    def spans(self) -> list[Any]:
        return sorted(r for b in self.batches for r in b.items)

    def errors(self, reason: str) -> float:
        return self.reg.get_sample_value("sidecar_trace_file_errors_total", {"reason": reason}) or 0.0


def test_one_poll_reads_a_backlog_in_slices_with_the_spans_of_one_pass(tmp_path: Path) -> None:
    path = _file(tmp_path, 300)
    size = Path(f"{path}.0").stat().st_size
    whole = _Reader(path, read_slice_bytes=16 << 20)
    assert whole.src.poll_once() > 0 and len(whole.batches) == 1
    sliced = _Reader(path, read_slice_bytes=size // 7)
    assert sliced.src.poll_once() > 0
    assert len(sliced.batches) >= 7  # one batch a pass, all in this one poll
    assert sliced.spans() == whole.spans() and len(whole.spans()) == 900  # three spans a request
    assert sliced.src.poll_once() == 0  # nothing was left for the next poll


def test_a_record_longer_than_a_slice_is_read_whole(tmp_path: Path) -> None:
    path = _file(tmp_path, 3)
    f = Path(f"{path}.0")
    records = orjson.loads(f.read_bytes())
    tensor = next(r for r in records if "tensor" in r)
    tensor["tensor"]["data"] = ",".join(["0.5"] * 20_000)  # a 80 KB record
    f.write_bytes(orjson.dumps(records))
    reader = _Reader(path, read_slice_bytes=10_000)
    reader.src.poll_once()
    assert len(reader.spans()) == 9 and reader.errors("record_too_large") == 0
    # Longer than a whole read, it is skipped and counted, as before slices (a TENSORS row: the spans stay).
    small = _Reader(path, read_slice_bytes=10_000, max_read_bytes=40_000)
    for _ in range(10):
        small.src.poll_once()
    assert small.errors("record_too_large") == 1 and len(small.spans()) == 9


def test_a_poll_still_reads_at_most_max_read_bytes(tmp_path: Path) -> None:
    path = _file(tmp_path, 300)
    reader = _Reader(path, read_slice_bytes=20_000, max_read_bytes=100_000)
    reader.src.poll_once()
    first = len(reader.spans())
    assert 0 < first < 900 and len(reader.batches) >= 4
    polls = 1
    while reader.src.poll_once():
        polls += 1
    assert len(reader.spans()) == 900 and polls >= 3


def test_a_failed_read_is_counted_once_a_poll_and_read_again_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _file(tmp_path, 300)
    reader = _Reader(path, read_slice_bytes=20_000)

    def refused(*a: object, **k: object) -> object:
        raise PermissionError("refused")

    monkeypatch.setattr(source_mod, "open", refused, raising=False)
    assert reader.src.poll_once() == 0
    assert reader.errors("read") == 1 and reader.batches == []
    monkeypatch.undo()
    reader.src.poll_once()
    assert len(reader.spans()) == 900 and reader.errors("read") == 1


def test_long_records_read_whole_still_count_against_the_poll(tmp_path: Path) -> None:
    path = _file(tmp_path, 40)
    f = Path(f"{path}.0")
    records = orjson.loads(f.read_bytes())
    for r in records:
        if "tensor" in r:
            r["tensor"]["data"] = ",".join(["0.5"] * 8_000)  # 32 KB each, longer than a slice
    f.write_bytes(orjson.dumps(records))
    reader = _Reader(path, read_slice_bytes=10_000, max_read_bytes=100_000)
    reader.src.poll_once()
    offset = reader.src._state().marks[str(f)].offset
    assert 0 < offset <= 100_000 + 10_000  # a slice past the bound at most, not a bound per pass
    for _ in range(60):  # ~2 MB, at most ~110 KB a poll (a poll may complete no request): read them all
        reader.src.poll_once()
    assert len(reader.spans()) == 120 and reader.errors("record_too_large") == 0
