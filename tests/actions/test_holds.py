"""A revert's hold is the guard rail working, not a failure: while it holds, no new revert is planned and no
ActionFailed is sent; the layer says once (alert ActionHeld, info) that the model is held at its version until
an operator clears it. A held model's probe ladder respects the hold: a reload loads the held version only, and a
failing probe of the reverted version triggers nothing (it would load that version again: flapping)."""

from __future__ import annotations

import html
import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry

from sidecar.actions.config import ActionsConfig
from sidecar.actions.layer import ActionLayer
from sidecar.alerting.render import finding_text
from sidecar.app import create_app
from sidecar.clock import FakeClock
from sidecar.component import Context
from sidecar.config import parse_config
from sidecar.model import Finding
from sidecar.pages.readers import Api
from sidecar.pages.status import StatusPages
from sidecar.polled import ManualTicker
from sidecar.service import Service
from sidecar.store import Store
from sidecar.wiring.alerting import build as alerting

from .test_layer import FakeControl, _canary, _count, _layer, _probe_finding

RANK = {"rank": {"on_canary_worse": ["revert"], "on_probe_failure": ["reload", "fallback"], "fallback_model": "rb"}}
PINNED_V1 = {"specific": {"versions": [1]}}


def _probe(clock: FakeClock, version: str) -> Finding:
    f = _probe_finding(clock)
    return replace(f, labels={**f.labels, "model": "rank", "version": version})


async def test_a_hold_is_said_once_as_a_hold_never_as_a_failure(clock: FakeClock, registry: CollectorRegistry) -> None:
    control = FakeControl()
    layer, _ = _layer(clock, registry, control, dry_run=False, cooldown_secs=10, alert_secs=100, models=RANK)
    layer.on_findings([_canary(clock)], clock.now())
    await layer.ticker.tick()  # type: ignore[attr-defined]
    assert layer.holds == {"rank": "1"}
    # The verdict still stands on v2's last values at every following evaluation, for longer than a cool-down
    # and longer than an alert lasts: no second revert, no ActionFailed, and the hold said once.
    for _ in range(30):
        clock.advance(15)
        layer.on_findings([replace(_canary(clock), evaluated_at=clock.now())], clock.now())
        await layer.ticker.tick()  # type: ignore[attr-defined]
    assert len(control.loads) == 1
    assert [r.outcome for r in layer.records] == ["done", "held"]
    assert _count(registry, "sidecar_actions_skipped_total", {"reason": "held"}) == 30
    held = [f for f in layer.evaluate(layer.records[-1].at) if f.facts["outcome"] == "held"]
    (f,) = held
    assert f.labels["alertname"] == "ActionHeld" and f.severity == "info" and f.active
    assert finding_text(f)[0] == (
        "held rank at version 1 until an operator clears it (POST /admin/actions/clear?model=rank); no revert "
        "| seen: rank v2 worse on p99 by 50%"
    )
    assert not any(f.labels["alertname"] == "ActionFailed" for f in layer.evaluate(clock.now()))
    # Cleared: the next worse verdict reverts again, and a later hold is said again.
    assert layer.clear("rank")
    layer.on_findings([_canary(clock)], clock.now())
    await layer.ticker.tick()  # type: ignore[attr-defined]
    clock.advance(15)
    layer.on_findings([_canary(clock)], clock.now())
    assert [r.outcome for r in layer.records] == ["done", "held", "done", "held"]


