"""Builds the model probe (``probes:``) and the actions layer (``actions:``): the probe's client is the official
``tritonclient`` at ``probes.url`` (default: ``triton.http_url``'s host and port), the layer's model control
the same client's HTTP flavour at ``actions.triton_url`` (default ``triton.http_url``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sidecar.actions.control import TritonModelControl, post_webhook
from sidecar.actions.layer import ActionLayer
from sidecar.checks.probe.check import ModelProbe
from sidecar.checks.probe.client import TritonProbeClient
from sidecar.component import Context
from sidecar.probe_marker import ProbeLedger
from sidecar.wiring.triton import build as build_triton

__all__ = ["build", "factories"]

Factory = Callable[[Context], list[Any]]


def factories() -> tuple[Factory, Factory]:
    """(Triton builder, probe and actions builder): with the probe and the Triton source both on, the first makes
    the probe's ledger and hands it to the SLI deriver (which takes the probe's requests out of Triton's
    counters), the second hands it to the probe, which records into it. One pair per Service."""
    made: list[ProbeLedger] = []

    def triton(ctx: Context) -> list[Any]:
        made.clear()
        if ctx.config.probes.enabled and ctx.config.triton.enabled:
            made.append(ProbeLedger())
        return build_triton(ctx, probe_ledger=made[0] if made else None)

    def actions(ctx: Context) -> list[Any]:
        return build(ctx, ledger=made[0] if made else None)

    return triton, actions


def build(ctx: Context, ledger: ProbeLedger | None = None) -> list[Any]:
    """The probe, then the layer (in that order: the probe's findings reach the layer in the same round). The
    layer is made first so the probe can take its read-only view of the holds: a version a revert unloaded is
    not probed while the hold lasts."""
    probes, actions = ctx.config.probes, ctx.config.actions
    triton_url = ctx.config.triton.http_url
    layer: ActionLayer | None = None
    if actions.enabled:
        control_url = actions.triton_url or triton_url
        if control_url is None:
            ctx.logger.warning("actions: no Triton URL (actions.triton_url or triton.http_url): every action fails")
        layer = ActionLayer(
            actions,
            control=TritonModelControl(control_url, timeout_secs=actions.timeout_secs) if control_url else None,
            bus=ctx.bus,
            registry=ctx.registry,
            clock=ctx.clock,
            logger=ctx.logger.getChild("actions"),
            webhook=post_webhook(ctx.http),
            guard=ctx.guard,
            store=ctx.store,
        )
    out: list[Any] = []
    if probes.enabled:
        url = probes.url or (triton_url if probes.protocol == "http" else None)
        if url is None:
            ctx.logger.warning("probes: no url (probes.url, or triton.http_url for protocol http): no probe runs")
        else:
            client = TritonProbeClient(url, protocol=probes.protocol)
            out.append(
                ModelProbe(
                    probes,
                    client=client,
                    registry=ctx.registry,
                    clock=ctx.clock,
                    logger=ctx.logger.getChild("probe"),
                    ledger=ledger,
                    holds=layer,
                )
            )
    if layer is not None:
        out.append(layer)
    return out
