"""The ``traces`` section: the trace hub's own settings (store, stage histograms) at its top level, and the
sections of the span side's other components, each model beside its component and nested here:

- ``limits``: the OTLP receiver's (``sources/otlp/config.py``)
- ``file``: the trace-file reader's (``sources/trace_files/config.py``)
- ``failure_join``: the failure join's (``sources/triton_failures_config.py``)
- ``forward``: the OTLP forwarder's (``exporters/config.py``)
- ``store``: the trace store's byte budgets (here, beside ``state/traces.py`` and ``state/trace_hub.py``)

The nested models are re-exported, so ``from sidecar.state.trace_config import TraceFileConfig`` still works.
"""

from __future__ import annotations

from pydantic import Field, field_validator, model_validator

from exporters.config import ForwardConfig
from sidecar.configbase import StrictModel
from sidecar.sources.otlp.config import SpanLimitsConfig
from sidecar.sources.trace_files.config import TraceFileConfig
from sidecar.sources.triton_failures_config import FailureJoinConfig

__all__ = [
    "FailureJoinConfig",
    "ForwardConfig",
    "SpanLimitsConfig",
    "TraceFileConfig",
    "TraceStoreConfig",
    "TracesConfig",
]

_DEFAULT_BUCKETS = (
    0.00005,
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
)


class TraceStoreConfig(StrictModel):
    max_bytes_mib: float = Field(
        default=128.0,
        gt=0,
        le=65536,
        description="Estimated memory the in-memory trace store may hold; above it the oldest traces go (plain "
        'before slow or failed ones), counted in sidecar_traces_evicted_total{reason="bytes_plain|bytes_kept"}. '
        "Estimated from the spans' text and raw bytes at ingest (sidecar_traces_stored_bytes).",
    )
    max_trace_bytes_mib: float = Field(
        default=4.0,
        gt=0,
        description="Estimated memory one trace may hold; its spans beyond it are dropped and counted "
        '(sidecar_traces_spans_dropped_total{reason="trace_bytes"}). At most a quarter of max_bytes_mib.',
    )
    pressure_keep_fraction: float = Field(
        default=0.5,
        ge=0,
        lt=1,
        description="When the process is over server.memory_limit_mib, the share of the store's bytes kept: the "
        "oldest traces beyond it are evicted (reason memory_pressure) before any push is refused, and the store's "
        "budget stays there until the process is back under the limit (then it grows back by half the headroom "
        "every server.memory_relief_interval_secs).",
    )

    @model_validator(mode="after")
    def _order(self) -> TraceStoreConfig:
        if self.max_trace_bytes_mib > self.max_bytes_mib / 4:
            raise ValueError(
                f"max_trace_bytes_mib ({self.max_trace_bytes_mib:g}) must be at most a quarter of max_bytes_mib "
                f"({self.max_bytes_mib:g}), so that one trace cannot empty the store"
            )
        return self

    @property
    def max_bytes(self) -> int:
        return int(self.max_bytes_mib * 1024 * 1024)

    @property
    def max_trace_bytes(self) -> int:
        return int(self.max_trace_bytes_mib * 1024 * 1024)


class TracesConfig(StrictModel):
    enabled: bool = Field(default=False, description="Turn the span side on (receiver, trace files, store, pages).")
    receiver_enabled: bool = Field(default=True, description="Serve OTLP/HTTP POST /v1/traces.")
    max_traces: int = Field(default=5000, gt=0, description="Traces kept in memory; above it the plain ones go first.")
    max_age_secs: float = Field(default=3600.0, gt=0, description="Traces first seen longer ago than this are dropped.")
    max_spans_per_trace: int = Field(
        default=1000, gt=0, description="Spans kept per trace; more are dropped and counted."
    )
    slow_threshold_ms: float = Field(
        default=100.0,
        gt=0,
        description="A trace at least this long is 'slow': kept preferentially and listed on /traces.",
    )
    max_model_versions: int = Field(
        default=200,
        gt=0,
        description="Distinct (model, version) label pairs in the stage histograms; more are refused and counted.",
    )
    stage_buckets_secs: list[float] = Field(
        default_factory=lambda: list(_DEFAULT_BUCKETS),
        description="Upper bounds of the per-stage latency histogram buckets, in seconds, increasing (at most 64).",
    )
    limits: SpanLimitsConfig = Field(
        default_factory=SpanLimitsConfig, description="Bounds on the names and text a span may carry."
    )
    store: TraceStoreConfig = Field(
        default_factory=TraceStoreConfig, description="Memory budgets of the in-memory trace store."
    )
    list_limit: int = Field(default=200, gt=0, description="Most traces the /traces page lists.")
    file: TraceFileConfig = Field(default_factory=TraceFileConfig, description="Triton mode=triton trace files.")
    forward: ForwardConfig = Field(default_factory=ForwardConfig, description="Forwarding to an OTLP endpoint.")
    failure_join: FailureJoinConfig = Field(
        default_factory=FailureJoinConfig, description="Marking failed traces from Triton's failure counters."
    )

    @field_validator("stage_buckets_secs")
    @classmethod
    def _buckets(cls, b: list[float]) -> list[float]:
        if not b or any(x <= 0 for x in b) or any(b[i] >= b[i + 1] for i in range(len(b) - 1)):
            raise ValueError("must be positive and strictly increasing")
        if len(b) > 64:
            raise ValueError(f"at most 64 buckets, not {len(b)}")
        return b
