"""GPU memory per model, live in a Service: the real GPU and diagnose wiring around the NVML stand-in
(tests/helpers/gpu_fake_nvml.py) and a /proc stand-in holding the recorded command lines of a real Triton 2.51's
processes. The ``process`` and ``load_delta`` figures must reach /metrics from NVML samples alone."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pynvml
from fastapi.testclient import TestClient
from gpu_fake_nvml import FakeGpu, FakeNvml, FakeProc
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from sidecar.app import create_app
from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.model import Batch, Change
from sidecar.service import Service
from sidecar.store import Store
from sidecar.wiring.diagnose import build as diagnose_build
from sidecar.wiring.gpu import factory as gpu_factory
from tests.conftest import DATA

MIB = 1024 * 1024
UUID = "GPU-4a1c0000-1111-2222-3333-444455556666"
TABLE = json.loads((DATA / "gpu" / "process_tables" / "triton-2.51-demo-python-stubs.json").read_text())
# /proc/<pid>/cmdline as the kernel gives it: NUL-separated, NUL-terminated.
CMDLINES = {p["pid"]: b"\0".join(a.encode() for a in p["cmdline"]) + b"\0" for p in TABLE["processes"]}
STUB_FRAUD_1, STUB_CTR_1, STUB_CTR_2, TRITON = 8627, 8616, 8628, 8580
GONE = 999  # listed by NVML, ended before /proc was read


def _service(tmp_path: Path, nvml: FakeNvml, proc: FakeProc) -> tuple[Service, CollectorRegistry, FakeClock]:
    clock = FakeClock()
    registry = CollectorRegistry()
    cfg = parse_config({"triton": {"http_url": "http://triton:8000"}, "gpu": {"enabled": True}})
    svc = Service(
        cfg,
        clock=clock,
        registry=registry,
        store=Store(tmp_path / "s.sqlite"),
        http=httpx.AsyncClient(transport=httpx.MockTransport(lambda r: httpx.Response(404))),
        factories=[gpu_factory(nvml=nvml, cmdline=proc, process_name=lambda pid: None), diagnose_build],
    )
    return svc, registry, clock


def _scrape(svc: Service) -> dict[tuple[str, str, str], float]:
    text = TestClient(create_app(svc, manage_lifecycle=False)).get("/metrics").text
    return {
        (s.labels["model"], s.labels["version"], s.labels["method"]): s.value
        for fam in text_string_to_metric_families(text)
        if fam.name == "sidecar_model_gpu_memory_bytes"
        for s in fam.samples
    }


def _load(svc: Service, clock: FakeClock, model: str, version: str) -> None:
    # What the repository-index source publishes when a version turns READY.
    svc.bus.publish(
        Batch(
            kind="changes",
            source="changes",
            items=(
                Change(
                    what=f"version {version} appeared in Triton",
                    at=clock.now(),
                    model=model,
                    version=version,
                    source="triton_repository",
                ),
            ),
        )
    )


def test_stub_processes_and_a_load_between_two_nvml_samples_reach_metrics(tmp_path: Path) -> None:
    gpu = FakeGpu(
        UUID,
        memory=(3000 * MIB, 77000 * MIB, 80000 * MIB),
        processes=[
            (TRITON, 1536 * MIB),
            (STUB_CTR_1, 512 * MIB),
            (STUB_CTR_2, 768 * MIB),
            (STUB_FRAUD_1, 256 * MIB),
            (GONE, 100 * MIB),
        ],
    )
    nvml = FakeNvml([gpu])
    proc = FakeProc(CMDLINES)
    svc, registry, clock = _service(tmp_path, nvml, proc)
    source = svc.component("gpu_nvml")

    source.sample_once()
    assert _scrape(svc) == {
        ("ctr", "1", "process"): 512 * MIB,
        ("ctr", "2", "process"): 768 * MIB,
        ("fraud", "1", "process"): 256 * MIB,
    }
    assert registry.get_sample_value("sidecar_gpu_process_cmdline_failures_total", {"reason": "vanished"}) == 1

    # A version loads (in-process backend: no stub of its own); the next NVML sample sees 700 MiB more used.
    _load(svc, clock, "rank", "3")
    gpu.memory = (3700 * MIB, 76300 * MIB, 80000 * MIB)
    # Pid churn: the fraud stub restarted under a new pid, and the one that ended is still listed by NVML.
    gpu.processes = [
        (TRITON, 2236 * MIB),
        (STUB_CTR_1, 512 * MIB),
        (STUB_CTR_2, 768 * MIB),
        (9001, 300 * MIB),
        (GONE, 100 * MIB),
    ]
    proc.cmdlines[9001] = proc.cmdlines.pop(STUB_FRAUD_1)
    clock.advance(10)
    source.sample_once()
    figures = _scrape(svc)
    assert figures[("rank", "3", "load_delta")] == 700 * MIB
    assert figures[("fraud", "1", "process")] == 300 * MIB  # the new pid's figure, the old one's gone
    assert registry.get_sample_value("sidecar_gpu_process_cmdline_failures_total", {"reason": "vanished"}) == 2


def test_a_process_table_nvml_could_not_read_keeps_the_figures_and_unreadable_pids_are_counted(
    tmp_path: Path,
) -> None:
    gpu = FakeGpu(UUID, processes=[(STUB_FRAUD_1, 256 * MIB), (STUB_CTR_1, 512 * MIB)])
    nvml = FakeNvml([gpu])
    proc = FakeProc(CMDLINES, unreadable=frozenset({STUB_CTR_1}))
    svc, registry, _ = _service(tmp_path, nvml, proc)
    svc.component("gpu_nvml").sample_once()
    assert _scrape(svc) == {("fraud", "1", "process"): 256 * MIB}
    assert registry.get_sample_value("sidecar_gpu_process_cmdline_failures_total", {"reason": "unreadable"}) == 1
    # A failed listing is a partial table: it must not wipe the figures (nor zero them).
    gpu.errors["nvmlDeviceGetComputeRunningProcesses"] = pynvml.NVML_ERROR_NO_PERMISSION
    svc.component("gpu_nvml").sample_once()
    assert _scrape(svc) == {("fraud", "1", "process"): 256 * MIB}


def test_a_driver_without_the_v3_process_call_is_asked_with_v2(tmp_path: Path) -> None:
    nvml = FakeNvml([FakeGpu(UUID, processes=[(STUB_FRAUD_1, 256 * MIB), (STUB_CTR_1, 2**64 - 1)])])
    nvml.v3 = False
    svc, registry, _ = _service(tmp_path, nvml, FakeProc(CMDLINES))
    for _ in range(2):
        svc.component("gpu_nvml").sample_once()
    assert _scrape(svc) == {("fraud", "1", "process"): 256 * MIB}
    assert nvml.calls["nvmlDeviceGetComputeRunningProcesses"] == 1  # not asked again once it failed
    assert nvml.calls["nvmlDeviceGetComputeRunningProcesses_v2"] == 2
    # NVML_VALUE_NOT_AVAILABLE (as a raw value, where the binding does not turn it into None) is no figure
    assert registry.get_sample_value("sidecar_gpu_skipped_total", {"what": "process_memory_unavailable"}) == 2


def test_without_nvml_there_is_no_process_or_load_delta_figure_and_readiness_says_why(tmp_path: Path) -> None:
    nvml = FakeNvml([], init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    svc, _, clock = _service(tmp_path, nvml, FakeProc(CMDLINES))
    svc.component("gpu_nvml").sample_once()
    _load(svc, clock, "rank", "3")
    clock.advance(10)
    svc.component("gpu_nvml").sample_once()
    assert _scrape(svc) == {}
    body = TestClient(create_app(svc, manage_lifecycle=False)).get("/readyz").json()
    assert "NVML unavailable" in json.dumps(body["components"])


def _sample_every_10s(svc: Service, clock: FakeClock, gpu: FakeGpu, used_mib: list[int]) -> None:
    for used in used_mib:
        gpu.memory = (used * MIB, (80000 - used) * MIB, 80000 * MIB)
        svc.component("gpu_nvml").sample_once()
        clock.advance(10)


def test_the_reading_before_a_load_is_from_before_the_poll_that_missed_it(tmp_path: Path) -> None:
    # NVML samples every 10 s, the repository poll every 30 s (the default): the load began at ~5 s, so the
    # samples at 10 and 20 s already hold it; the poll at 30 s is the first to see the version READY.
    gpu = FakeGpu(UUID)
    svc, _, clock = _service(tmp_path, FakeNvml([gpu]), FakeProc(CMDLINES))
    _sample_every_10s(svc, clock, gpu, [2000, 2700, 2700])
    _load(svc, clock, "rank", "3")
    _sample_every_10s(svc, clock, gpu, [2700])
    assert _scrape(svc)[("rank", "3", "load_delta")] == 700 * MIB


def test_another_load_inside_the_window_makes_the_delta_ambiguous(tmp_path: Path) -> None:
    gpu = FakeGpu(UUID)
    svc, registry, clock = _service(tmp_path, FakeNvml([gpu]), FakeProc(CMDLINES))
    _sample_every_10s(svc, clock, gpu, [2000, 2700, 2700])
    _load(svc, clock, "rank", "3")
    _sample_every_10s(svc, clock, gpu, [2700, 2700])
    _load(svc, clock, "ctr", "3")  # its window reaches back over the rank load
    _sample_every_10s(svc, clock, gpu, [3000])
    figures = _scrape(svc)
    assert figures[("rank", "3", "load_delta")] == 700 * MIB
    assert ("ctr", "3", "load_delta") not in figures
    assert registry.get_sample_value("sidecar_model_gpu_memory_refused_total", {"reason": "ambiguous_delta"}) == 1
