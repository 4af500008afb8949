"""Builds one profile-reading source per configured model server (``servers:``), sharing one exporter of their
SLIs and one set of self-telemetry families."""

from __future__ import annotations

from typing import Any

from sidecar.component import Context
from sidecar.sources.servers.export import ServingExport
from sidecar.sources.servers.source import ServerSource
from sidecar.sources.servers.telemetry import ServerTelemetry

__all__ = ["build"]


def build(ctx: Context) -> list[Any]:
    servers = ctx.config.servers
    if not servers:
        return []
    export = ServingExport(ctx.registry)
    telemetry = ServerTelemetry(ctx.registry)
    log = ctx.logger.getChild("server")
    return [
        ServerSource(
            cfg,
            registry=ctx.registry,
            clock=ctx.clock,
            http=ctx.http,
            export=export,
            telemetry=telemetry,
            logger=log.getChild(cfg.name),
        )
        for cfg in servers
    ]
