"""The config of the Triton trace-file reader (``traces.file``; ``events.triton_trace`` is beside the events
sources): the model is the documentation."""

from __future__ import annotations

from pydantic import Field

from sidecar.configbase import StrictModel

__all__ = ["TraceFileConfig"]


class TraceFileConfig(StrictModel):
    path: str | None = Field(
        default=None,
        description="The file Triton was started with (`--trace-config triton,file=PATH`); the sidecar "
        "follows PATH "
        "and its rotations PATH.0, PATH.1, ... Unset: no trace files are read.",
    )
    poll_interval_secs: float = Field(
        default=1.0, gt=0, description="How often the trace files are checked for new data."
    )
    settle_secs: float = Field(
        default=5.0,
        gt=0,
        description="A file that is still not a complete JSON array after this long without changing is read "
        "leniently (the records before the damage are used, the rest is counted as a parse error).",
    )
    max_pending_requests: int = Field(
        default=10000,
        gt=0,
        description="Requests seen only partly (their records not all written yet) kept at once.",
    )
    max_files_remembered: int = Field(
        default=10000,
        gt=0,
        description="Files whose read offsets are remembered; beyond it the oldest fully read ones are "
        "summarised by their rotation index and mtime (they are still not read twice).",
    )
    delete_after_read: bool = Field(
        default=False,
        description="Delete a file once it is closed, fully read, and its spans and events were published "
        "(Triton never deletes them itself). If `events.triton_trace` names the same path, either one asking "
        "is enough: the one reader deletes only after both outputs were taken.",
    )
    max_read_bytes: int = Field(
        default=16 * 1024 * 1024,
        gt=0,
        description="Most bytes read from the trace files per poll (a backlog is read over several polls); "
        "one record larger than this is skipped and counted.",
    )
    read_slice_bytes: int = Field(
        default=2 * 1024 * 1024,
        gt=0,
        description="Bytes read, turned into spans and published per pass: a poll runs passes until nothing new is "
        "left or max_read_bytes were read. Smaller passes keep a request's data in the CPU's caches from reading to "
        "publishing (about 7% less CPU a traced request than 16 MiB passes: docs/reliability-measured.md); a record "
        "longer than this is still read whole, up to max_read_bytes.",
    )
    empty_final_response: bool = Field(
        default=False,
        description="The clients of decoupled (streaming) models ask for an empty final response "
        "(tritonclient's `enable_empty_final_response`): the last response of each stream carries no token and is "
        "left out of the `llm_request` span's time to first token, end-to-end time and token count (a trace file "
        "does not say which response was empty).",
    )
    max_string_length: int = Field(
        default=256,
        gt=0,
        description="Longest model name, version, request id or tensor name taken from a trace record; a "
        'longer one is refused and counted (`sidecar_trace_file_records_refused_total{reason="string_too_long"}`).',
    )
