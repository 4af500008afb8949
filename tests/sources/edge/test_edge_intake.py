"""POST /v1/edge through the real app and the file tailer, both built by wiring from ``edge:``."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry

from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.polled import ManualTicker
from sidecar.processors.edge_record import EdgeRecord
from sidecar.service import Service
from sidecar.sources.edge.config import EdgeFileConfig, EdgeSourceConfig
from sidecar.sources.edge.jsonl import EdgeTailer
from sidecar.sources.edge.metrics import EdgeSourceMetrics
from sidecar.store import Store

NOW = 1_765_000_000.0


def _line(**kw: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {"time": NOW - 5, "path": "/p", "cache": "HIT", "request_time": 0.01, "status": 200}
    doc.update(kw)
    return doc


@pytest.fixture
def client(tmp_path: Path) -> Iterator[tuple[TestClient, Service]]:
    from sidecar.app import create_app
    from sidecar.wiring.edge import build

    cfg = parse_config(
        {"server": {"push_token": "t0k"}, "edge": {"enabled": True, "source": {"max_lines_per_request": 10}}}
    )
    svc = Service(
        cfg, clock=FakeClock(NOW), registry=CollectorRegistry(), store=Store(tmp_path / "s.sqlite"), factories=[build]
    )
    with TestClient(create_app(svc), headers={"authorization": "Bearer t0k"}) as c:
        yield c, svc


def test_lines_are_accepted_and_counted(client: tuple[TestClient, Service]) -> None:
    c, svc = client
    r = c.post("/v1/edge", json={"lines": [_line(), _line(cache="MISS", upstream_time="0.2")]})
    assert r.status_code == 200, r.text
    assert r.json()["accepted"] == 2
    assert svc.component("edge_series").hits("all", NOW - 60, NOW + 60) == (1, 2)
    assert svc.registry.get_sample_value("sidecar_edge_lines_received_total", {"source": "http"}) == 2


def test_partial_acceptance_names_index_and_field(client: tuple[TestClient, Service]) -> None:
    c, svc = client
    body = b"\n".join(orjson.dumps(d) for d in [_line(), _line(status=99), _line(extra=1)])
    r = c.post("/v1/edge", content=body, headers={"content-type": "application/x-ndjson"})
    assert r.status_code == 200
    rejected = r.json()["rejected"]
    assert [(x["index"], x["field"]) for x in rejected] == [(1, "lines[1].status"), (2, "lines[2].extra")]
    assert (
        svc.registry.get_sample_value("sidecar_edge_lines_rejected_total", {"source": "http", "reason": "invalid"}) == 2
    )


def test_nothing_usable_is_400_and_too_many_is_413(client: tuple[TestClient, Service]) -> None:
    c, _ = client
    r = c.post("/v1/edge", json=[_line(time="soon")])
    assert r.status_code == 400
    assert r.json()["error"].startswith("lines[0].time:")
    assert c.post("/v1/edge", content=b"{nope", headers={"content-type": "application/json"}).status_code == 400
    assert c.post("/v1/edge", json=[_line()] * 11).status_code == 413
    assert c.post("/v1/edge", content=b"a", headers={"content-type": "text/plain"}).status_code == 415


def test_unauthorized_push_is_401(client: tuple[TestClient, Service]) -> None:
    c, _ = client
    assert c.post("/v1/edge", json=[_line()], headers={"authorization": "Bearer wrong"}).status_code == 401


class _Sink:
    def __init__(self) -> None:
        self.records: list[EdgeRecord] = []

    def observe(self, records: Any) -> None:
        self.records.extend(records)


def test_the_tailer_reads_new_lines_survives_rotation_and_counts_bad_ones(tmp_path: Path) -> None:
    path = tmp_path / "access.log"
    reg = CollectorRegistry()
    sink = _Sink()
    metrics = EdgeSourceMetrics(reg)
    tailer = EdgeTailer(
        EdgeFileConfig(path=str(path), max_line_bytes=300),
        source_cfg=EdgeSourceConfig(),
        metrics=metrics,
        sinks=[sink],
        clock=FakeClock(NOW),
        store=Store(tmp_path / "s.sqlite"),
        registry=reg,
        ticker=ManualTicker,
    )
    assert tailer.poll_once() == 0  # no file yet
    with open(path, "wb") as fh:
        fh.write(orjson.dumps(_line(path="/a")) + b"\n" + b"not json\n" + orjson.dumps(_line(path="/" + "x" * 400)))
        fh.write(b"\n" + orjson.dumps(_line(path="/b")) + b"\n" + orjson.dumps(_line(path="/c")))  # /c: no newline yet
    assert tailer.poll_once() == 2
    os.rename(path, tmp_path / "access.log.1")
    with open(tmp_path / "access.log.1", "ab") as fh:
        fh.write(b"\n")
    path.write_bytes(orjson.dumps(_line(path="/d")) + b"\n")
    tailer.poll_once()  # the rest of the rotated file
    tailer.poll_once()  # the new file
    assert [r.path for r in sink.records] == ["/a", "/b", "/c", "/d"]
    assert reg.get_sample_value("sidecar_edge_lines_rejected_total", {"source": "file", "reason": "not_json"}) == 1
    assert reg.get_sample_value("sidecar_edge_lines_rejected_total", {"source": "file", "reason": "line_too_long"}) == 1
