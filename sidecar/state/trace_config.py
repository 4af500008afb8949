"""TracesConfig: the span side (OTLP receiver, Triton trace files, trace store, stage histograms,
forwarding)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from sidecar.configbase import StrictModel

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


class TraceFileConfig(StrictModel):
    path: str | None = Field(
        default=None,
        description="The file Triton was started with (`--trace-config triton,file=PATH`); the sidecar "
        "follows PATH "
        "and its rotations PATH.0, PATH.1, ... Unset: no trace files are read.",
    )
    poll_interval_secs: float = Field(
        default=1.0, gt=0, description="How often the trace files are checked for new data."
    )
    settle_secs: float = Field(
        default=5.0,
        gt=0,
        description="A file that is still not a complete JSON array after this long without changing is read "
        "leniently (the records before the damage are used, the rest is counted as a parse error).",
    )
    max_pending_requests: int = Field(
        default=10000,
        gt=0,
        description="Requests seen only partly (their records not all written yet) kept at once.",
    )
    max_files_remembered: int = Field(
        default=10000,
        gt=0,
        description="Files whose read offsets are remembered; beyond it the oldest fully read ones are "
        "summarised by their rotation index and mtime (they are still not read twice).",
    )
    delete_after_read: bool = Field(
        default=False,
        description="Delete a file once it is closed, fully read, and its spans and events were published "
        "(Triton never deletes them itself). If `events.triton_trace` names the same path, either one asking "
        "is enough: the one reader deletes only after both outputs were taken.",
    )
    max_read_bytes: int = Field(
        default=16 * 1024 * 1024,
        gt=0,
        description="Most bytes read from the trace files per poll (a backlog is read over several polls); "
        "one record larger than this is skipped and counted.",
    )
    max_string_length: int = Field(
        default=256,
        gt=0,
        description="Longest model name, version, request id or tensor name taken from a trace record; a "
        'longer one is refused and counted (`sidecar_trace_file_records_refused_total{reason="string_too_long"}`).',
    )


class ForwardConfig(StrictModel):
    endpoint: str | None = Field(
        default=None,
        description="OTLP/HTTP traces endpoint to forward every received span to, e.g. "
        "http://tempo:4318/v1/traces. Unset: no forwarding.",
    )
    headers: dict[str, str] = Field(default_factory=dict, description="Extra HTTP headers sent with each export.")
    compression: Literal["none", "gzip"] = Field(default="gzip", description="Body compression of forwarded exports.")
    timeout_secs: float = Field(
        default=10.0,
        gt=0,
        description="Time one export may take, retries included (the exporter backs off with jitter "
        "and honours Retry-After; it retries 429, 502, 503 and 504 only).",
    )
    queue_max_spans: int = Field(
        default=20000, gt=0, description="Spans waiting to be forwarded; more are dropped and counted."
    )
    batch_max_spans: int = Field(default=512, gt=0, description="Spans sent in one export request.")
    shutdown_flush_secs: float = Field(default=5.0, ge=0, description="Time spent flushing the queue at shutdown.")

    @field_validator("endpoint")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL")
        return v


class FailureJoinConfig(StrictModel):
    metrics_url: str | None = Field(
        default=None,
        description="Triton's /metrics URL; when set, increases of nv_inference_request_failure per model "
        "and version mark the traces of that model and version in the same interval (see docs/traces.md).",
    )
    interval_secs: float = Field(default=15.0, gt=0, description="How often Triton's failure counters are read.")


class SpanLimitsConfig(StrictModel):
    max_name_chars: int = Field(
        default=128,
        ge=16,
        le=65536,
        description="Longest span name, model name or version, attribute key, event name or service.name; a "
        "request with a longer one is refused with 400 naming the field (these become metric labels and keys).",
    )
    max_value_chars: int = Field(
        default=4096,
        ge=64,
        le=1048576,
        description="Longest stored attribute value, event attribute value or status message; longer ones are "
        "kept cut to this length, ending with '…[truncated]', and counted.",
    )

    @model_validator(mode="after")
    def _order(self) -> SpanLimitsConfig:
        if self.max_value_chars < self.max_name_chars:
            raise ValueError(
                f"max_value_chars ({self.max_value_chars}) must be at least max_name_chars ({self.max_name_chars})"
            )
        return self


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
        "oldest traces beyond it are evicted (reason memory_pressure) before any push is refused.",
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
