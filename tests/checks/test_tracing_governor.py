"""The tracing governor's decisions and the changes it records, with a fake Triton trace API."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from prometheus_client import CollectorRegistry

from sidecar.checks.tracing_governor.check import TracingGovernor
from sidecar.checks.tracing_governor.config import GovernorConfig
from sidecar.clock import FakeClock
from sidecar.component import Bus
from sidecar.model import Batch, Change, Finding


@dataclass(frozen=True)
class FakeSetting:
    rate: int
    levels: tuple[str, ...]
    mode: str = "triton"


class FakeTriton:
    """Triton's trace-setting semantics: a model without its own setting follows the global one."""

    def __init__(self, mode: str = "triton") -> None:
        self.mode = mode
        self.global_ = FakeSetting(1, ("TIMESTAMPS",), mode)
        self.models: dict[str, FakeSetting] = {}
        self.fail: str | None = None
        self.calls: list[tuple[str, str | None]] = []

    def _check(self, what: str, model: str | None) -> None:
        self.calls.append((what, model))
        if self.fail:
            raise RuntimeError(self.fail)

    async def get(self, model: str | None = None) -> FakeSetting:
        self._check("get", model)
        return self.models.get(model, self.global_) if model else self.global_

    async def set(self, model: str | None, rate: int, levels: tuple[str, ...]) -> FakeSetting:
        self._check("set", model)
        s = FakeSetting(rate, levels, self.mode)
        if model is None:
            self.global_ = s
        else:
            self.models[model] = s
        return s

    async def clear(self, model: str) -> FakeSetting:
        self._check("clear", model)
        self.models.pop(model, None)
        return self.global_


def finding(model: str, kind: str = "drift", active: bool = True) -> Finding:
    return Finding(check=kind, kind=kind, labels={"model": model, "version": "1"}, active=active, value=1.0)


def make(triton: FakeTriton, **cfg: object) -> tuple[TracingGovernor, list[Change], CollectorRegistry]:
    reg = CollectorRegistry()
    bus = Bus(reg)
    changes: list[Change] = []
    bus.subscribe("changes", "log", lambda b: changes.extend(b.items))
    gov = TracingGovernor(
        GovernorConfig.model_validate({"enabled": True, **cfg}),
        control=triton,
        bus=bus,
        registry=reg,
        clock=FakeClock(),
    )
    return gov, changes, reg


async def test_healthy_rate_then_a_boost_while_a_finding_is_active_then_back() -> None:
    triton = FakeTriton()
    gov, changes, reg = make(triton, healthy_rate=1000, boosted_rate=10)
    await gov.apply_once()
    assert triton.global_ == FakeSetting(1000, ("TIMESTAMPS",))
    assert [c.what for c in changes] == ["global trace rate set to 1 in 1000 (was 1 in 1), level TIMESTAMPS"]

    gov.on_findings([finding("ctr"), finding("fraud", active=False), finding("rank", kind="business")], 0.0)
    await gov.apply_once()
    assert triton.models == {"ctr": FakeSetting(10, ("TIMESTAMPS", "TENSORS"))}
    assert changes[-1].model == "ctr" and changes[-1].source == "tracing_governor"
    assert changes[-1].what == (
        "trace rate of ctr raised to 1 in 10, level TIMESTAMPS+TENSORS (drift finding drift active)"
    )
    assert reg.get_sample_value("sidecar_tracing_governor_boosted", {"model": "ctr"}) == 1
    await gov.apply_once()  # nothing changed: no call, no change recorded
    assert len(changes) == 2 and triton.calls.count(("set", "ctr")) == 1

    gov.on_findings([finding("ctr", active=False)], 15.0)
    await gov.apply_once()
    assert triton.models == {}
    back = "trace settings of ctr back to the global 1 in 1000, level TIMESTAMPS (no finding active)"
    assert changes[-1].what == back
    assert reg.get_sample_value("sidecar_tracing_governor_boosted", {"model": "ctr"}) is None
    assert reg.get_sample_value("sidecar_tracing_governor_changes_total", {"action": "unboost"}) == 1


