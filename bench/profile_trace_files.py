"""Where the trace-file path's CPU goes, phase by phase, in us per traced request, next to decoding alone.

    .venv/bin/python bench/profile_trace_files.py [--requests 20000] [--per-file 1000] [--per-poll 6] [--repeat 3]
        [--read-slice-bytes N]

The input and the reading are ``bench/bench_trace_files_filed.py``'s (the recorded Triton 2.51 files of the demo's
``ctr`` model replicated to ``--requests`` requests, cut into files of ``--per-file`` requests as Triton's
``log-frequency`` rotates them, ``--per-poll`` files appearing before each poll; the trace-file source publishing to
the trace hub, the store at its default 5,000 traces, the collector as ``sidecar run`` sets it). Each phase is timed
by wrapping the function that does it (process CPU time; the wrappers add well under 1% at these call counts):

- decode: ``records.scan`` (the typed ``msgspec`` decode of each read, its fallbacks and the bracket handling);
- fold: ``requests.Assembler.add`` (records into requests);
- settle, probes, bounds (``spans.clock_groups``), plausible, whole requests (``spans.whole_of``: which requests
  go whole, their trace ids), stream records;
- hub: the trace hub's ``on_span_requests`` and ``on_spans`` (store and stage histograms; span records are built
  only for requests not taken whole); publish (less the hub): the bus and the commit;
- the rest of a poll: listing and reading the files, freeing the decoded records.

The baseline printed with it is decoding alone: ``msgspec``'s typed decode of the same files' bytes into the
reader's own record structs, nothing else (the limit any Python reader of these files starts from). Rounds run one
after another in this process; the table is the median of ``--repeat`` rounds.
"""

from __future__ import annotations

import dataclasses
import gc
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT.parent / "tests" / "helpers"))

from bench_trace_files_filed import input_args, write_files  # noqa: E402
from prometheus_client import CollectorRegistry  # noqa: E402
from trace_read_once import clock_after, poll_all  # noqa: E402

import sidecar.sources.trace_files.requests as requests_mod  # noqa: E402
import sidecar.sources.trace_files.source as source_mod  # noqa: E402
from sidecar.component import Bus  # noqa: E402
from sidecar.config import parse_config  # noqa: E402
from sidecar.runtime import tune_gc  # noqa: E402
from sidecar.sources.trace_files.metrics import TraceFileMetrics  # noqa: E402
from sidecar.sources.trace_files.settings import TraceFileSettings  # noqa: E402
from sidecar.sources.trace_files.typed import decode_run  # noqa: E402
from sidecar.state.trace_hub import TraceHub  # noqa: E402
from sidecar.store import Store  # noqa: E402
from sidecar.wiring.span_subs import subscribe_spans  # noqa: E402

# (label, owner, attribute): module functions the source calls by name, and methods.
_PHASES: tuple[tuple[str, Any, str], ...] = (
    ("decode", source_mod, "scan"),
    ("fold", requests_mod.Assembler, "add"),
    ("settle", requests_mod.Assembler, "settle"),
    ("probes", requests_mod.ProbeFilter, "split"),
    ("bounds", source_mod, "clock_groups"),
    ("plausible", source_mod, "plausible_of"),
    ("whole requests", source_mod, "whole_of"),
    ("stream records", source_mod, "stream_records"),
    ("publish", source_mod.TraceFileSource, "publish"),
)


def _timed(f: Callable[..., Any], label: str, spent: dict[str, float]) -> Callable[..., Any]:
    def wrapper(*a: Any, **k: Any) -> Any:
        t = time.process_time()
        try:
            return f(*a, **k)
        finally:
            spent[label] = spent.get(label, 0.0) + time.process_time() - t

    return wrapper


def one_round(files_dir: Path, work: Path, per_poll: int, slice_bytes: int | None) -> tuple[float, dict[str, float]]:
    """(CPU seconds of the polls, seconds per phase) of one read of the trace files in ``files_dir``."""
    files = _files(files_dir)
    spent: dict[str, float] = {}
    saved = [(owner, attr, getattr(owner, attr)) for _, owner, attr in _PHASES]
    for label, owner, attr in _PHASES:
        setattr(owner, attr, _timed(getattr(owner, attr), label, spent))
    try:
        clock = clock_after(files_dir, work)
        settings = TraceFileSettings(path=str(work / "trace.json"), settle_secs=0.0)
        if slice_bytes is not None:
            settings = dataclasses.replace(settings, read_slice_bytes=slice_bytes)
        reg = CollectorRegistry()
        bus = Bus(reg)
        hub = TraceHub(parse_config({"traces": {"enabled": True}}).traces, registry=reg, clock=clock)
        subscribe_spans(
            bus, hub.name, _timed(hub.on_spans, "hub", spent), requests=_timed(hub.on_span_requests, "hub", spent)
        )
        src = source_mod.TraceFileSource(
            settings,
            bus=bus,
            metrics=TraceFileMetrics(reg),
            clock=clock,
            store=Store(":memory:"),
        )
        gc.collect()
        cpu, _ = poll_all(src, files, work, per_poll)
    finally:
        for owner, attr, f in saved:
            setattr(owner, attr, f)
    spent["publish"] = spent.get("publish", 0.0) - spent.get("hub", 0.0)
    return cpu, spent


def _files(folder: Path) -> list[Path]:
    """The ``trace.json.K`` files of ``folder`` in rotation order."""
    return sorted((p for p in folder.iterdir() if p.name.startswith("trace.json.")), key=lambda p: int(p.suffix[1:]))


def decode_alone(files: list[Path]) -> float:
    """CPU seconds of the typed decode of every file's records, nothing else."""
    bodies = []
    for p in files:
        b = p.read_bytes().strip()
        bodies.append(b[1:-1] if b.startswith(b"[") and b.endswith(b"]") else b)
    gc.collect()
    t = time.process_time()
    for b in bodies:
        if decode_run(b) is None:
            raise SystemExit(f"a file did not decode typed: {len(b)} bytes")
    return time.process_time() - t


def main() -> None:
    ap = input_args()
    ap.add_argument(
        "--read-slice-bytes", type=int, default=None, help="traces.file.read_slice_bytes (default: its default)"
    )
    args = ap.parse_args()
    tune_gc(parse_config({}).runtime)
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        write_files(t / "files", args.requests, args.per_file)
        files = _files(t / "files")
        totals: list[float] = []
        phases: dict[str, list[float]] = {}
        floors: list[float] = []
        for _ in range(args.repeat):
            floors.append(decode_alone(files))
            cpu, spent = one_round(t / "files", t / "work", args.per_poll, args.read_slice_bytes)
            totals.append(cpu)
            for k, s in spent.items():
                phases.setdefault(k, []).append(s)
            phases.setdefault("rest of a poll", []).append(cpu - sum(spent.values()))
    n = args.requests
    total = statistics.median(totals) / n * 1e6
    floor = statistics.median(floors) / n * 1e6
    print(f"{n} requests in files of ~{args.per_file}, {args.per_poll} files a poll; median of {args.repeat} rounds")
    print(f"{'phase':18s} {'us/request':>10s} {'share':>6s}")
    for k, secs in sorted(phases.items(), key=lambda kv: -statistics.median(kv[1])):
        us = statistics.median(secs) / n * 1e6
        print(f"{k:18s} {us:10.2f} {us / total:6.1%}")
    print(f"{'total':18s} {total:10.2f}")
    print(f"decoding alone (msgspec, typed): {floor:.2f} us/request; the path / decoding alone: {total / floor:.2f}x")


if __name__ == "__main__":
    main()
