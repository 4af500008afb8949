"""GPU memory per model on a real GPU, with a real Triton and ``sidecar run`` (called by bench/gpu_check.sh).

Two Python-backend models, ``gpu_hold`` (loaded at start) and ``gpu_late`` (loaded later), each hold
``--hold-mib`` of GPU memory in their stub process through the CUDA driver API (libcuda only; no toolkit, no
torch). Checked on the sidecar's /metrics:

- ``sidecar_model_gpu_memory_bytes{model="gpu_hold",version="1",method="process"}`` >= the memory held;
- after ``gpu_late`` is loaded: its ``method="load_delta"`` and ``method="process"`` figures >= the memory held;
- after ``gpu_late`` is unloaded: no figure of it is left.

The sidecar runs in this shell's PID namespace, beside Triton's processes: that is what lets it read their
``/proc/<pid>/cmdline``. Exit status 0 when every check passed, 4 when no Triton can be started here (the
``nvidia-pytriton`` wheel is missing: skipped), 5 when a check failed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sidecar.demo.tritonserver import TritonNotAvailable, TritonServer, free_port, triton_home

MODEL = '''"""Holds HOLD bytes of GPU memory in this stub process for as long as the model is loaded."""
import ctypes

import triton_python_backend_utils as pb_utils

HOLD = {hold}


class TritonPythonModel:
    def initialize(self, args):
        cuda = ctypes.CDLL("libcuda.so.1")

        def ok(r, what):
            if r != 0:
                raise RuntimeError(f"{{what}} failed: CUresult {{r}}")

        ok(cuda.cuInit(0), "cuInit")
        dev = ctypes.c_int()
        ok(cuda.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
        self.ctx = ctypes.c_void_p()
        ok(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(self.ctx), dev), "cuDevicePrimaryCtxRetain")
        ok(cuda.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")
        self.ptr = ctypes.c_uint64()
        ok(cuda.cuMemAlloc_v2(ctypes.byref(self.ptr), ctypes.c_size_t(HOLD)), "cuMemAlloc")
        ok(cuda.cuMemsetD8_v2(self.ptr, ctypes.c_ubyte(1), ctypes.c_size_t(HOLD)), "cuMemsetD8")

    def execute(self, requests):
        return [pb_utils.InferenceResponse(output_tensors=[
            pb_utils.Tensor("y", pb_utils.get_input_tensor_by_name(r, "x").as_numpy())]) for r in requests]
'''

CONFIG = """name: "{name}"
backend: "python"
max_batch_size: 0
input [ {{ name: "x", data_type: TYPE_FP32, dims: [ 1 ] }} ]
output [ {{ name: "y", data_type: TYPE_FP32, dims: [ 1 ] }} ]
instance_group [ {{ count: 1, kind: KIND_CPU }} ]
"""

Figures = dict[tuple[str, str, str], float]


class Check:
    def __init__(self, base: str) -> None:
        self.base = base
        self.failures: list[str] = []

    def figures(self) -> Figures:
        try:
            text = httpx.get(f"{self.base}/metrics", timeout=5).text
        except httpx.HTTPError:
            return {}
        return {
            (s.labels["model"], s.labels["version"], s.labels["method"]): s.value
            for fam in text_string_to_metric_families(text)
            if fam.name == "sidecar_model_gpu_memory_bytes"
            for s in fam.samples
        }

    def wait_for(self, what: str, ok: Callable[[Figures], bool], timeout_s: float = 90.0) -> Figures:
        deadline = time.monotonic() + timeout_s
        got: Figures = {}
        while time.monotonic() < deadline:
            got = self.figures()
            if ok(got):
                print(f"   ok: {what}")
                break
            time.sleep(1)
        else:
            self.failures.append(what)
            print(f"   FAILED: {what}")
        print("   figures (MiB):", {"/".join(k): round(v / 2**20, 1) for k, v in sorted(got.items())})
        return got


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hold-mib", type=int, default=256)
    args = ap.parse_args()
    hold = args.hold_mib * 1024 * 1024
    try:
        triton_home()
    except TritonNotAvailable as exc:
        print(f"== skipped: {exc}")
        return 4
    work = Path(tempfile.mkdtemp(prefix="gpu-memory-check-"))
    repo = work / "models"
    for name in ("gpu_hold", "gpu_late"):
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "config.pbtxt").write_text(CONFIG.format(name=name))
        (repo / name / "1" / "model.py").write_text(MODEL.format(hold=hold))
    triton = TritonServer(repo, work / "triton", model_control_explicit=True, load_models=["gpu_hold"])
    port = free_port()
    cfg = {
        "server": {"host": "127.0.0.1", "port": port},
        "store": {"path": str(work / "sidecar.sqlite")},
        "triton": {"http_url": triton.http_url, "metrics_url": triton.metrics_url},
        "traces": {"enabled": False},
        "gpu": {"enabled": True, "stale_after_secs": 10, "nvml": {"interval_secs": 1}},
        "alerting": {"changes": {"poll_interval_secs": 2}},
        "diagnose": {"interval_secs": 5},
    }
    (work / "sidecar.yaml").write_text(json.dumps(cfg))  # JSON is YAML
    check = Check(f"http://127.0.0.1:{port}")
    sidecar: subprocess.Popen[bytes] | None = None
    try:
        triton.start()
        with open(work / "sidecar.log", "wb") as log:
            sidecar = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    "import sys; from sidecar.cli import main; sys.exit(main())",
                    "run",
                    "--config",
                    str(work / "sidecar.yaml"),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        print(f"== Triton {triton.http_url}, sidecar {check.base}, each stub holds {args.hold_mib} MiB; in {work}")
        check.wait_for(
            f"process figure of gpu_hold v1 >= {args.hold_mib} MiB",
            lambda f: f.get(("gpu_hold", "1", "process"), 0) >= hold,
        )
        if shutil.which("nvidia-smi"):
            subprocess.run(
                ["nvidia-smi", "--query-compute-apps=pid,process_name,used_memory", "--format=csv"], check=False
            )
        time.sleep(5)  # more than one repository poll and several NVML samples: a clean reading before the load
        httpx.post(f"{triton.http_url}/v2/repository/models/gpu_late/load", timeout=120).raise_for_status()
        check.wait_for(
            f"load_delta figure of gpu_late v1 >= {args.hold_mib} MiB",
            lambda f: f.get(("gpu_late", "1", "load_delta"), 0) >= hold,
        )
        check.wait_for(
            f"process figure of gpu_late v1 >= {args.hold_mib} MiB",
            lambda f: f.get(("gpu_late", "1", "process"), 0) >= hold,
        )
        httpx.post(f"{triton.http_url}/v2/repository/models/gpu_late/unload", timeout=120).raise_for_status()
        check.wait_for("no figure of gpu_late after its unload", lambda f: not any(k[0] == "gpu_late" for k in f))
        text = httpx.get(f"{check.base}/metrics", timeout=5).text
        for line in text.splitlines():
            if line.startswith(("sidecar_gpu_process_cmdline_failures", "sidecar_model_gpu_memory_refused")):
                print("  ", line)
    except Exception as exc:
        check.failures.append(repr(exc))
        print("   FAILED:", repr(exc))
        print(triton.log_tail())
    finally:
        if sidecar is not None:
            sidecar.terminate()
            sidecar.wait(30)
        triton.stop()
    if check.failures:
        if sidecar is not None:
            tail = (work / "sidecar.log").read_text(errors="replace").splitlines()[-30:]
            print("== sidecar log tail:\n" + "\n".join(tail))
        print(f"== per-model GPU memory: {len(check.failures)} check(s) failed")
        return 5
    print("== per-model GPU memory: every check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
