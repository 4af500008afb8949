"""Cost of every verdict check per evaluation round, against the evaluation interval (issue 15).

    .venv/bin/python bench/bench_verdicts.py               # 50 models x 2 versions
    .venv/bin/python bench/bench_verdicts.py --models 500  # a larger server (canary and sanity cap at their max_models)

Every check is built from its own config (as ``sidecar/wiring`` builds it) and filled to its bounds before
timing, so each round works on full windows: canary (``max_samples`` latency, error and score values per
version), output sanity (a full window of scores per version), cold-start watch and batching advisor (a full
window of model-API polls), tracing governor (deciding from one round's findings), diagnoses (two probes; a
healthy case where nothing fires and a worst case where every rule fires for every version) and GPU memory per
model (one NVML reading with one Python-backend stub per version, and the scrape of its gauges).

Two tables, each as the median of ``--repeat`` rounds in milliseconds and as a share of the evaluation interval
(``checks.eval_interval_secs``, 15 s by default):

- ``evaluate``: what one evaluation round costs in the evaluation thread;
- ``ingest``: work done outside the round, scaled to one interval at the default rates (model-API polls every
  ``checks.model_api.interval_secs``, NVML samples every ``gpu.nvml.interval_secs``, one diagnose probe parse every
  ``diagnose.interval_secs``). Event and span intake scales with traffic and is not in it.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
from prometheus_client import CollectorRegistry, generate_latest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sidecar.checks.batching.check import BatchingAdvisor
from sidecar.checks.canary.check import CanaryCheck
from sidecar.checks.cold_start.check import ColdStartWatch
from sidecar.checks.output_sanity.check import OutputSanityCheck
from sidecar.checks.tracing_governor.check import TracingGovernor
from sidecar.clock import FakeClock
from sidecar.component import Bus
from sidecar.config import parse_config
from sidecar.diagnose.observe import ModelConfigInfo, parse_probe
from sidecar.diagnose.rules import Inputs, diagnose
from sidecar.diagnose.runner import Diagnoser
from sidecar.model import Batch, Event, Finding, GpuMemoryReading, GpuProcess, Sample
from sidecar.processors.gpu_memory import GpuMemoryByModel

NOW = 1_700_000_000.0
STATS = (
    ("inference_count", 1.0),
    ("execution_count", 0.5),
    ("success_count", 1.0),
    ("success_ns", 1e6),
    ("queue_count", 1.0),
    ("queue_ns", 3e6),
)
CONFIG = (("max_batch_size", 16.0), ("dynamic_batching", 1.0), ("max_queue_delay_us", 2000.0))


@dataclass
class Row:
    name: str
    ms: float  # one round (evaluate) or one interval's worth (ingest)


def median_ms(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def keys(models: int) -> list[tuple[str, str]]:
    return [(f"model_{m}", str(v)) for m in range(models) for v in (1, 2)]


# -- canary and output sanity: events ---------------------------------------------------------------------------
def events(models: int, per_version: int, window_secs: float, rng: np.random.Generator) -> list[Batch]:
    """``per_version`` events per version spread over the window; v2 slower and scoring higher than v1."""
    out = []
    for model, version in keys(models):
        slow = 1.2 if version == "2" else 1.0
        lat = rng.lognormal(np.log(30 * slow), 0.3, per_version)
        score = rng.beta(2 + int(version), 5, per_version)
        err = rng.random(per_version) < 0.01
        ts = NOW - window_secs + np.sort(rng.random(per_version)) * window_secs * 0.99
        out.append(
            Batch(
                kind="events",
                source="bench",
                items=tuple(
                    Event(
                        model=model,
                        version=version,
                        timestamp=float(t),
                        score=float(s),
                        fields={"latency_ms": float(la), "error": float(e)},
                        trace_id=f"{i:032x}",
                    )
                    for i, (t, s, la, e) in enumerate(zip(ts, score, lat, err, strict=True))
                ),
            )
        )
    return out


# -- cold start and batching: model-API polls ---------------------------------------------------------------------
def poll(models: int, at: float, n: float) -> Batch:
    items = [Sample("triton_model_index_seconds", (), 0.01)]
    for m, v in keys(models):
        items.append(Sample("triton_model_state", (("model", m), ("state", "READY"), ("version", v)), 1.0))
        items += [Sample("triton_model_stats", (("model", m), ("stat", st), ("version", v)), n * k) for st, k in STATS]
    for i in range(models):
        items += [Sample("triton_model_config", (("field", f), ("model", f"model_{i}")), val) for f, val in CONFIG]
    return Batch(kind="samples", source="triton_model_api", items=tuple(items), received_at=at)


# -- diagnoses: Triton's exposition ------------------------------------------------------------------------------
def exposition(models: int, *, t: int, worst: bool) -> str:
    """A Triton-2.51-shaped /metrics body for ``models`` x 2 versions at probe ``t`` (0 or 1)."""
    lines = ["# TYPE nv_gpu_utilization gauge", f'nv_gpu_utilization{{gpu_uuid="GPU-0"}} {0.02 if worst else 0.8}']
    for model, v in keys(models):
        lab = f'{{model="{model}",version="{v}"}}'
        n = 1000 + t * 300
        queue = t * (60_000_000 if worst else 300_000)
        compute = t * (29_000_000 if worst else 3_000_000)
        lines += [
            f"nv_inference_request_success{lab} {n}",
            f"nv_inference_count{lab} {n}",
            f"nv_inference_exec_count{lab} {n}",
            f"nv_inference_request_duration_us{lab} {queue + compute}",
            f"nv_inference_queue_duration_us{lab} {queue}",
            f"nv_inference_compute_input_duration_us{lab} 0",
            f"nv_inference_compute_infer_duration_us{lab} {compute}",
            f"nv_inference_compute_output_duration_us{lab} 0",
            f"nv_inference_pending_request_count{lab} {t * 9 if worst else 0}",
        ]
        for q in ("0.5", "0.9", "0.99"):
            lines.append(f'nv_inference_request_summary_us{{model="{model}",version="{v}",quantile="{q}"}} 700')
        lines += [f"nv_inference_request_summary_us_count{lab} {n}", f"nv_inference_request_summary_us_sum{lab} 7"]
    return "\n".join(lines) + "\n"


def stub(model: str, version: str) -> tuple[str, ...]:
    return (
        "/b/triton_python_backend_stub",
        f"/r/{model}/{version}/model.py",
        "shm",
        "1",
        "1",
        "1",
        "/b",
        "336",
        f"{model}_0_0",
        "DEFAULT",
    )


class _Control:
    """A trace-setting endpoint that answers at once (the governor's calls to Triton are not timed here)."""

    @dataclass
    class _S:
        rate: int = 1000
        levels: tuple[str, ...] = ("TIMESTAMPS",)
        mode: str = "triton"

    async def get(self, model: str | None = None) -> _S:
        return self._S()

    async def set(self, model: str | None, rate: int, levels: tuple[str, ...]) -> _S:
        return self._S(rate, levels)

    async def clear(self, model: str) -> _S:
        return self._S()


def run(models: int, repeat: int) -> tuple[float, list[Row], list[Row], list[str]]:
    cfg = parse_config(
        {
            "triton": {"http_url": "http://triton:8000"},
            "checks": {
                "canary": {"enabled": True, "max_models": max(50, models)},
                "output_sanity": {"enabled": True, "max_models": max(200, models), "models": {}},
                "cold_start": {"enabled": True},
                "batching": {"enabled": True},
                "tracing_governor": {"enabled": True},
            },
        }
    )
    checks = cfg.checks
    interval = checks.eval_interval_secs
    clock = FakeClock(start=NOW)
    rng = np.random.default_rng(15)
    notes: list[str] = []
    evaluate: list[Row] = []
    ingest: list[Row] = []

    canary = CanaryCheck(checks.canary, registry=CollectorRegistry(), clock=clock)
    sanity = OutputSanityCheck(checks.output_sanity, registry=CollectorRegistry(), clock=clock)
    per_version = checks.canary.max_samples
    for b in events(models, per_version, min(checks.canary.window_secs, checks.output_sanity.window_secs), rng):
        canary.observe(b)
        sanity.observe(b)
    notes.append(
        f"canary and output sanity: {per_version} events per version in the window "
        f"(canary.max_samples), v2 20% slower and scoring higher"
    )
    found_canary = canary.evaluate(NOW)
    evaluate.append(Row(f"canary ({len(found_canary)} pairs)", median_ms(lambda: canary.evaluate(NOW), repeat)))
    found_sanity = sanity.evaluate(NOW)
    evaluate.append(
        Row(f"output sanity ({len(found_sanity)} findings)", median_ms(lambda: sanity.evaluate(NOW), repeat))
    )

    cold = ColdStartWatch(checks.cold_start, registry=CollectorRegistry())
    adv = BatchingAdvisor(checks.batching, registry=CollectorRegistry())
    api_every = checks.model_api.interval_secs
    polls = max(checks.cold_start.steady_intervals, int(checks.batching.window_secs / api_every)) + 1
    for i in range(polls):
        b = poll(models, NOW - (polls - i) * api_every, 100.0 * i)
        cold.observe(b)
        adv.observe(b)
    notes.append(f"cold start and batching: {polls} model-API polls ({api_every:g} s apart) before timing")
    evaluate.append(Row("cold-start watch", median_ms(lambda: cold.evaluate(NOW), repeat)))
    evaluate.append(Row("batching advisor", median_ms(lambda: adv.evaluate(NOW), repeat)))
    nxt = poll(models, NOW, 100.0 * polls)
    per_interval = interval / api_every
    ingest.append(
        Row(f"cold-start watch: {per_interval:g} polls", per_interval * median_ms(lambda: cold.observe(nxt), repeat))
    )
    ingest.append(
        Row(f"batching advisor: {per_interval:g} polls", per_interval * median_ms(lambda: adv.observe(nxt), repeat))
    )

    governor = TracingGovernor(
        checks.tracing_governor,
        control=_Control(),
        bus=Bus(CollectorRegistry()),
        registry=CollectorRegistry(),
        clock=clock,
        logger=logging.getLogger("bench"),
    )
    round_findings: list[Finding] = [*found_canary, *found_sanity, *cold.evaluate(NOW), *adv.evaluate(NOW)]
    # The worst case for the decision: every model has an active finding of a kind it boosts for.
    kind = checks.tracing_governor.kinds[0]
    round_findings += [
        Finding(check="bench", kind=kind, labels={"model": m}, active=True, value=1.0)
        for m, v in keys(models)
        if v == "1"
    ]
    evaluate.append(
        Row(
            f"tracing governor (decide on {len(round_findings)} findings)",
            median_ms(lambda: governor.on_findings(round_findings, NOW), repeat),
        )
    )
    asyncio.run(governor.apply_once())

    dcfg = cfg.diagnose
    configs = {f"model_{m}": ModelConfigInfo("python", 1) for m in range(models)}
    for case in ("healthy", "worst"):
        worst = case == "worst"
        text0, text1 = exposition(models, t=0, worst=worst), exposition(models, t=1, worst=worst)
        p0 = parse_probe(text0, at=NOW - 30, url="u", max_models=dcfg.max_models, configs=configs)
        p1 = parse_probe(text1, at=NOW, url="u", max_models=dcfg.max_models, configs=configs)
        found = diagnose(Inputs(p0, p1, silent_secs=60.0), dcfg)
        diag = Diagnoser(
            dcfg,
            metrics_url="u",
            http_url=None,
            spans_expected=True,
            registry=CollectorRegistry(),
            clock=clock,
            http=None,
        )  # type: ignore[arg-type]  # no probe is made here
        diag._probes = (p0, p1)
        evaluate.append(
            Row(f"diagnoses, {case} ({len(found)} diagnoses)", median_ms(partial(diag.evaluate, NOW), repeat))
        )
        if worst:
            probes = interval / dcfg.interval_secs
            ingest.append(
                Row(
                    f"diagnoses: {probes:g} probe parses ({len(text1) // 1024} KiB)",
                    probes
                    * median_ms(
                        partial(parse_probe, text1, at=NOW, url="u", max_models=dcfg.max_models, configs=configs),
                        repeat,
                    ),
                )
            )

    registry = CollectorRegistry()
    memory = GpuMemoryByModel(
        registry, max_models=max(500, 2 * models), clock=clock, lookback_secs=cfg.alerting.changes.poll_interval_secs
    )
    reading = GpuMemoryReading(
        used={"GPU-0": 40e9},
        processes=tuple(GpuProcess("GPU-0", 10_000 + i, 1e9, stub(m, v)) for i, (m, v) in enumerate(keys(models))),
        processes_complete=True,
    )
    sample = Batch(kind="gpu_memory", source="nvml", items=(reading,), received_at=NOW)
    memory.on_samples(sample)
    evaluate.append(
        Row("gpu memory: collect sidecar_model_gpu_memory_bytes", median_ms(lambda: generate_latest(registry), repeat))
    )
    samples = interval / cfg.gpu.nvml.interval_secs
    ingest.append(
        Row(
            f"gpu memory: {samples:g} NVML readings ({len(reading.processes)} stubs)",
            samples * median_ms(lambda: memory.on_samples(sample), repeat),
        )
    )
    return interval, evaluate, ingest, notes


def table(title: str, rows: Sequence[Row], interval: float) -> list[str]:
    width = max(len(r.name) for r in rows) + 2
    out = [f"{title:<{width}} {'ms':>9}  {'of interval':>11}"]
    for r in [*rows, Row("total", sum(r.ms for r in rows))]:
        out.append(f"  {r.name:<{width - 2}} {r.ms:9.3f}  {r.ms / (interval * 1000):11.4%}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", type=int, default=50, help="models, each with 2 versions")
    ap.add_argument("--repeat", type=int, default=21, help="rounds timed per row (the median is printed)")
    args = ap.parse_args()
    interval, evaluate, ingest, notes = run(args.models, args.repeat)
    print(
        f"verdict checks, {args.models} models x 2 versions, median of {args.repeat} rounds, "
        f"checks.eval_interval_secs {interval:g} s"
    )
    for n in notes:
        print(f"  ({n})")
    print("\n".join(table("evaluate (one round)", evaluate, interval)))
    print("\n".join(table("ingest (per interval)", ingest, interval)))
    total = sum(r.ms for r in evaluate) + sum(r.ms for r in ingest)
    print(f"all checks, one interval: {total:.3f} ms = {total / (interval * 1000):.4%} of {interval:g} s")


if __name__ == "__main__":
    main()
