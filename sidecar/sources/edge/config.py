"""Config of the edge sources (``edge.source``): which JSON field of a log line means what, in which unit, and
the checks at the door (string lengths, time range, unknown fields)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from sidecar.configbase import StrictModel

__all__ = ["EdgeFields", "EdgeFileConfig", "EdgeSourceConfig", "LatencyUnit"]

LatencyUnit = Literal["s", "ms", "us"]


class EdgeFields(StrictModel):
    """Which JSON key of a log line holds each figure (the defaults fit nginx's JSON access log in docs/edge.md)."""

    time: str = Field("time", min_length=1, description="Time of the request: Unix seconds, or an RFC 3339 time.")
    date: str | None = Field(
        None,
        description="A separate date field (CloudFront's `date` beside `time`): the line's time is "
        "`<date>T<time>Z` (UTC).",
    )
    time_unit: Literal["s", "ms"] = Field("s", description="Unit of a numeric time (seconds or milliseconds).")
    path: str = Field("path", min_length=1, description="Request path (a query string is cut off).")
    route: str | None = Field(None, description="The edge's own route or cache-behaviour name, when it logs one.")
    cache_status: str = Field("cache", min_length=1, description="Cache status (HIT, MISS, STALE...).")
    edge_latency: str | None = Field(
        "request_time", description="Time the edge took for the whole request (nginx `$request_time`)."
    )
    edge_latency_unit: LatencyUnit = Field("s", description="Unit of edge_latency.")
    origin_latency: str | None = Field(
        "upstream_time",
        description="Time the origin took (nginx `$upstream_response_time`); empty or `-`: not sent to the origin. "
        "Several comma-separated times (nginx tried several upstreams) are added up.",
    )
    origin_latency_unit: LatencyUnit = Field("s", description="Unit of origin_latency.")
    status: str = Field("status", min_length=1, description="HTTP status the edge answered.")
    node: str | None = Field("node", description="Edge node or point of presence; none: every line is `edge`.")
    trace_id: str | None = Field(
        "trace_id", description="A W3C trace id, or a `traceparent` header value; other ids are kept as request ids."
    )
    request_id: str | None = Field("request_id", description="The edge's request id (any width, kept opaque).")

    def mapped(self) -> set[str]:
        names = [
            self.time,
            self.date,
            self.path,
            self.route,
            self.cache_status,
            self.edge_latency,
            self.origin_latency,
            self.status,
            self.node,
            self.trace_id,
            self.request_id,
        ]
        return {n for n in names if n}


class EdgeFileConfig(StrictModel):
    path: str = Field(..., min_length=1, description="JSON Lines access log the edge appends to.")
    poll_interval_secs: float = Field(1.0, gt=0, description="How often to read new lines.")
    max_line_bytes: int = Field(16384, gt=0, description="Longer lines are skipped and counted.")
    max_read_bytes: int = Field(8 * 1024 * 1024, gt=0, description="Most bytes read per poll (bounds one read).")
    start_at_end: bool = Field(False, description="On first sight of the file, skip what is already in it.")
    node: str | None = Field(None, max_length=128, description="Edge node of every line of this file (overrides).")


class EdgeSourceConfig(StrictModel):
    http: bool = Field(True, description="Serve POST /v1/edge (JSON, a list, or JSON Lines).")
    fields: EdgeFields = Field(default_factory=EdgeFields, description="Field mapping of a log line.")
    unknown_fields: Literal["reject", "ignore"] = Field(
        "reject",
        description="A key neither mapped nor in `extra_fields`: `reject` refuses the line naming the key; "
        "`ignore` keeps the line (for CDN logs with dozens of fields).",
    )
    extra_fields: list[str] = Field(
        default_factory=list, max_length=256, description="Keys a line may carry that are not read."
    )
    max_string_length: int = Field(512, gt=0, le=65536, description="Longest path, node, status or id.")
    max_lines_per_request: int = Field(50_000, gt=0, description="More lines in one POST gives 413.")
    max_rejections_listed: int = Field(100, gt=0, description="Rejected lines listed in a response (all counted).")
    max_future_skew_secs: float = Field(300.0, ge=0, le=86_400.0, description="Lines further ahead are refused.")
    max_age_secs: float = Field(
        7 * 86400.0, gt=0, le=366 * 86400.0, description="Older lines are refused (CDN logs may come a day late)."
    )
    files: list[EdgeFileConfig] = Field(default_factory=list, max_length=64, description="Access logs to tail.")

    @model_validator(mode="after")
    def _check(self) -> EdgeSourceConfig:
        clash = self.fields.mapped() & set(self.extra_fields)
        if clash:
            raise ValueError(f"extra_fields: {sorted(clash)[0]!r} is also a mapped field")
        return self
