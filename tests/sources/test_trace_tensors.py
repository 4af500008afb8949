"""A real Triton 2.51 writes TENSORS trace files; the events mapper turns them into the values we sent."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from drift_testutil import make_ctx
from tracefile_helpers import tensor_source
from waiting import wait_until

from sidecar.clock import FakeClock
from sidecar.model import Event
from sidecar.sources.events.metrics import EventsMetrics
from sidecar.wiring.span_subs import subscribe_spans

pytestmark = pytest.mark.triton

# Values with at most 6 significant digits: Triton prints tensor data in trace files with 6 (like "%g").
REQUESTS: list[tuple[str, str, list[list[float]]]] = [
    ("req-a", "2", [[1.0, 2.0, 3.0, 4.0]]),
    ("req-b", "2", [[0.5, -1.25, 2.75, 10.0]]),
    ("req-c", "2", [[-3.5, 0.125, 7.0, 0.0], [2.5, 2.5, -0.75, 1.0]]),  # a batch of two rows
    ("req-d", "1", [[4.0, 1.5, 0.25, -2.0]]),
    ("req-e", "2", [[12.0, -0.5, 1.75, 3.25]]),
]


@pytest.fixture(scope="module")
def traced_triton(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Path]]:
    from sidecar.demo.tritonserver import TritonServer, demo_model_repository

    work = tmp_path_factory.mktemp("triton-tensors")
    trace = work / "trace.json"
    server = TritonServer(
        demo_model_repository(),
        work,
        extra_args=[
            "--trace-config",
            "mode=triton",
            "--trace-config",
            f"triton,file={trace}",
            "--trace-config",
            "triton,log-frequency=1",
            "--trace-config",
            "rate=1",
            "--trace-config",
            "level=TIMESTAMPS",
            "--trace-config",
            "level=TENSORS",
        ],
    )
    try:
        server.start()
        yield server, trace
    finally:
        server.stop()


def test_tensors_trace_files_give_the_values_sent_and_the_scores_returned(
    traced_triton: tuple[Any, Path], tmp_path: Path
) -> None:
    server, trace = traced_triton
    sent: dict[str, tuple[str, list[list[float]], list[float]]] = {}
    with httpx.Client(base_url=server.http_url, timeout=10) as client:
        for rid, version, rows in REQUESTS:
            body = {
                "id": rid,
                "inputs": [
                    {"name": "x", "shape": [len(rows), 4], "datatype": "FP32", "data": [v for row in rows for v in row]}
                ],
            }
            r = client.post(f"/v2/models/ctr/versions/{version}/infer", json=body)
            assert r.status_code == 200, r.text
            out = next(o for o in r.json()["outputs"] if o["name"] == "score")
            sent[rid] = (version, rows, [float(v) for v in out["data"]])

    clock = FakeClock()
    ctx = make_ctx(
        tmp_path / "state.sqlite",
        clock,
        {
            "events": {
                "triton_trace": {
                    "enabled": True,
                    "path": str(trace),
                    "models": {
                        "ctr": {
                            "inputs": {"x": ["age", "income", "clicks_7d", "dwell_secs"]},
                            "score": {"tensor": "score"},
                        }
                    },
                }
            }
        },
    )
    got: list[Event] = []
    reader = tensor_source(
        ctx.config.events.triton_trace, ctx.bus, ctx.registry, clock, ctx.store, EventsMetrics(ctx.registry)
    )
    ctx.bus.subscribe("events", "test", lambda b: got.extend(b.items))  # type: ignore[arg-type]
    want = sum(len(rows) for _, _, rows in REQUESTS)
    # Triton writes each trace's part file shortly after the response.
    wait_until(lambda: reader.poll_once() >= 0 and len(got) >= want, 15.0, interval_s=0.2)
    assert len(got) == want, f"{len(got)} of {want} events; files: {sorted(p.name for p in trace.parent.iterdir())}"

    by_rid: dict[str, list[Event]] = {}
    for e in got:
        assert e.request_id is not None
        by_rid.setdefault(e.request_id, []).append(e)
    assert set(by_rid) == set(sent)
    names = ["age", "income", "clicks_7d", "dwell_secs"]
    for rid, (version, rows, scores) in sent.items():
        events = by_rid[rid]
        assert [(e.model, e.version) for e in events] == [("ctr", version)] * len(rows)
        assert [e.features for e in events] == [dict(zip(names, row, strict=True)) for row in rows]
        for e, score in zip(events, scores, strict=True):
            assert e.score is not None and e.score == pytest.approx(score, rel=1e-5, abs=1e-6)
    assert len({round(s, 4) for _, _, ss in sent.values() for s in ss}) > 3  # distinct scores, not a constant
    assert reader.poll_once() == 0  # every part file is read once


def test_one_reader_of_a_real_file_with_both_levels_gives_each_request_its_spans_and_rows_once(
    traced_triton: tuple[Any, Path], tmp_path: Path
) -> None:
    """Both config sections on Triton's one file: a single source, every span and every row exactly once."""
    from prometheus_client import CollectorRegistry

    from sidecar.component import Bus
    from sidecar.config import parse_config
    from sidecar.sources.trace_files import TraceFileSource, merge
    from sidecar.sources.trace_files.metrics import TraceFileMetrics
    from sidecar.store import Store

    server, trace = traced_triton
    rows = [[1.5, 2.5, 3.5, 4.5], [0.25, 0.5, 0.75, 1.0]]
    with httpx.Client(base_url=server.http_url, timeout=10) as client:
        for i in range(3):
            body = {
                "id": f"both-{i}",
                "inputs": [
                    {"name": "x", "shape": [2, 4], "datatype": "FP32", "data": [v for row in rows for v in row]}
                ],
            }
            assert client.post("/v2/models/ctr/versions/2/infer", json=body).status_code == 200
    cfg = parse_config(
        {
            "traces": {"enabled": True, "file": {"path": str(trace)}},
            "events": {
                "triton_trace": {
                    "enabled": True,
                    "path": str(trace),
                    "models": {"ctr": {"inputs": {"x": ["a", "b", "c", "d"]}}},
                }
            },
        }
    )
    reg = CollectorRegistry()
    bus = Bus(reg)
    spans: list[Any] = []
    events: list[Event] = []
    subscribe_spans(bus, "t", lambda b: spans.extend(b.items))
    bus.subscribe("events", "t", lambda b: events.extend(b.items))  # type: ignore[arg-type]
    src = TraceFileSource(
        merge(cfg.traces.file, cfg.events.triton_trace),
        bus=bus,
        metrics=TraceFileMetrics(reg),
        clock=FakeClock(),
        store=Store(tmp_path / "s.sqlite"),
        events_metrics=EventsMetrics(reg),
    )
    ours = lambda: [e for e in events if (e.request_id or "").startswith("both-")]  # noqa: E731
    wait_until(lambda: src.poll_once() >= 0 and len(ours()) >= 6, 15.0, interval_s=0.2)
    src.poll_once()
    assert sorted((e.request_id, e.features["a"]) for e in ours()) == sorted(
        (f"both-{i}", r[0]) for i in range(3) for r in rows
    )
    span_ids = [s[1] for s in spans]
    assert len(span_ids) == len(set(span_ids))
    n_requests = len({e.request_id for e in events})  # this module's earlier requests are in the files too
    assert len(spans) == 3 * n_requests
