"""Config of the events sources (``events``): the /v1/events endpoint, JSONL tailers, Triton trace files."""

from __future__ import annotations

from pydantic import Field, model_validator

from sidecar.configbase import StrictModel

__all__ = ["EventsConfig", "JsonlFileConfig", "TensorMapping", "TensorRef", "TritonTraceConfig"]


class TensorRef(StrictModel):
    tensor: str = Field(..., min_length=1, description="Tensor name as Triton logs it.")
    column: int = Field(0, ge=0, description="Column of the tensor's last dimension to read.")


class TensorMapping(StrictModel):
    inputs: dict[str, list[str]] = Field(
        default_factory=dict,
        description="Input (or output) tensor name -> feature names of its columns, in order "
        "(e.g. {x: [age, income, clicks, ctr_7d]}); an empty name skips that column.",
    )
    score: TensorRef | None = Field(None, description="Tensor column holding the prediction score.")
    map_unlisted: bool = Field(
        False,
        description="Also map tensors not listed in `inputs`, as features named <tensor>_<column>.",
    )


class TritonTraceConfig(StrictModel):
    enabled: bool = Field(False, description="Read Triton trace files written with level=TENSORS.")
    path: str = Field(
        "",
        description="The trace file Triton writes (--trace-config triton,file=PATH); PATH and its "
        "rotated parts PATH.0, PATH.1, ... are followed record by record, each record read "
        "once. If `traces.file.path` is the same file, one reader publishes spans and events.",
    )
    poll_interval_secs: float = Field(2.0, gt=0, description="How often to look for new trace files.")
    max_file_bytes: int = Field(
        64 * 1024 * 1024,
        gt=0,
        description="Most bytes read per poll (files of any "
        "size are read over several polls); "
        "one record larger is skipped and "
        "counted.",
    )
    models: dict[str, TensorMapping] = Field(
        default_factory=dict, description="Per model: which tensors are features and score."
    )
    delete_after_read: bool = Field(
        False,
        description="Delete a trace file once it is closed, fully read and "
        "its events (and spans, if traces.file names it too) "
        "were published.",
    )

    @model_validator(mode="after")
    def _check(self) -> TritonTraceConfig:
        if self.enabled and not self.path:
            raise ValueError("path: required when enabled")
        return self


class JsonlFileConfig(StrictModel):
    path: str = Field(..., min_length=1, description="JSON Lines file of events the model server appends to.")
    poll_interval_secs: float = Field(1.0, gt=0, description="How often to read new lines.")
    max_line_bytes: int = Field(65536, gt=0, description="Longer lines are skipped and counted.")
    max_read_bytes: int = Field(4 * 1024 * 1024, gt=0, description="Most bytes read per poll (bounds one batch).")
    start_at_end: bool = Field(False, description="On first sight of the file, skip what is already in it.")


class EventsConfig(StrictModel):
    enabled: bool = Field(True, description="Serve POST /v1/events.")
    max_events_per_batch: int = Field(10_000, gt=0, description="More events in one request gives 413.")
    max_features_per_event: int = Field(256, gt=0, description="More features in one event rejects it.")
    max_name_length: int = Field(128, gt=0, description="Longest model, version, feature or field name.")
    max_string_length: int = Field(256, gt=0, description="Longest string value (category, ids).")
    max_rejections_listed: int = Field(100, gt=0, description="Rejected events listed in a response (all are counted).")
    default_version: str = Field("unversioned", min_length=1, description="Version given to events that carry none.")
    max_future_skew_secs: float = Field(
        300.0, ge=0, le=86_400.0, description="Events timestamped further in the future are rejected (at most a day)."
    )
    max_age_secs: float = Field(
        30 * 86400.0, gt=0, le=366 * 86400.0, description="Events older than this are rejected (at most a year)."
    )
    jsonl: list[JsonlFileConfig] = Field(default_factory=list, description="JSON Lines files to tail.")
    triton_trace: TritonTraceConfig = Field(
        default_factory=TritonTraceConfig, description="Triton TENSORS trace files to map into events."
    )
