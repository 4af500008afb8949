"""The typed facts of the model probe's findings and of the actions layer's records (see ``sidecar.facts``).

Numbers and short tokens only; ``sidecar/alerting/render/probe.py`` and ``render/action.py`` write the words.
Like ``sidecar.facts``, this module depends on nothing of ours but that module.
"""

from __future__ import annotations

from dataclasses import dataclass

from sidecar.facts import Facts

__all__ = ["ActionFacts", "ProbeFacts"]


@dataclass(frozen=True, slots=True)
class ProbeFacts(Facts):
    """A model probe's state: ``consecutive`` failures in a row (``failures_to_fire`` make the finding active),
    the last probe's result (``reason`` a token: ok | timeout | unavailable | server_error | missing_output |
    shape | dtype | non_finite | out_of_range), its ``detail`` (short), latency and request id; ``held_by`` when a
    revert's hold keeps this version from being probed."""

    consecutive: int
    failures_to_fire: int
    reason: str
    probes: int
    failures: int
    runbook: str
    detail: str = ""
    latency_s: float | None = None
    last_at: float | None = None
    last_ok_at: float | None = None
    request_id: str = ""
    protocol: str = "http"
    held_by: str = ""  # not probed: the id of the actions layer's revert that unloaded this version and holds


@dataclass(frozen=True, slots=True)
class ActionFacts(Facts):
    """One action of the actions layer: what (``action`` reload | revert | fallback | gpu_snapshot | webhook),
    on which model, its ``outcome`` (planned: dry run | done | failed | skipped | held), the exact ``plan`` (the
    request it sends), why it could not run (``error``), and the evidence (the trigger finding's alert name and
    summary, and when it was evaluated)."""

    action: str
    outcome: str
    plan: str
    trigger: str
    evidence: str
    evidence_at: float
    at: float
    action_id: str
    runbook: str
    error: str = ""
    target_version: str | None = None
    gpu: str = ""
