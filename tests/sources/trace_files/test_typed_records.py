"""The typed decode of trace records (sidecar/sources/trace_files/typed.py) against the ordinary path: whenever
it takes a run of records, folding its structs gives the same requests, in the same order, with the same
refusals as folding orjson's dicts; whatever it refuses is read the ordinary way, so a scan with it (``lean``)
gives the same records, offsets and counts as one without."""

from __future__ import annotations

import json

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tracefile_helpers import scan_figures

from sidecar.sources.trace_files.records import scan
from sidecar.sources.trace_files.requests import Assembler, Request
from sidecar.sources.trace_files.typed import Rec, RecMany, decode_run

_BIG = [0, 1, 7, (1 << 63) - 1, 1 << 63, (1 << 64) - 1, 1 << 64, 1 << 70, -1, -(1 << 63), -(1 << 63) - 1]
_scalar = st.one_of(
    st.sampled_from(_BIG),
    st.integers(-3, 40),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.none(),
    st.text(max_size=4),
    st.sampled_from(["REQUEST_START", "REQUEST_END", "QUEUE_START", "ctr", "x" * 65, "é", ""]),
)
_value = st.one_of(_scalar, st.lists(_scalar, max_size=2), st.dictionaries(st.text(max_size=2), _scalar, max_size=2))
_stamp = st.one_of(
    st.fixed_dictionaries({"name": st.sampled_from(["REQUEST_START", "REQUEST_END", "A", "N" * 64]), "ns": _scalar}),
    st.fixed_dictionaries({"name": _scalar, "ns": st.integers(0, 99)}),
    st.dictionaries(st.sampled_from(["name", "ns", "other"]), _scalar, max_size=3),
    _scalar,
)
_tensor = st.one_of(
    st.fixed_dictionaries({"name": st.sampled_from(["x", "score"]), "data": st.just("1,2"), "shape": st.just("2")}),
    st.dictionaries(st.sampled_from(["name", "data", "shape", "dtype"]), _value, max_size=4),
    _scalar,
)
_FIELDS = {
    "timestamps": st.one_of(st.lists(_stamp, max_size=3), _scalar),
    "model_name": st.one_of(st.sampled_from(["ctr", "fraud", "", "long-name"]), _scalar),
    "model_version": st.one_of(st.integers(0, 3), st.sampled_from(["1", "v2"]), _scalar),
    "request_id": st.one_of(st.sampled_from(["req-1", "", "r" * 9]), _scalar),
    "parent_id": st.one_of(st.integers(0, 5), _scalar),
    "tensor": _tensor,
    "activity": st.just("TENSOR_QUEUE_INPUT"),
    "other": _value,
}
_record = st.builds(
    lambda i, extra: {"id": i, **extra},
    st.one_of(st.integers(0, 5), st.integers(0, 5), _scalar),
    st.fixed_dictionaries({}, optional=_FIELDS),
)
_ids = st.integers(0, 4)
_opt_text = st.one_of(st.none(), st.text(max_size=4))
# Triton-shaped records with values the typed decode takes (most runs of these are taken typed), near the fold's
# limits: short strings against max_string, repeated timestamp names, tensors named again, model records of
# every optional field.
_good = st.one_of(
    st.fixed_dictionaries(
        {
            "id": _ids,
            "timestamps": st.lists(
                st.fixed_dictionaries(
                    {
                        "name": st.one_of(st.sampled_from(["REQUEST_END", "N" * 64]), st.text(max_size=3)),
                        "ns": st.one_of(st.integers(0, 9), st.just((1 << 63) - 1)),
                    }
                ),
                max_size=2,
            ),
        }
    ),
    st.builds(
        lambda i, name, extra: {"id": i, "model_name": name, **extra},
        _ids,
        st.one_of(st.none(), st.text(max_size=4)),
        st.fixed_dictionaries(
            {},
            optional={
                "model_version": st.one_of(st.integers(-(1 << 63), (1 << 63) - 1), st.text(max_size=3), st.none()),
                "request_id": _opt_text,
                "parent_id": st.one_of(st.integers(0, (1 << 63) - 1), st.none()),
            },
        ),
    ),
    st.builds(
        lambda i, t: {"id": i, "activity": "TENSOR_BACKEND_OUTPUT", "tensor": t},
        _ids,
        st.fixed_dictionaries(
            {"name": st.text(max_size=3)},
            optional={"data": _opt_text, "shape": _opt_text, "dtype": st.just("FP32")},
        ),
    ),
)
_RAW = st.sampled_from(
    [
        b'{"id":1,"id":2,"timestamps":[{"name":"A","ns":1,"name":"B"}]}',  # repeated keys: the last wins
        b'{"id":1,"model_name":"a","model_name":null}',
        b'{"id":1,"other":"\xff"}',  # invalid UTF-8 outside any field the fold reads
        b'{"id":1,"model_name":"\xff"}',
        b'{"id":1,"other":99999999999999999999999999}',
        b'{"id":1,"timestamps":[{"name":"A","ns":1e3}]}',
        b'{"id":1,"timestamps":[{"name":"A","ns":-0}]}',
        b'{"id":1,"x":NaN}',
        b"[1]",
        b'"text"',
        b'{"id":1,"timestamps":[{"name":"A","ns":1}]} ',
    ]
)


