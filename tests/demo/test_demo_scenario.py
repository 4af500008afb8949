from __future__ import annotations

import statistics

from sidecar.demo.business_demo import REGRESSION_END_SECS, REGRESSION_START_SECS
from sidecar.demo.drift_demo import FEATURE_MEANS, FEATURE_SDS, SHIFT_AFTER_SECS
from sidecar.demo.scenario import DemoScenario


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
