"""Probes built from Triton 2.51's recorded /metrics (tests/data/core), with the fraud model's counters set
to what a test needs and, where asked, the ``nv_gpu_utilization`` line a GPU server adds."""

from __future__ import annotations

from sidecar.diagnose.observe import ModelConfigInfo, Probe, parse_probe
from tests.conftest import DATA

RECORDED = (DATA / "core" / "triton-2.51-metrics.txt").read_text()
PYTHON_ONE = {
    "fraud": ModelConfigInfo("python", 1),
    "ctr": ModelConfigInfo("python", 1),
    "rank": ModelConfigInfo("python", 1),
}


def exposition(
    *,
    success: float,
    queue_us: float,
    compute_us: float,
    pending: float = 0,
    gpu_util: float | None = None,
    summaries: bool = True,
) -> str:
    lines = [ln for ln in RECORDED.splitlines() if 'model="fraud"' not in ln]
    if not summaries:
        lines = [ln for ln in lines if "_summary_us" not in ln]
    lab = '{model="fraud",version="1"}'
    lines += [
        f"nv_inference_request_success{lab} {success}",
        f"nv_inference_count{lab} {success}",
        f"nv_inference_exec_count{lab} {success}",
        f"nv_inference_request_duration_us{lab} {queue_us + compute_us}",
        f"nv_inference_queue_duration_us{lab} {queue_us}",
        f"nv_inference_compute_input_duration_us{lab} 0",
        f"nv_inference_compute_infer_duration_us{lab} {compute_us}",
        f"nv_inference_compute_output_duration_us{lab} 0",
        f"nv_inference_pending_request_count{lab} {pending}",
    ]
    if gpu_util is not None:
        lines += [
            "# HELP nv_gpu_utilization GPU utilization rate [0.0 - 1.0)",
            "# TYPE nv_gpu_utilization gauge",
            f'nv_gpu_utilization{{gpu_uuid="GPU-4a1c"}} {gpu_util}',
        ]
    return "\n".join(lines) + "\n"


def probe(at: float, configs: dict[str, ModelConfigInfo] | None = None, **kw: float | bool | None) -> Probe:
    return parse_probe(
        exposition(**kw),
        at=at,
        url="http://triton:8002/metrics",
        max_models=500,  # type: ignore[arg-type]
        configs=configs,
    )
