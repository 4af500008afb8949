"""Builds the verdict checks (canary comparison, output sanity) and subscribes them to the bus."""

from __future__ import annotations

from typing import Any

from sidecar.checks.canary.check import CanaryCheck
from sidecar.checks.output_sanity.check import OutputSanityCheck
from sidecar.component import Context
from sidecar.sources.triton_metrics import TritonMetricsSource
from sidecar.wiring.event_subs import subscribe_events
from sidecar.wiring.span_subs import subscribe_spans

__all__ = ["build"]


def build(ctx: Context) -> list[Any]:
    out: list[Any] = []
    cfg = ctx.config.checks.canary
    if cfg.enabled:
        triton = cfg.triton and ctx.config.triton.enabled
        comp = CanaryCheck(
            cfg,
            registry=ctx.registry,
            clock=ctx.clock,
            logger=ctx.logger.getChild("canary"),
            triton_source=TritonMetricsSource.name if triton else None,
        )
        subscribe_events(ctx.bus, comp.name, comp.observe)
        if cfg.spans:
            subscribe_spans(ctx.bus, comp.name, comp.observe, requests=comp.observe)
        if triton:
            ctx.bus.subscribe("scrapes", comp.name, comp.observe, source=TritonMetricsSource.name)
        out.append(comp)
    sanity_cfg = ctx.config.checks.output_sanity
    if sanity_cfg.enabled:
        sanity = OutputSanityCheck(
            sanity_cfg, registry=ctx.registry, clock=ctx.clock, logger=ctx.logger.getChild("output_sanity")
        )
        subscribe_events(ctx.bus, sanity.name, sanity.observe)
        out.append(sanity)
    return out
