"""Builds the Triton verdicts (cold-start watch, batching advisor, tracing governor) and the model-API poller."""

from __future__ import annotations

from typing import Any

from sidecar.checks.batching.check import BatchingAdvisor
from sidecar.checks.cold_start.check import ColdStartWatch
from sidecar.checks.tracing_governor.check import TracingGovernor
from sidecar.component import Context
from sidecar.sources.triton_model_api import SOURCE as MODEL_API
from sidecar.sources.triton_model_api import TritonModelApiSource
from sidecar.sources.triton_trace_control import TritonTraceControl

__all__ = ["build"]


def build(ctx: Context) -> list[Any]:
    checks = ctx.config.checks
    url = ctx.config.triton.http_url
    out: list[Any] = []
    if checks.cold_start.enabled:
        cold = ColdStartWatch(checks.cold_start, registry=ctx.registry)
        ctx.bus.subscribe("samples", cold.name, cold.observe, source=MODEL_API)
        out.append(cold)
    if checks.batching.enabled:
        advisor = BatchingAdvisor(checks.batching, registry=ctx.registry)
        ctx.bus.subscribe("samples", advisor.name, advisor.observe, source=MODEL_API)
        out.append(advisor)
    model_api = bool(out)
    if checks.tracing_governor.enabled and url:
        control = TritonTraceControl(url, ctx.http)
        out.append(
            TracingGovernor(
                checks.tracing_governor,
                control=control,
                bus=ctx.bus,
                registry=ctx.registry,
                clock=ctx.clock,
                logger=ctx.logger.getChild("tracing_governor"),
            )
        )
    if (model_api or checks.tracing_governor.enabled) and not url:
        ctx.logger.warning(
            "checks.cold_start, checks.batching and checks.tracing_governor need triton.http_url; "
            "it is null, so they receive nothing"
        )
    if model_api and url:
        api = checks.model_api
        out.append(
            TritonModelApiSource(
                triton_http_url=url,
                interval_secs=api.interval_secs,
                timeout_secs=api.timeout_secs,
                max_models=api.max_models,
                config_refresh_secs=checks.batching.config_refresh_secs,
                registry=ctx.registry,
                clock=ctx.clock,
                http=ctx.http,
                bus=ctx.bus,
                logger=ctx.logger.getChild("triton_model_api"),
            )
        )
    return out
