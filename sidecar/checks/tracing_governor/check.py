"""Tracing governor (``mode=triton``): trace little while healthy, much more for a model while a finding is active.

A finding sink: each evaluation round it takes the active findings of the configured kinds (drift, canary,
latency ...) and decides which models to boost, at most ``max_boosted_models`` at once (the overhead budget;
models over it wait, counted). Boosted models get their own trace setting (``boosted_rate``, TIMESTAMPS and,
when configured, TENSORS, so output tensors are sampled while something is wrong); the others follow the global
setting, which the governor sets to ``healthy_rate``. The HTTP calls are the collaborator's (wiring passes
``sidecar/sources/triton_trace_control.py``); the decision is here. ``apply_once`` runs on the event loop,
applies what changed and records every change that took effect as a ``Change`` on the bus; a failed call is
counted and tried again next round. Each round it reads the global setting back, so a Triton that restarted
(settings and boosts gone) is governed again. Shutdown restores what Triton had before.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Awaitable, Sequence
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge

from sidecar.checks.tracing_governor.config import GovernorConfig
from sidecar.clock import Clock
from sidecar.component import Bus, Role
from sidecar.model import Batch, Change, Finding
from sidecar.polled import Polled, TickerFactory

__all__ = ["TraceControl", "TracingGovernor"]


class Setting(Protocol):
    @property
    def rate(self) -> int: ...

    @property
    def levels(self) -> tuple[str, ...]: ...

    @property
    def mode(self) -> str: ...


class TraceControl(Protocol):
    async def get(self, model: str | None = None) -> Setting: ...

    async def set(self, model: str | None, rate: int, levels: tuple[str, ...]) -> Setting: ...

    async def clear(self, model: str) -> Setting: ...


def _levels(levels: Sequence[str]) -> str:
    return "+".join(levels) or "OFF"


class TracingGovernor(Polled):
    name = "tracing_governor"
    role = Role.SINK

    def __init__(
        self,
        cfg: GovernorConfig,
        *,
        control: TraceControl,
        bus: Bus,
        registry: CollectorRegistry,
        clock: Clock,
        logger: logging.Logger | None = None,
        ticker: TickerFactory | None = None,
    ) -> None:
        super().__init__(
            interval_secs=cfg.interval_secs, registry=registry, logger=logger, ticker=ticker, job=self.apply_once
        )
        self.cfg = cfg
        self.control = control
        self.bus = bus
        self.clock = clock
        self.log = logger or logging.getLogger("sidecar.tracing_governor")
        self._lock = threading.Lock()
        self.wanted: dict[str, str] = {}  # model -> why it is boosted
        self.applied: dict[str, str] = {}
        self._original: Setting | None = None
        self._healthy_rate = 0  # the global rate as Triton answered it when set: a different one means a restart
        self._state = "not started"
        self._boosted = Gauge(
            "sidecar_tracing_governor_boosted",
            "1 while the governor has raised a model's trace rate.",
            ["model"],
            registry=registry,
        )
        self._changes = Counter(
            "sidecar_tracing_governor_changes",
            "Trace-setting changes that took effect in Triton, by action (healthy, boost, unboost, restore).",
            ["action"],
            registry=registry,
        )
        self._errors = Counter(
            "sidecar_tracing_governor_errors",
            "Trace-setting calls that failed (tried again next round), by reason.",
            ["reason"],
            registry=registry,
        )
        self._refused = Counter(
            "sidecar_tracing_governor_over_budget",
            "Evaluation rounds a model with an active finding waited for a boost because "
            "max_boosted_models were boosted already.",
            registry=registry,
        )

    # -- decide (evaluation thread) ------------------------------------------------------------------------
    def on_findings(self, findings: Sequence[Finding], now: float) -> None:
        active: dict[str, str] = {}
        for f in findings:
            model = f.labels.get("model")
            if f.active and model and f.kind in self.cfg.kinds:
                active.setdefault(model, f"{f.kind} finding {f.check} active")
        with self._lock:
            keep = {m: active[m] for m in self.wanted if m in active}  # a boosted model keeps its place
            waiting = sorted(m for m in active if m not in keep)
            room = max(0, self.cfg.max_boosted_models - len(keep))
            for m in waiting[:room]:
                keep[m] = active[m]
            if len(waiting) > room:
                self._refused.inc(len(waiting) - room)
            self.wanted = keep

    # -- apply (event loop) --------------------------------------------------------------------------------
    async def apply_once(self) -> None:
        """Make Triton's settings what was decided; every change that took effect is recorded."""
        if self._original is None:
            if not await self._begin():
                return
        elif not await self._still_ours():
            return
        with self._lock:
            wanted = dict(self.wanted)
        levels = ("TIMESTAMPS", "TENSORS") if self.cfg.tensors else ("TIMESTAMPS",)
        for model, why in sorted(wanted.items()):
            if model in self.applied:
                continue
            got = await self._try(self.control.set(model, self.cfg.boosted_rate, levels))
            if got is not None:
                self.applied[model] = why
                self._boosted.labels(model).set(1)
                self._record(
                    "boost",
                    f"trace rate of {model} raised to 1 in {got.rate}, level {_levels(got.levels)} ({why})",
                    model,
                )
        for model in sorted(set(self.applied) - set(wanted)):
            got = await self._try(self.control.clear(model))
            if got is not None:
                del self.applied[model]
                self._boosted.remove(model)
                self._record(
                    "unboost",
                    f"trace settings of {model} back to the global 1 in {got.rate}, level "
                    f"{_levels(got.levels)} (no finding active)",
                    model,
                )

    async def _still_ours(self) -> bool:
        """False (after starting over) when Triton's global setting is no longer the one set: Triton restarted
        (its start-up settings again, every boost gone) or someone changed it by hand."""
        cur = await self._try(self.control.get())
        if cur is None:
            return False
        if cur.rate == self._healthy_rate:
            return True
        self.log.warning(
            "Triton's global trace rate is 1 in %d, not the 1 in %d set (Triton restarted?): "
            "applying the settings again",
            cur.rate,
            self._healthy_rate,
        )
        for model in list(self.applied):
            self._boosted.remove(model)
        self.applied.clear()
        self._original = None
        return await self._begin()

    async def _begin(self) -> bool:
        """Remember Triton's global setting, check mode=triton, and set the healthy rate."""
        got = await self._try(self.control.get())
        if got is None:
            return False
        if got.mode != "triton":
            if self._state != "unsupported":
                self.log.warning(
                    "Triton traces in mode %r: the tracing governor works in mode=triton only; it changes nothing",
                    got.mode,
                )
            self._state = "unsupported"
            self._errors.labels("not_triton_mode").inc()
            return False
        healthy = await self._try(self.control.set(None, self.cfg.healthy_rate, got.levels))
        if healthy is None:
            return False
        self._original = got
        self._healthy_rate = healthy.rate
        self._state = "governing"
        self._record(
            "healthy",
            f"global trace rate set to 1 in {healthy.rate} (was 1 in {got.rate}), level {_levels(healthy.levels)}",
            None,
        )
        return True

    async def _try(self, call: Awaitable[Setting]) -> Setting | None:
        try:
            return await call
        except Exception as exc:  # the control raises its own error with a reason; anything else is internal
            self._error(str(getattr(exc, "reason", "internal")), str(exc))
            return None

    def _error(self, reason: str, message: str) -> None:
        self._errors.labels(reason).inc()
        self.log.warning("trace setting call failed (%s): %s", reason, message)

    def _record(self, action: str, what: str, model: str | None) -> None:
        self._changes.labels(action).inc()
        self.log.info("change: %s", what)
        change = Change(what=what, at=self.clock.now(), who="sidecar", model=model, source=self.name)
        if self.bus.publish(Batch(kind="changes", source=self.name, items=(change,), received_at=change.at)):
            self.log.error("the change log refused a trace-setting change (counted on the bus)")

    async def restore(self) -> None:
        """Drop every boost and put the global setting back as it was."""
        for model in sorted(self.applied):
            got = await self._try(self.control.clear(model))
            if got is not None:
                del self.applied[model]
                self._boosted.remove(model)
                self._record("unboost", f"trace settings of {model} back to the global ones (shutdown)", model)
        orig = self._original
        if orig is not None:
            got = await self._try(self.control.set(None, orig.rate, orig.levels))
            if got is not None:
                self._original = None
                self._state = "restored"
                self._record(
                    "restore", f"global trace rate restored to 1 in {got.rate}, level {_levels(got.levels)}", None
                )

    # -- lifecycle -----------------------------------------------------------------------------------------
    async def shutdown(self) -> None:
        await super().shutdown()
        await self.restore()

    def describe(self) -> str:
        """One line for the status page."""
        boosted = ", ".join(sorted(self.applied)) or "none"
        return f"{self._state}; boosted: {boosted}"
