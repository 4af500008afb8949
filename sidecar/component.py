"""The contract every source, check and exporter follows, and the context they are built with.

Lifecycle (the OpenTelemetry Collector's): ``start()`` returns quickly (it may spawn asyncio tasks or threads);
``shutdown()`` is idempotent, safe without ``start()``, and flushes within its deadline. The service starts
components downstream-first and stops them upstream-first.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import httpx
from prometheus_client import CollectorRegistry, Counter

from sidecar.clock import Clock
from sidecar.model import BATCH_KINDS, Batch, BatchKind

if TYPE_CHECKING:
    from fastapi import APIRouter

    from sidecar.config import SidecarConfig
    from sidecar.httpguard import RequestGuard
    from sidecar.store import Store

__all__ = ["START_ORDER", "Bus", "Component", "Context", "Passive", "Readiness", "Role"]


class Role(StrEnum):
    """The closed set of component kinds (the OpenTelemetry Collector's idea): the kind decides the start order
    (``START_ORDER``, downstream first) and which shape a component has (``tests/test_component_shape.py``)."""

    EXPORTER = "exporter"  # ships data out (Alertmanager, audit stores, OTLP forwarding)
    SINK = "sink"  # takes batches or findings and keeps state others read (alert book, change log, pages' state)
    PAGE = "page"  # serves pages only
    CHECK = "check"  # keeps bounded windows, evaluates them into findings
    PROCESSOR = "processor"  # turns batches into derived series
    SOURCE = "source"  # brings data in: scraped, polled, pushed or tailed


# Downstream first: a source never starts before what takes its batches.
START_ORDER: tuple[Role, ...] = (Role.EXPORTER, Role.SINK, Role.PAGE, Role.CHECK, Role.PROCESSOR, Role.SOURCE)


@dataclass(frozen=True)
class Readiness:
    ok: bool
    detail: str = ""


@runtime_checkable
class Component(Protocol):
    name: str
    role: Role

    async def start(self) -> None: ...

    async def shutdown(self) -> None: ...

    def readiness(self) -> Readiness | None:
        """None when this component has no say in /readyz."""

    def routes(self) -> APIRouter | None:
        """HTTP routes this component serves, or None."""


class Passive:
    """The no-op half of ``Component`` for a component with nothing to start or stop, no say in /readyz and no
    routes of its own; it overrides only what it has."""

    async def start(self) -> None:
        return None

    async def shutdown(self) -> None:
        return None

    def readiness(self) -> Readiness | None:
        return None

    def routes(self) -> APIRouter | None:
        return None


class Bus:
    """The one way data moves between components: sources publish frozen batches, components subscribe to the
    kinds they need. Each subscriber is isolated, so one failing never blocks the others; ``publish`` returns
    the names of those that failed, so a push source can answer its client 500 (and be sent the data again)
    instead of acknowledging what was not taken.

    Subscribers must be O(1)-ish per item (append into a bounded window); heavy work belongs in evaluate().
    """

    def __init__(self, registry: CollectorRegistry, logger: logging.Logger | None = None) -> None:
        self._subs: dict[BatchKind, list[tuple[str, Callable[[Batch], None]]]] = {k: [] for k in BATCH_KINDS}
        self._log = logger or logging.getLogger("sidecar.bus")
        self._published = Counter(
            "sidecar_bus_items",
            "Items published on the internal bus, by kind and source.",
            ["kind", "source"],
            registry=registry,
        )
        self._errors = Counter(
            "sidecar_bus_subscriber_errors",
            "Batches a subscriber failed to take (the item is lost for it only).",
            ["subscriber"],
            registry=registry,
        )

    def subscribe(self, kind: BatchKind, name: str, fn: Callable[[Batch], None]) -> None:
        self._subs[kind].append((name, fn))

    def subscribers(self, kind: BatchKind) -> Sequence[str]:
        return [n for n, _ in self._subs[kind]]

    def publish(self, batch: Batch) -> list[str]:
        """Hand ``batch`` to every subscriber of its kind; returns the names of the subscribers that failed."""
        self._published.labels(batch.kind, batch.source).inc(len(batch.items))
        failed: list[str] = []
        for name, fn in self._subs[batch.kind]:
            try:
                fn(batch)
            except Exception:
                self._errors.labels(name).inc()
                self._log.exception("subscriber %s failed on a %s batch", name, batch.kind)
                failed.append(name)
        return failed


@dataclass
class Context:
    """Everything a component may use; there are no globals."""

    config: SidecarConfig
    registry: CollectorRegistry
    clock: Clock
    http: httpx.AsyncClient
    store: Store
    bus: Bus
    guard: RequestGuard
    logger: logging.Logger = field(default_factory=lambda: logging.getLogger("sidecar"))
    # Deliberately no registry of components: they never look each other up by name. They subscribe on the
    # bus, or wiring/ hands them the collaborator they need (tests/test_import_rules.py holds this).
