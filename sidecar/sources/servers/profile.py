"""What a server profile is: the server's families, their declared types and units, and the labels that name a
model and a version, each mapped onto one SLI of the schema (``schema.py``).

A profile is data, not code: one frozen ``Profile`` per server module, listed once in ``registry.py``. The
mapping (``mapping.py``) reads only this, so adding a server is one module, one fixture, one test, one line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

from sidecar.sources.servers.schema import Counter, DistName, Gauge

__all__ = ["ALL", "MS", "REQUESTS", "US", "FamilyType", "Profile", "Rule"]

FamilyType = Literal["counter", "gauge", "histogram", "summary"]
REQUESTS = "requests"  # the target of a requests-by-outcome counter
ALL = "all"  # the outcome of a counter of every finished request: success is what failures and aborts leave
US = 1e-6  # microseconds -> seconds
MS = 1e-3  # milliseconds -> seconds


@dataclass(frozen=True, slots=True, eq=False)  # hashed by identity: a rule is a constant of its module
class Rule:
    """One family of the server mapped onto one SLI.

    ``family`` is the name the server declares (a counter without its ``_total``: ``prometheus_client`` writes
    ``# TYPE x counter`` and samples ``x_total``; the C++ client writes both as ``x``; both are read).
    A gauge may be one side of a ratio (``part="num"`` / ``"den"``: TensorRT-LLM's used and max KV-cache blocks
    make the KV-cache usage), picked out of a family by label values (``where``). A histogram may feed a counter
    with its ``_sum`` (``part="sum"``: TGI's tokens per request make the token counters). A counter may feed one
    half of a distribution (``part="sum"`` or ``"count"``): Triton's classic
    ``nv_inference_request_duration_us`` is the sum of the request duration whose count is
    ``nv_inference_request_success``. ``scale`` converts the server's unit to the schema's (seconds);
    ``unit`` is the OpenMetrics ``# UNIT`` the family must carry when it declares one.
    """

    family: str
    type: FamilyType
    target: str  # REQUESTS, a Counter, a Gauge or a DistName
    part: Literal["value", "sum", "count", "num", "den"] = "value"
    scale: float = 1.0
    unit: str | None = None
    outcome: str | None = None  # a fixed outcome for a requests counter
    outcome_label: str | None = None  # or the label that carries it ...
    outcomes: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))  # ... mapped onto OUTCOMES
    gauge_agg: Literal["sum", "max"] = "sum"  # across engines/ranks of one model: sum (requests), max (a ratio)
    where: tuple[tuple[str, str], ...] = ()  # only samples with these label values (a family of several meanings)
    skip: tuple[tuple[str, str], ...] = ()  # not samples with one of these label values (health-check routes)
    http_status_label: str | None = None  # outcome from an HTTP status code: 2xx/3xx success, 499 aborted, else failure

    def __post_init__(self) -> None:
        kinds = {REQUESTS, *Counter, *Gauge, *DistName}
        if self.target not in kinds:
            raise ValueError(f"{self.family}: unknown SLI {self.target!r}")
        if self.target in DistName.__members__.values() and self.type == "counter" and self.part == "value":
            raise ValueError(f"{self.family}: a counter feeding a distribution needs part='sum' or 'count'")


@dataclass(frozen=True, slots=True, eq=False)
class Profile:
    """A server's mapping. ``model_label``/``version_label`` name the labels carrying them (None: the server
    serves one model, reported as ``default_model``). ``renames`` are ``(old, new)`` family names of one SLI
    across the server's releases: both are mapped, and the upgrade guard names the pair when one replaces the
    other. ``source`` says where the names were read (repository, path, commit)."""

    name: str
    rules: tuple[Rule, ...]
    model_label: str | None = "model"
    version_label: str | None = "version"
    default_model: str = "default"
    unversioned: str | None = None  # the version value a server writes for a request that named none: read as ""
    renames: tuple[tuple[str, str], ...] = ()
    source: str = ""

    @property
    def families(self) -> frozenset[str]:
        return frozenset(r.family for r in self.rules)

    def what_breaks(self, family: str) -> str:
        """The SLIs a family feeds, for the words of a finding (``gen_ai.server.time_to_first_token``)."""
        return ", ".join(sorted({r.target for r in self.rules if r.family == family})) or "nothing"
