"""Whatever a log line holds, the parser returns a record or refuses it naming a field; it never raises anything
else (a crash would be a 500 on POST /v1/edge, or a lost read of the tailer)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from sidecar.sources.edge.config import EdgeSourceConfig
from sidecar.sources.edge.parse import EdgeParser, EventError

NOW = 1_765_000_000.0
KEYS = ["time", "path", "cache", "request_time", "upstream_time", "status", "node", "trace_id", "request_id", "x"]
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=80),
    st.sampled_from(
        [
            "-",
            "",
            "HIT",
            "0.01, 0.2",
            "200",
            f"{NOW:.3f}",
            "2025-12-06T05:46:35Z",
            "00-" + "a" * 32 + "-" + "b" * 16 + "-01",
        ]
    ),
)
values = st.one_of(scalars, st.lists(scalars, max_size=3), st.dictionaries(st.text(max_size=5), scalars, max_size=3))


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(st.sampled_from(KEYS), values, max_size=len(KEYS)), st.booleans())
def test_any_document_gives_a_record_or_a_named_refusal(doc: dict[str, Any], ignore_unknown: bool) -> None:
    cfg = EdgeSourceConfig(unknown_fields="ignore" if ignore_unknown else "reject")
    try:
        r = EdgeParser(cfg).parse(doc, "l", NOW)
    except EventError as exc:
        assert exc.field.startswith("l")
        return
    assert 100 <= r.status <= 599 and isinstance(r.status, int)
    assert r.edge_s is None or 0 <= r.edge_s <= 86_400
    assert r.origin_s is None or 0 <= r.origin_s <= 86_400
    assert r.trace_id is None or len(r.trace_id) == 32
    assert len(r.path) <= cfg.max_string_length


@settings(max_examples=200, deadline=None)
@given(st.one_of(scalars, st.lists(scalars, max_size=3)))
def test_a_document_that_is_not_an_object_is_refused(doc: Any) -> None:
    try:
        EdgeParser(EdgeSourceConfig()).parse(doc, "l", NOW)
    except EventError as exc:
        assert exc.field == "l"
    else:
        raise AssertionError("accepted a non-object")
