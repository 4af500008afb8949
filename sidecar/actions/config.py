"""Config of the actions layer (``actions:``): off by default, dry-run by default, per model."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from sidecar.configbase import StrictModel

__all__ = ["ActionsConfig", "ModelActionsConfig"]

ProbeStep = Literal["reload", "fallback"]
Extra = Literal["gpu_snapshot", "webhook"]


class ModelActionsConfig(StrictModel):
    on_probe_failure: list[ProbeStep] = Field(
        ["reload"],
        max_length=4,
        description="What the probe's failure rule triggers, one step per trigger in this order (the next step "
        "only when a probe after the previous step failed again), e.g. `[reload, fallback]`: reload the model, then "
        "load its fallback_model.",
    )
    fallback_model: str | None = Field(None, max_length=200, description="The model `fallback` loads.")
    on_canary_worse: list[Literal["revert"]] = Field(
        default_factory=list,
        max_length=1,
        description="`[revert]`: a canary verdict of worse loads the model with only its baseline version "
        "(version_policy override); the revert holds until an operator clears it.",
    )
    also: list[Extra] = Field(
        default_factory=list,
        max_length=2,
        description="Done with every step: `gpu_snapshot` (NVML, attached to the record; 'no GPU' without one) "
        "and `webhook` (POST of the record to webhook_url).",
    )
    webhook_url: str | None = Field(None, description="URL the `webhook` extra posts each record to.")

    @model_validator(mode="after")
    def _needs(self) -> ModelActionsConfig:
        if "fallback" in self.on_probe_failure and not self.fallback_model:
            raise ValueError("fallback_model: required when on_probe_failure has fallback")
        if "webhook" in self.also and not self.webhook_url:
            raise ValueError("webhook_url: required when also has webhook")
        return self


class ActionsConfig(StrictModel):
    enabled: bool = Field(False, description="Act on findings (see dry_run).")
    dry_run: bool = Field(
        True, description="Only plan: each plan is shown on / (alert ActionPlanned) and audited; nothing is sent."
    )
    triton_url: str | None = Field(None, description="Triton's HTTP API for model control; default: triton.http_url.")
    cooldown_secs: float = Field(300.0, ge=0, le=86400, description="At most one action per model per cool-down.")
    max_evidence_age_secs: float = Field(
        120.0, gt=0, le=86400, description="Evidence older than this (the last probe, the finding) is stale: no action."
    )
    timeout_secs: float = Field(120.0, gt=0, le=3600, description="A model-control request gives up after this.")
    alert_secs: float = Field(
        600.0, gt=0, le=86400, description="How long an ActionTaken/ActionFailed/ActionPlanned alert stays firing."
    )
    execute_interval_secs: float = Field(1.0, gt=0, le=60, description="How often queued actions are carried out.")
    max_pending: int = Field(100, ge=1, le=10_000, description="Actions queued at most (more refused, counted).")
    max_records: int = Field(500, ge=10, le=100_000, description="Action records kept for /admin/actions.")
    models: dict[str, ModelActionsConfig] = Field(
        default_factory=dict, max_length=1000, description="Per model: what its findings trigger. Unlisted: nothing."
    )
