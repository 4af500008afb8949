"""Server profiles: any model server's Prometheus exposition mapped onto one serving SLI schema."""

from sidecar.sources.servers.mapping import Limits, map_exposition
from sidecar.sources.servers.registry import PROFILES, detect
from sidecar.sources.servers.schema import Counter, Dist, DistName, Gauge, ModelServing, ServingSnapshot

__all__ = [
    "PROFILES",
    "Counter",
    "Dist",
    "DistName",
    "Gauge",
    "Limits",
    "ModelServing",
    "ServingSnapshot",
    "detect",
    "map_exposition",
]
