"""Config of the edge hop store (``edge.join``): its budgets and where spans carry the edge's request id."""

from __future__ import annotations

from pydantic import Field

from sidecar.configbase import StrictModel

__all__ = ["EdgeJoinConfig"]


class EdgeJoinConfig(StrictModel):
    enabled: bool = Field(True, description="Keep recent edge hops so the trace page shows the edge in front.")
    max_hops: int = Field(50_000, gt=0, le=1_000_000, description="Hops held; the oldest go first (counted).")
    max_bytes: int = Field(
        16 * 1024 * 1024, gt=0, le=1024 * 1024 * 1024, description="Byte budget of the hops held (estimated)."
    )
    request_id_attributes: list[str] = Field(
        default_factory=lambda: ["http.request.header.x-request-id", "http.request_id", "request_id"],
        max_length=16,
        description="Span attributes that carry the request id the edge logged (an OTel header attribute such as "
        "`http.request.header.x-request-id` may hold a list: its first value is used).",
    )
