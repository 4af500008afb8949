"""A version the actions layer reverted away from is not probed while the revert holds (the revert unloaded it:
probing it would only fail, noise against the action just taken). Its ModelProbeFailing resolves, the finding,
``/`` and the metrics say why, and probing resumes when an operator clears the hold. And the hold's ActionHeld is
said once per hold across a restart: "already said" is kept with the hold in the store."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
from prometheus_client import CollectorRegistry

from sidecar.actions.config import ActionsConfig
from sidecar.actions.holds import Hold, decode_hold
from sidecar.actions.layer import ActionLayer
from sidecar.alerting.render import finding_text
from sidecar.checks.probe.check import ModelProbe
from sidecar.checks.probe.client import ProbeAnswer, ProbeFailure
from sidecar.checks.probe.config import ProbeInput, ProbesConfig
from sidecar.clock import FakeClock
from sidecar.component import Bus
from sidecar.model import Finding
from sidecar.pages.probe_line import probe_line
from sidecar.polled import ManualTicker
from sidecar.store import Store

from .test_layer import FakeControl, _canary

MODEL = {
    "versions": ["1", "2"],
    "inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 1], "data": [0.5]}],
    "outputs": [{"name": "score", "datatype": "FP32", "shape": [1, 1], "min": 0, "max": 1}],
}
RANK = {"rank": {"on_canary_worse": ["revert"], "on_probe_failure": ["reload"]}}


class VersionClient:
    """v1 answers 0.5; v2 is unloaded (Triton: 'not at ready state')."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    async def infer(
        self,
        model: str,
        version: str,
        inputs: Sequence[ProbeInput],
        outputs: Sequence[str],
        *,
        request_id: str,
        headers: Mapping[str, str],
        timeout_secs: float,
    ) -> Mapping[str, ProbeAnswer]:
        self.sent.append(version)
        if version == "2":
            raise ProbeFailure("server_error", f"'{model}' version 2 is not at ready state")
        return {"score": ProbeAnswer("FP32", (1, 1), np.full((1, 1), 0.5, dtype=np.float32))}

    async def close(self) -> None:
        pass


def _layer(clock: FakeClock, registry: CollectorRegistry, store: Store | None = None) -> ActionLayer:
    cfg = ActionsConfig.model_validate({"enabled": True, "dry_run": False, "cooldown_secs": 10, "models": RANK})
    return ActionLayer(
        cfg, control=FakeControl(), bus=Bus(registry), registry=registry, clock=clock, ticker=ManualTicker, store=store
    )


def _v2(findings: Sequence[Finding]) -> Finding:
    (f,) = [f for f in findings if f.labels["version"] == "2"]
    return f


def _sample(registry: CollectorRegistry, name: str, labels: dict[str, str]) -> float | None:
    return registry.get_sample_value(name, labels)


async def test_a_reverted_version_is_not_probed_while_held_and_probed_again_once_cleared(
    clock: FakeClock, registry: CollectorRegistry
) -> None:
    client = VersionClient()
    layer = _layer(clock, registry)
    probes = ProbesConfig.model_validate({"enabled": True, "interval_secs": 10, "models": {"rank": MODEL}})
    probe = ModelProbe(probes, client=client, registry=registry, clock=clock, ticker=ManualTicker, holds=layer)
    v2 = {"model": "rank", "version": "2"}

    # v2 fails three times in a row: ModelProbeFailing rank v2 fires.
    for _ in range(3):
        await probe.ticker.tick()  # type: ignore[attr-defined]
        clock.advance(10)
    assert client.sent == ["1", "2"] * 3
    assert _v2(probe.evaluate(clock.now())).active

    # The canary verdict reverts rank to v1 (v2 unloaded) and holds it there.
    layer.on_findings([_canary(clock)], clock.now())
    await layer.ticker.tick()  # type: ignore[attr-defined]
    (revert,) = layer.records
    assert revert.outcome == "done" and layer.held_versions() == {"rank": ("1", revert.id)}

    # From now on only v1 is probed; v2's finding is resolved and says why, as do / and the metrics.
    client.sent.clear()
    for _ in range(3):
        await probe.ticker.tick()  # type: ignore[attr-defined]
        clock.advance(10)
    assert client.sent == ["1"] * 3
    f = _v2(probe.evaluate(clock.now()))
    assert not f.active and not f.insufficient_data and f.facts["held_by"] == revert.id
    said = f"rank v2 not probed: reverted by action {revert.id}, held"
    assert finding_text(f)[0] == said
    assert said in str(probe_line(registry)) and "rank v1 ok" in str(probe_line(registry))
    assert _sample(registry, "sidecar_probe_held", {**v2, "action_id": revert.id}) == 1.0
    assert _sample(registry, "sidecar_probe_success", v2) is None
    assert _sample(registry, "sidecar_probe_consecutive_failures", v2) is None
    assert probe.snapshot()["rank v2"]["held_by"] == revert.id
    # The layer takes the round's findings as before: nothing to act on (v2's finding is not active).
    layer.on_findings(probe.evaluate(clock.now()), clock.now())
    assert [r.outcome for r in layer.records] == ["done"]

    # An operator clears the hold: v2 is probed again at the next tick, and counts from zero.
    assert layer.clear("rank")
    client.sent.clear()
    await probe.ticker.tick()  # type: ignore[attr-defined]
    assert client.sent == ["1", "2"]
    f = _v2(probe.evaluate(clock.now()))
    assert f.facts["held_by"] == "" and f.facts["consecutive"] == 1 and not f.active
    assert finding_text(f)[0] == "rank v2 probe passing (1 failed in a row; fires at 3)"
    assert _sample(registry, "sidecar_probe_held", {**v2, "action_id": revert.id}) is None
    assert _sample(registry, "sidecar_probe_success", v2) == 0.0
    assert "not probed" not in str(probe_line(registry))


