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
from sidecar.model import BATCH_ITEM_TYPES, BATCH_KINDS, Batch, BatchKind

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

    Each kind carries one item type (``model.BATCH_ITEM_TYPES``): a batch of another type is refused before any
    subscriber sees it (counted in ``sidecar_bus_batches_refused_total{kind, source}`` and logged, never raised
    into the publisher). Only the first item is checked, unless ``check_all_items`` (tests, debugging).
    A subscriber may name the one ``source`` it takes, so no component picks its source itself.

    Subscribers must be O(1)-ish per item (append into a bounded window); heavy work belongs in evaluate().
    """

    def __init__(
        self, registry: CollectorRegistry, logger: logging.Logger | None = None, *, check_all_items: bool = False
    ) -> None:
        self._subs: dict[BatchKind, list[tuple[str, Callable[[Batch], None], str | None]]] = {
            k: [] for k in BATCH_KINDS
        }
        self._log = logger or logging.getLogger("sidecar.bus")
        self._check_all = check_all_items
        self._logged_refusals: set[tuple[str, str, str]] = set()  # one log line per (kind, source, type), bounded
        self._published = Counter(
            "sidecar_bus_items",
            "Items published on the internal bus, by kind and source.",
            ["kind", "source"],
            registry=registry,
        )
        self._refused = Counter(
            "sidecar_bus_batches_refused",
            "Batches refused by the bus because their items are not of their kind's type (a publisher's bug; "
            "no subscriber saw them).",
            ["kind", "source"],
            registry=registry,
        )
        self._errors = Counter(
            "sidecar_bus_subscriber_errors",
            "Batches a subscriber failed to take (the item is lost for it only).",
            ["subscriber"],
            registry=registry,
        )

    def subscribe(self, kind: BatchKind, name: str, fn: Callable[[Batch], None], *, source: str | None = None) -> None:
        """``fn`` gets every batch of ``kind``, or only those published by ``source`` when it is given."""
        self._subs[kind].append((name, fn, source))

    def subscribers(self, kind: BatchKind) -> Sequence[str]:
        return [n for n, _, _ in self._subs[kind]]

    def publish(self, batch: Batch) -> list[str]:
        """Hand ``batch`` to every subscriber of its kind; returns the names of the subscribers that failed (all
        those it was meant for when the batch is refused: none of them took it)."""
        subs = self._subs[batch.kind]
        wrong = self._wrong_item(batch)
        if wrong is not None:
            self._refuse(batch, wrong)
            return [name for name, _, src in subs if src is None or src == batch.source]
        self._published.labels(batch.kind, batch.source).inc(len(batch.items))
        failed: list[str] = []
        for name, fn, src in subs:
            if src is not None and src != batch.source:
                continue
            try:
                fn(batch)
            except Exception:
                self._errors.labels(name).inc()
                self._log.exception("subscriber %s failed on a %s batch", name, batch.kind)
                failed.append(name)
        return failed

    def _wrong_item(self, batch: Batch) -> object | None:
        """The first item not of the kind's type (only the first item is looked at, unless checking all)."""
        want = BATCH_ITEM_TYPES[batch.kind]
        items = batch.items if self._check_all else batch.items[:1]
        return next((item for item in items if not isinstance(item, want)), None)

    def _refuse(self, batch: Batch, item: object) -> None:
        self._refused.labels(batch.kind, batch.source).inc()
        key = (batch.kind, batch.source, type(item).__name__)
        if key in self._logged_refusals or len(self._logged_refusals) >= _MAX_LOGGED_REFUSALS:
            return  # said once already (or too many distinct ones): the counter still counts each
        self._logged_refusals.add(key)
        self._log.error(
            "refused a %s batch from %s: it carries %s, the kind carries %s only",
            batch.kind,
            batch.source,
            type(item).__name__,
            BATCH_ITEM_TYPES[batch.kind].__name__,
        )


_MAX_LOGGED_REFUSALS = 64  # distinct (kind, source, type) refusals logged once each; beyond, only counted


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
