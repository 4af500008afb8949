"""Batches of trace-file requests whole (``span_requests``) for the tests of the readers' request paths."""

from __future__ import annotations

import string
from typing import Any

from hypothesis import strategies as st

from sidecar.model import Batch, SpanRequests
from sidecar.records import TRITON_COMPUTE_EVENTS, TRITON_MODEL_EVENTS, TRITON_REQUEST_EVENTS
from sidecar.sources.trace_files.requests import Request
from sidecar.sources.trace_files.spans import ROOT_NAME, span_records, whole_of

__all__ = ["GRPC", "HTTP", "OFFSET", "PATH", "T0", "span_request_batches", "span_requests_batch"]

T0 = 8_040_649_493_778  # Triton's ns (since its boot)
OFFSET = 1_796_218_366_000_000_000 - T0
PATH = "/var/triton/trace.json"
HTTP = ("HTTP_RECV_START", "HTTP_RECV_END", "INFER_RESPONSE_COMPLETE", "HTTP_SEND_START", "HTTP_SEND_END")
GRPC = ("GRPC_WAITREAD_START", "GRPC_WAITREAD_END", "GRPC_SEND_START", "GRPC_SEND_END")
assert set(HTTP + GRPC) == set(TRITON_REQUEST_EVENTS)


def span_requests_batch(groups: list[list[Request]]) -> Batch:
    """A ``span_requests`` batch of one ``SpanRequests`` per group, as the trace-file reader makes them."""
    items = []
    for reqs in groups:
        whole, n = whole_of(reqs, OFFSET, PATH)
        items.append(SpanRequests(tuple(reqs), tuple(whole), OFFSET, PATH, span_records, n, ROOT_NAME))
    return Batch(kind="span_requests", source="trace_file", items=tuple(items))


@st.composite
def _request(draw: Any, tid: int) -> Request:
    """A request as the reader folds one: most with every event of an HTTP or gRPC request, some missing a span's
    events, some with an event Triton may add that no span takes, any request id."""
    front = draw(st.sampled_from((HTTP, GRPC)))
    names = [*front, *TRITON_MODEL_EVENTS, *TRITON_COMPUTE_EVENTS]
    shape = draw(st.sampled_from(("whole", "whole", "whole", "no_front", "no_compute", "some", "custom")))
    if shape == "no_front":
        names = [n for n in names if n not in front]
    elif shape == "no_compute":
        names = [n for n in names if n not in TRITON_COMPUTE_EVENTS]
    elif shape == "some":
        names = draw(st.lists(st.sampled_from(names), min_size=1, max_size=6, unique=True))
    elif shape == "custom":
        names.append("CUSTOM_ACTIVITY")
    start = T0 + tid * 140_000
    # Ties on purpose (steps of 0): events of one time are ordered by name.
    times = draw(st.lists(st.integers(0, 3).map(lambda k: k * 50_000), min_size=len(names), max_size=len(names)))
    stamps = {n: start + t for n, t in zip(names, times, strict=True)}
    model = draw(st.sampled_from(("ctr", "fraud", "", "m" * 250)))  # a name longer than a record keeps
    rid = draw(st.one_of(st.just(""), st.text(string.ascii_letters + "-", max_size=40)))
    return Request(tid, stamps, model, draw(st.sampled_from(("1", "2"))), rid)


@st.composite
def span_request_batches(draw: Any) -> list[Batch]:
    """One to three batches of trace-file requests, some read again (the same trace)."""
    out = []
    tid = 0
    seen: list[Request] = []
    for _ in range(draw(st.integers(1, 3))):
        groups = []
        for _ in range(draw(st.integers(1, 2))):
            reqs: list[Request] = []
            for _ in range(draw(st.integers(1, 30))):
                if seen and draw(st.integers(0, 9)) == 0:
                    reqs.append(draw(st.sampled_from(seen)))  # read again: a duplicate trace
                else:
                    tid += 1
                    reqs.append(draw(_request(tid)))
            seen += reqs
            groups.append(reqs)
        out.append(span_requests_batch(groups))
    return out
