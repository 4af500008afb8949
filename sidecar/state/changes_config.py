"""Config of the change log (``alerting.changes`` in the YAML file)."""

from __future__ import annotations

from pydantic import Field

from sidecar.configbase import StrictModel

__all__ = ["ChangesConfig"]


class ChangesConfig(StrictModel):
    poll_repository: bool = Field(
        default=True,
        description="Poll Triton's repository index (triton.http_url) and record versions appearing/going.",
    )
    poll_interval_secs: float = Field(default=30.0, gt=0, description="Seconds between repository-index polls.")
    max_changes: int = Field(
        default=10_000, gt=0, description="Changes kept in the store; the oldest go first (counted)."
    )
    idempotency_window_secs: float = Field(
        default=600.0,
        gt=0,
        le=86_400.0,
        description="A change posted without `id`, `Idempotency-Key` or `at` that equals, field for field, one "
        "posted this many seconds before is a retry of it: answered 200 with its id, not stored "
        "again.",
    )
    max_future_secs: float = Field(
        default=300.0,
        ge=0,
        le=86_400.0,
        description="A change posted with `at` further ahead of this sidecar's clock is refused (400 naming `at`): "
        "it would head every newest-first list until that date.",
    )
    annotate_window_secs: float = Field(
        default=86_400.0, gt=0, description="Changes this recent annotate an alert of the same model."
    )
    max_in_annotation: int = Field(default=3, gt=0, description="Most recent changes listed in an alert's description.")
