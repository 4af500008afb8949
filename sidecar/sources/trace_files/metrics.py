"""The trace-file source's self-telemetry (one set per registry)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter

__all__ = ["TraceFileMetrics"]


class TraceFileMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.files = Counter(
            "sidecar_trace_files_read",
            "Trace files read to the end, by how (complete: a closed "
            "array; lenient: a file that stopped changing with a record cut short).",
            ["how"],
            registry=registry,
        )
        self.errors = Counter(
            "sidecar_trace_file_errors", "Trace file problems, by reason.", ["reason"], registry=registry
        )
        self.refused = Counter(
            "sidecar_trace_file_records_refused",
            "Trace records or values refused, by reason "
            "(bad_id, bad_timestamp, string_too_long, implausible_time, ...).",
            ["reason"],
            registry=registry,
        )
        self.requests = Counter("sidecar_trace_file_requests", "Requests taken from trace files.", registry=registry)
        self.dropped = Counter(
            "sidecar_trace_file_requests_dropped",
            "Partly written requests dropped (pending map full) or emitted incomplete (never completed).",
            ["reason"],
            registry=registry,
        )
        self.rewritten = Counter(
            "sidecar_trace_files_rewritten",
            "Trace files read again from the start because they were written again under the same name.",
            registry=registry,
        )
        self.probes = Counter(
            "sidecar_trace_file_probe_requests_dropped",
            "Requests the model probe sent (request id sidecar-probe-..., and composing requests under them), left "
            "out of spans, stage histograms and tensor events.",
            registry=registry,
        )
        self.fallback = Counter(
            "sidecar_trace_file_clock_fallbacks",
            "Reads whose monotonic timestamps were anchored at the file's mtime instead.",
            registry=registry,
        )
        self.deleted = Counter(
            "sidecar_trace_files_deleted",
            "Trace files deleted after every output was published (delete_after_read).",
            registry=registry,
        )
