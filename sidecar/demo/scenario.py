"""What the demo's traffic looks like over time, so every capability has something real to find.

Feature values are drawn per request (means and spreads from ``drift_demo``) and sent to Triton standardised,
so the models' scores are real model outputs, not invented numbers:

* from ``SHIFT_AFTER_SECS`` (3 min) ``ctr``'s ``clicks_7d`` moves up by one standard deviation: input drift the
  drift check flags;
* from ``REGRESSION_START_SECS`` to ``REGRESSION_END_SECS`` (6 to 9 min) ``income`` moves up by 1.5 standard
  deviations; the CTR models weigh income negatively, so the predicted CTR mean falls by roughly 40%: the
  business check fires and, once the inputs return, resolves;
* about 8% of ``fraud`` requests carry a negative amount, which the model rejects: failure SLIs and traces;
* one streamed request a second goes to ``chat`` (a decoupled model streaming tokens); from
  ``PROMPT_CHANGE_SECS`` (5 min), after a recorded change, every prompt carries ``SYSTEM_PROMPT_TOKENS`` more
  tokens, so the time to first token grows past the goodput SLO;
* from ``CANARY_SECS`` (8 min), after a recorded rollout, half of the ``fraud`` requests go to v2, which is
  slower at P99: the canary verdict calls it worse and the actions layer plans a revert;
* ``repeat`` gives the same few ``ctr`` inputs over and over (the lookups an edge cache answers).

Each of the later additions draws from its own random stream, so the scenario's earlier draws (and the times
of the alerts they cause) are the same with or without them.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from sidecar.demo.business_demo import REGRESSION_END_SECS, REGRESSION_START_SECS
from sidecar.demo.drift_demo import DEMO_FEATURES, FEATURE_MEANS, FEATURE_SDS, SHIFT_AFTER_SECS, SHIFT_SD

__all__ = [
    "CANARY_SECS",
    "LLM_MODEL",
    "PROMPT_CHANGE_SECS",
    "REPEAT_POOL",
    "SYSTEM_PROMPT_TOKENS",
    "DemoRequest",
    "DemoScenario",
    "LlmRequest",
]

INCOME_SHIFT_SD = 1.5
LLM_MODEL = "chat"
PROMPT_CHANGE_SECS = 300.0
PROMPT_TOKENS_MEAN, PROMPT_TOKENS_SD = 48.0, 10.0
SYSTEM_PROMPT_TOKENS = 200  # what prompt template v2 adds to every prompt
CANARY_SECS = 480.0
CANARY_SHARE = 0.5  # of the fraud requests, from CANARY_SECS
REPEAT_POOL = 16  # distinct inputs the repeated lookups cycle through


@dataclass(frozen=True)
class DemoRequest:
    model: str
    version: str
    inputs: list[float]  # what Triton receives
    features: dict[str, float]  # what the caller reports to /v1/events (raw units)


@dataclass(frozen=True)
class LlmRequest:
    model: str
    version: str
    prompt_tokens: int
    max_tokens: int


class DemoScenario:
    def __init__(self, seed: int = 7, fraud_failure_ratio: float = 0.08) -> None:
        self.rng = random.Random(seed)
        self.fraud_failure_ratio = fraud_failure_ratio
        self._split = random.Random(seed + 1)  # which fraud version, from CANARY_SECS
        self._llm = random.Random(seed + 2)
        pool = random.Random(seed + 3)
        self._pool = [
            [pool.gauss(0.0, 1.0) for _ in DEMO_FEATURES["ctr"]] for _ in range(REPEAT_POOL)
        ]  # standardised ctr inputs

    def _feature(self, name: str, shift_sd: float = 0.0) -> tuple[float, float]:
        mean, sd = FEATURE_MEANS[name], FEATURE_SDS[name]
        raw = self.rng.gauss(mean + shift_sd * sd, sd)
        return raw, (raw - mean) / sd

    def request(self, t_since_start: float) -> DemoRequest:
        r = self.rng.random()
        if r < 0.7:
            version = "1" if r < 0.35 else "2"
            feats: dict[str, float] = {}
            z: list[float] = []
            for name in DEMO_FEATURES["ctr"]:
                shift = 0.0
                if name == "clicks_7d" and t_since_start >= SHIFT_AFTER_SECS:
                    shift = SHIFT_SD
                if name == "income" and REGRESSION_START_SECS <= t_since_start < REGRESSION_END_SECS:
                    shift = INCOME_SHIFT_SD
                raw, zv = self._feature(name, shift)
                feats[name] = raw
                z.append(zv)
            return DemoRequest("ctr", version, z, feats)
        amount, _ = self._feature("amount")
        amount = abs(amount)
        if self.rng.random() < self.fraud_failure_ratio:
            amount = -amount
        hour_raw, hour_z = self._feature("hour")
        risk_raw, risk_z = self._feature("risk")
        version = "2" if t_since_start >= CANARY_SECS and self._split.random() < CANARY_SHARE else "1"
        return DemoRequest(
            "fraud", version, [amount, hour_z, risk_z], {"amount": amount, "hour": hour_raw, "risk": risk_raw}
        )

    def llm_request(self, t_since_start: float) -> LlmRequest:
        """One streamed request to ``chat``: a prompt of about 48 tokens, 200 more from ``PROMPT_CHANGE_SECS``."""
        prompt = max(8, round(self._llm.gauss(PROMPT_TOKENS_MEAN, PROMPT_TOKENS_SD)))
        if t_since_start >= PROMPT_CHANGE_SECS:
            prompt += SYSTEM_PROMPT_TOKENS
        return LlmRequest(LLM_MODEL, "1", prompt, self._llm.randint(12, 20))

    def repeat(self, n: int) -> DemoRequest:
        """The ``n``-th repeated lookup: ``ctr`` v1 on one of ``REPEAT_POOL`` fixed inputs, in turn."""
        return DemoRequest("ctr", "1", self._pool[n % REPEAT_POOL], {})

    @staticmethod
    def changes() -> list[tuple[float, dict[str, Any]]]:
        """Changes the demo's "CI" records, by time: the one that causes the CTR regression."""
        return [
            (
                PROMPT_CHANGE_SECS - 5.0,
                {
                    "what": "prompt template v2: longer system prompt (safety preamble, +200 tokens)",
                    "who": "demo-ci",
                    "model": LLM_MODEL,
                    "link": "https://github.com/example/prompts/pull/57",
                },
            ),
            (
                REGRESSION_START_SECS - 5.0,
                {
                    "what": "feature pipeline: income no longer log-scaled (PR#221)",
                    "who": "demo-ci",
                    "model": "ctr",
                    "link": "https://github.com/example/feature-pipeline/pull/221",
                },
            ),
            (
                CANARY_SECS - 5.0,
                {
                    "what": f"fraud v2 rollout: canary at {CANARY_SHARE:.0%} of fraud traffic",
                    "who": "demo-ci",
                    "model": "fraud",
                    "version": "2",
                },
            ),
        ]

    @staticmethod
    def timeline() -> list[tuple[float, str]]:
        return [
            (SHIFT_AFTER_SECS, "ctr input 'clicks_7d' shifts up by 1 sd, for good"),
            (PROMPT_CHANGE_SECS - 5.0, "a prompt-template change for chat is posted to /v1/changes"),
            (
                PROMPT_CHANGE_SECS,
                f"chat prompts grow by {SYSTEM_PROMPT_TOKENS} tokens: time to first token ~140 -> ~540 ms",
            ),
            (REGRESSION_START_SECS - 5.0, "a feature-pipeline change is posted to /v1/changes"),
            (REGRESSION_START_SECS, "ctr input 'income' shifts up by 1.5 sd: predicted CTR falls by more than 15%"),
            (CANARY_SECS - 5.0, "a fraud v2 rollout is posted to /v1/changes"),
            (CANARY_SECS, f"{CANARY_SHARE:.0%} of fraud requests go to v2, which is slower at P99"),
            (REGRESSION_END_SECS, "'income' returns to normal"),
        ]
