"""Shared helpers for the traces tests (imported by module name; pytest's rootdir import mode)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from app_server import AppServer
from prometheus_client import CollectorRegistry
from waiting import wait_until

from sidecar.app import create_app
from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.service import Service
from sidecar.wiring.traces import build

DATA = Path(__file__).parent.parent / "data" / "traces"


def make_service(
    traces: dict[str, Any] | None = None,
    server: dict[str, Any] | None = None,
    clock: FakeClock | None = None,
    registry: CollectorRegistry | None = None,
) -> Service:
    cfg = parse_config(
        {"store": {"path": ":memory:"}, "server": server or {}, "traces": {"enabled": True, **(traces or {})}}
    )
    return Service(cfg, clock=clock or FakeClock(), registry=registry or CollectorRegistry(), factories=[build])


def sample(registry: CollectorRegistry, name: str, labels: dict[str, str] | None = None) -> float:
    v = registry.get_sample_value(name, labels or {})
    return 0.0 if v is None else v


@contextlib.contextmanager
def live_sidecar(
    traces: dict[str, Any] | None = None,
    registry: CollectorRegistry | None = None,
    **uvicorn_options: Any,
) -> Iterator[tuple[str, Service]]:
    """The real app under uvicorn in a thread on a free loopback port; stopped even when the test fails.
    ``uvicorn_options`` go to ``uvicorn.Config`` (e.g. ``timeout_keep_alive``)."""
    svc = Service(
        parse_config({"store": {"path": ":memory:"}, "traces": {"enabled": True, **(traces or {})}}),
        registry=registry or CollectorRegistry(),
        factories=[build],
    )
    with AppServer(create_app(svc), lifespan="on", **uvicorn_options) as url:
        yield url, svc


def wait_for(cond: Callable[[], bool], secs: float) -> bool:
    """Poll a condition until a deadline (for real processes that work at their own pace)."""
    return bool(wait_until(cond, secs))


def store_and_stage_samples(registry: CollectorRegistry) -> list[tuple[str, dict[str, str], float, Any]]:
    """Every sample of the trace store's and the stage histograms' metrics (name, labels, value, exemplar), for
    comparing two hubs; the hub's own counters (spans ingested, expiry errors) were never the store's or the
    histograms', and ``_created`` times differ between any two runs."""
    return [
        (s.name, s.labels, s.value, s.exemplar)
        for fam in registry.collect()
        if fam.name.startswith(("sidecar_triton_stage", "sidecar_traces"))
        for s in fam.samples
        if not s.name.endswith("_created")
        and not s.name.startswith(("sidecar_traces_spans_ingested", "sidecar_traces_expiry"))
    ]
