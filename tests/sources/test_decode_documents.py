"""One body decoder for every JSON push endpoint (events, edge lines): the same shapes, the same errors."""

from __future__ import annotations

import re

import pytest

from sidecar.sources.media import decode_documents


def _decode(body: bytes, mtype: str, max_docs: int = 10) -> list[object]:
    return decode_documents(body, mtype, wrapper="lines", max_docs=max_docs, what="a log-line object")


def test_json_seq_records_lose_their_rs_prefix_on_every_endpoint() -> None:
    assert _decode(b'\x1e{"a": 1}\n\x1e{"a": 2}\n', "application/json-seq") == [{"a": 1}, {"a": 2}]


def test_one_object_a_list_and_the_wrapper_give_the_same_documents() -> None:
    for body in (b'{"a": 1}', b'[{"a": 1}]', b'{"lines": [{"a": 1}]}'):
        assert _decode(body, "application/json") == [{"a": 1}]


def test_reading_lines_stops_one_past_the_bound() -> None:
    body = b"".join(b'{"i": %d}\n' % i for i in range(100))
    assert len(_decode(body, "application/x-ndjson", max_docs=3)) == 4


def test_errors_name_the_line_or_the_shape() -> None:
    with pytest.raises(ValueError, match="line 2 is not JSON"):
        _decode(b'{"a": 1}\nnope\n', "application/x-ndjson")
    with pytest.raises(ValueError, match=re.escape('a log-line object, a list of them or {"lines": [...]}')):
        _decode(b"3", "application/json")
