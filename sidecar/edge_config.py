"""The ``edge:`` section: the edge sources, the series the processor derives, and the edge checks.

Its own module because it gathers the config models of three layers (sources, processors, checks), which may not
import one another (``tests/test_import_rules.py``); it imports only config models."""

from __future__ import annotations

from pydantic import Field

from sidecar.checks.edge.config import EdgeChecksConfig
from sidecar.configbase import StrictModel
from sidecar.processors.edge_config import EdgeSeriesConfig
from sidecar.sources.edge.config import EdgeSourceConfig
from sidecar.state.edge_join_config import EdgeJoinConfig

__all__ = ["EdgeConfig"]


class EdgeConfig(StrictModel):
    enabled: bool = Field(False, description="Read edge (CDN, edge cache) access logs: docs/edge.md.")
    source: EdgeSourceConfig = Field(default_factory=EdgeSourceConfig, description="Field mapping, intake, files.")
    series: EdgeSeriesConfig = Field(default_factory=EdgeSeriesConfig, description="Route groups, hits, bounds.")
    checks: EdgeChecksConfig = Field(default_factory=EdgeChecksConfig, description="Hit-ratio SLA, tail, purges.")
    join: EdgeJoinConfig = Field(
        default_factory=EdgeJoinConfig, description="Recent edge hops joined to the model's spans on the trace page."
    )
