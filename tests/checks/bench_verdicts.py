"""Cost of the cold-start watch and batching advisor for 50 models x 2 versions (not collected by pytest).

Run from the repository root: ``PYTHONPATH=. python tests/checks/bench_verdicts.py``. Prints the time to take one
poll batch (both checks, on the event loop) and one evaluation (both, in the evaluation thread), and their share
of a 15 s evaluation interval at the default 2 s poll, with each advisor window full (300 s: 150 polls).
"""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry

from sidecar.checks.batching import BatchingAdvisor
from sidecar.checks.cold_start import ColdStartWatch
from sidecar.checks.verdicts_config import BatchingConfig, ColdStartConfig
from sidecar.model import Batch, Sample

KEYS = [(f"m{i}", str(v)) for i in range(50) for v in (1, 2)]
STATS = (("inference_count", 1.0), ("execution_count", 0.5), ("success_count", 1.0), ("success_ns", 1e6),
         ("queue_count", 1.0), ("queue_ns", 3e6))
CONFIG = (("max_batch_size", 16.0), ("dynamic_batching", 1.0), ("max_queue_delay_us", 2000.0))


def poll(at: float, n: float) -> Batch:
    items = [Sample("triton_model_index_seconds", (), 0.01)]
    for m, v in KEYS:
        items.append(Sample("triton_model_state", (("model", m), ("state", "READY"), ("version", v)), 1.0))
        items += [Sample("triton_model_stats", (("model", m), ("stat", st), ("version", v)), n * k) for st, k in STATS]
    for i in range(50):
        items += [Sample("triton_model_config", (("field", f), ("model", f"m{i}")), val) for f, val in CONFIG]
    return Batch(kind="samples", source="triton_model_api", items=tuple(items), received_at=at)


def main() -> None:
    cold = ColdStartWatch(ColdStartConfig(enabled=True), registry=CollectorRegistry())
    adv = BatchingAdvisor(BatchingConfig(enabled=True), registry=CollectorRegistry())
    for i in range(150):
        b = poll(1000 + 2 * i, 100.0 * i)
        cold.observe(b)
        adv.observe(b)
    rounds = 50
    t0 = time.perf_counter()
    for i in range(rounds):
        b = poll(1300 + 2 * i, 100.0 * (150 + i))
        cold.observe(b)
        adv.observe(b)
    observe = (time.perf_counter() - t0) / rounds
    t0 = time.perf_counter()
    for _ in range(rounds):
        cold.evaluate(1400.0)
        adv.evaluate(1400.0)
    evaluate = (time.perf_counter() - t0) / rounds
    per_interval = evaluate + 7.5 * observe
    print(f"100 versions: one poll batch {observe * 1e3:.2f} ms, one evaluation {evaluate * 1e3:.2f} ms; "
          f"per 15 s interval (7.5 polls + 1 evaluation) {per_interval * 1e3:.1f} ms = "
          f"{per_interval / 15 * 100:.2f}% of it")


if __name__ == "__main__":
    main()
