"""Shared helpers for the traces tests (imported by module name; pytest's rootdir import mode)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.service import Service
from sidecar.traces.factory import build

DATA = Path(__file__).parent.parent / "data" / "traces"


def make_service(traces: dict[str, Any] | None = None, server: dict[str, Any] | None = None,
                 clock: FakeClock | None = None, registry: CollectorRegistry | None = None) -> Service:
    cfg = parse_config({"store": {"path": ":memory:"}, "server": server or {},
                        "traces": {"enabled": True, **(traces or {})}})
    return Service(cfg, clock=clock or FakeClock(), registry=registry or CollectorRegistry(), factories=[build])


def sample(registry: CollectorRegistry, name: str, labels: dict[str, str] | None = None) -> float:
    v = registry.get_sample_value(name, labels or {})
    return 0.0 if v is None else v
