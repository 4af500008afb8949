"""Shared builders for the alerting tests (imported by test modules; no fixtures here)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import httpx
from prometheus_client import CollectorRegistry

from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.model import Batch, Event
from sidecar.service import Service
from sidecar.store import Store
from sidecar.wiring.alerting import build as alerting_build
from sidecar.wiring.business import build as business_build

DATA = Path(__file__).resolve().parents[1] / "data" / "alerting"


def make_service(
    tmp_path: Path,
    cfg: dict[str, Any],
    *,
    clock: FakeClock | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    store: Store | None = None,
    registry: CollectorRegistry | None = None,
) -> Service:
    config = parse_config(copy.deepcopy(cfg))
    http = httpx.AsyncClient(transport=transport or httpx.MockTransport(lambda r: httpx.Response(200)))
    return Service(
        config,
        clock=clock or FakeClock(),
        http=http,
        registry=registry or CollectorRegistry(),
        store=store or Store(tmp_path / "state.sqlite"),
        factories=[alerting_build, business_build],
    )


def events(model: str, version: str, ts: float, scores: list[float], **fields: float) -> Batch:
    return Batch(
        kind="events",
        source="test",
        items=tuple(Event(model=model, version=version, timestamp=ts, score=s, fields=dict(fields)) for s in scores),
    )
