"""Cost of the canary comparison for 50 models x 2 versions.

Run from the repository root: ``PYTHONPATH=. python tests/checks/bench_canary.py``. Fills each version's window
the default way (10 minutes: ``max_samples`` 2000 event latencies, errors and scores per version, and 120 Triton
scrapes at the default 5 s interval with summaries on), then prints the time to take one Triton scrape, and one
evaluation of the 50 pairs with its share of the default 15 s evaluation interval.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from types import MappingProxyType

import numpy as np
from prometheus_client import CollectorRegistry

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sidecar.checks.canary.check import CanaryCheck
from sidecar.checks.canary.config import CanaryConfig
from sidecar.clock import FakeClock
from sidecar.model import Batch, Event, SeriesSnapshot
from sidecar.promtext import parse_exposition

MODELS = [f"m{i}" for i in range(50)]
SOURCE = "triton_metrics"


def scrape(counts: dict[tuple[str, str], float], clock: FakeClock) -> Batch:
    lines = []
    for (m, v), n in counts.items():
        lab = f'model="{m}",version="{v}"'
        ms = 35.0 if v == "1" else 41.0
        lines += [
            f"nv_inference_request_success{{{lab}}} {n:.0f}",
            f"nv_inference_count{{{lab}}} {n:.0f}",
            f'nv_inference_request_failure{{{lab},reason="BACKEND"}} {n // 100:.0f}',
            f"nv_inference_request_duration_us{{{lab}}} {n * ms * 1000:.0f}",
            f"nv_inference_queue_duration_us{{{lab}}} {n * ms * 100:.0f}",
            f'nv_inference_request_summary_us{{{lab},quantile="0.5"}} {ms * 900:.0f}',
            f'nv_inference_request_summary_us{{{lab},quantile="0.99"}} {ms * 1500:.0f}',
        ]
    expo = parse_exposition("\n".join(lines) + "\n")
    samples = tuple(expo.samples)
    snap = SeriesSnapshot(
        target="t",
        samples=samples,
        parsed=MappingProxyType({r: expo.labels(r) for _n, r, _v in samples}),
        types=MappingProxyType({}),
        taken_at=clock.monotonic(),
    )
    return Batch("scrapes", SOURCE, (snap,), received_at=clock.now(), complete=True)


def main() -> None:
    clock, rng = FakeClock(), np.random.default_rng(1)
    chk = CanaryCheck(CanaryConfig(enabled=True), registry=CollectorRegistry(), clock=clock, triton_source=SOURCE)
    counts = {(m, v): 0.0 for m in MODELS for v in ("1", "2")}
    chk.observe(scrape(counts, clock))
    took = []
    for _ in range(120):
        clock.advance(5)
        for k in counts:
            counts[k] += 50
        batch = scrape(counts, clock)
        t0 = time.perf_counter()
        chk.observe(batch)
        took.append(time.perf_counter() - t0)
    for m in MODELS:
        for v in ("1", "2"):
            lat = rng.normal(35 if v == "1" else 41, 3, 2000)
            chk.observe(
                Batch(
                    "events",
                    "bench",
                    tuple(
                        Event(
                            model=m,
                            version=v,
                            timestamp=clock.now() - i * 0.1,
                            score=float(rng.beta(2, 8)),
                            fields={"latency_ms": float(lat[i]), "error": float(i % 100 == 0)},
                        )
                        for i in range(2000)
                    ),
                )
            )
    evals = []
    for _ in range(5):
        t0 = time.perf_counter()
        found = chk.evaluate(clock.now())
        evals.append(time.perf_counter() - t0)
    ev = float(np.median(evals))
    print(f"one Triton scrape (100 versions): {np.median(took) * 1e3:.1f} ms")
    print(
        f"one evaluation (50 pairs, 8 aspects each, {sum(f.active for f in found)} worse): {ev * 1e3:.0f} ms, "
        f"{ev / 15 * 100:.1f}% of the 15 s evaluation interval"
    )


if __name__ == "__main__":
    main()
