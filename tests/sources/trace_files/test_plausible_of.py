"""``plausible_of`` (the source's check from each request's first and last time, taken once with its clock
offset) keeps exactly the requests ``plausible`` keeps."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sidecar.sources.trace_files.requests import MAX_NS, Request
from sidecar.sources.trace_files.spans import MAX_REQUEST_NS, plausible, plausible_of

_ns = st.one_of(st.integers(0, 10), st.sampled_from([MAX_NS, MAX_NS - 5, MAX_REQUEST_NS, MAX_REQUEST_NS + 1]))
_offset = st.one_of(st.integers(-12, 12), st.sampled_from([-MAX_NS, MAX_NS, -MAX_REQUEST_NS, 5 - MAX_NS]))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from(["A", "B", "C"]), _ns, max_size=3), max_size=6), _offset)
def test_plausible_of_keeps_what_plausible_keeps(stamps, offset):
    reqs = [Request(i, s) for i, s in enumerate(stamps)]
    bounds = [(min(q.stamps.values()), max(q.stamps.values())) if q.stamps else None for q in reqs]
    assert plausible_of(reqs, offset, bounds) == [q for q in reqs if plausible(q, offset)]
