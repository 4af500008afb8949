"""Triton ``mode=triton`` trace files: one reader per file, publishing spans and TENSORS events from one pass.

``source`` (the component), ``records`` (incremental decoding), ``requests`` (records grouped into requests),
``spans`` and ``tensors`` (what a request becomes), ``state`` (offsets persisted in the store), ``settings``
(the merge of the two config sections naming a PATH).
"""

from sidecar.sources.trace_files.records import parse_records, scan
from sidecar.sources.trace_files.settings import TraceFileSettings, merge
from sidecar.sources.trace_files.source import TraceFileSource
from sidecar.sources.trace_files.spans import records_to_spans
from sidecar.sources.trace_files.tensors import events_from_trace_records

__all__ = [
    "TraceFileSettings",
    "TraceFileSource",
    "events_from_trace_records",
    "merge",
    "parse_records",
    "records_to_spans",
    "scan",
]
