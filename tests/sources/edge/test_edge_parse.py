"""Edge log lines through the field mapping: units, ids of every width, and refusals that name the field."""

from __future__ import annotations

from typing import Any

import pytest

from sidecar.config import parse_config
from sidecar.errors import ConfigError
from sidecar.sources.edge.config import EdgeSourceConfig
from sidecar.sources.edge.parse import EdgeParser, EventError

NOW = 1_765_000_000.0
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def _cfg(**kw: Any) -> EdgeSourceConfig:
    return EdgeSourceConfig.model_validate(kw)


def _line(**kw: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "time": NOW - 5,
        "path": "/v2/models/ctr/infer?x=1",
        "cache": "hit",
        "request_time": 0.012,
        "upstream_time": "-",
        "status": 200,
        "node": "fra1",
    }
    doc.update(kw)
    return doc


def test_an_nginx_line_maps_to_a_record() -> None:
    r = EdgeParser(_cfg()).parse(_line(trace_id=TRACE, request_id="abc"), "line 1", NOW)
    assert (r.path, r.cache, r.status, r.node) == ("/v2/models/ctr/infer", "HIT", 200, "fra1")
    assert r.edge_s == pytest.approx(0.012)
    assert r.origin_s is None  # "-": never went to the origin
    assert (r.trace_id, r.request_id) == (TRACE, "abc")


def test_several_upstream_times_add_up_and_units_convert() -> None:
    cfg = _cfg(fields={"edge_latency_unit": "ms", "origin_latency_unit": "ms"})
    r = EdgeParser(cfg).parse(_line(request_time=250, upstream_time="100, 50"), "l", NOW)
    assert r.edge_s == pytest.approx(0.25)
    assert r.origin_s == pytest.approx(0.15)


def test_iso_time_and_quoted_msec_are_read() -> None:
    p = EdgeParser(_cfg())
    assert p.parse(_line(time="2025-12-06T05:46:35+00:00"), "l", NOW).at == pytest.approx(1765000000 - 5)
    assert p.parse(_line(time=f"{NOW - 1:.3f}"), "l", NOW).at == pytest.approx(NOW - 1)


@pytest.mark.parametrize(
    ("tid", "trace", "req_id"),
    [
        (TRACE.upper(), TRACE, None),  # upper-case W3C id: normalised
        (f"00-{TRACE}-00f067aa0ba902b7-01", TRACE, None),  # a traceparent header value
        ("a3ce929d0e0e4736", None, "a3ce929d0e0e4736"),  # 16 hex (the edge's 8-byte id): opaque, kept
        ("0" * 32, None, "0" * 32),  # the invalid all-zero trace id: not a trace, still an id
        ("x" * 40, None, "x" * 40),  # another width: never refused for it
    ],
)
def test_trace_ids_of_other_widths_are_kept_as_request_ids(tid: str, trace: str | None, req_id: str | None) -> None:
    r = EdgeParser(_cfg()).parse(_line(trace_id=tid), "l", NOW)
    assert (r.trace_id, r.request_id) == (trace, req_id)


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        ({"status": 700}, "l.status", "HTTP status"),
        ({"status": "ok"}, "l.status", "HTTP status"),
        ({"status": 200.5}, "l.status", "HTTP status"),
        ({"time": NOW + 3600}, "l.time", "future"),
        ({"time": NOW - 30 * 86400}, "l.time", "older than"),
        ({"time": NOW * 1000}, "l.time", "milliseconds"),
        ({"time": "yesterday"}, "l.time", "RFC 3339"),
        ({"request_time": -1}, "l.request_time", "between 0"),
        ({"request_time": "fast"}, "l.request_time", "number"),
        ({"path": "/" + "a" * 600}, "l.path", "longer than 512"),
        ({"node": ["a"]}, "l.node", "string"),
        ({"surprise": 1}, "l.surprise", "unknown field"),
    ],
)
def test_refusals_name_the_field(change: dict[str, Any], field: str, words: str) -> None:
    with pytest.raises(EventError) as exc:
        EdgeParser(_cfg()).parse(_line(**change), "l", NOW)
    assert exc.value.field == field
    assert words in exc.value.message


def test_missing_time_and_path_are_named() -> None:
    p = EdgeParser(_cfg())
    doc = _line()
    del doc["time"]
    with pytest.raises(EventError, match=r"l\.time: required"):
        p.parse(doc, "l", NOW)
    doc = _line()
    del doc["path"]
    with pytest.raises(EventError, match=r"l\.path: required"):
        p.parse(doc, "l", NOW)


def test_unknown_fields_can_be_listed_or_ignored() -> None:
    assert EdgeParser(_cfg(extra_fields=["ua"])).parse(_line(ua="curl"), "l", NOW).status == 200
    assert EdgeParser(_cfg(unknown_fields="ignore")).parse(_line(anything=1), "l", NOW).status == 200


def test_a_file_node_overrides_the_lines() -> None:
    assert EdgeParser(_cfg(), node="pop-7").parse(_line(), "l", NOW).node == "pop-7"


def test_config_errors_name_the_edge_field() -> None:
    with pytest.raises(ConfigError, match=r"edge\.source\.fields\.edge_latency_unit"):
        parse_config({"edge": {"source": {"fields": {"edge_latency_unit": "minutes"}}}})
    with pytest.raises(ConfigError, match=r"edge\.series\.route_groups\[0\]: .*prefixes or regex"):
        parse_config({"edge": {"series": {"route_groups": [{"name": "infer"}]}}})
    with pytest.raises(ConfigError, match=r"extra_fields"):
        parse_config({"edge": {"source": {"extra_fields": ["path"]}}})
