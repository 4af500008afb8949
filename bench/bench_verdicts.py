"""Cost of the verdicts per evaluation, against the evaluation interval (issue 15).

    .venv/bin/python bench/bench_verdicts.py               # 50 models x 2 versions
    .venv/bin/python bench/bench_verdicts.py --models 500  # a larger server

Section ``diagnoses``: the five diagnoses (sidecar/diagnose) on two probes of a Triton serving
``--models`` x 2 versions, in two cases: healthy (nothing fires) and worst (every version queues behind an
idle GPU and every Python model is one busy instance, so every rule emits a finding per version). Timed:
the rules alone, one whole ``Diagnoser.evaluate`` (findings and gauges), one probe's parse of the exposition
(done once per ``diagnose.interval_secs``, not per evaluation) and the GPU-memory-per-model attribution of a
process table of one stub per version plus a scrape of its gauges. Printed as median milliseconds and as a
share of the evaluation interval (``checks.eval_interval_secs``, 15 s by default).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sidecar.clock import FakeClock
from sidecar.diagnose.config import DiagnoseConfig
from sidecar.diagnose.observe import ModelConfigInfo, Probe, parse_probe
from sidecar.diagnose.rules import Inputs, diagnose
from sidecar.diagnose.runner import Diagnoser
from sidecar.processors.gpu_memory import GpuMemoryByModel, ProcessRow


def exposition(models: int, *, t: int, worst: bool) -> str:
    """A Triton-2.51-shaped /metrics body for ``models`` x 2 versions at probe ``t`` (0 or 1)."""
    lines = ["# TYPE nv_gpu_utilization gauge", f'nv_gpu_utilization{{gpu_uuid="GPU-0"}} {0.02 if worst else 0.8}']
    for m in range(models):
        for v in (1, 2):
            lab = f'{{model="model_{m}",version="{v}"}}'
            n = 1000 + t * 300
            queue = t * (60_000_000 if worst else 300_000)
            compute = t * (29_000_000 if worst else 3_000_000)
            lines += [
                f"nv_inference_request_success{lab} {n}", f"nv_inference_count{lab} {n}",
                f"nv_inference_exec_count{lab} {n}", f"nv_inference_request_duration_us{lab} {queue + compute}",
                f"nv_inference_queue_duration_us{lab} {queue}", f"nv_inference_compute_input_duration_us{lab} 0",
                f"nv_inference_compute_infer_duration_us{lab} {compute}",
                f"nv_inference_compute_output_duration_us{lab} 0",
                f"nv_inference_pending_request_count{lab} {t * 9 if worst else 0}",
            ]
            for q in ("0.5", "0.9", "0.99"):
                lines.append(f'nv_inference_request_summary_us{{model="model_{m}",version="{v}",quantile="{q}"}} 700')
            lines += [f"nv_inference_request_summary_us_count{lab} {n}", f"nv_inference_request_summary_us_sum{lab} 7"]
    return "\n".join(lines) + "\n"


def median_ms(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def diagnose_case(case: str, models: int, configs: dict[str, ModelConfigInfo], cfg: DiagnoseConfig, repeat: int,
                  budget_ms: float) -> list[tuple[str, float, float]]:
    worst = case == "worst"
    text0, text1 = exposition(models, t=0, worst=worst), exposition(models, t=1, worst=worst)

    def parse() -> Probe:
        return parse_probe(text1, at=30.0, url="u", max_models=1000, configs=configs)

    p0 = parse_probe(text0, at=0.0, url="u", max_models=1000, configs=configs)
    inputs = Inputs(p0, parse(), silent_secs=60.0)
    found = diagnose(inputs, cfg)
    diag = Diagnoser(cfg, metrics_url="u", http_url=None, spans_expected=True, registry=CollectorRegistry(),
                     clock=FakeClock(), http=None)  # type: ignore[arg-type]  # no probe is made here
    diag._probes = (p0, inputs.cur)
    return [
        (f"{case}: rules ({len(found)} diagnoses)", median_ms(lambda: diagnose(inputs, cfg), repeat), budget_ms),
        (f"{case}: Diagnoser.evaluate", median_ms(lambda: diag.evaluate(0.0), repeat), budget_ms),
        (f"{case}: parse one probe ({len(text1) // 1024} KiB)", median_ms(parse, repeat), cfg.interval_secs * 1000),
    ]


def stub(i: int) -> list[str]:
    return ["/b/triton_python_backend_stub", f"/r/model_{i // 2}/{i % 2 + 1}/model.py", "shm", "1", "1", "1", "/b",
            "336", f"model_{i // 2}_0_0", "DEFAULT"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--eval-interval-secs", type=float, default=15.0)
    args = ap.parse_args()
    cfg = DiagnoseConfig()
    configs = {f"model_{m}": ModelConfigInfo("python", 1) for m in range(args.models)}
    pairs = args.models * 2
    budget_ms = args.eval_interval_secs * 1000
    print(f"diagnoses, {args.models} models x 2 versions ({pairs} pairs), median of {args.repeat}, "
          f"eval interval {args.eval_interval_secs:g} s")
    rows: list[tuple[str, float, float]] = []
    for case in ("healthy", "worst"):
        rows += diagnose_case(case, args.models, configs, cfg, args.repeat, budget_ms)
    registry = CollectorRegistry()
    memory = GpuMemoryByModel(registry, max_models=1000)
    procs = [ProcessRow("GPU-0", 10_000 + i, 1e9, stub(i)) for i in range(pairs)]
    rows.append((f"gpu memory: attribute {pairs} stub processes", median_ms(lambda: memory.observe_processes(procs),
                                                                             args.repeat), budget_ms))
    rows.append(("gpu memory: scrape sidecar_model_gpu_memory_bytes", median_ms(lambda: generate_latest(registry),
                                                                                args.repeat), budget_ms))
    width = max(len(r[0]) for r in rows)
    for name, ms, against in rows:
        print(f"  {name:<{width}}  {ms:9.3f} ms  {ms / against:9.5%} of {against / 1000:g} s")


if __name__ == "__main__":
    main()