async def test_revert_then_probe_failures_reload_the_held_version_then_clear(
    clock: FakeClock, registry: CollectorRegistry
) -> None:
    control = FakeControl()
    layer, changes = _layer(clock, registry, control, dry_run=False, cooldown_secs=10, models=RANK)
    layer.on_findings([_canary(clock)], clock.now())  # v2 worse: revert to v1
    await layer.ticker.tick()  # type: ignore[attr-defined]
    assert control.loads[-1][1] is not None and control.loads[-1][1]["version_policy"] == PINNED_V1

    # v1's probe fails three times in a row: a reload, of v1 only (its config pinned again), never plain.
    clock.advance(20)
    layer.on_findings([_probe(clock, "1")], clock.now())
    await layer.ticker.tick()  # type: ignore[attr-defined]
    assert len(control.loads) == 2
    model, config = control.loads[-1]
    assert model == "rank" and config is not None and config["version_policy"] == PINNED_V1
    assert changes[-1].version == "1"
    assert changes[-1].what.startswith(
        "did reload rank: POST /v2/repository/models/rank/load with config version_policy {specific: {versions: [1]}}"
    )

    # v2's probe fails (the revert unloaded it): acting would load v2 again. Nothing, and no ActionFailed.
    clock.advance(20)
    layer.on_findings([_probe(clock, "2")], clock.now())
    await layer.ticker.tick()  # type: ignore[attr-defined]
    assert len(control.loads) == 2
    assert {f.labels["alertname"] for f in layer.evaluate(clock.now())} == {"ActionTaken", "ActionHeld"}

    # An operator clears the hold: back to normal, a plain reload (Triton's own version policy).
    assert layer.clear("rank")
    clock.advance(20)
    layer.on_findings([_probe(clock, "")], clock.now())
    await layer.ticker.tick()  # type: ignore[attr-defined]
    assert control.loads[-1] == ("rank", None)


async def test_a_dry_run_plan_for_a_held_model_shows_the_pinned_reload(
    clock: FakeClock, registry: CollectorRegistry
) -> None:
    layer, _ = _layer(clock, registry, FakeControl(), models=RANK)
    layer.holds["rank"] = "1"  # as after a restart that kept a hold
    layer.on_findings([_probe(clock, "1")], clock.now())
    (rec,) = layer.records
    assert rec.outcome == "planned" and rec.target_version == "1"
    assert rec.plan.endswith("with config version_policy {specific: {versions: [1]}}")


async def test_the_hold_is_said_on_the_page_and_in_the_audit_once(tmp_path: Path) -> None:
    clock = FakeClock(1_800_000_000.0)
    control = FakeControl()

    def mine(ctx: Context) -> list[Any]:
        cfg = ActionsConfig.model_validate({"enabled": True, "dry_run": False, "cooldown_secs": 10, "models": RANK})
        pages = StatusPages(
            registry=ctx.registry, clock=ctx.clock, api=Api(ctx.registry, logging.getLogger("t")), runbook_url="/r"
        )
        layer = ActionLayer(
            cfg, control=control, bus=ctx.bus, registry=ctx.registry, clock=ctx.clock, ticker=ManualTicker
        )
        return [layer, pages]

    cfg = parse_config({"triton": {"enabled": False}, "alerting": {"enabled": True, "audit": {"enabled": True}}})
    svc = Service(
        cfg, clock=clock, registry=CollectorRegistry(), store=Store(tmp_path / "s.sqlite"), factories=[alerting, mine]
    )
    layer: ActionLayer = svc.component("actions")
    try:
        layer.on_findings([_canary(clock)], clock.now())
        await layer.poll_once()
        for _ in range(5):  # the verdict stands at every evaluation; the hold is said once
            clock.advance(15)
            layer.on_findings([replace(_canary(clock), evaluated_at=clock.now())], clock.now())
            svc.evaluate_once()
        with TestClient(create_app(svc, manage_lifecycle=False)) as client:
            page = html.unescape(client.get("/").text)
        said = "held rank at version 1 until an operator clears it (POST /admin/actions/clear?model=rank); no revert"
        assert said in page and "ActionHeld" in page
        crossed = [r for r in svc.component("audit").events("finding_crossed") if r["check"] == "actions"]
        assert sorted(r["labels"]["alertname"] for r in crossed) == ["ActionHeld", "ActionTaken"]
        (held,) = [r for r in crossed if r["labels"]["alertname"] == "ActionHeld"]
        assert held["summary"].startswith(said)
    finally:
        await svc.shutdown()
        svc.store.close()
