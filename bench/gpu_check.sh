#!/usr/bin/env bash
# Runs the sidecar's NVML source against the real GPUs of this machine and prints what it saw, next to
# nvidia-smi's view of the same GPUs for a cross-check. Run from the repo root: bash bench/gpu_check.sh
# Then, unless GPU_CHECK_TRITON=0, GPU memory per model with a real Triton and `sidecar run`
# (bench/gpu_memory_check.py: process and load_delta figures of two Python-backend models whose stubs hold
# GPU_CHECK_HOLD_MIB of GPU memory each).
# Exit status: 0 when at least one GPU was sampled and the Triton part passed (or was skipped: no
# nvidia-pytriton wheel), 3 when NVML sees no GPU (the no-GPU path, printed too), 5 when a per-model GPU memory
# check failed.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -x .venv/bin/python ]]; then PY=.venv/bin/python; else PY=python3; fi
SAMPLES="${GPU_CHECK_SAMPLES:-2}"
GAP="${GPU_CHECK_GAP_SECS:-1}"

echo "== python: $PY ($($PY --version 2>&1))"
if command -v nvidia-smi >/dev/null 2>&1; then
  echo "== nvidia-smi (reference)"
  nvidia-smi --query-gpu=index,uuid,name,driver_version,utilization.gpu,memory.used,memory.total,power.draw,power.limit,temperature.gpu,clocks.sm,clocks.mem --format=csv || true
  nvidia-smi --query-compute-apps=gpu_uuid,pid,process_name,used_memory --format=csv || true
else
  echo "== nvidia-smi: not installed"
fi

set +e
PYTHONPATH=. SAMPLES="$SAMPLES" GAP="$GAP" "$PY" - <<'PYEOF'
import logging, os, sys, time

try:
    import pynvml  # noqa: F401  (package nvidia-ml-py)
except ImportError:
    sys.exit("pynvml is not importable: pip install nvidia-ml-py (or run from the repo's .venv)")

from prometheus_client import CollectorRegistry, generate_latest

from sidecar.clock import SystemClock
from sidecar.sources.gpu.config import GpuConfig
from sidecar.state.gpus import GpuHub
from sidecar.sources.gpu.nvml import NvmlSource

logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
cfg = GpuConfig()
reg = CollectorRegistry(auto_describe=True)
clock = SystemClock()
hub = GpuHub(reg, clock, max_series=cfg.max_series, stale_after_secs=cfg.stale_after_secs)
src = NvmlSource(cfg.nvml, hub, reg, clock)
n = int(os.environ["SAMPLES"])
for i in range(n):
    t0 = time.perf_counter()
    kept = src.sample_once()
    print(f"== sample {i + 1}/{n}: {kept} series in {1000 * (time.perf_counter() - t0):.1f} ms")
    if i + 1 < n:
        time.sleep(float(os.environ["GAP"]))
print("== sidecar exposition (sidecar_gpu_*)")
for line in generate_latest(reg).decode().splitlines():
    if line.startswith("sidecar_gpu_") and "_created" not in line:
        print(line)
print("== readiness:", hub.readiness())
print("== gpu_by_uuid:", hub.gpu_by_uuid())
import asyncio
asyncio.run(src.shutdown())
sys.exit(0 if hub.visible("nvml") else 3)
PYEOF
status=$?
set -e
if [[ $status -ne 0 || "${GPU_CHECK_TRITON:-1}" == "0" ]]; then exit "$status"; fi

echo "== GPU memory per model: a real Triton and sidecar run"
set +e
"$PY" bench/gpu_memory_check.py --hold-mib "${GPU_CHECK_HOLD_MIB:-256}"
status=$?
set -e
if [[ $status -eq 4 ]]; then exit 0; fi  # no Triton here: skipped (printed)
exit "$status"
