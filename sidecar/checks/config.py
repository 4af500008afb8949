"""Config of the checks: each check owns its section's model."""

from __future__ import annotations

from pydantic import Field

from sidecar.checks.batching.config import BatchingConfig
from sidecar.checks.business.config import BusinessConfig
from sidecar.checks.canary.config import CanaryConfig
from sidecar.checks.cold_start.config import ColdStartConfig
from sidecar.checks.drift.config import DriftConfig
from sidecar.checks.fleet.config import FleetConfig
from sidecar.checks.goodput.config import GoodputConfig
from sidecar.checks.model_api_config import ModelApiConfig
from sidecar.checks.output_sanity.config import OutputSanityConfig
from sidecar.checks.tokens.config import TokensConfig
from sidecar.checks.tracing_governor.config import GovernorConfig
from sidecar.configbase import StrictModel

__all__ = ["ChecksConfig"]


class ChecksConfig(StrictModel):
    eval_interval_secs: float = Field(15.0, gt=0, description="How often checks evaluate their windows.")
    drift: DriftConfig = DriftConfig()
    fleet: FleetConfig = FleetConfig()
    business: BusinessConfig = BusinessConfig()
    canary: CanaryConfig = CanaryConfig()
    output_sanity: OutputSanityConfig = OutputSanityConfig()
    model_api: ModelApiConfig = ModelApiConfig()
    cold_start: ColdStartConfig = ColdStartConfig()
    batching: BatchingConfig = BatchingConfig()
    tracing_governor: GovernorConfig = GovernorConfig()
    goodput: GoodputConfig = GoodputConfig()
    tokens: TokensConfig = TokensConfig()
