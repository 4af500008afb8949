"""Config of the checks: each check owns its section's model."""

from __future__ import annotations

from pydantic import Field

from sidecar.checks.business_config import BusinessConfig
from sidecar.checks.canary_config import CanaryConfig
from sidecar.checks.drift_config import DriftConfig
from sidecar.checks.output_sanity_config import OutputSanityConfig
from sidecar.checks.verdicts_config import BatchingConfig, ColdStartConfig, GovernorConfig, ModelApiConfig
from sidecar.configbase import StrictModel

__all__ = ["ChecksConfig"]


class ChecksConfig(StrictModel):
    eval_interval_secs: float = Field(15.0, gt=0, description="How often checks evaluate their windows.")
    drift: DriftConfig = DriftConfig()
    business: BusinessConfig = BusinessConfig()
    canary: CanaryConfig = CanaryConfig()
    output_sanity: OutputSanityConfig = OutputSanityConfig()
    model_api: ModelApiConfig = ModelApiConfig()
    cold_start: ColdStartConfig = ColdStartConfig()
    batching: BatchingConfig = BatchingConfig()
    tracing_governor: GovernorConfig = GovernorConfig()
