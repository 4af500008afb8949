"""The store of recent edge hops the trace page joins to spans: keys, widths, budgets and their counters."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from sidecar.config import parse_config
from sidecar.processors.edge_record import EdgeRecord
from sidecar.state.edge_hops import EdgeHops, EdgeJoinConfig, hop_bytes, request_ids_of

TID = "4bf92f3577b34da6a3ce929d0e0e4736"


def _hop(trace: str | None = None, request: str | None = None, path: str = "/v2/models/m/infer") -> EdgeRecord:
    return EdgeRecord(1_765_000_000.0, path, "MISS", 0.02, 0.015, 200, "edge-1", trace, request)


def _store(**kw: int) -> tuple[EdgeHops, CollectorRegistry]:
    reg = CollectorRegistry()
    return EdgeHops(EdgeJoinConfig(**kw), registry=reg), reg


def _evicted(reg: CollectorRegistry, reason: str) -> float | None:
    return reg.get_sample_value("sidecar_edge_hops_evicted_total", {"reason": reason})


def test_joins_by_trace_id_any_case_and_by_opaque_request_ids_of_any_width() -> None:
    hops, _ = _store()
    ids = ["0af7651916cd43dd", "abcdefghij-KLMNOP_qr", "x" * 56, "00000000000000000000000000000000"]
    hops.observe([_hop(trace=TID)] + [_hop(request=q, path=f"/{i}") for i, q in enumerate(ids)])
    found = hops.find(TID.upper())
    assert found is not None and found.trace_id == TID
    for i, q in enumerate(ids):
        r = hops.find(None, [q])
        assert r is not None and r.path == f"/{i}"
    assert hops.find("f" * 32, ["nope"]) is None


def test_the_trace_id_wins_over_a_request_id_and_the_first_known_request_id_is_taken() -> None:
    hops, _ = _store()
    hops.observe([_hop(trace=TID, path="/by-trace"), _hop(request="r1", path="/r1"), _hop(request="r2", path="/r2")])
    assert hops.find(TID, ["r1"]).path == "/by-trace"  # type: ignore[union-attr]
    assert hops.find("e" * 32, ["unknown", "r2", "r1"]).path == "/r2"  # type: ignore[union-attr]


def test_span_attributes_carry_the_request_id_as_a_string_or_an_otel_header_list() -> None:
    names = EdgeJoinConfig().request_id_attributes
    attrs = [{"other": "x"}, {"http.request.header.x-request-id": ["q-1", "q-2"]}, {"request_id": "q-3"}]
    assert request_ids_of(attrs, names) == ["q-1", "q-3"]
    hops, _ = _store()
    hops.observe([_hop(request="q-3")])
    assert hops.find_for_spans("a" * 32, attrs) is not None


def test_the_item_budget_evicts_the_oldest_and_counts_it() -> None:
    hops, reg = _store(max_hops=3)
    hops.observe([_hop(request=f"r{i}") for i in range(5)])
    assert len(hops) == 3
    assert hops.find(None, ["r0"]) is None and hops.find(None, ["r1"]) is None
    assert hops.find(None, ["r4"]) is not None
    assert _evicted(reg, "items") == 2
    assert reg.get_sample_value("sidecar_edge_hops_held") == 3


def test_the_byte_budget_evicts_and_counts_and_the_held_bytes_stay_exact() -> None:
    one = hop_bytes(_hop(request="r00", path="/" + "p" * 99))
    hops, reg = _store(max_bytes=one * 4)
    hops.observe([_hop(request=f"r{i:02d}", path="/" + "p" * 99) for i in range(10)])
    assert len(hops) == 4 and hops.bytes == one * 4
    assert _evicted(reg, "bytes") == 6 and not _evicted(reg, "items")
    assert hops.find(None, ["r05"]) is None and hops.find(None, ["r09"]) is not None


def test_a_repeated_id_finds_the_newest_and_the_old_hops_eviction_leaves_it_indexed() -> None:
    hops, reg = _store(max_hops=2)
    hops.observe([_hop(trace=TID, path="/old"), _hop(trace=TID, path="/new")])
    assert hops.find(TID).path == "/new"  # type: ignore[union-attr]
    hops.observe([_hop(request="r1")])  # the old hop of TID goes first: TID still finds the new one
    assert _evicted(reg, "items") == 1 and hops.find(TID).path == "/new"  # type: ignore[union-attr]
    hops.observe([_hop(request="r2")])
    assert hops.find(TID) is None and hops.find(None, ["r1"]) is not None
    # A hop indexed by both ids: a newer hop of one id leaves it found by the other.
    hops.observe([_hop(trace="b" * 32, request="both", path="/both"), _hop(request="both", path="/again")])
    assert hops.find("b" * 32).path == "/both"  # type: ignore[union-attr]
    assert hops.find(None, ["both"]).path == "/again"  # type: ignore[union-attr]


def test_lines_without_ids_are_skipped_and_counted() -> None:
    hops, reg = _store()
    hops.observe([_hop(), _hop(), _hop(request="r")])
    assert len(hops) == 1
    assert reg.get_sample_value("sidecar_edge_hops_skipped_total") == 2


@pytest.mark.parametrize(("key", "value"), [("max_hops", 0), ("max_bytes", -1)])
def test_bad_bounds_name_the_field(key: str, value: int) -> None:
    with pytest.raises(Exception, match=f"edge.join.{key}"):
        parse_config({"edge": {"enabled": True, "join": {key: value}}})
