"""The actions layer with fake clients: dry run by default, each guard rail, the probe ladder (reload, then
fallback), the canary revert and its hold, and every outcome reported as a finding, a change and a count."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from sidecar.actions.config import ActionsConfig
from sidecar.actions.control import ActionError
from sidecar.actions.layer import ActionLayer
from sidecar.alerting.render import finding_text, with_text
from sidecar.clock import FakeClock
from sidecar.component import Bus
from sidecar.facts import CanaryFacts
from sidecar.facts_actions import ProbeFacts
from sidecar.model import Change, Finding
from sidecar.polled import ManualTicker
from sidecar.store import Store


class FakeControl:
    def __init__(self) -> None:
        self.loads: list[tuple[str, Mapping[str, Any] | None]] = []
        self.fail: str | None = None
        self.closed = False

    async def load(self, model: str, config: Mapping[str, Any] | None = None) -> None:
        if self.fail:
            raise ActionError(self.fail)
        self.loads.append((model, config))

    async def model_config(self, model: str) -> dict[str, Any]:
        return {"name": model, "backend": "python", "version_policy": {"all": {}}, "max_batch_size": 8}

    async def close(self) -> None:
        self.closed = True


MODELS = {"ctr": {"on_probe_failure": ["reload", "fallback"], "fallback_model": "ctr_fallback"}}


def _layer(
    clock: FakeClock, registry: CollectorRegistry, control: FakeControl | None, **kw: Any
) -> tuple[ActionLayer, list[Change]]:
    changes: list[Change] = []
    bus = Bus(registry)
    bus.subscribe("changes", "log", lambda b: changes.extend(b.items))
    cfg = ActionsConfig.model_validate({"enabled": True, "models": MODELS, **kw})
    layer = ActionLayer(
        cfg, control=control, bus=bus, registry=registry, clock=clock, ticker=ManualTicker, gpu=lambda: "no GPU"
    )
    return layer, changes


def _probe_finding(clock: FakeClock, *, active: bool = True, last_at: float | None = None, n: int = 3) -> Finding:
    now = clock.now()
    facts = ProbeFacts(
        consecutive=n if active else 0,
        failures_to_fire=3,
        reason="non_finite" if active else "ok",
        probes=10,
        failures=n,
        runbook="ModelProbeFailing.md",
        detail="score: 1 of 1 values are NaN or inf" if active else "",
        last_at=now if last_at is None else last_at,
        request_id="sidecar-probe-ctr-9",
    )
    f = Finding(
        check="probe",
        kind="probe",
        labels={"alertname": "ModelProbeFailing", "model": "ctr", "version": ""},
        active=active,
        value=float(facts.consecutive),
        threshold=3.0,
        evaluated_at=now,
        facts=facts,
    )
    return with_text(f)


def _count(registry: CollectorRegistry, name: str, labels: dict[str, str]) -> float:
    return registry.get_sample_value(name, labels) or 0.0


async def test_dry_run_is_the_default_and_shows_the_exact_plan(clock: FakeClock, registry: CollectorRegistry) -> None:
    control = FakeControl()
    layer, changes = _layer(clock, registry, control)
    assert layer.cfg.dry_run
    layer.on_findings([_probe_finding(clock)], clock.now())
    await layer.ticker.tick()  # type: ignore[attr-defined]
    assert control.loads == [] and changes == []
    (f,) = layer.evaluate(clock.now())
    assert f.active and f.labels["alertname"] == "ActionPlanned" and f.severity == "info"
    summary, _ = finding_text(f)
    assert summary == (
        "[dry run] would reload ctr: POST /v2/repository/models/ctr/load | because ctr probe failing: 3 in a row "
        "(NaN or inf in the output: score: 1 of 1 values are NaN or inf)"
    )
    assert _count(registry, "sidecar_actions_total", {"action": "reload", "outcome": "planned"}) == 1


async def test_reload_then_fallback_each_a_change_and_an_alert(clock: FakeClock, registry: CollectorRegistry) -> None:
    control = FakeControl()
    layer, changes = _layer(clock, registry, control, dry_run=False, cooldown_secs=60)
    layer.on_findings([_probe_finding(clock)], clock.now())
    await layer.ticker.tick()  # type: ignore[attr-defined]
    assert control.loads == [("ctr", None)]
    (change,) = changes
    assert change.source == "action" and change.model == "ctr"
    assert change.what.startswith("did reload ctr: POST /v2/repository/models/ctr/load | because ctr probe failing")
    (f,) = layer.evaluate(clock.now())
    assert f.labels["alertname"] == "ActionTaken" and f.facts["outcome"] == "done"

    # Within the cool-down: nothing, counted.
    clock.advance(30)
    layer.on_findings([_probe_finding(clock)], clock.now())
    await layer.ticker.tick()  # type: ignore[attr-defined]
    assert len(control.loads) == 1
    assert _count(registry, "sidecar_actions_skipped_total", {"reason": "cooldown"}) == 1
    # After it, but the evidence is from before the reload: no new evidence, nothing.
    clock.advance(40)
    layer.on_findings([_probe_finding(clock, last_at=clock.now() - 71)], clock.now())
    assert _count(registry, "sidecar_actions_skipped_total", {"reason": "no_new_evidence"}) == 1
    # A probe after the reload failed again: the next step, the fallback.
    layer.on_findings([_probe_finding(clock)], clock.now())
    await layer.ticker.tick()  # type: ignore[attr-defined]
    assert control.loads == [("ctr", None), ("ctr_fallback", None)]
    assert changes[-1].what.startswith("did load the fallback of ctr: POST /v2/repository/models/ctr_fallback/load")
    # Nothing left to try: said once (ActionFailed, skipped), counted every time.
    clock.advance(70)
    layer.on_findings([_probe_finding(clock)], clock.now())
    layer.on_findings([_probe_finding(clock)], clock.now())
    assert _count(registry, "sidecar_actions_skipped_total", {"reason": "exhausted"}) == 2
    skipped = [f for f in layer.evaluate(clock.now()) if f.facts["outcome"] == "skipped"]
    assert len(skipped) == 1 and skipped[0].labels["alertname"] == "ActionFailed"
    assert "no step left" in finding_text(skipped[0])[0]
    # The probe passes: the ladder starts again at reload.
    layer.on_findings([_probe_finding(clock, active=False)], clock.now())
    clock.advance(70)
    layer.on_findings([_probe_finding(clock)], clock.now())
    await layer.ticker.tick()  # type: ignore[attr-defined]
    assert control.loads[-1] == ("ctr", None)


async def test_stale_evidence_is_refused_and_says_why(clock: FakeClock, registry: CollectorRegistry) -> None:
    control = FakeControl()
    layer, changes = _layer(clock, registry, control, dry_run=False, max_evidence_age_secs=30)
    layer.on_findings([_probe_finding(clock, last_at=clock.now() - 31)], clock.now())
    await layer.ticker.tick()  # type: ignore[attr-defined]
    assert control.loads == [] and changes == []
    (f,) = layer.evaluate(clock.now())
    assert f.labels["alertname"] == "ActionFailed"
    assert finding_text(f)[0].startswith("did not reload ctr (skipped: stale evidence) | because ctr probe failing")
    assert _count(registry, "sidecar_actions_skipped_total", {"reason": "stale"}) == 1


async def test_pause_stops_everything_until_resumed(clock: FakeClock, registry: CollectorRegistry) -> None:
    control = FakeControl()
    layer, _ = _layer(clock, registry, control, dry_run=False)
    layer.on_findings([_probe_finding(clock)], clock.now())
    layer.pause(True)  # a queued action is dropped too
    await layer.ticker.tick()  # type: ignore[attr-defined]
    clock.advance(400)
    layer.on_findings([_probe_finding(clock)], clock.now())
    await layer.ticker.tick()  # type: ignore[attr-defined]
    assert control.loads == []
    # The queued reload dropped by the pause and the trigger while paused: both counted and said.
    assert _count(registry, "sidecar_actions_skipped_total", {"reason": "paused"}) == 2
    assert [f.facts["outcome"] for f in layer.evaluate(clock.now())] == ["skipped"] * 2
    assert registry.get_sample_value("sidecar_actions_paused") == 1
    layer.pause(False)
    layer.on_findings([_probe_finding(clock)], clock.now())
    await layer.ticker.tick()  # type: ignore[attr-defined]
    assert control.loads == [("ctr", None)]


async def test_a_failed_action_is_recorded_with_its_error(clock: FakeClock, registry: CollectorRegistry) -> None:
    control = FakeControl()
    control.fail = "load ctr: failed to load 'ctr', no version is available"
    layer, changes = _layer(
        clock,
        registry,
        control,
        dry_run=False,
        models={"ctr": {"on_probe_failure": ["reload"], "also": ["gpu_snapshot"]}},
    )
    layer.on_findings([_probe_finding(clock)], clock.now())
    await layer.ticker.tick()  # type: ignore[attr-defined]
    (f,) = layer.evaluate(clock.now())
    assert f.labels["alertname"] == "ActionFailed" and f.severity == "warning"
    assert f.facts["gpu"] == "no GPU"
    summary, desc = finding_text(f)
    assert summary.startswith("failed to reload ctr: load ctr: failed to load 'ctr', no version is available")
    assert "GPU: no GPU." in desc
    assert changes[0].what.startswith("failed to reload ctr")
    assert _count(registry, "sidecar_actions_total", {"action": "reload", "outcome": "failed"}) == 1


async def test_no_control_client_fails_loudly(clock: FakeClock, registry: CollectorRegistry) -> None:
    layer, _ = _layer(clock, registry, None, dry_run=False)
    layer.on_findings([_probe_finding(clock)], clock.now())
    await layer.ticker.tick()  # type: ignore[attr-defined]
    (f,) = layer.evaluate(clock.now())
    assert f.facts["outcome"] == "failed" and "no model-control client" in str(f.facts["error"])


def _canary(clock: FakeClock) -> Finding:
    facts = CanaryFacts(
        verdict="worse", worse="p99", latency_source="spans", min_samples=100, alpha=0.01, min_intervals=3, runbook=""
    )
    return Finding(
        check="canary",
        kind="canary",
        labels={"alertname": "CanaryVersionWorse", "model": "rank", "baseline": "1", "candidate": "2"},
        active=True,
        value=0.5,
        evaluated_at=clock.now(),
        summary="rank v2 worse on p99 by 50%",
        facts=facts,
    )


async def test_a_worse_canary_is_reverted_and_held_until_cleared(clock: FakeClock, registry: CollectorRegistry) -> None:
    control = FakeControl()
    layer, changes = _layer(
        clock, registry, control, dry_run=False, cooldown_secs=10, models={"rank": {"on_canary_worse": ["revert"]}}
    )
    layer.on_findings([_canary(clock)], clock.now())
    await layer.ticker.tick()  # type: ignore[attr-defined]
    ((model, config),) = control.loads
    assert model == "rank" and config is not None
    assert config["version_policy"] == {"specific": {"versions": [1]}} and config["max_batch_size"] == 8
    assert layer.holds == {"rank": "1"} and changes[0].version == "1"
    assert "version_policy {specific: {versions: [1]}}" in changes[0].what
    clock.advance(60)
    layer.on_findings([_canary(clock)], clock.now())
    await layer.ticker.tick()  # type: ignore[attr-defined]
    assert len(control.loads) == 1
    assert _count(registry, "sidecar_actions_skipped_total", {"reason": "held"}) == 1
    assert [r.outcome for r in layer.records] == ["done", "held"]  # the hold said, never as a failure
    assert layer.clear("rank") and not layer.clear("rank")
    layer.on_findings([_canary(clock)], clock.now())
    await layer.ticker.tick()  # type: ignore[attr-defined]
    assert len(control.loads) == 2


async def test_records_resolve_after_alert_secs_and_are_bounded(clock: FakeClock, registry: CollectorRegistry) -> None:
    layer, _ = _layer(clock, registry, FakeControl(), alert_secs=100, cooldown_secs=0, max_records=10)
    for _ in range(25):
        layer.on_findings([_probe_finding(clock, active=False)], clock.now())  # the ladder restarts
        layer.on_findings([_probe_finding(clock)], clock.now())
        clock.advance(1)
    assert len(layer.records) == 10
    clock.advance(100)
    assert all(not f.active for f in layer.evaluate(clock.now()))
    clock.advance(200)
    assert layer.evaluate(clock.now()) == []


def test_config_names_the_missing_field() -> None:
    from sidecar.config import parse_config
    from sidecar.errors import ConfigError

    with pytest.raises(ConfigError, match=r"actions.models.ctr.*fallback_model: required"):
        parse_config({"actions": {"enabled": True, "models": {"ctr": {"on_probe_failure": ["fallback"]}}}})


async def test_shutdown_closes_the_client(clock: FakeClock, registry: CollectorRegistry) -> None:
    control = FakeControl()
    layer, _ = _layer(clock, registry, control)
    await layer.shutdown()
    await layer.shutdown()
    assert control.closed


async def test_the_pause_and_a_hold_survive_a_restart(
    clock: FakeClock, registry: CollectorRegistry, tmp_path: Path
) -> None:
    store = Store(tmp_path / "s.sqlite")
    cfg = ActionsConfig.model_validate(
        {"enabled": True, "dry_run": False, "models": {"rank": {"on_canary_worse": ["revert"]}}}
    )

    def layer(reg: CollectorRegistry) -> ActionLayer:
        return ActionLayer(
            cfg, control=FakeControl(), bus=Bus(reg), registry=reg, clock=clock, ticker=ManualTicker, store=store
        )

    first = layer(registry)
    first.on_findings([_canary(clock)], clock.now())
    await first.ticker.tick()  # type: ignore[attr-defined]
    first.pause(True)
    second = layer(CollectorRegistry())
    assert second.paused and second.holds == {"rank": "1"}
    second.pause(False)
    assert second.clear("rank")
    third = layer(CollectorRegistry())
    assert not third.paused and third.holds == {}
    store.close()


async def test_the_layer_calls_the_webhook_with_each_record(clock: FakeClock, registry: CollectorRegistry) -> None:
    bodies: list[tuple[str, dict[str, Any]]] = []

    async def hook(url: str, body: Any) -> None:
        bodies.append((url, dict(body)))

    cfg = ActionsConfig.model_validate(
        {
            "enabled": True,
            "dry_run": False,
            "models": {"ctr": {"also": ["webhook", "gpu_snapshot"], "webhook_url": "http://hooks.example/a"}},
        }
    )
    layer = ActionLayer(
        cfg,
        control=FakeControl(),
        bus=Bus(registry),
        registry=registry,
        clock=clock,
        ticker=ManualTicker,
        gpu=lambda: "no GPU",
        webhook=hook,
    )
    layer.on_findings([_probe_finding(clock)], clock.now())
    await layer.ticker.tick()  # type: ignore[attr-defined]
    ((url, body),) = bodies
    assert url == "http://hooks.example/a"
    assert body["action"] == "reload" and body["outcome"] == "done" and body["gpu"] == "no GPU"
    assert body["plan"] == "POST /v2/repository/models/ctr/load"


async def test_a_passing_version_does_not_restart_the_ladder_of_a_failing_one(
    clock: FakeClock, registry: CollectorRegistry
) -> None:
    control = FakeControl()
    layer, _ = _layer(clock, registry, control, dry_run=False, cooldown_secs=10)
    ok_v1 = replace(
        _probe_finding(clock, active=False), labels={"alertname": "ModelProbeFailing", "model": "ctr", "version": "1"}
    )
    layer.on_findings([_probe_finding(clock), ok_v1], clock.now())
    await layer.ticker.tick()  # type: ignore[attr-defined]
    clock.advance(20)
    ok_v1 = replace(ok_v1, evaluated_at=clock.now())
    layer.on_findings([_probe_finding(clock), ok_v1], clock.now())
    await layer.ticker.tick()  # type: ignore[attr-defined]
    assert control.loads == [("ctr", None), ("ctr_fallback", None)]  # reload, then the next step: fallback


async def test_a_finding_acts_only_once_it_has_held_for_its_for_secs(
    clock: FakeClock, registry: CollectorRegistry
) -> None:
    control = FakeControl()
    layer, _ = _layer(clock, registry, control, dry_run=False, models={"rank": {"on_canary_worse": ["revert"]}})
    held = replace(_canary(clock), for_secs=60.0)
    layer.on_findings([held], clock.now())
    clock.advance(30)
    layer.on_findings([replace(held, evaluated_at=clock.now())], clock.now())
    await layer.ticker.tick()  # type: ignore[attr-defined]
    assert control.loads == []
    assert _count(registry, "sidecar_actions_skipped_total", {"reason": "pending"}) == 2
    clock.advance(30)
    layer.on_findings([replace(held, evaluated_at=clock.now())], clock.now())
    await layer.ticker.tick()  # type: ignore[attr-defined]
    assert [m for m, _ in control.loads] == ["rank"]
