"""Config of the per-request records (``sidecar.processors.request_records``); depends only on pydantic, so the
config tree can import it."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from sidecar.configbase import StrictModel

__all__ = ["RequestRecordsConfig"]


class RequestRecordsConfig(StrictModel):
    enabled: bool = Field(
        default=True,
        description="Join Triton's spans with the caller's into request records (with the audit log: "
        "alerting.enabled and alerting.audit.enabled). On by default since bench/bench_overhead.py "
        "--request-records both showed Triton's throughput unchanged with it (docs/reliability-measured.md).",
    )
    join_window_secs: float = Field(
        default=30.0, gt=0, description="How long one side waits for the other before the record is emitted alone."
    )
    sweep_interval_secs: float = Field(
        default=5.0,
        gt=0,
        le=3600,
        description="How often waiting joins are checked when no spans or events arrive: a side left alone is "
        "emitted within join_window_secs plus this.",
    )
    max_pending: int = Field(default=50_000, gt=0, description="Requests waiting for their other side at once.")
    sample_rate: float = Field(
        default=0.01, ge=0, le=1, description="Share of ok, fast requests kept in the audit log (by trace id)."
    )
    slow_ms: float = Field(default=1000.0, gt=0, description="Requests slower than this are always kept.")
    user_ids: Literal["drop", "hash"] = Field(
        default="drop", description="What becomes of a caller's user id: dropped, or HMAC-SHA256-hashed."
    )
    user_id_key_env: str | None = Field(
        default=None, description="Environment variable holding the HMAC key (needed with user_ids: hash)."
    )

    @model_validator(mode="after")
    def _key(self) -> RequestRecordsConfig:
        if self.user_ids == "hash" and not self.user_id_key_env:
            raise ValueError("user_ids: hash needs user_id_key_env")
        return self
