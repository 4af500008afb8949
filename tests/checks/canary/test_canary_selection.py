"""Which models the canary compares: ``checks.canary.models`` (only these) and ``exclude_models`` (never
these), so a model is left out without a fake version pair; config errors name the field."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from sidecar.checks.canary.check import CanaryCheck
from sidecar.checks.canary.config import CanaryConfig
from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.errors import ConfigError
from sidecar.model import Batch, Event

T0 = 1_764_892_800.0


def _feed(chk: CanaryCheck, model: str, now: float) -> None:
    # v2 30% slower at every value: a worse verdict wherever it is compared.
    items = tuple(
        Event(model=model, version=v, timestamp=now - i * 0.01, fields={"latency_ms": base * (1 + i % 10 / 10)})
        for v, base in (("1", 10.0), ("2", 13.0))
        for i in range(300)
    )
    chk.observe(Batch("events", "test", items))


@pytest.mark.parametrize(
    ("selection", "compared"),
    [({}, {"fraud", "ctr"}), ({"models": ["fraud"]}, {"fraud"}), ({"exclude_models": ["ctr"]}, {"fraud"})],
)
def test_only_the_selected_models_are_compared(selection: dict[str, list[str]], compared: set[str]) -> None:
    clock = FakeClock(T0)
    reg = CollectorRegistry()
    cfg = CanaryConfig.model_validate({"enabled": True, "min_samples": 100, "min_tail_samples": 2, **selection})
    chk = CanaryCheck(cfg, registry=reg, clock=clock)
    for model in ("fraud", "ctr"):
        _feed(chk, model, clock.now())
    found = chk.evaluate(clock.now())
    assert {f.labels["model"] for f in found} == compared
    assert all(f.facts["verdict"] == "worse" for f in found)
    assert set(chk.models) == compared  # a model left out takes no slot of max_models
    left_out = {"fraud", "ctr"} - compared
    for model in left_out:
        assert (
            reg.get_sample_value("sidecar_canary_samples", {"model": model, "version": "1", "signal": "latency_events"})
            is None
        )


@pytest.mark.parametrize(
    ("canary", "match"),
    [
        ({"models": ["ctr"], "exclude_models": ["ctr"]}, r"checks\.canary.*exclude_models: ctr also listed in models"),
        (
            {"exclude_models": ["ctr"], "pairs": {"ctr": {"baseline": "1", "candidate": "2"}}},
            r"checks\.canary.*pairs\.ctr: the model is in exclude_models",
        ),
        (
            {"models": ["fraud"], "pairs": {"ctr": {"baseline": "1", "candidate": "2"}}},
            r"checks\.canary.*pairs\.ctr: the model is not in models",
        ),
    ],
)
def test_a_contradictory_selection_is_a_config_error_naming_the_field(canary: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        parse_config({"checks": {"canary": {"enabled": True, **canary}}})
