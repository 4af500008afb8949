"""Span records order each span's events by (time, name) whatever order the request's timestamps came in and
however many share a time: against the frozen span building (tests/helpers/trace_files_before.py) on requests
with tied and shuffled times, names of every span group and names of none."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from trace_files_before import records_before

from sidecar.records import event_times, to_span
from sidecar.sources.trace_files.requests import Request
from sidecar.sources.trace_files.spans import span_records

_NAMES = [
    "HTTP_RECV_START",
    "HTTP_RECV_END",
    "INFER_RESPONSE_COMPLETE",
    "HTTP_SEND_START",
    "HTTP_SEND_END",
    "GRPC_WAITREAD_START",
    "GRPC_SEND_END",
    "REQUEST_START",
    "QUEUE_START",
    "REQUEST_END",
    "COMPUTE_START",
    "COMPUTE_INPUT_END",
    "COMPUTE_OUTPUT_START",
    "COMPUTE_END",
    "CACHE_LOOKUP_START",  # in no span group
    "A",
]
# Times from a small range, so that many events of a request share one.
_stamps = st.dictionaries(st.sampled_from(_NAMES), st.integers(1_000, 1_004), max_size=len(_NAMES))


@settings(max_examples=300, deadline=None)
@given(st.lists(_stamps, max_size=5), st.sampled_from(["", "ctr"]), st.sampled_from(["", "r-1"]))
def test_events_in_time_then_name_order_as_before(stamps, model, rid):
    reqs = [
        Request(i, s, model=model, version="1", request_id=rid, has_model=bool(model)) for i, s in enumerate(stamps)
    ]
    new = span_records(reqs, 7, "/t/trace.json")
    old = records_before(reqs, 7, "/t/trace.json")
    assert len(new) == len(old)
    for a, b in zip(old, new, strict=True):
        assert to_span(b) == to_span(a)
        assert list(event_times(b).items()) == list(event_times(a).items())  # the order too
