"""Builds components from config, starts them downstream-first, stops them upstream-first, runs the evaluation ticker.

Checks (components with ``evaluate(now)``) are evaluated every ``checks.eval_interval_secs`` in a worker thread,
so statistics never block the event loop; their findings go to every component with ``on_findings``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import httpx
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    disable_created_metrics,
)

from sidecar.alerting.render import with_text
from sidecar.clock import Clock, SystemClock
from sidecar.component import START_ORDER, Bus, Context, Readiness, Role
from sidecar.config import SidecarConfig
from sidecar.httpguard import RequestGuard
from sidecar.model import Finding
from sidecar.store import Store

__all__ = ["Check", "FindingSink", "Service", "default_factories"]

_ROLE_ORDER = {role: i for i, role in enumerate(START_ORDER)}


@runtime_checkable
class Check(Protocol):
    name: str

    def evaluate(self, now: float) -> Sequence[Finding]: ...


@runtime_checkable
class FindingSink(Protocol):
    name: str

    def on_findings(self, findings: Sequence[Finding], now: float) -> None: ...


Factory = Callable[[Context], list[Any]]


def default_factories() -> list[Factory]:
    # Imported here so that a broken optional area fails loudly at build time with its own traceback.
    from sidecar.wiring.actions import factories as triton_and_actions
    from sidecar.wiring.alerting import build as alerting
    from sidecar.wiring.business import build as business
    from sidecar.wiring.canary import build as canary
    from sidecar.wiring.diagnose import build as diagnose
    from sidecar.wiring.edge import factories as traces_and_edge
    from sidecar.wiring.events import build as events
    from sidecar.wiring.fleet import factories as fleet_factories
    from sidecar.wiring.goodput import build as goodput
    from sidecar.wiring.gpu import build as gpu
    from sidecar.wiring.pages import factories as drift_and_pages
    from sidecar.wiring.tokens import factories as servers_and_tokens
    from sidecar.wiring.verdicts import build as verdicts

    # Build order = subscription order on the bus: the change log subscribes before the checks that publish.
    # The pages builder is handed the drift check the drift builder made (the drift pages read it).
    drift, pages = drift_and_pages()
    drift, fleet = fleet_factories(drift)
    # The trace pages are handed the edge hop store the edge builder feeds.
    traces, edge = traces_and_edge()
    # The token-length drift check is handed the server sources the servers builder makes.
    servers, tokens = servers_and_tokens()
    # The Triton SLI deriver is handed the probe's ledger (the probe's requests are taken out of the SLIs).
    triton, actions = triton_and_actions()
    return [
        alerting,
        triton,
        servers,
        gpu,
        traces,
        events,
        edge,
        drift,
        fleet,
        business,
        goodput,
        tokens,
        canary,
        diagnose,
        verdicts,
        actions,
        pages,
    ]


class Service:
    def __init__(
        self,
        config: SidecarConfig,
        *,
        clock: Clock | None = None,
        http: httpx.AsyncClient | None = None,
        registry: CollectorRegistry | None = None,
        store: Store | None = None,
        logger: logging.Logger | None = None,
        factories: list[Factory] | None = None,
    ) -> None:
        # The *_created series would double the series count, and Prometheus' text format reads them as separate
        # gauges; this is a process-wide switch in prometheus_client, idempotent.
        disable_created_metrics()
        self.config = config
        self.clock = clock or SystemClock()
        self.registry = registry or CollectorRegistry(auto_describe=True)
        self._own_http = http is None
        self.http = http or httpx.AsyncClient(timeout=10.0, follow_redirects=False)
        self._own_store = store is None
        self.store = store or Store(config.store.path)
        self.logger = logger or logging.getLogger("sidecar")
        # Every item's type checked against its batch kind at debug level; the first item's otherwise.
        self.bus = Bus(
            self.registry, self.logger.getChild("bus"), check_all_items=self.logger.isEnabledFor(logging.DEBUG)
        )
        srv = config.server
        self.guard = RequestGuard(
            self.registry,
            max_body_bytes=srv.max_body_bytes,
            push_token=srv.push_token,
            admin_token=srv.admin_token,
            read_token=srv.read_token,
            max_inflight=srv.max_inflight_requests,
            max_inflight_bytes=int(srv.max_inflight_bytes_mib * 1048576) if srv.max_inflight_bytes_mib else None,
            memory_limit_bytes=srv.memory_limit_mib * 1024 * 1024 if srv.memory_limit_mib else None,
            memory_relief_interval_secs=srv.memory_relief_interval_secs,
            clock=self.clock.now,
            body_timeout_secs=srv.body_timeout_secs,
            logger=self.logger.getChild("http"),
        )
        self.ctx = Context(
            config=config,
            registry=self.registry,
            clock=self.clock,
            http=self.http,
            store=self.store,
            bus=self.bus,
            guard=self.guard,
            logger=self.logger,
        )
        self.components: list[Any] = []
        for factory in factories if factories is not None else default_factories():
            for comp in factory(self.ctx):
                self.components.append(comp)
        self._eval_task: asyncio.Task[None] | None = None
        self._started: list[Any] = []
        self._stopped = False
        self._eval_seconds = Histogram(
            "sidecar_check_evaluation_seconds",
            "Time one evaluation of a check took.",
            ["check"],
            buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=self.registry,
        )
        self._eval_errors = Counter(
            "sidecar_check_evaluation_errors", "Evaluations that raised.", ["check"], registry=self.registry
        )
        self._sink_errors = Counter(
            "sidecar_finding_sink_errors",
            "Evaluation rounds a finding sink failed to take.",
            ["sink"],
            registry=self.registry,
        )
        self._eval_lag = Gauge(
            "sidecar_check_evaluation_lag_seconds",
            "How far the last evaluation round ran past its interval (0 when on time).",
            registry=self.registry,
        )
        self._up = Gauge("sidecar_start_time_seconds", "Unix time the sidecar started.", registry=self.registry)
        if registry is None:
            # Memory and CPU of the sidecar itself (process_resident_memory_bytes etc.), for the health dashboard.
            ProcessCollector(registry=self.registry)

    def _ordered(self) -> list[Any]:
        return sorted(self.components, key=lambda c: _ROLE_ORDER[Role(c.role)])

    async def start(self) -> None:
        self._up.set(self.clock.now())
        for comp in self._ordered():
            await comp.start()
            self._started.append(comp)
        self._eval_task = asyncio.create_task(self._eval_loop(), name="sidecar-eval")

    async def shutdown(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        if self._eval_task is not None:
            self._eval_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._eval_task
        for comp in reversed(self._started):
            try:
                await comp.shutdown()
            except Exception:
                self.logger.exception("component %s failed to shut down", comp.name)
        if self._own_http:
            await self.http.aclose()
        if self._own_store:
            self.store.close()

    def component(self, name: str) -> Any:
        """The component called ``name`` (for tests, the CLI and the app; components never call this)."""
        for comp in self.components:
            if comp.name == name:
                return comp
        raise KeyError(name)

    def checks(self) -> list[Check]:
        return [c for c in self.components if isinstance(c, Check)]

    def evaluate_once(self, now: float | None = None) -> list[Finding]:
        """One evaluation round (tests call this directly with a fake clock)."""
        now = self.clock.now() if now is None else now
        findings: list[Finding] = []
        for check in self.checks():
            t0 = time.perf_counter()
            try:
                findings.extend(check.evaluate(now))
            except Exception:
                self._eval_errors.labels(check.name).inc()
                self.logger.exception("check %s failed to evaluate", check.name)
            finally:
                self._eval_seconds.labels(check.name).observe(time.perf_counter() - t0)
        # The words of every finding, written once by the one renderer: the book, the audit trail and webhooks
        # all quote the same evidence.
        findings = [with_text(f) for f in findings]
        for sink in self.components:
            if isinstance(sink, FindingSink):
                try:
                    sink.on_findings(findings, now)
                except Exception:
                    self._sink_errors.labels(sink.name).inc()
                    self.logger.exception("finding sink %s failed", sink.name)
        return findings

    async def _eval_loop(self) -> None:
        interval = self.config.checks.eval_interval_secs
        while True:
            t0 = self.clock.monotonic()
            await asyncio.to_thread(self.evaluate_once)
            spent = self.clock.monotonic() - t0
            self._eval_lag.set(max(0.0, spent - interval))
            await asyncio.sleep(max(0.0, interval - spent))

    def readiness(self) -> tuple[bool, dict[str, str]]:
        ok = True
        details: dict[str, str] = {}
        for comp in self.components:
            r: Readiness | None = comp.readiness() if hasattr(comp, "readiness") else None
            if r is None:
                continue
            details[comp.name] = ("ok" if r.ok else "not ready") + (f": {r.detail}" if r.detail else "")
            ok = ok and r.ok
        return ok, details

    def routers(self) -> list[Any]:
        routers = (comp.routes() for comp in self.components if hasattr(comp, "routes"))
        return [r for r in routers if r is not None]
