"""The CDN config examples read lines built from each CDN's documented log fields."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.processors.edge import EdgeProcessor
from sidecar.sources.edge.examples import CDN_EXAMPLES
from sidecar.sources.edge.parse import EdgeParser

NOW = 1_764_945_000.0  # 2025-12-05 14:30 UTC

# CloudFront standard logging (v2), JSON output: the documented field names, values as its docs show them.
CLOUDFRONT = [
    {
        "date": "2025-12-05",
        "time": "14:29:41",
        "x-edge-location": "FRA56-P3",
        "sc-bytes": "1045619",
        "c-ip": "192.0.2.10",
        "cs-method": "GET",
        "cs(Host)": "d111111abcdef8.cloudfront.net",
        "cs-uri-stem": "/model/weights/v1.3.7-onnx",
        "sc-status": "200",
        "cs(Referer)": "-",
        "cs(User-Agent)": "python-httpx/0.28",
        "cs-uri-query": "-",
        "x-edge-result-type": "Hit",
        "x-edge-request-id": "SOX4xwn4XV6Q4rgb7XiVGOHms_BGlTAC4KyHmureZmBNrjGdRLiNIQ==",
        "time-taken": "0.002",
        "origin-fbl": "-",
        "origin-lbl": "-",
    },
    {
        "date": "2025-12-05",
        "time": "14:29:42",
        "x-edge-location": "IAD89-C1",
        "cs-uri-stem": "/model/weights/v1.4.0",
        "sc-status": "200",
        "x-edge-result-type": "Miss",
        "x-edge-request-id": "k6WGMNkEzR5BEM_SaF47gjtX9zBDO2m349OY2an0QPEaUum1ZOLrow==",
        "time-taken": "0.231",
        "origin-fbl": "0.120",
        "origin-lbl": "0.201",
    },
    {
        "date": "2025-12-05",
        "time": "14:29:43",
        "x-edge-location": "FRA56-P3",
        "cs-uri-stem": "/model/weights/v1.3.7-onnx",
        "sc-status": "200",
        "x-edge-result-type": "RefreshHit",
        "x-edge-request-id": "a3ce929d0e0e4736",
        "time-taken": "0.050",
        "origin-lbl": "0.040",
    },
    {
        "date": "2025-12-05",
        "time": "14:29:44",
        "x-edge-location": "FRA56-P3",
        "cs-uri-stem": "/v2/models/ctr/infer",
        "sc-status": "502",
        "x-edge-result-type": "Error",
        "x-edge-request-id": "b-" + "x" * 54,
        "time-taken": "0.010",
        "origin-lbl": "-",
    },
]

# Fastly, a JSON log format after its documented default (timestamp, time_elapsed in µs, url, cache_status).
FASTLY = [
    {
        "timestamp": "2025-12-05T14:29:50",
        "time_elapsed": "1830",
        "is_tls": "true",
        "client_ip": "192.0.2.20",
        "request": "GET",
        "host": "models.example.com",
        "url": "/model/weights/v1.3.7-onnx?sig=abc",
        "cache_status": "HIT",
        "pop": "FRA",
        "status": 200,
        "request_id": "5f3c1a2b9d8e7f60",
        "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    },
    {
        "timestamp": "2025-12-05T14:29:51",
        "time_elapsed": "184220",
        "url": "/model/weights/v1.4.0",
        "cache_status": "MISS",
        "pop": "IAD",
        "status": 200,
        "request_id": "77aa",
        "traceparent": "",
    },
    {
        "timestamp": "2025-12-05T14:29:52",
        "time_elapsed": "900",
        "url": "/v2/models/ctr/infer",
        "cache_status": "PASS",
        "pop": "FRA",
        "status": 200,
        "request_id": "88bb",
        "traceparent": "",
    },
]


def _read(name: str, lines: list[dict[str, Any]]) -> tuple[EdgeProcessor, list[Any]]:
    cfg = parse_config({"edge": CDN_EXAMPLES[name]}).edge
    parser = EdgeParser(cfg.source)
    records = [parser.parse(line, f"line {i}", NOW) for i, line in enumerate(lines)]
    proc = EdgeProcessor(cfg.series, registry=CollectorRegistry(), clock=FakeClock(NOW))
    proc.observe(records)
    return proc, records


def test_cloudfront_lines_map_times_nodes_latencies_and_results() -> None:
    proc, recs = _read("cloudfront", CLOUDFRONT)
    assert recs[0].at == 1_764_944_981.0
    assert [r.node for r in recs] == ["FRA56-P3", "IAD89-C1", "FRA56-P3", "FRA56-P3"]
    assert [r.origin_s for r in recs] == [None, pytest.approx(0.201), pytest.approx(0.04), None]
    assert recs[1].edge_s == pytest.approx(0.231)
    assert recs[0].request_id is not None and len(recs[0].request_id) == 56  # kept whole, not refused
    assert recs[0].trace_id is None
    assert proc.hits("all", NOW - 120, NOW + 60) == (
        2,
        3,
    )  # Hit and RefreshHit of Hit, Miss, RefreshHit; Error left out


def test_fastly_lines_map_microseconds_query_strings_and_traceparent() -> None:
    proc, recs = _read("fastly", FASTLY)
    assert recs[0].path == "/model/weights/v1.3.7-onnx"
    assert recs[0].edge_s == pytest.approx(0.00183)
    assert recs[1].edge_s == pytest.approx(0.18422)
    assert recs[0].trace_id == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert recs[0].request_id == "5f3c1a2b9d8e7f60"
    assert all(r.origin_s is None for r in recs)
    assert proc.hits("all", NOW - 120, NOW + 60) == (1, 2)  # PASS is not in the ratio


def test_nginx_example_is_the_default_mapping() -> None:
    cfg = parse_config({"edge": CDN_EXAMPLES["nginx"]}).edge
    assert cfg.source.fields.cache_status == "cache" and cfg.source.files[0].path.endswith(".json")
