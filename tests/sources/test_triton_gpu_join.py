"""Triton's nv_gpu_* series (derived by processors/triton_series.py) are joined to the GPU sources' view
through the bus (kind "gpus"), not by looking the GPU state up: the GPU state publishes its merged identities
after every snapshot, NVML winning."""

from __future__ import annotations

import httpx
from prometheus_client import CollectorRegistry

from sidecar.clock import FakeClock
from sidecar.component import Bus
from sidecar.sources.triton_config import TritonConfig
from sidecar.state.gpus import GpuHub, GpuIdentity
from sidecar.wiring.triton import triton_pair


def test_the_triton_source_learns_gpu_identities_from_the_bus() -> None:
    reg, clock = CollectorRegistry(), FakeClock()
    bus = Bus(reg)
    triton, _ = triton_pair(
        TritonConfig(),
        registry=reg,
        clock=clock,
        bus=bus,
        http=httpx.AsyncClient(transport=httpx.MockTransport(lambda r: httpx.Response(404))),
    )
    hub = GpuHub(registry=reg, clock=clock, max_series=100, stale_after_secs=60, bus=bus)
    assert triton.gpu_labels() == {}

    hub.publish("dcgm", [], {"GPU-1": GpuIdentity("3", "from dcgm"), "GPU-2": GpuIdentity("1", "A100")}, visible=2)
    hub.publish("nvml", [], {"GPU-1": GpuIdentity("0", "H100")}, visible=1)
    assert triton.gpu_labels() == {
        "GPU-1": {"index": "0", "name": "H100", "source": "nvml"},
        "GPU-2": {"index": "1", "name": "A100", "source": "dcgm"},
    }
    assert reg.get_sample_value("sidecar_bus_items_total", {"kind": "gpus", "source": "gpu"}) == 4