def _text(records: list[object], raw: list[bytes], compact: bool) -> bytes:
    seps = (",", ":") if compact else (", ", ": ")  # Triton writes compact; the other spacing too
    parts = [json.dumps(r, separators=seps, ensure_ascii=not compact).encode() for r in records] + raw
    return b",".join(parts)


def _fold(records: list[object], max_string: int) -> tuple[list[tuple[int, Request]], dict[str, int]]:
    asm = Assembler(4, max_string)
    into: dict[int, Request] = {}
    asm.add(records, into)
    return list(into.items()) + list(asm.pending.items()), asm.refused


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.one_of(_good, _good, _good, _record), max_size=8),
    st.lists(_RAW, max_size=2),
    st.booleans(),
    st.sampled_from([2, 256]),
)
def test_typed_records_fold_as_the_dicts_do(records, raw, compact, max_string):
    body = _text(records, raw, compact)
    typed = decode_run(body)
    try:
        dicts = orjson.loads(b"[" + body + b"]")
    except orjson.JSONDecodeError:
        dicts = scan(b"[" + body + b"]", fast=False).records
    if typed is not None:
        assert len(typed) == len(dicts)
        assert all(type(r) is Rec for r in typed) or all(type(r) is RecMany for r in typed)
        assert _fold(typed, max_string) == _fold(dicts, max_string)
    buf = b"[" + body + b"]"
    old, new = scan(buf), scan(buf, lean=True)
    assert scan_figures(new) == scan_figures(old)
    assert _fold(new.records, max_string) == _fold(old.records, max_string)


def test_triton_records_take_the_typed_path():
    """Triton's own records (every shape the recorded files hold) are all taken typed, none left to the
    ordinary path; a record it would refuse sends the whole run the ordinary way."""
    body = (
        b'{"id":1,"timestamps":[{"name":"HTTP_RECV_START","ns":8357536111656}]},'
        b'{"id":1,"model_name":"ctr","model_version":2,"request_id":"req-1"},'
        b'{"id":2,"model_name":"ensemble_step","model_version":1,"parent_id":1},'
        b'{"id":1,"activity":"TENSOR_QUEUE_INPUT","tensor":{"name":"x","data":"1,2","shape":"2,1","dtype":"FP32"}}'
    )
    got = decode_run(body)
    assert got is not None and [r.id for r in got] == [1, 1, 2, 1] and {type(r) for r in got} == {Rec}
    reqs, refused = _fold(got, 256)
    one = dict(reqs)[1]
    assert (one.model, one.version, one.request_id) == ("ctr", "2", "req-1")
    assert one.stamps == {"HTTP_RECV_START": 8357536111656}
    assert one.tensors == {"x": {"data": "1,2", "shape": "2,1"}}
    assert dict(reqs)[2].parent_id == 1 and not refused
    assert decode_run(body + b',{"id":-1}') is None  # the ordinary path refuses it as bad_id and counts it
    assert decode_run(body + b',{"id":1,"timestamps":[{"name":"A","ns":1.5}]}') is None
    assert decode_run(body + b",[1]") is None  # not an object: counted by the ordinary path


@pytest.mark.parametrize("many", [False, True])
def test_typed_records_meet_the_folds_limits_as_the_dicts_do(many):
    """Past the per-request limits (timestamp names, tensors) and with repeated names, the typed fold refuses
    and keeps what the ordinary one does, for records of one timestamp (``Rec``) and of several (``RecMany``)."""
    recs: list[dict[str, object]] = [{"id": 3, "timestamps": [{"name": f"S{i}", "ns": i}]} for i in range(70)]
    recs += [{"id": 3, "timestamps": [{"name": "S1", "ns": 100 + i}]} for i in range(3)]
    recs += [{"id": 3, "timestamps": [{"name": "S2", "ns": 5}]} for i in range(3)]
    if many:
        recs.append({"id": 4, "timestamps": [{"name": "A", "ns": 1}, {"name": "A", "ns": 2}]})
    recs += [{"id": 3, "tensor": {"name": f"t{i}", "data": "1", "shape": "1"}} for i in range(70)]
    recs += [{"id": 3, "tensor": {"name": "t1", "data": "2"}}]
    body = b",".join(orjson.dumps(r) for r in recs)
    typed = decode_run(body)
    assert typed is not None and {type(r) for r in typed} == {RecMany if many else Rec}
    got, refused = _fold(typed, 256)
    assert (got, refused) == _fold(orjson.loads(b"[" + body + b"]"), 256)
    assert refused == {"too_many_timestamps": 6, "too_many_tensors": 6}
    q = dict(got)[3]
    assert q.repeats == {"S1": [1, 100, 101, 102], "S2": [2, 5, 5, 5]} and q.tensors["t1"] == {"data": "2", "shape": ""}
    if many:
        assert dict(got)[4].repeats == {"A": [1, 2]}
