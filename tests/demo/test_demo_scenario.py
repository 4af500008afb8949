from __future__ import annotations

import statistics

from sidecar.demo.business_demo import REGRESSION_END_SECS, REGRESSION_START_SECS
from sidecar.demo.drift_demo import FEATURE_MEANS, FEATURE_SDS, SHIFT_AFTER_SECS
from sidecar.demo.scenario import (
    CANARY_SECS,
    PROMPT_CHANGE_SECS,
    REPEAT_POOL,
    SYSTEM_PROMPT_TOKENS,
    DemoScenario,
)


def ctr_requests(t: float, n: int = 3000) -> list:  # type: ignore[type-arg]
    s = DemoScenario(seed=1)
    return [r for r in (s.request(t) for _ in range(n)) if r.model == "ctr"]


def mean_z(reqs: list, idx: int) -> float:  # type: ignore[type-arg]
    return statistics.fmean(r.inputs[idx] for r in reqs)


def test_inputs_are_standardised_and_shift_on_schedule() -> None:
    calm = ctr_requests(10.0)
    assert abs(mean_z(calm, 1)) < 0.1 and abs(mean_z(calm, 2)) < 0.1
    drifted = ctr_requests(SHIFT_AFTER_SECS + 1)
    assert abs(mean_z(drifted, 2) - 1.0) < 0.1  # clicks_7d up 1 sd
    regression = ctr_requests((REGRESSION_START_SECS + REGRESSION_END_SECS) / 2)
    assert abs(mean_z(regression, 1) - 1.5) < 0.1  # income up 1.5 sd
    recovered = ctr_requests(REGRESSION_END_SECS + 1)
    assert abs(mean_z(recovered, 1)) < 0.1
    # What the caller reports is the raw feature, consistent with what Triton got.
    r = calm[0]
    assert abs((r.features["income"] - FEATURE_MEANS["income"]) / FEATURE_SDS["income"] - r.inputs[1]) < 1e-9


def test_fraud_failures_have_negative_amounts_at_the_configured_ratio() -> None:
    s = DemoScenario(seed=3, fraud_failure_ratio=0.1)
    fraud = [r for r in (s.request(0.0) for _ in range(5000)) if r.model == "fraud"]
    bad = sum(1 for r in fraud if r.inputs[0] < 0)
    assert 0.07 < bad / len(fraud) < 0.13
    assert {r.version for r in fraud} == {"1"}


def test_the_later_steps_draw_apart_so_the_earlier_alerts_keep_their_times() -> None:
    plain, busy = DemoScenario(seed=5), DemoScenario(seed=5)
    for t in (0.0, 100.0, 200.0, 400.0):
        busy.llm_request(t)
        busy.repeat(int(t))
        a, b = plain.request(t), busy.request(t)
        assert (a.model, a.inputs) == (b.model, b.inputs)


def test_prompts_grow_after_the_change_and_half_of_fraud_goes_to_v2_after_the_rollout() -> None:
    s = DemoScenario(seed=2)
    before = [s.llm_request(PROMPT_CHANGE_SECS - 1).prompt_tokens for _ in range(500)]
    after = [s.llm_request(PROMPT_CHANGE_SECS).prompt_tokens for _ in range(500)]
    assert 40 < statistics.fmean(before) < 56 and max(before) < 100
    assert abs(statistics.fmean(after) - statistics.fmean(before) - SYSTEM_PROMPT_TOKENS) < 3
    fraud = [r for r in (s.request(CANARY_SECS) for _ in range(4000)) if r.model == "fraud"]
    v2 = sum(r.version == "2" for r in fraud) / len(fraud)
    assert 0.45 < v2 < 0.55
    assert {r.version for r in (s.request(CANARY_SECS - 1) for _ in range(500)) if r.model == "fraud"} == {"1"}


def test_repeated_lookups_cycle_through_a_few_fixed_inputs() -> None:
    s = DemoScenario()
    reqs = [s.repeat(n) for n in range(64)]
    assert len({tuple(r.inputs) for r in reqs}) == REPEAT_POOL
    assert all(r.model == "ctr" and r.version == "1" and r.features == {} for r in reqs)
    assert reqs[0].inputs == reqs[REPEAT_POOL].inputs
