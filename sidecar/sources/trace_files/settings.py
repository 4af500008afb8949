"""What one trace-file source is asked to do: the merge of ``traces.file`` and ``events.triton_trace`` for one
PATH (wiring builds it), so each file has exactly one reader whatever the two sections say."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sidecar.sources.events.config import TensorMapping, TritonTraceConfig
from sidecar.sources.trace_files.config import TraceFileConfig

__all__ = ["TraceFileSettings", "merge"]


@dataclass(frozen=True)
class TraceFileSettings:
    path: str
    spans: bool = True  # publish spans (traces.file names this PATH)
    tensors: Mapping[str, TensorMapping] | None = None  # publish tensor events (events.triton_trace names it)
    poll_interval_secs: float = 1.0
    settle_secs: float = 5.0
    max_pending_requests: int = 10000
    max_files_remembered: int = 10000
    max_read_bytes: int = 16 * 1024 * 1024
    read_slice_bytes: int = 2 * 1024 * 1024  # bytes a pass reads (a poll reads passes up to max_read_bytes)
    max_string_length: int = 256
    max_features_per_event: int = 256
    delete_after_read: bool = False
    empty_final_response: bool = False


def merge(
    spans: TraceFileConfig | None, tensors: TritonTraceConfig | None, max_features_per_event: int = 256
) -> TraceFileSettings:
    """One source's settings from the sections naming its PATH (either may be None, not both).

    Both name it: it polls at the faster interval, and deletes a file after reading if either asks (the file
    is deleted only once spans and events from it were both published, so neither side can lose it).
    """
    if spans is None and tensors is None:
        raise ValueError("a trace-file source needs traces.file or events.triton_trace")
    sections = [c for c in (spans, tensors) if c is not None]
    base = TraceFileSettings(path="")
    reads = [c.max_read_bytes for c in sections if isinstance(c, TraceFileConfig)]
    reads += [c.max_file_bytes for c in sections if isinstance(c, TritonTraceConfig)]
    return TraceFileSettings(
        path=str(spans.path) if spans is not None and spans.path else tensors.path if tensors is not None else "",
        spans=spans is not None,
        tensors=dict(tensors.models) if tensors is not None else None,
        poll_interval_secs=min(c.poll_interval_secs for c in sections),
        settle_secs=spans.settle_secs if spans is not None else base.settle_secs,
        max_pending_requests=spans.max_pending_requests if spans is not None else base.max_pending_requests,
        max_files_remembered=spans.max_files_remembered if spans is not None else base.max_files_remembered,
        max_read_bytes=min(reads),
        read_slice_bytes=spans.read_slice_bytes if spans is not None else base.read_slice_bytes,
        max_string_length=spans.max_string_length if spans is not None else base.max_string_length,
        max_features_per_event=max_features_per_event,
        delete_after_read=any(c.delete_after_read for c in sections),
        empty_final_response=spans.empty_final_response if spans is not None else False,
    )
