"""Builds the Triton metrics source and the processor that derives SLIs from its scrapes."""

from __future__ import annotations

import logging
from typing import Any

import httpx
from prometheus_client import CollectorRegistry

from sidecar.clock import Clock
from sidecar.component import Bus, Context
from sidecar.probe_marker import ProbeLedger
from sidecar.processors.triton_series import TritonSeries
from sidecar.sources.triton_config import TritonConfig
from sidecar.sources.triton_metrics import TritonMetricsSource

__all__ = ["build", "triton_pair"]


def triton_pair(
    cfg: TritonConfig,
    *,
    registry: CollectorRegistry,
    clock: Clock,
    http: httpx.AsyncClient,
    bus: Bus,
    logger: logging.Logger | None = None,
    probe_ledger: ProbeLedger | None = None,
) -> tuple[TritonSeries, TritonMetricsSource]:
    """The source and its deriver, connected over ``bus`` (the deriver takes only the source's scrapes); with
    ``probe_ledger`` (the model probe's), the probe's requests are taken out of the SLIs."""
    log = logger or logging.getLogger("sidecar")
    series = TritonSeries(
        registry=registry,
        clock=clock,
        ratio_window_secs=cfg.ratio_window_secs,
        max_models=cfg.max_models,
        stale_after_secs=cfg.stale_after_secs,
        source=TritonMetricsSource.name,
        logger=log.getChild("triton_series"),
        probe_ledger=probe_ledger,
    )
    bus.subscribe("scrapes", series.name, series.on_samples, source=TritonMetricsSource.name)
    bus.subscribe("gpus", series.name, series.on_gpus)
    source = TritonMetricsSource(cfg, registry=registry, clock=clock, http=http, bus=bus, logger=log.getChild("triton"))
    return series, source


def build(ctx: Context, probe_ledger: ProbeLedger | None = None) -> list[Any]:
    cfg = ctx.config.triton
    if not cfg.enabled:
        return []
    return list(
        triton_pair(
            cfg,
            registry=ctx.registry,
            clock=ctx.clock,
            http=ctx.http,
            bus=ctx.bus,
            logger=ctx.logger,
            probe_ledger=probe_ledger,
        )
    )