async def test_the_overhead_budget_caps_boosted_models_and_a_boosted_model_keeps_its_place() -> None:
    triton = FakeTriton()
    gov, _, reg = make(triton, max_boosted_models=2)
    gov.on_findings([finding("b"), finding("c")], 0.0)
    await gov.apply_once()
    gov.on_findings([finding("a"), finding("b"), finding("c", kind="latency")], 15.0)
    await gov.apply_once()
    assert set(triton.models) == {"b", "c"}
    assert reg.get_sample_value("sidecar_tracing_governor_over_budget_total") == 1
    gov.on_findings([finding("a"), finding("c")], 30.0)  # b recovered: a gets its place
    await gov.apply_once()
    assert set(triton.models) == {"a", "c"}


async def test_tensors_off_boosts_timestamps_only() -> None:
    triton = FakeTriton()
    gov, _, _ = make(triton, tensors=False)
    gov.on_findings([finding("ctr")], 0.0)
    await gov.apply_once()
    assert triton.models["ctr"].levels == ("TIMESTAMPS",)


async def test_not_mode_triton_changes_nothing_and_is_counted() -> None:
    triton = FakeTriton(mode="opentelemetry")
    gov, changes, reg = make(triton)
    gov.on_findings([finding("ctr")], 0.0)
    await gov.apply_once()
    assert triton.models == {} and triton.global_.rate == 1 and changes == []
    assert reg.get_sample_value("sidecar_tracing_governor_errors_total", {"reason": "not_triton_mode"}) == 1
    assert gov.describe().startswith("unsupported")


async def test_a_failed_call_is_counted_and_tried_again_next_round() -> None:
    triton = FakeTriton()
    gov, changes, reg = make(triton)
    await gov.apply_once()
    gov.on_findings([finding("ctr")], 0.0)
    triton.fail = "connection refused"
    await gov.apply_once()
    assert triton.models == {} and gov.applied == {} and len(changes) == 1
    assert reg.get_sample_value("sidecar_tracing_governor_errors_total", {"reason": "internal"}) == 1
    triton.fail = None
    await gov.apply_once()
    assert "ctr" in triton.models and len(changes) == 2


async def test_shutdown_restores_what_triton_had() -> None:
    triton = FakeTriton()
    before = triton.global_
    gov, changes, _ = make(triton)
    gov.on_findings([finding("ctr")], 0.0)
    await gov.apply_once()
    await gov.shutdown()
    assert triton.global_ == before and triton.models == {}
    assert [c.what.split(" ")[0:2] for c in changes][-1] == ["global", "trace"]
    assert gov.describe() == "restored; boosted: none"


async def test_a_refused_change_record_does_not_stop_the_governor(caplog: pytest.LogCaptureFixture) -> None:
    triton = FakeTriton()
    gov, _, _ = make(triton)

    def refuse(b: Batch) -> None:
        raise RuntimeError("store is read-only")

    gov.bus.subscribe("changes", "broken", refuse)
    await gov.apply_once()
    assert triton.global_.rate == 1000
    assert "refused a trace-setting change" in caplog.text


async def test_a_restarted_triton_is_set_again_and_its_boosts_reapplied() -> None:
    triton = FakeTriton()
    gov, changes, _ = make(triton, healthy_rate=1000, boosted_rate=10)
    gov.on_findings([finding("ctr")], 0.0)
    await gov.apply_once()
    assert triton.global_.rate == 1000 and "ctr" in triton.models
    triton.global_, triton.models = FakeSetting(7, ("TIMESTAMPS",)), {}  # Triton restarted with its own settings
    await gov.apply_once()
    assert triton.global_.rate == 1000 and triton.models["ctr"].rate == 10
    assert changes[-2].what == "global trace rate set to 1 in 1000 (was 1 in 7), level TIMESTAMPS"
    await gov.shutdown()
    assert triton.global_.rate == 7  # restored to what the restarted Triton had
