"""The tailer's many-lines loop (sidecar/sources/edge/lines.py) gives, line for line, what the reference parser
gives: the same record, or a refusal naming the same field; lines that are not JSON are counted, blank ones
skipped."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from sidecar.processors.edge_record import EdgeRecord
from sidecar.sources.edge.config import EdgeSourceConfig
from sidecar.sources.edge.lines import parse_lines
from sidecar.sources.edge.parse import EdgeParser, EventError

NOW = 1_765_000_000.0
KEYS = ["time", "path", "cache", "request_time", "upstream_time", "status", "node", "trace_id", "request_id", "x"]
# Each field: usually a valid value of the usual shape (the inline path), sometimes a valid value of another
# shape or an invalid one (the reference path).
VALID = {
    "time": st.floats(min_value=NOW - 3000, max_value=NOW + 30),
    "path": st.sampled_from(["/v2/models/ctr/infer", "/model/weights/v1.3.7-onnx", "/m"]),
    "cache": st.sampled_from(["HIT", "miss", "Stale", "-", "", "MISS"]),
    "request_time": st.floats(min_value=0, max_value=100),
    "upstream_time": st.sampled_from(["-", "", "0.012", "0.2", " 0.3 ", "1e1"]),
    "status": st.sampled_from([200, 304, 503]),
    "node": st.sampled_from(["pop1", "pop2", ""]),
    "trace_id": st.sampled_from(["", "-", "00-" + "a" * 32 + "-" + "b" * 16 + "-01", "A" * 32, "0" * 32, "abc"]),
    "request_id": st.sampled_from(["", "-", "req-1", "req-2"]),
}
OTHER = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 10**6),
    st.floats(),
    st.text(max_size=8),
    st.lists(st.none()),
    st.sampled_from(["/a?b=1", "x" * 300, "0.01, 0.2", "nan", "inf", "1e9", "99", "200", f"{NOW:.3f}"]),
)


def _field(v: Any) -> Any:
    return st.integers(0, 11).flatmap(lambda i: OTHER if i == 0 else v)


docs = st.builds(
    lambda d, unknown: {**d, **({"x": 1} if unknown == 0 else {})},
    st.fixed_dictionaries(
        {k: _field(VALID[k]) for k in ("time", "path", "status")},
        optional={k: _field(v) for k, v in VALID.items() if k not in ("time", "path", "status")},
    ),
    st.integers(0, 9),
)

RECORDS: list[int] = []


def _reference(parser: EdgeParser, line: bytes) -> object:
    try:
        doc = orjson.loads(line)
    except orjson.JSONDecodeError:
        return "not json"
    try:
        return parser.parse(doc, "line", NOW)
    except EventError as exc:
        return ("refused", exc.field)


@settings(max_examples=150, deadline=None)
@given(st.lists(docs, max_size=8), st.booleans(), st.sampled_from([None, "file-node"]))
def test_each_line_gets_the_reference_answer(batch: list[dict[str, Any]], ignore_unknown: bool, node: Any) -> None:
    cfg = EdgeSourceConfig(unknown_fields="ignore" if ignore_unknown else "reject", max_string_length=256)
    parser = EdgeParser(cfg, node=node)
    lines = [orjson.dumps(d, option=orjson.OPT_SERIALIZE_NUMPY) for d in batch] + [b"{not json", b"  ", b"[1]"]
    got = parse_lines(parser, lines, NOW)
    want = [_reference(parser, line) for line in lines]
    refused = {i: ("refused", exc.field) for i, exc in got.invalid}
    records = iter(got.records)
    for i, w in enumerate(want):
        if w == "not json":
            continue
        if isinstance(w, EdgeRecord):
            assert i not in refused and next(records) == w, (lines[i], w)
        else:
            assert refused.get(i) == w, (lines[i], w)
    assert next(records, None) is None
    RECORDS.append(len(got.records))
    assert got.not_json == 1  # "{not json"; the blank line is skipped, "[1]" is refused naming the line
    assert refused[len(lines) - 1] == ("refused", "line")


def test_most_lines_of_the_property_test_were_records() -> None:
    # Runs after it (file order): the inline path was exercised, not only refusals.
    assert sum(RECORDS) > 150, sum(RECORDS)
