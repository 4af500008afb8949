"""One process reading a folder of Triton trace files with the trace-file source and the trace hub of whichever tree is
first on ``sys.path`` (run by bench/bench_trace_files_filed.py with ``PYTHONPATH`` set to the tree: ours, or the
code as it was when issue 31 was filed). Written against both trees' constructors.

    python bench/trace_read_once.py FILES_DIR WORK_DIR REQUESTS PER_POLL MAX_TRACES

Copies ``PER_POLL`` files of ``FILES_DIR`` into ``WORK_DIR`` before each poll (0: all of them before the first), as
Triton rotating files under a sidecar polling every second, the trace store keeping ``MAX_TRACES``; prints one JSON
line: process CPU seconds of the polls (reading, publishing, the trace hub's store and stage histograms; copying the
files not counted), spans published, polls, and how the collector was set (``tuned``: ``sidecar.runtime.tune_gc`` as
``sidecar run`` sets it, where the tree has it; else CPython's default).
"""

from __future__ import annotations

import gc
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any


def clock_after(src_dir: Path, work: Path) -> Any:
    """A fake clock whose monotonic time is just after the files' times (Triton's are since boot, read from
    ``src_dir/last_ns``), the wall clock at 1.8e9; ``work`` emptied for the files to appear in."""
    from sidecar.clock import FakeClock

    mono = int((src_dir / "last_ns").read_text()) / 1e9 + 10

    class Clock(FakeClock):
        def monotonic(self) -> float:
            return mono

    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    return Clock(start=1_800_000_000.0)


def poll_all(src: Any, files: list[Path], work: Path, per_poll: int) -> tuple[float, int]:
    """Copy ``per_poll`` of ``files`` into ``work`` before each poll of ``src`` until a poll takes nothing and
    none are left; returns the CPU seconds of the polls (the copying not counted) and how many there were."""
    cpu = 0.0
    polls = 0
    while True:
        batch, files = files[:per_poll], files[per_poll:]
        for p in batch:
            shutil.copy(p, work / p.name)
        t0 = time.process_time()
        got = src.poll_once()
        cpu += time.process_time() - t0
        polls += 1
        if not got and not files:
            return cpu, polls


def main() -> None:
    src_dir, work, n_req, per = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    max_traces = int(sys.argv[5])
    from prometheus_client import CollectorRegistry

    import sidecar.sources.trace_files.source as source_mod
    from sidecar.component import Bus
    from sidecar.config import parse_config
    from sidecar.sources.trace_files.metrics import TraceFileMetrics
    from sidecar.sources.trace_files.settings import TraceFileSettings
    from sidecar.state.trace_hub import TraceHub
    from sidecar.store import Store

    gc_mode = "default"
    try:
        from sidecar.runtime import tune_gc

        tune_gc(parse_config({}).runtime)
        gc_mode = "tuned"
    except (ImportError, AttributeError):
        pass  # the tree predates the runtime section: CPython's default collector, as it ran then
    clock = clock_after(src_dir, work)
    files = sorted((p for p in src_dir.iterdir() if p.name.startswith("trace.json.")), key=lambda p: int(p.suffix[1:]))
    if per <= 0:
        per = len(files)
    reg = CollectorRegistry()
    bus = Bus(reg)
    n = [0]
    bus.subscribe("spans", "count", lambda b: n.__setitem__(0, n[0] + len(b.items)))
    cfg = parse_config({"traces": {"enabled": True, "max_traces": max_traces}}).traces
    hub: Any
    try:
        hub = TraceHub(cfg, registry=reg, clock=clock)
    except TypeError:
        hub = TraceHub(cfg, reg, clock)  # type: ignore[call-arg]
    try:  # a tree whose trace-file source publishes its requests whole
        from sidecar.wiring.span_subs import subscribe_spans

        bus.subscribe("span_requests", "count", lambda b: n.__setitem__(0, n[0] + sum(i.span_count for i in b.items)))
        subscribe_spans(bus, hub.name, hub.on_spans, requests=hub.on_span_requests)
    except ImportError:
        bus.subscribe("spans", hub.name, hub.on_spans)
    settings = TraceFileSettings(path=str(work / "trace.json"), settle_secs=0.0)
    src: Any
    try:
        src = source_mod.TraceFileSource(
            settings, bus=bus, metrics=TraceFileMetrics(reg), clock=clock, store=Store(":memory:")
        )
    except TypeError:
        src = source_mod.TraceFileSource(settings, bus, TraceFileMetrics(reg), clock, Store(":memory:"))  # type: ignore[call-arg]
    gc.collect()
    cpu, polls = poll_all(src, files, work, per)
    print(json.dumps({"cpu_s": cpu, "us_per_request": cpu / n_req * 1e6, "spans": n[0], "polls": polls, "gc": gc_mode}))


if __name__ == "__main__":
    main()
