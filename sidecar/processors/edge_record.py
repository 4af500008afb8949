"""One edge (CDN or edge cache) access-log line as it flows from the edge sources to the edge processor and the
purge watch: typed and bounded by the source's checks at the door, with names and units already normalised.

The edge sources hand their records straight to the sinks wiring gives them (``EdgeSink``), not through the bus:
edge lines are not an item type of ``sidecar.model``'s closed set of batch kinds (docs/edge.md says why).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, Protocol

__all__ = ["EdgeRecord", "EdgeSink"]


class EdgeRecord(NamedTuple):
    """One per log line on the hot path, so a named tuple (built several times faster than a frozen dataclass).
    ``cache`` is the edge's cache status upper-cased (``HIT``, ``MISS``, ``STALE``...; ``""`` when the edge
    logged none); latencies are seconds (``origin_s`` None when the edge did not go to the origin); ``trace_id``
    is a W3C trace id (32 lowercase hex) and ``request_id`` any other id, kept opaque whatever its width."""

    at: float
    path: str
    cache: str
    edge_s: float | None
    origin_s: float | None
    status: int
    node: str
    trace_id: str | None = None
    request_id: str | None = None
    route: str | None = None  # the edge's own route name, when it logs one (else the path is grouped)


class EdgeSink(Protocol):
    """What takes the records of one read or one request (the edge processor, the purge watch)."""

    def observe(self, records: Sequence[EdgeRecord]) -> None: ...
