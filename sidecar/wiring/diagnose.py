"""Builds the diagnoses (the probe-and-rules check, fed the span feed on the bus), the per-model GPU memory
attribution it feeds, and the webhooks findings call."""

from __future__ import annotations

from typing import Any

from exporters.webhook import WebhookExporter
from sidecar.component import Context
from sidecar.diagnose.runner import Diagnoser
from sidecar.processors.gpu_memory import GpuMemoryByModel
from sidecar.wiring.span_subs import subscribe_spans

__all__ = ["build"]


def build(ctx: Context) -> list[Any]:
    cfg = ctx.config
    out: list[Any] = [
        WebhookExporter(
            w, registry=ctx.registry, clock=ctx.clock, http=ctx.http, logger=ctx.logger.getChild(f"webhook.{w.name}")
        )
        for w in cfg.webhooks
    ]
    if not cfg.diagnose.enabled or not cfg.triton.enabled:
        return out
    # GPU memory per model: load/unload changes and the NVML source's readings (memory used per GPU, compute
    # processes joined to their command lines) from the bus; memory_usage from Triton's statistics and the
    # memory used per GPU Triton reports, both read with each probe.
    # The poller sees a version up to one poll interval after its load began: the reading before is looked up
    # that far back.
    changes = cfg.alerting.changes
    memory = GpuMemoryByModel(
        ctx.registry,
        max_models=cfg.diagnose.max_models,
        clock=ctx.clock,
        lookback_secs=changes.poll_interval_secs if changes.poll_repository else 0.0,
    )
    ctx.bus.subscribe("changes", "gpu_memory", memory.on_changes)
    ctx.bus.subscribe("gpu_memory", "gpu_memory", memory.on_samples)
    traces = cfg.traces
    spans_expected = traces.enabled and (traces.receiver_enabled or traces.file.path is not None)
    diag = Diagnoser(
        cfg.diagnose,
        metrics_url=cfg.triton.metrics_url,
        http_url=cfg.triton.http_url,
        spans_expected=spans_expected,
        registry=ctx.registry,
        clock=ctx.clock,
        http=ctx.http,
        logger=ctx.logger.getChild("diagnose"),
        on_stats=memory.observe_stats,
        on_gpu_memory=memory.observe_memory,
    )
    # It only notes that spans came: a batch of requests says so as well as their spans.
    subscribe_spans(ctx.bus, diag.name, diag.on_spans, requests=diag.on_spans)
    return [*out, diag]
