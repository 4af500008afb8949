"""The columnar fold (``scan(lean=COLUMNS)`` + ``Assembler.add_columns``, the source's reads) against the frozen
record-by-record assembler of tests/helpers/trace_files_before.py: the same requests (stamps, repeats, model,
tensors), in the same order, with the same refusals and offsets, whatever the text holds and wherever reads
cut it."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from trace_files_before import AssemblerBefore

from sidecar.sources.trace_files.records import COLUMNS, scan
from sidecar.sources.trace_files.requests import Assembler, Request


def _stamp(tid: int, name: str, ns: int) -> bytes:
    return b'{"id":%d,"timestamps":[{"name":"%s","ns":%d}]}' % (tid, name.encode(), ns)


_names = st.sampled_from(["REQUEST_START", "QUEUE_START", "COMPUTE_START", "REQUEST_END", "GRPC_SEND_START"])
_ids = st.integers(0, 5)
_records = st.one_of(
    st.builds(_stamp, _ids, _names, st.integers(0, 10**15)),
    st.builds(lambda t: b'{"id":%d,"model_name":"ctr","model_version":1,"request_id":"r%d"}' % (t, t), _ids),
    st.builds(lambda t, p: b'{"id":%d,"model_name":"m","model_version":2,"parent_id":%d}' % (t, p), _ids, _ids),
    st.builds(lambda t: b'{"id":%d,"tensor":{"name":"x","data":"1,2","shape":"1,2"}}' % t, _ids),
    st.sampled_from(
        [
            b'{"id":1,"timestamps":[{"name":"A","ns":1},{"name":"B","ns":2}]}',  # two timestamps: not columns
            b'{"id":-1,"model_name":"ctr"}',
            b'{"id":true,"tensor":{"name":"y"}}',
            b'{"id":2,"timestamps":[{"name":"' + b"N" * 65 + b'","ns":1}]}',
            b"[1]",
            b'{"id": 3, "timestamps": [{"name": "COMPUTE_END", "ns": 7}]}',
        ]
    ),
)


def _fold(parts: list[bytes], cut: int, how: str) -> tuple[list[dict[int, Request]], dict[str, int]]:
    """Read ``parts`` as a trace file ``cut`` bytes at a time, as the source does, settling after each read:
    ``how`` "before" (the frozen assembler on decoded records), "records" (today's, record by record) or
    "columns"."""
    data = b"[" + b",".join(parts) + b"]\n"
    asm = AssemblerBefore(3, 256) if how == "before" else Assembler(3, 256)
    out: list[dict[int, Request]] = []
    offset = 0
    for _ in range(len(data) + 2):
        lean = {"before": False, "records": True, "columns": COLUMNS}[how]
        sc = scan(data[offset : offset + cut], at_start=offset == 0, lean=lean)
        into: dict[int, Request] = {}
        if sc.columns is not None:
            asm.add_columns(sc.columns, into)
        asm.add(sc.records, into)
        out.append(dict(into))
        asm.settle(into, False)
        offset += sc.consumed
        if sc.closed:
            break
    return out, dict(asm.refused)


@settings(max_examples=300, deadline=None)
@given(st.lists(_records, max_size=30), st.sampled_from([1 << 20, 400, 120]))
def test_columns_fold_to_the_same_requests_as_record_by_record(parts: list[bytes], cut: int) -> None:
    old, old_refused = _fold(parts, cut, "before")
    rec, _ = _fold(parts, cut, "records")
    new, new_refused = _fold(parts, cut, "columns")
    assert len(new) == len(old) == len(rec)
    for a, r, b in zip(old, rec, new, strict=True):
        assert list(b) == list(a)  # order of first appearance
        assert b == a
        assert [q.repeats for q in b.values()] == [q.repeats for q in r.values()]  # (not compared by ==)
    assert new_refused == old_refused


def test_repeats_are_kept_in_file_order_through_columns() -> None:
    parts = [_stamp(1, "GRPC_SEND_START", t) for t in (5, 3, 9)] + [_stamp(1, "REQUEST_START", 1)]
    sc = scan(b"[" + b",".join(parts) + b"]", lean=COLUMNS)
    assert sc.columns is not None and not sc.records
    into: dict[int, Request] = {}
    Assembler(10, 256).add_columns(sc.columns, into)
    assert into[1].repeats == {"GRPC_SEND_START": [5, 3, 9]}
    assert into[1].stamps == {"GRPC_SEND_START": 9, "REQUEST_START": 1}
