"""The actions layer: takes every round's findings (``on_findings``), turns the configured triggers into planned
steps behind the guard rails, carries them out on the event loop (a polled tick drains the queue), and reports
each as a finding of kind ``action`` (alerts ActionPlanned, ActionTaken, ActionFailed, ActionHeld) and a recorded
change.

Guard rails, in the order they are applied (each skip counted in ``sidecar_actions_skipped_total{reason}``):
``pending`` (the finding has not yet held for its own ``for_secs``, as the alert book applies it), ``paused``
(POST /admin/actions/pause), ``held`` (a revert holds its model until an operator clears it: no other revert,
and no probe-triggered step for another version than the held one; a reload of a held model pins the held
version), ``stale`` (evidence older than ``max_evidence_age_secs``), ``cooldown`` (one action per model per
``cooldown_secs``), ``no_new_evidence`` (the next step waits for a probe after the previous step), ``exhausted``
(no step left), ``queue_full``. Pending, cooldown and no_new_evidence are the normal pacing (counted only); a hold
is the guard rail working: said once per hold (outcome ``held``, alert ActionHeld, info), never as a failure; any
other skip is a record (outcome ``skipped``, alert ActionFailed) once per model and reason per cool-down.
``dry_run`` (the default) records the exact plan (outcome ``planned``) and sends nothing.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from typing import Any

from fastapi import APIRouter
from prometheus_client import CollectorRegistry, Counter, Gauge

from sidecar.actions.api import actions_router
from sidecar.actions.config import ActionsConfig, ModelActionsConfig
from sidecar.actions.control import ActionError, ModelControl, Webhook, nvml_snapshot
from sidecar.actions.holds import Hold, decode_hold, encode_hold
from sidecar.actions.plan import Plan, Trigger, plan_id, plan_text, trigger_of
from sidecar.actions.report import ALERTNAMES, ActionRecord, findings_of
from sidecar.alerting.render.action import words
from sidecar.clock import Clock
from sidecar.component import Bus, Role
from sidecar.httpguard import RequestGuard
from sidecar.model import Batch, Change, Finding
from sidecar.polled import Polled, TickerFactory
from sidecar.store import Store

__all__ = ["ALERTNAMES", "ActionLayer", "ActionRecord"]

_PACING = ("pending", "cooldown", "no_new_evidence")
_NS = "actions"
_WHY = {
    "paused": "actions are paused (POST /admin/actions/resume)",
    "stale": "stale evidence",
    "held": "a revert holds this model until an operator clears it (POST /admin/actions/clear)",
    "exhausted": "no step left for this trigger",
    "queue_full": "too many actions queued",
}


class ActionLayer(Polled):
    name = "actions"
    role = Role.SINK

    def __init__(
        self,
        cfg: ActionsConfig,
        *,
        control: ModelControl | None,
        bus: Bus,
        registry: CollectorRegistry,
        clock: Clock,
        logger: logging.Logger | None = None,
        ticker: TickerFactory | None = None,
        gpu: Callable[[], str] = nvml_snapshot,
        webhook: Webhook | None = None,
        guard: RequestGuard | None = None,
        store: Store | None = None,
    ) -> None:
        super().__init__(interval_secs=cfg.execute_interval_secs, registry=registry, logger=logger, ticker=ticker)
        self.cfg, self.control, self.bus, self.clock = cfg, control, bus, clock
        self.gpu, self.webhook, self.guard = gpu, webhook, guard
        self._lock = threading.Lock()
        self.paused = False
        self.holds: dict[str, str] = {}  # model -> the version its revert holds
        self._hold_ids: dict[str, str] = {}  # model -> the revert that made the hold
        self._hold_said: set[str] = set()  # models whose hold ActionHeld has said (once per hold)
        self._last: dict[str, float] = {}  # model -> when its last step was planned
        self._step: dict[str, int] = {}  # model -> the probe ladder's next step
        # (kind, model, version) -> active since; configured models only, versions bounded by the probes' and the
        # canary's own limits.
        self._since: dict[tuple[str, str, str], float] = {}
        self._said: dict[tuple[str, str], float] = {}  # (model, reason) -> when that refusal was recorded
        self._pending: deque[Plan] = deque()
        self.records: deque[ActionRecord] = deque(maxlen=cfg.max_records)
        self._actions = Counter(
            "sidecar_actions",
            "Action records by step and outcome (planned: dry run, done, failed, skipped, held).",
            ["action", "outcome"],
            registry=registry,
        )
        self._refused = Counter(
            "sidecar_actions_skipped",
            "Triggers that led to no action, by reason (pending: within the finding's for_secs, paused, held, "
            "stale, cooldown, no_new_evidence, exhausted, queue_full).",
            ["reason"],
            registry=registry,
        )
        for r in ("pending", "paused", "held", "stale", "cooldown", "no_new_evidence", "exhausted", "queue_full"):
            self._refused.labels(r)
        self._paused = Gauge("sidecar_actions_paused", "1 while actions are paused.", registry=registry)
        dry = Gauge("sidecar_actions_dry_run", "1 when actions only plan (actions.dry_run).", registry=registry)
        dry.set(1.0 if cfg.dry_run else 0.0)
        self._held = Gauge("sidecar_actions_held_models", "Models a revert holds.", registry=registry)
        # The pause and the holds are an operator's decisions: kept in the store, so a restart keeps them.
        self.store = store
        if store is not None:
            self.paused = store.get(_NS, "paused") == "1"
            for key in store.keys(_NS):
                if key.startswith("hold:") and key[5:] in cfg.models:
                    hold = decode_hold(store.get(_NS, key))
                    if hold is None:
                        self.log.error("actions: the stored %s is not a hold; it is left as it is", key)
                        continue
                    self.holds[key[5:]], self._hold_ids[key[5:]] = hold.version, hold.action_id
                    if hold.said:
                        self._hold_said.add(key[5:])
        self._paused.set(1.0 if self.paused else 0.0)
        self._held.set(len(self.holds))

    # -- deciding nothing: mapping findings to planned steps --------------------------------------------------
    def on_findings(self, findings: Sequence[Finding], now: float) -> None:
        probed = {f.labels.get("model", "") for f in findings if f.kind == "probe" and not f.insufficient_data}
        failing = {f.labels.get("model", "") for f in findings if f.kind == "probe" and f.active}
        with self._lock:
            for model in probed - failing:  # every probed version passes: the next failure starts the ladder again
                self._step.pop(model, None)
            for f in findings:
                model = f.labels.get("model", "")
                mcfg = self.cfg.models.get(model)
                if mcfg is None:
                    continue
                trig = trigger_of(f, mcfg)
                series = (f.kind, model, f.labels.get("version") or f.labels.get("candidate") or "")
                if trig is None:
                    if not f.active:
                        self._since.pop(series, None)
                    continue
                # The finding's own hold (for_secs) first, as the alert book applies it: act on what fires.
                since = self._since.setdefault(series, now)
                if now - since < (f.for_secs or 0.0):
                    self._refused.labels("pending").inc()
                    continue
                self._consider(trig, mcfg, now)

    def _consider(self, trig: Trigger, mcfg: ModelActionsConfig, now: float) -> None:
        model = trig.model
        action = "revert"
        if trig.kind == "probe":
            step = self._step.get(model, 0)
            action = mcfg.on_probe_failure[step] if step < len(mcfg.on_probe_failure) else "exhausted"
        last = self._last.get(model)
        held = self.holds.get(model)
        reason = ""
        if self.paused:
            reason = "paused"
        elif held is not None and (trig.kind == "canary" or trig.version not in ("", held)):
            reason = "held"  # no other revert; and a probe of the reverted version must not load it again
        elif now - trig.evidence_at > self.cfg.max_evidence_age_secs:
            reason = "stale"
        elif last is not None and now - last < self.cfg.cooldown_secs:
            reason = "cooldown"
        elif trig.kind == "probe" and last is not None and trig.evidence_at <= last:
            reason = "no_new_evidence"
        elif action == "exhausted":
            reason = "exhausted"
        elif not self.cfg.dry_run and len(self._pending) >= self.cfg.max_pending:
            reason = "queue_full"
        if reason:
            self._refuse(trig, action, reason, now)
            return
        target = mcfg.fallback_model or model if action == "fallback" else model
        plan = Plan(
            id=plan_id(model, action, now),
            model=model,
            action=action,
            trigger=trig,
            target=target,
            version=trig.baseline if action == "revert" else held if action == "reload" else None,
            also=tuple(mcfg.also),
            webhook_url=mcfg.webhook_url,
            at=now,
        )
        self._last[model] = now
        if trig.kind == "probe":
            self._step[model] = self._step.get(model, 0) + 1
        if self.cfg.dry_run:
            self._record(plan, "planned", now)
        else:
            self._pending.append(plan)

    def _refuse(self, trig: Trigger, action: str, reason: str, now: float) -> None:
        self._refused.labels(reason).inc()
        if reason in _PACING:
            return
        if reason == "held":  # said once per hold, kept with the hold in the store (clear() forgets it)
            if trig.model in self._hold_said:
                return
            self._hold_said.add(trig.model)
            hold = Hold(self.holds.get(trig.model, ""), self._hold_ids.get(trig.model, ""), said=True)
            self._persist(f"hold:{trig.model}", encode_hold(hold))
        else:  # any other refusal: once per model and reason per cool-down
            said = self._said.get((trig.model, reason))
            if said is not None and now - said < max(self.cfg.cooldown_secs, self.cfg.alert_secs):
                return
            if len(self._said) >= 4 * len(self.cfg.models) + 16:
                self._said.clear()
            self._said[(trig.model, reason)] = now
        self.log.warning("no %s of %s: %s", action, trig.model, _WHY[reason])
        self._keep(self._refusal(trig, action, reason, now))

    def _refusal(self, trig: Trigger, action: str, reason: str, now: float) -> ActionRecord:
        held = self.holds.get(trig.model) if reason == "held" else None
        return ActionRecord(
            id=plan_id(trig.model, f"{action}-{reason}", now),
            model=trig.model,
            action=action,
            outcome="held" if reason == "held" else "skipped",
            plan=plan_text(action, trig.model, trig.baseline),
            trigger=trig.alertname,
            evidence=trig.evidence,
            evidence_at=trig.evidence_at,
            at=now,
            error="" if reason == "held" else _WHY[reason],
            target_version=held or trig.baseline,
        )

    # -- acting -----------------------------------------------------------------------------------------------
    async def poll_once(self) -> None:
        while True:
            with self._lock:
                if not self._pending:
                    return
                plan = self._pending.popleft()
            await self._carry_out(plan)

    async def _carry_out(self, plan: Plan) -> None:
        error, gpu = "", ""
        try:
            if self.control is None:
                raise ActionError("no model-control client (set actions.triton_url or triton.http_url)")
            if plan.version and plan.action in ("revert", "reload"):  # pinned: a revert, or a held model's reload
                config = await self.control.model_config(plan.model)
                config["version_policy"] = {"specific": {"versions": [int(plan.version)]}}
                await self.control.load(plan.model, config)
                if plan.action == "revert":
                    with self._lock:
                        self.holds[plan.model], self._hold_ids[plan.model] = plan.version, plan.id
                        self._hold_said.discard(plan.model)
                        self._held.set(len(self.holds))
            else:
                await self.control.load(plan.target)
            outcome = "done"
        except ActionError as exc:
            outcome, error = "failed", str(exc)[:500]
        except Exception as exc:  # a bug in a client: still recorded, never silent
            outcome, error = "failed", f"{type(exc).__name__}: {exc}"[:500]
        if outcome == "done" and plan.action == "revert":
            self._persist(f"hold:{plan.model}", encode_hold(Hold(plan.version or "", plan.id)))
        if "gpu_snapshot" in plan.also:
            gpu = await asyncio.to_thread(self.gpu)
        rec = self._record(plan, outcome, self.clock.now(), error=error, gpu=gpu)
        if "webhook" in plan.also and plan.webhook_url and self.webhook is not None:
            try:
                await self.webhook(plan.webhook_url, asdict(rec))
            except ActionError as exc:
                self.log.warning("action %s: %s", rec.id, exc)

    def _record(self, plan: Plan, outcome: str, now: float, *, error: str = "", gpu: str = "") -> ActionRecord:
        rec = ActionRecord(
            id=plan.id,
            model=plan.model,
            action=plan.action,
            outcome=outcome,
            plan=plan.text,
            trigger=plan.trigger.alertname,
            evidence=plan.trigger.evidence,
            evidence_at=plan.trigger.evidence_at,
            at=now,
            error=error,
            target_version=plan.version,
            gpu=gpu,
        )
        self._keep(rec)
        if outcome in ("done", "failed"):
            what = words(rec.action, outcome, rec.model, rec.plan, rec.error, rec.evidence, rec.target_version)
            change = Change(
                what=what[:1000],
                at=now,
                who="sidecar actions",
                model=rec.model,
                version=rec.target_version,
                source="action",
                id=rec.id,
            )
            failed = self.bus.publish(Batch(kind="changes", source="actions", items=(change,), received_at=now))
            if failed:
                self.log.error("action %s: the change log did not take its record (%s)", rec.id, ", ".join(failed))
        return rec

    def _keep(self, rec: ActionRecord) -> None:
        self.records.append(rec)
        self._actions.labels(rec.action, rec.outcome).inc()
        self.log.info("action %s %s %s: %s %s", rec.id, rec.action, rec.model, rec.outcome, rec.error)

    # -- reporting ----------------------------------------------------------------------------------------------
    def evaluate(self, now: float) -> Sequence[Finding]:
        return findings_of(list(self.records), now, self.cfg.alert_secs, check=self.name)

    # -- operators ----------------------------------------------------------------------------------------------
    def pause(self, paused: bool) -> None:
        with self._lock:
            self.paused = paused
            dropped = list(self._pending) if paused else []
            self._pending.clear()
            for plan in dropped:  # not done: as if never planned, and said so
                if plan.trigger.kind == "probe":
                    self._step[plan.model] = max(0, self._step.get(plan.model, 1) - 1)
                self._last.pop(plan.model, None)
                self._refused.labels("paused").inc()
                self._keep(self._refusal(plan.trigger, plan.action, "paused", self.clock.now()))
        self._paused.set(1.0 if paused else 0.0)
        self._persist("paused", "1" if paused else "0")
        self.log.warning("actions %s", "paused" if paused else "resumed")

    def clear(self, model: str) -> bool:
        """Clear a revert's hold on ``model`` (and its ladder); False when it held nothing."""
        with self._lock:
            held = self.holds.pop(model, None) is not None
            self._hold_ids.pop(model, None)
            self._hold_said.discard(model)
            self._step.pop(model, None)
            self._held.set(len(self.holds))
        if held:
            self._persist(f"hold:{model}", None)
        return held

    def held_versions(self) -> Mapping[str, tuple[str, str]]:
        """The read-only view of the holds: model -> (the version held, the revert's action id). Every other
        version of a held model was unloaded by the revert (the model probe leaves them alone meanwhile)."""
        with self._lock:
            return {m: (v, self._hold_ids.get(m, "")) for m, v in self.holds.items()}

    def _persist(self, key: str, value: str | None) -> None:
        """Keep an operator's decision (or a hold) in the store; a failure is logged, the state in memory holds."""
        if self.store is None:
            return
        try:
            if value is None:
                self.store.delete(_NS, key)
            else:
                self.store.put(_NS, key, value)
        except Exception:
            self.log.exception("actions: could not store %s (it holds until a restart only)", key)

    def describe(self) -> dict[str, Any]:
        with self._lock:
            return {
                "enabled": self.cfg.enabled,
                "dry_run": self.cfg.dry_run,
                "paused": self.paused,
                "holds": dict(self.holds),
                "pending": len(self._pending),
                "records": [asdict(r) for r in reversed(self.records)][:100],
            }

    def routes(self) -> APIRouter | None:
        return actions_router(self, self.guard) if self.guard is not None else None

    async def shutdown(self) -> None:
        await super().shutdown()
        if self.control is not None:
            await self.control.close()
