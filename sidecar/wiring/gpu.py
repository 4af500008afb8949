"""Builds the GPU area: the sources (publishing GPU snapshots on the bus), and the GPU state that subscribes,
exports them and publishes the merged GPU identities.

``factory`` takes the NVML library and the /proc readers so a test can build the real wiring around a stand-in
(there is no GPU in CI); ``build`` is the factory the service uses.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pynvml

from sidecar.component import Context
from sidecar.sources.gpu.dcgm import DcgmSource
from sidecar.sources.gpu.nvml import NvmlSource
from sidecar.sources.gpu.nvml_calls import read_cmdline, read_process_name
from sidecar.sources.gpu.publisher import BusGpuSink
from sidecar.state.gpus import GpuHub

__all__ = ["build", "factory"]


def factory(
    *,
    nvml: Any = pynvml,
    cmdline: Callable[[int], bytes] = read_cmdline,
    process_name: Callable[[int], str | None] = read_process_name,
) -> Callable[[Context], list[Any]]:
    def build(ctx: Context) -> list[Any]:
        cfg = ctx.config.gpu
        if not cfg.enabled or not (cfg.nvml.enabled or cfg.dcgm.enabled):
            return []
        log = ctx.logger.getChild("gpu")
        hub = GpuHub(
            registry=ctx.registry,
            clock=ctx.clock,
            max_series=cfg.max_series,
            stale_after_secs=cfg.stale_after_secs,
            logger=log,
            bus=ctx.bus,
        )
        ctx.bus.subscribe("gpu_snapshots", hub.name, hub.on_samples)
        sink = BusGpuSink(ctx.bus, ctx.clock)  # the sources publish; the GPU state subscribes
        out: list[Any] = [hub]
        if cfg.nvml.enabled:
            # It also publishes a GpuMemoryReading per sample (kind gpu_memory), which the per-model GPU memory
            # (wiring/diagnose.py) subscribes to.
            out.append(
                NvmlSource(
                    cfg.nvml,
                    hub=sink,
                    registry=ctx.registry,
                    clock=ctx.clock,
                    nvml=nvml,
                    cmdline=cmdline,
                    process_name=process_name,
                    logger=log.getChild("nvml"),
                )
            )
        if cfg.dcgm.enabled:
            out.append(
                DcgmSource(
                    cfg.dcgm,
                    hub=sink,
                    registry=ctx.registry,
                    clock=ctx.clock,
                    http=ctx.http,
                    logger=log.getChild("dcgm"),
                )
            )
        return out

    return build


build = factory()
