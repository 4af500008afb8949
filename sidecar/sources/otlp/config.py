"""The config of the OTLP receiver (``traces.limits``): bounds on the names and text a span may carry."""

from __future__ import annotations

from pydantic import Field, model_validator

from sidecar.configbase import StrictModel

__all__ = ["SpanLimitsConfig"]


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
