"""OTLP ingest in one process, no HTTP: decode a body and publish its span batch on the bus (store, stage
histograms), as the receiver does; the same bodies as ``bench_otlp.py``, the same GC settings as ``sidecar run``.

Less noisy than the HTTP bench on a shared machine (CPU time of this process only), and it splits the cost
into decoding and the rest (store + stage pairing).

    .venv/bin/python bench/profile_otlp_ingest.py [json|protobuf|both] [--profile]
"""

from __future__ import annotations

import cProfile
import pstats
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import bench_otlp as b  # noqa: E402
from prometheus_client import CollectorRegistry  # noqa: E402

from sidecar.component import Batch  # noqa: E402
from sidecar.config import parse_config  # noqa: E402
from sidecar.runtime import tune_gc  # noqa: E402
from sidecar.service import Service  # noqa: E402
from sidecar.sources.otlp.decode import decode_json, decode_protobuf  # noqa: E402
from sidecar.sources.otlp.limits import SpanLimits  # noqa: E402
from sidecar.sources.otlp.result import DecodeResult  # noqa: E402
from sidecar.wiring.traces import build  # noqa: E402

PER_BODY = 100


def main() -> None:
    which = sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("-") else "both"
    profile = "--profile" in sys.argv
    cfg = parse_config({"store": {"path": ":memory:"}, "traces": {"enabled": True}})
    svc = Service(cfg, registry=CollectorRegistry(), factories=[build])
    bus = svc.ctx.bus
    jb, pb = b._bodies(20, 1)
    lim = SpanLimits()
    tune_gc()
    counter = [0]

    def fresh(enc: str, bodies: list[bytes], n: int) -> list[bytes]:
        """``n`` bodies with trace ids never sent before (as the HTTP bench's generators make them)."""
        out = []
        for _ in range(n):
            i = counter[0]
            counter[0] += 1
            body = bodies[i % len(bodies)]
            prefix = i.to_bytes(4, "big")
            if enc == "json":
                out.append(body.replace(b.JSON_MARK, b'"traceId":"' + prefix.hex().encode()))
            else:
                out.append(body.replace(b.PB_MARK, b"\x0a\x10" + prefix))
        return out

    def run(dec: Callable[[bytes, SpanLimits], DecodeResult], batch: list[bytes]) -> int:
        n = 0
        for body in batch:
            r = dec(body, lim)
            bus.publish(Batch(kind="spans", source="otlp", items=tuple(r.records), received_at=time.time()))
            n += len(r.records)
        return n

    for enc in ("json", "protobuf") if which == "both" else (which,):
        bodies = jb if enc == "json" else pb
        dec = decode_json if enc == "json" else decode_protobuf
        run(dec, fresh(enc, bodies, 300))  # fill the store to max_traces, so eviction runs as in steady state
        best_all = best_dec = 0.0
        for _ in range(3):
            work = fresh(enc, bodies, 1000)
            t = time.process_time()
            n = run(dec, work)
            best_all = max(best_all, n / (time.process_time() - t))
            t = time.process_time()
            for body in work:
                dec(body, lim)
            best_dec = max(best_dec, len(work) * PER_BODY / (time.process_time() - t))
        rest_us = 1e6 / best_all - 1e6 / best_dec
        print(
            f"{enc:8s}: decode+publish {best_all:,.0f} spans/s ({1e6 / best_all:.1f} us/span); decode alone "
            f"{best_dec:,.0f} spans/s ({1e6 / best_dec:.1f} us/span); store + stages {rest_us:.1f} us/span"
        )
        if profile:
            prof = cProfile.Profile()
            prof.runcall(run, dec, fresh(enc, bodies, 1000))
            pstats.Stats(prof).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
