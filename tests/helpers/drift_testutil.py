"""Helpers for the drift and events tests: a Context built on a fake clock, a fresh registry and a store."""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import numpy as np
from prometheus_client import CollectorRegistry

from sidecar.clock import FakeClock
from sidecar.component import Bus, Context
from sidecar.config import parse_config
from sidecar.httpguard import RequestGuard
from sidecar.model import Batch, Event
from sidecar.store import Store
from sidecar.wiring.drift import drift_check

if TYPE_CHECKING:
    from sidecar.checks.drift.check import DriftCheck

DATA = Path(__file__).parent.parent / "data" / "drift"


def make_ctx(
    store_path: str | Path,
    clock: FakeClock,
    config: Mapping[str, Any] | None = None,
    registry: CollectorRegistry | None = None,
    max_body_bytes: int = 1 << 20,
) -> Context:
    cfg = parse_config(dict(config or {}))
    reg = registry or CollectorRegistry()

    def _no_network(request: httpx.Request) -> httpx.Response:
        return httpx.Response(599)

    return Context(
        config=cfg,
        registry=reg,
        clock=clock,
        http=httpx.AsyncClient(transport=httpx.MockTransport(_no_network)),
        store=Store(store_path),
        bus=Bus(reg),
        guard=RequestGuard(
            reg, max_body_bytes=max_body_bytes, admin_token=cfg.server.admin_token, push_token=cfg.server.push_token
        ),
    )


_BUILT: weakref.WeakKeyDictionary[Any, Context] = weakref.WeakKeyDictionary()


def built_check(ctx: Context) -> DriftCheck:
    """The drift check the wiring builds from ``ctx`` (subscribed to its bus); ``ctx_of`` gives ``ctx`` back."""
    check = drift_check(ctx)
    _BUILT[check] = ctx
    return check


def ctx_of(check: DriftCheck) -> Context:
    """The context ``built_check`` built ``check`` from (its registry, store, bus and clock)."""
    return _BUILT[check]


def events(model: str, version: str, ts: float, features: Iterable[Mapping[str, Any]]) -> Batch:
    return Batch(
        kind="events",
        source="test",
        items=tuple(Event(model=model, version=version, timestamp=ts, features=dict(f)) for f in features),
    )


def feed(check: Any, clock: FakeClock, model: str, version: str, rows: list[dict[str, Any]], per_sec: int) -> None:
    """Feed rows at ``per_sec`` events per second of fake time."""
    for i in range(0, len(rows), per_sec):
        check.observe(events(model, version, clock.now(), rows[i : i + per_sec]))
        clock.advance(1.0)


def normal_rows(
    rng: np.random.Generator,
    n: int,
    names: Iterable[str],
    loc: Mapping[str, float] | None = None,
    scale: Mapping[str, float] | None = None,
) -> list[dict[str, Any]]:
    names = list(names)
    loc = loc or {}
    scale = scale or {}
    cols = {f: rng.normal(loc.get(f, 0.0), scale.get(f, 1.0), size=n) for f in names}
    return [{f: float(cols[f][i]) for f in names} for i in range(n)]


def metric(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)
