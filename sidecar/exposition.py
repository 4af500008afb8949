"""The sidecar's own /metrics body, in the format the scraper asks for."""

from __future__ import annotations

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

__all__ = ["render_metrics"]


def render_metrics(registry: CollectorRegistry, accept: str | None) -> tuple[bytes, str]:
    """The exposition of ``registry`` in the format the Accept header asks for, and its content type.

    Prometheus asks for ``application/openmetrics-text`` when exemplar storage is on; only that format carries
    exemplars (the trace ids on the stage-latency buckets). Everything else gets the classic text format.
    """
    encoder, content_type = choose_encoder(accept or "")
    return encoder(registry), content_type
