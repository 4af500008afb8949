"""Config of the model probe (``probes:``): a known request sent to each listed model on a schedule, its answer
held to what it must look like (names, shape, datatype, range, finiteness)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from sidecar.configbase import StrictModel

__all__ = ["DATATYPES", "ProbeInput", "ProbeModelConfig", "ProbeOutput", "ProbesConfig"]

DATATYPES = ("BOOL", "INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16", "UINT32", "UINT64", "FP16", "FP32", "FP64")
_MAX_ELEMENTS = 65_536


class ProbeInput(StrictModel):
    name: str = Field(..., min_length=1, max_length=200, description="Input tensor name, as in config.pbtxt.")
    datatype: Literal[DATATYPES] = Field(..., description="KServe v2 datatype (FP32, INT64, ...).")  # type: ignore[valid-type]
    shape: list[int] = Field(..., min_length=1, max_length=8, description="Shape, batch dimension included.")
    data: list[Any] = Field(..., min_length=1, description="The values, flat, row-major.")

    @model_validator(mode="after")
    def _size(self) -> ProbeInput:
        if any(d <= 0 for d in self.shape):
            raise ValueError("shape: every dimension must be > 0")
        n = 1
        for d in self.shape:
            n *= d
        if n > _MAX_ELEMENTS:
            raise ValueError(f"shape: more than {_MAX_ELEMENTS} elements")
        if len(self.data) != n:
            raise ValueError(f"data: {len(self.data)} values for shape {self.shape} ({n} expected)")
        return self


class ProbeOutput(StrictModel):
    name: str = Field(..., min_length=1, max_length=200, description="Output tensor name.")
    shape: list[int] | None = Field(None, max_length=8, description="Expected shape (-1: any size).")
    datatype: Literal[DATATYPES] | None = Field(None, description="Expected datatype.")  # type: ignore[valid-type]
    min: float | None = Field(None, description="Lowest valid value (inclusive).")
    max: float | None = Field(None, description="Highest valid value (inclusive).")
    finite: bool = Field(True, description="NaN or inf in this output fails the probe.")

    @model_validator(mode="after")
    def _range(self) -> ProbeOutput:
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError("max: must not be below min")
        return self


class ProbeModelConfig(StrictModel):
    version: str = Field("", max_length=20, description="Version to probe (digits); empty: the one Triton picks.")
    versions: list[str] = Field(
        default_factory=list,
        max_length=16,
        description="Several versions to probe, each on its own (its own failure count and finding); replaces version.",
    )
    inputs: list[ProbeInput] = Field(default_factory=list, max_length=32, description="The request's inputs.")
    inputs_file: str | None = Field(
        None, description="A JSON file holding the inputs (a list of {name, datatype, shape, data}) instead."
    )
    outputs: list[ProbeOutput] = Field(
        ..., min_length=1, max_length=32, description="The outputs to ask for and what each must look like."
    )
    interval_secs: float | None = Field(None, ge=1, le=86400, description="This model's interval (default: probes').")
    timeout_secs: float | None = Field(None, gt=0, le=300, description="This model's timeout (default: probes').")

    @field_validator("version")
    @classmethod
    def _digits(cls, v: str) -> str:
        if v and not v.isdigit():
            raise ValueError("must be digits (a model version) or empty")
        return v

    @field_validator("versions")
    @classmethod
    def _all_digits(cls, v: list[str]) -> list[str]:
        if any(not x.isdigit() for x in v):
            raise ValueError("every version must be digits")
        if len(set(v)) != len(v):
            raise ValueError("a version is listed twice")
        return v

    @model_validator(mode="after")
    def _inputs(self) -> ProbeModelConfig:
        if self.version and self.versions:
            raise ValueError("version or versions: not both")
        if bool(self.inputs) == bool(self.inputs_file):
            raise ValueError("inputs or inputs_file: exactly one is required")
        if self.inputs_file:
            path = Path(self.inputs_file)
            try:
                doc = json.loads(path.read_text())
            except (OSError, ValueError) as exc:
                raise ValueError(f"inputs_file: cannot read {path} as JSON ({exc})") from None
            if not isinstance(doc, list) or not doc:
                raise ValueError("inputs_file: must hold a non-empty JSON list of inputs")
            object.__setattr__(self, "inputs", [ProbeInput.model_validate(d) for d in doc])
        return self


class ProbesConfig(StrictModel):
    enabled: bool = Field(False, description="Send each listed model a known request and check its answer.")
    protocol: Literal["http", "grpc"] = Field("http", description="Triton API the probes use (tritonclient).")
    url: str | None = Field(
        None, description="Triton's address (host:port of the HTTP or gRPC API); default: triton.http_url's."
    )
    interval_secs: float = Field(10.0, ge=1, le=86400, description="How often each model is probed.")
    timeout_secs: float = Field(5.0, gt=0, le=300, description="A probe without an answer by then failed (timeout).")
    failures_to_fire: int = Field(3, ge=1, le=100, description="Consecutive failures that make a finding.")
    max_per_sec: float = Field(
        5.0, gt=0, le=1000, description="Probes sent per second at most, all models together (more wait, counted)."
    )
    max_concurrent: int = Field(4, ge=1, le=64, description="Probes in flight at once.")
    severity: Literal["info", "warning", "critical"] = Field("critical", description="Severity of the alerts.")
    models: dict[str, ProbeModelConfig] = Field(
        default_factory=dict, max_length=1000, description="Per model: its request and what the answer must be."
    )

    @model_validator(mode="after")
    def _models(self) -> ProbesConfig:
        if self.enabled and not self.models:
            raise ValueError("models: at least one model is required when probes are enabled")
        return self
