"""Edge benchmark: nginx JSON access-log lines per second through the sidecar's edge path, against orjson alone
on the same lines, measured in the same run on one core.

    .venv/bin/python bench/bench_edge.py                 # 1,000,000 lines
    .venv/bin/python bench/bench_edge.py --lines 100000

Lines are written to a temporary file first (untimed): four route groups, 20 nodes, 90% hits, misses with an
origin time, a W3C traceparent on one line in ten. Then, each timed alone:

- ``orjson``: ``orjson.loads`` of every line read from the file (the floor: decoding only).
- ``ours``: the edge tailer (sidecar/sources/edge/jsonl.py) reading the file in 8 MiB polls, checking every line
  at the door (sidecar/sources/edge/parse.py) and handing each poll's records to the edge processor
  (sidecar/processors/edge.py: counts, hit-ratio minutes, latency sketches and histograms) and the purge watch.

Prints lines per CPU second of this process for each (``time.process_time``: on a shared machine the figure
other processes do not move; the target is 100,000 lines/s on one core), the wall-clock rates beside them, and
ours/orjson from the CPU-second rates. Not part of the test suite's pass/fail.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import orjson
from prometheus_client import CollectorRegistry

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sidecar.checks.edge.config import PurgeWatchConfig  # noqa: E402
from sidecar.checks.edge.purge import PurgeWatch  # noqa: E402
from sidecar.clock import FakeClock  # noqa: E402
from sidecar.processors.edge import EdgeProcessor  # noqa: E402
from sidecar.processors.edge_config import EdgeSeriesConfig  # noqa: E402
from sidecar.purge import Purge  # noqa: E402
from sidecar.sources.edge.config import EdgeFileConfig, EdgeSourceConfig  # noqa: E402
from sidecar.sources.edge.jsonl import EdgeTailer  # noqa: E402
from sidecar.sources.edge.metrics import EdgeSourceMetrics  # noqa: E402
from sidecar.state.edge_hops import EdgeHops  # noqa: E402
from sidecar.state.edge_join_config import EdgeJoinConfig  # noqa: E402
from sidecar.store import Store  # noqa: E402

T0 = 1_764_892_800.0
PATHS = ["/model/weights/v1.3.7-onnx", "/model/weights/v1.4.0", "/v2/models/ctr/infer", "/static/app.js"]


def write_lines(path: Path, n: int) -> None:
    with open(path, "wb") as fh:
        for i in range(n):
            miss = i % 10 == 0
            doc = {
                "time": round(T0 + i * 0.003, 3),
                "path": PATHS[i % 4] + f"/{i % 50}",
                "cache": "MISS" if miss else "HIT",
                "request_time": 0.012 + (i % 97) / 1000,
                "upstream_time": f"{0.008 + (i % 89) / 1000:.3f}" if miss else "-",
                "status": 200 if i % 200 else 503,
                "node": f"pop{i % 20}",
                "request_id": f"{i:032x}",
                "trace_id": f"00-{i:032x}-00f067aa0ba902b7-01" if i % 10 == 3 else "",
            }
            fh.write(orjson.dumps(doc) + b"\n")


def bench_orjson(path: Path) -> tuple[float, float]:
    t, c = time.perf_counter(), time.process_time()
    loads = orjson.loads
    n = 0
    with open(path, "rb") as fh:
        for line in fh:
            loads(line)
            n += 1
    return n / (time.perf_counter() - t), n / (time.process_time() - c)


def bench_ours(path: Path, tmp: Path, n: int, join: bool = False) -> tuple[float, float]:
    reg = CollectorRegistry()
    clock = FakeClock(T0 + n * 0.003 + 60)
    series = EdgeProcessor(
        EdgeSeriesConfig.model_validate(
            {
                "route_groups": [
                    {"name": "weights", "prefixes": ["/model/weights/"]},
                    {"name": "infer", "prefixes": ["/v2/"]},
                ]
            }
        ),
        registry=reg,
        clock=clock,
    )
    purges = PurgeWatch(PurgeWatchConfig(), hit_statuses=series.cfg.hit_statuses, registry=reg)
    purges.add(Purge("/model/weights/v1.3.", "prefix"), at=T0 + 1)
    tailer = EdgeTailer(
        EdgeFileConfig(path=str(path), max_read_bytes=8 * 1024 * 1024),
        source_cfg=EdgeSourceConfig(max_age_secs=366 * 86400),
        metrics=EdgeSourceMetrics(reg),
        # --join: the store of edge hops the trace page joins to spans, as wiring adds it with traces on.
        sinks=[series, purges, EdgeHops(EdgeJoinConfig(), registry=reg)] if join else [series, purges],
        clock=clock,
        store=Store(tmp / "bench.sqlite"),
        registry=reg,
    )
    t, c = time.perf_counter(), time.process_time()
    got = 0
    while (k := tailer.poll_once()) > 0:
        got += k
    elapsed, cpu = time.perf_counter() - t, time.process_time() - c
    assert got == n, (got, n)
    assert series.hits("all", T0, T0 + n)[1] == n
    return n / elapsed, n / cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--join", action="store_true", help="the edge hop store among the sinks too")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        path = tmp / "access.json"
        write_lines(path, args.lines)
        size = path.stat().st_size
        base = bench_orjson(path)
        ours = bench_ours(path, tmp, args.lines, args.join)
    print(f"lines: {args.lines:,} ({size / args.lines:.0f} bytes each)")
    print(f"orjson alone: {base[1]:,.0f} lines per CPU second (wall clock: {base[0]:,.0f} lines/s)")
    what = "processor, purge watch, hop store" if args.join else "processor, purge watch"
    print(f"ours (tail, door checks, {what}): {ours[1]:,.0f} lines per CPU second (wall clock: {ours[0]:,.0f} lines/s)")
    print(f"ours/orjson (CPU seconds): {ours[1] / base[1]:.3f}; target 100,000 lines/s: {ours[1] / 100_000:.2f}x")


if __name__ == "__main__":
    main()