async def test_a_probe_of_the_version_triton_picks_goes_on_while_held(
    clock: FakeClock, registry: CollectorRegistry
) -> None:
    client = VersionClient()
    layer = _layer(clock, registry)
    one = {**MODEL, "versions": [], "version": ""}
    probes = ProbesConfig.model_validate({"enabled": True, "models": {"rank": one}})
    probe = ModelProbe(probes, client=client, registry=registry, clock=clock, ticker=ManualTicker, holds=layer)
    layer.on_findings([_canary(clock)], clock.now())
    await layer.ticker.tick()  # type: ignore[attr-defined]
    await probe.ticker.tick()  # type: ignore[attr-defined]
    assert client.sent == [""]  # Triton resolves it to the held version
    (f,) = probe.evaluate(clock.now())
    assert f.facts["held_by"] == ""


async def test_a_hold_said_before_a_restart_is_not_said_again(
    clock: FakeClock, registry: CollectorRegistry, tmp_path: Path
) -> None:
    store = Store(tmp_path / "s.sqlite")
    first = _layer(clock, registry, store)
    first.on_findings([_canary(clock)], clock.now())
    await first.ticker.tick()  # type: ignore[attr-defined]
    clock.advance(15)
    first.on_findings([replace(_canary(clock), evaluated_at=clock.now())], clock.now())
    assert [r.outcome for r in first.records] == ["done", "held"]
    revert_id = first.records[0].id

    # A restart: a new layer over the same store keeps the hold, its revert's id, and that it was said.
    reg2 = CollectorRegistry()
    second = _layer(clock, reg2, store)
    assert second.held_versions() == {"rank": ("1", revert_id)}
    for _ in range(5):
        clock.advance(15)
        second.on_findings([replace(_canary(clock), evaluated_at=clock.now())], clock.now())
    assert list(second.records) == []  # held each time (counted), said no more
    assert reg2.get_sample_value("sidecar_actions_skipped_total", {"reason": "held"}) == 5

    # Cleared, reverted again: the new hold is said once, and that too survives a restart.
    assert second.clear("rank")
    second.on_findings([_canary(clock)], clock.now())
    await second.ticker.tick()  # type: ignore[attr-defined]
    clock.advance(15)
    second.on_findings([replace(_canary(clock), evaluated_at=clock.now())], clock.now())
    assert [r.outcome for r in second.records] == ["done", "held"]
    third = _layer(clock, CollectorRegistry(), store)
    clock.advance(15)
    third.on_findings([replace(_canary(clock), evaluated_at=clock.now())], clock.now())
    assert list(third.records) == [] and third.held_versions() == {"rank": ("1", second.records[0].id)}
    store.close()


def test_a_stored_hold_that_reads_as_neither_form_is_refused() -> None:
    assert decode_hold("{not json") is None and decode_hold('{"version": "x"}') is None
    assert decode_hold('{"version": "2", "action_id": "a", "said": true}') == Hold("2", "a", said=True)


def test_a_hold_stored_in_the_older_form_is_kept_and_said_once(
    clock: FakeClock, registry: CollectorRegistry, tmp_path: Path
) -> None:
    store = Store(tmp_path / "s.sqlite")
    store.put("actions", "hold:rank", "1")  # as a sidecar before this change stored it
    layer = _layer(clock, registry, store)
    assert layer.held_versions() == {"rank": ("1", "")}
    layer.on_findings([_canary(clock)], clock.now())
    assert [r.outcome for r in layer.records] == ["held"]
    assert '"said": true' in str(store.get("actions", "hold:rank"))
    store.close()
