"""GPU memory per model version from a recorded process table (real Triton 2.51 stub command lines), load
deltas around repository-index changes, and Triton's memory_usage statistics; each figure names its method."""

from __future__ import annotations

import json

from prometheus_client import CollectorRegistry

from sidecar.model import Batch, Change
from sidecar.processors.gpu_memory import GpuMemoryByModel, ProcessRow, parse_stub, stats_gpu_bytes
from tests.conftest import DATA

TABLE = json.loads((DATA / "gpu" / "process_tables" / "triton-2.51-demo-python-stubs.json").read_text())
MIB = 1024 * 1024


def rows(table: dict[str, object] = TABLE) -> list[ProcessRow]:
    cmd = {p["pid"]: p["cmdline"] for p in table["processes"]}  # type: ignore[index, union-attr]
    return [
        ProcessRow(r["gpu_uuid"], r["pid"], r["used_bytes"], cmd.get(r["pid"], ()))  # type: ignore[index]
        for r in table["nvml"]
    ]  # type: ignore[union-attr]


def gauge(registry: CollectorRegistry, model: str, version: str, method: str) -> float | None:
    return registry.get_sample_value(
        "sidecar_model_gpu_memory_bytes", {"model": model, "version": version, "method": method}
    )


def test_stub_command_lines_name_model_version_and_instance() -> None:
    by_pid = {p["pid"]: p["cmdline"] for p in TABLE["processes"]}
    assert parse_stub(by_pid[8627]).__dict__ == {"model": "fraud", "version": "1", "instance": "fraud_0_0"}
    assert parse_stub(by_pid[8628]).__dict__ == {"model": "ctr", "version": "2", "instance": "ctr_0_0"}
    assert parse_stub(by_pid[8580]) is None  # tritonserver itself: its memory cannot be split this way
    assert parse_stub(["python", "train.py"]) is None


def test_process_method_attributes_each_stub_and_leaves_the_rest_out(registry: CollectorRegistry) -> None:
    mem = GpuMemoryByModel(registry)
    mem.observe_processes(rows())
    assert mem.figures()["process"] == {("ctr", "1"): 512 * MIB, ("ctr", "2"): 768 * MIB, ("fraud", "1"): 256 * MIB}
    assert gauge(registry, "ctr", "2", "process") == 768 * MIB
    assert gauge(registry, "ctr", "2", "load_delta") is None


def test_two_instances_of_one_version_are_summed(registry: CollectorRegistry) -> None:
    table = json.loads(json.dumps(TABLE))
    second = json.loads(json.dumps(next(p for p in table["processes"] if p["pid"] == 8627)))
    second["pid"], second["cmdline"][8] = 8700, "fraud_0_1"
    table["processes"].append(second)
    table["nvml"].append({"gpu_uuid": "GPU-77b2", "pid": 8700, "used_bytes": 300 * MIB})
    mem = GpuMemoryByModel(registry)
    mem.observe_processes(rows(table))
    assert mem.figures()["process"][("fraud", "1")] == 556 * MIB


def _change(what: str, model: str, version: str) -> Batch:
    return Batch(
        kind="changes",
        source="changes",
        items=(
            Change(
                what=f"version {version} {what} in Triton",
                at=0.0,
                model=model,
                version=version,
                source="triton_repository",
            ),
        ),
    )


def test_load_delta_is_the_memory_a_single_load_added(registry: CollectorRegistry) -> None:
    mem = GpuMemoryByModel(registry)
    mem.observe_memory({"GPU-4a1c": 2000 * MIB})
    mem.on_changes(_change("appeared", "rank", "3"))
    mem.observe_memory({"GPU-4a1c": 2900 * MIB})
    assert gauge(registry, "rank", "3", "load_delta") == 900 * MIB
    mem.on_changes(_change("disappeared", "rank", "3"))
    assert gauge(registry, "rank", "3", "load_delta") is None


def test_a_gpu_absent_from_one_of_the_two_readings_is_left_out_of_the_delta(registry: CollectorRegistry) -> None:
    # NVML reads every GPU; Triton's nv_gpu_memory_used_bytes only those it was given. A load between an NVML
    # reading and a Triton one must not count the GPU Triton does not see as emptied.
    mem = GpuMemoryByModel(registry)
    mem.observe_memory({"GPU-4a1c": 2000 * MIB, "GPU-77b0": 30000 * MIB})
    mem.on_changes(_change("appeared", "rank", "3"))
    mem.observe_memory({"GPU-4a1c": 2900 * MIB})
    assert gauge(registry, "rank", "3", "load_delta") == 900 * MIB


def test_two_loads_between_readings_are_ambiguous_and_counted(registry: CollectorRegistry) -> None:
    mem = GpuMemoryByModel(registry)
    mem.observe_memory({"GPU-4a1c": 2000 * MIB})
    mem.on_changes(_change("appeared", "rank", "3"))
    mem.on_changes(_change("appeared", "ctr", "3"))
    mem.observe_memory({"GPU-4a1c": 2900 * MIB})
    assert mem.figures()["load_delta"] == {}
    assert registry.get_sample_value("sidecar_model_gpu_memory_refused_total", {"reason": "ambiguous_delta"}) == 2


def test_changes_from_elsewhere_are_not_loads(registry: CollectorRegistry) -> None:
    mem = GpuMemoryByModel(registry)
    mem.observe_memory({"GPU-4a1c": 2000 * MIB})
    mem.on_changes(
        Batch(
            kind="changes",
            source="api",
            items=(Change(what="feature PR#221", at=0.0, model="rank", version="3", source="api"),),
        )
    )
    mem.observe_memory({"GPU-4a1c": 2900 * MIB})
    assert mem.figures()["load_delta"] == {}


def test_triton_memory_usage_statistics(registry: CollectorRegistry) -> None:
    body = {
        "model_stats": [
            {
                "name": "rank",
                "version": "3",
                "memory_usage": [
                    {"type": "GPU", "id": 0, "byte_size": 400 * MIB},
                    {"type": "GPU", "id": 1, "byte_size": 100 * MIB},
                    {"type": "CPU", "id": 0, "byte_size": 999},
                ],
            },
            {"name": "ctr", "version": "1", "memory_usage": []},
            {"name": "fraud", "version": "1"},
        ]
    }
    assert stats_gpu_bytes(body) == {("rank", "3"): 500 * MIB}
    assert stats_gpu_bytes({"error": "x"}) == {}
    mem = GpuMemoryByModel(registry)
    mem.observe_stats(body)
    assert gauge(registry, "rank", "3", "triton_stats") == 500 * MIB


def test_figures_are_bounded_and_refusals_counted(registry: CollectorRegistry) -> None:
    mem = GpuMemoryByModel(registry, max_models=2)
    mem.observe_processes(rows())
    assert len(mem.figures()["process"]) == 2
    assert registry.get_sample_value("sidecar_model_gpu_memory_refused_total", {"reason": "max_models"}) == 1
