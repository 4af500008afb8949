"""Builds the GPU area: the sources (publishing GPU snapshots on the bus), and the GPU state that subscribes,
exports them and publishes the merged GPU identities."""

from __future__ import annotations

from typing import Any

from sidecar.component import Context
from sidecar.sources.gpu.dcgm import DcgmSource
from sidecar.sources.gpu.nvml import NvmlSource
from sidecar.sources.gpu.publisher import BusGpuSink
from sidecar.state.gpus import GpuHub

__all__ = ["build"]


def build(ctx: Context) -> list[Any]:
    cfg = ctx.config.gpu
    if not cfg.enabled or not (cfg.nvml.enabled or cfg.dcgm.enabled):
        return []
    log = ctx.logger.getChild("gpu")
    hub = GpuHub(
        ctx.registry, ctx.clock, max_series=cfg.max_series, stale_after_secs=cfg.stale_after_secs, logger=log,
        bus=ctx.bus,
    )
    ctx.bus.subscribe("samples", hub.name, hub.on_samples)
    sink = BusGpuSink(ctx.bus, ctx.clock)  # the sources publish; the GPU state subscribes
    out: list[Any] = [hub]
    if cfg.nvml.enabled:
        out.append(NvmlSource(cfg.nvml, sink, ctx.registry, ctx.clock, logger=log.getChild("nvml")))
    if cfg.dcgm.enabled:
        out.append(DcgmSource(cfg.dcgm, sink, ctx.registry, ctx.clock, ctx.http, logger=log.getChild("dcgm")))
    return out
