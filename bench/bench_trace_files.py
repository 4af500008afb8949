"""CPU per traced request of the ``mode=triton`` trace-file reader, before and after, on real Triton files.

    .venv/bin/python bench/bench_trace_files.py [--requests 50000] [--repeat 3] [--profile]
        [--gc-threshold 50000,20,100] [--rss-only]

Input: the recorded Triton 2.51 trace files of the demo's ``ctr`` model (tests/data/traces/: one request at
level=TIMESTAMPS, five at TIMESTAMPS+TENSORS), replicated with fresh trace ids, request ids and times to
``--requests`` requests in one file (two requests' records interleaved, as concurrent requests' are).

Each run reads the whole file with a fresh ``TraceFileSource`` into a bus with the trace hub (store and stage
histograms) subscribed, as the service wires it, and counts process CPU time (one thread). Rows:

- floor: ``orjson.loads`` of the file alone (decoding, nothing else), and ``msgspec``'s typed decode of it into
  the reader's own record structs (sidecar/sources/trace_files/typed.py), the decode the reader does now;
- before: the source with the frozen span building and record joining of tests/helpers/trace_files_before.py;
- ours: the source as it is.

Each is shown for the reader alone (spans published to nobody) and with the trace hub. Prints the median us of
CPU per traced request, before/ours and ours/floor, then "ours" with the frozen trace hub of ae3dd55 (every span
stored and observed one by one: tests/state/traces_before.py, stages_before.py), with Python's garbage collector
off, and the floor, ours and ours with the frozen hub under CPython's default collector (thresholds 700, 10, 10,
nothing frozen: the last is the path as it was before issue 31 item 2's GC and hub work). Every
other row runs with the collector as the sidecar sets it at start-up: ``sidecar.runtime.tune_gc`` with the
``runtime`` section (``--gc-threshold`` sets ``runtime.gc_threshold``; default: the config's default), called
after the input is built. ``--profile`` prints cProfile's top functions of one "ours" run. Each timed run starts
after a ``gc.collect()``. ``--rss-only``: only "ours" with the hub, then the process's peak RSS (run once per
threshold, in its own process, to compare their memory).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import gc
import pstats
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from unittest import mock

import msgspec
import orjson
from prometheus_client import CollectorRegistry

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "helpers"))
sys.path.insert(0, str(ROOT / "tests" / "state"))

from stages_before import StageHistograms as StagesBefore  # noqa: E402
from trace_files_before import AssemblerBefore, records_before, replicated, scan_before, templates_of  # noqa: E402
from traces_before import TraceStore as StoreBefore  # noqa: E402

import sidecar.sources.trace_files.source as source_mod  # noqa: E402
from sidecar.clock import FakeClock  # noqa: E402
from sidecar.component import Bus  # noqa: E402
from sidecar.config import parse_config  # noqa: E402
from sidecar.runtime import tune_gc  # noqa: E402
from sidecar.sources.trace_files.metrics import TraceFileMetrics  # noqa: E402
from sidecar.sources.trace_files.settings import TraceFileSettings  # noqa: E402
from sidecar.sources.trace_files.typed import Rec  # noqa: E402
from sidecar.state.trace_hub import TraceHub  # noqa: E402
from sidecar.store import Store  # noqa: E402

DATA = ROOT / "tests" / "data" / "traces"


class _Clock(FakeClock):
    """Monotonic time just after the files' (Triton's ns are seconds since boot), so times map as in service."""

    def __init__(self, mono_s: float) -> None:
        super().__init__(start=1_800_000_000.0)
        self._base = mono_s - super().monotonic()

    def monotonic(self) -> float:
        return super().monotonic() + self._base


def _frozen_hub(reg: CollectorRegistry, clock: _Clock) -> Any:
    """The trace hub's ingest as it was at ae3dd55 (tests/state/traces_before.py, stages_before.py): every span
    stored and every stage observed one by one."""
    cfg = parse_config({"traces": {"enabled": True, "max_traces": 100_000}}).traces
    store = StoreBefore(
        reg,
        max_traces=cfg.max_traces,
        max_age_secs=cfg.max_age_secs,
        max_spans_per_trace=cfg.max_spans_per_trace,
        slow_threshold_ns=int(cfg.slow_threshold_ms * 1e6),
        max_bytes=cfg.store.max_bytes,
        max_trace_bytes=cfg.store.max_trace_bytes,
    )
    stages = StagesBefore(reg, buckets=cfg.stage_buckets_secs, max_model_versions=cfg.max_model_versions)

    def on_spans(b: Any) -> None:
        now = clock.now()
        with stages.observing(now):
            store.add(b.items, now, stages.on_stored)

    return on_spans


def run(
    folder: Path, data: bytes, mono_s: float, *, before: bool, hub: bool, frozen: bool = False
) -> tuple[float, int]:
    """CPU seconds to read ``data`` as a trace file, and the spans published."""
    patches: list[Any] = []
    if before:
        patches = [
            mock.patch.object(source_mod, "span_records", records_before),
            mock.patch.object(source_mod, "Assembler", AssemblerBefore),
            mock.patch.object(source_mod, "scan", scan_before),
        ]
    for p in patches:
        p.start()
    try:
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir()
        (folder / "trace.json.0").write_bytes(data)
        reg = CollectorRegistry()
        clock = _Clock(mono_s)
        bus = Bus(reg)
        n = [0]
        bus.subscribe("spans", "count", lambda b: n.__setitem__(0, n[0] + len(b.items)))
        if hub and frozen:
            bus.subscribe("spans", "traces", _frozen_hub(reg, clock))
        elif hub:
            h = TraceHub(
                parse_config({"traces": {"enabled": True, "max_traces": 100_000}}).traces, registry=reg, clock=clock
            )
            bus.subscribe("spans", h.name, h.on_spans)
        settings = TraceFileSettings(path=str(folder / "trace.json"), settle_secs=0.0)
        src = source_mod.TraceFileSource(
            settings, bus=bus, metrics=TraceFileMetrics(reg), clock=clock, store=Store(":memory:")
        )
        gc.collect()
        t0 = time.process_time()
        while src.poll_once():
            pass
        return time.process_time() - t0, n[0]
    finally:
        for p in patches:
            p.stop()


def _status_mib(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _reset_peak_rss() -> float:
    """Reset the kernel's peak RSS (VmHWM) to the current RSS, so the peak read later is the runs' own; returns
    the RSS now in MiB (Linux; elsewhere the peak stays the process's)."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")
    return _status_mib("VmRSS")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=50_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--gc-threshold", default=None, help="runtime.gc_threshold as A,B,C (default: the config's)")
    ap.add_argument("--rss-only", action="store_true")
    args = ap.parse_args()
    runtime: dict[str, Any] = {}
    if args.gc_threshold:
        runtime["gc_threshold"] = [int(x) for x in args.gc_threshold.split(",")]
    runtime_cfg = parse_config({"runtime": runtime}).runtime
    files = [(DATA / "trace-file-triton-mode.json").read_bytes(), (DATA / "trace-file-tensors.json").read_bytes()]
    data = replicated(templates_of(*files), args.requests)
    last_ns = max(t["ns"] for r in orjson.loads(data) for t in r.get("timestamps", ()))
    mono_s = last_ns / 1e9 + 10
    n = args.requests
    print(
        f"{n} requests, {len(data) / 1e6:.1f} MB ({len(data) / n:.0f} bytes a request), python {sys.version.split()[0]}"
    )
    tune_gc(runtime_cfg)  # as `sidecar run` does at the end of its start-up
    print(f"collector: runtime.gc_threshold {list(runtime_cfg.gc_threshold)}, {gc.get_freeze_count()} objects frozen")
    if args.rss_only:
        gc.collect()
        base = _reset_peak_rss()
        with tempfile.TemporaryDirectory() as tmp:
            ts = [run(Path(tmp) / "traces", data, mono_s, before=False, hub=True)[0] for _ in range(args.repeat)]
        us = statistics.median(ts) / n * 1e6
        peak = _status_mib("VmHWM")
        print(f"{'ours, reader + trace hub':48s} {us:7.2f} us/request; RSS {base:.0f} MiB before, peak {peak:.0f} MiB")
        return

    typed = msgspec.json.Decoder(list[Rec])

    def floor_us(decode: Any = orjson.loads) -> float:
        floor = []
        for _ in range(args.repeat):
            gc.collect()
            t0 = time.process_time()
            decode(data)
            floor.append(time.process_time() - t0)
        return statistics.median(floor) / n * 1e6

    def hub_us(frozen: bool) -> float:
        ts = [run(folder, data, mono_s, before=False, hub=True, frozen=frozen)[0] for _ in range(args.repeat)]
        return statistics.median(ts) / n * 1e6

    f_us = floor_us()
    print(f"{'floor: orjson.loads of the file alone':48s} {f_us:7.2f} us/request")
    t_us = floor_us(typed.decode)
    print(f"{'floor: msgspec typed decode (typed.Rec) alone':48s} {t_us:7.2f} us/request")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "traces"
        for hub in (False, True):
            res: dict[bool, float] = {}
            for before in (True, False):
                times, spans = [], 0
                for _ in range(args.repeat):
                    t, spans = run(folder, data, mono_s, before=before, hub=hub)
                    times.append(t)
                res[before] = statistics.median(times) / n * 1e6
                what = "before" if before else "ours"
                where = "reader + trace hub (store, stage histograms)" if hub else "reader alone"
                print(f"{what + ', ' + where:48s} {res[before]:7.2f} us/request  ({spans} spans)")
            print(
                f"{'':48s} before/ours {res[True] / res[False]:5.2f}x  ours/floor {res[False] / f_us:5.1f}x"
                f"  ours/typed floor {res[False] / t_us:5.1f}x"
            )
        ours = res[False]
        frozen = hub_us(True)
        print(
            f"{'ours, reader + frozen hub (ae3dd55, one by one)':48s} {frozen:7.2f} us/request  "
            f"({frozen / ours:.2f}x ours)"
        )
        gc.disable()
        try:
            off = hub_us(False)
        finally:
            gc.enable()
        print(f"{'ours, reader + trace hub, collector off':48s} {off:7.2f} us/request")
        gc.unfreeze()
        gc.set_threshold(700, 10, 10)
        try:
            d_floor, d_ours, d_frozen = floor_us(), hub_us(False), hub_us(True)
        finally:
            tune_gc(runtime_cfg)
        print("CPython's default collector (700, 10, 10, nothing frozen):")
        print(f"{'  floor: orjson.loads of the file alone':48s} {d_floor:7.2f} us/request")
        print(
            f"{'  ours, reader + trace hub':48s} {d_ours:7.2f} us/request  ({d_ours / ours:.2f}x the tuned collector)"
        )
        print(
            f"{'  ours, reader + frozen hub (start of the day)':48s} {d_frozen:7.2f} us/request  "
            f"({d_frozen / ours:.2f}x now)"
        )
        if args.profile:
            prof = cProfile.Profile()
            prof.enable()
            run(folder, data, mono_s, before=False, hub=True)
            prof.disable()
            pstats.Stats(prof).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
