"""Per-request records: Triton's spans (the recorded OTLP export of a real Triton, tests/data/traces) joined with
the caller's span or event; outcome as the client saw it; sampling; the join window and bounds; hashed user ids."""

from __future__ import annotations

import hashlib
import hmac
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from sidecar.clock import FakeClock
from sidecar.model import Batch, Event, Span
from sidecar.processors.request_records import RequestRecords
from sidecar.processors.request_records_config import RequestRecordsConfig
from sidecar.records import from_span
from sidecar.sources.otlp.decode import decode_json

DATA = Path(__file__).resolve().parents[1] / "data" / "traces"
Rec = tuple[str, str, float, dict[str, Any]]


def _triton() -> list[Span]:
    return list(decode_json((DATA / "otlp-traces-triton.json").read_bytes()).spans)


def _by_trace(spans: list[Span]) -> dict[str, list[Span]]:
    out: dict[str, list[Span]] = {}
    for s in spans:
        out.setdefault(s.trace_id, []).append(s)
    return out


def _caller(trace_id: str, status: int, **attrs: object) -> Span:
    return Span(
        trace_id=trace_id,
        span_id="ab" * 8,
        parent_span_id=None,
        name="POST /predict",
        start_unix_nano=1_700_000_000 * 10**9,
        end_unix_nano=1_700_000_000 * 10**9 + 5_000_000,
        service_name="ranker",
        attributes={"http.response.status_code": status, **attrs},
    )


def _spans(spans: list[Span]) -> Batch:
    return Batch(kind="spans", source="otlp", items=tuple(from_span(s) for s in spans))


def _rr(reg: CollectorRegistry, clock: FakeClock, got: list[Rec], **cfg: Any) -> RequestRecords:
    return RequestRecords(RequestRecordsConfig(enabled=True, **cfg), sink=got.extend, registry=reg, clock=clock)


def _total(reg: CollectorRegistry, outcome: str, model: str = "ctr", version: str = "1") -> float:
    return (
        reg.get_sample_value("sidecar_requests_total", {"model": model, "version": version, "outcome": outcome}) or 0.0
    )


def test_joined_outcome_is_the_clients_and_only_failed_ones_are_kept_at_rate_0() -> None:
    reg, clock, got = CollectorRegistry(), FakeClock(), []
    rr = _rr(reg, clock, got, sample_rate=0.0)
    traces = _by_trace(_triton())
    ids = sorted(t for t, ss in traces.items() if any(s.name == "ctr" for s in ss))
    # 120 requests to ctr, rank and fraud, 40 each. Triton marks every one ok; the caller saw one 500 (a
    # Python-backend error response) and one 404.
    callers = [
        _caller(
            t,
            500 if t == ids[0] else 404 if t == ids[1] else 200,
            **{"sidecar.routing_rule": "canary", "sidecar.canary_bucket": "b7"},
        )
        for t in traces
    ]
    rr.on_spans(_spans(callers))
    assert got == []  # each waits for Triton's side
    rr.on_spans(_spans(_triton()))
    assert _total(reg, "ok") == 38 and _total(reg, "error") == 1 and _total(reg, "client_error") == 1
    assert _total(reg, "ok", "rank", "2") == 40 and _total(reg, "ok", "fraud") == 40
    assert sorted(r[3]["code"] for r in got) == ["http_404", "http_500"]
    rec = next(r for r in got if r[3]["code"] == "http_500")
    kind, ident, at, doc = rec
    assert kind == "request" and ident == f"req-{ids[0]}" and doc["trace_id"] == ids[0]
    assert doc["model"] == "ctr" and doc["version"] == "1" and doc["triton_outcome"] == "ok"
    assert doc["outcome"] == "error" and doc["rule"] == "canary" and doc["bucket"] == "b7" and doc["joined"]
    assert {"request", "queue", "compute_infer", "network_receive"} <= set(doc["stages_ms"])
    assert doc["latency_ms"] > 0 and at > 1.6e9
    assert reg.get_sample_value("sidecar_request_records_kept_total", {"why": "failed"}) == 2


def test_sample_rate_and_slow_requests() -> None:
    reg, clock, got = CollectorRegistry(), FakeClock(), []
    rr = _rr(reg, clock, got, sample_rate=1.0)
    traces = _by_trace(_triton())
    rr.on_spans(_spans([_caller(t, 200) for t in traces] + _triton()))
    assert len(got) == 120 and reg.get_sample_value("sidecar_request_records_kept_total", {"why": "sampled"}) == 120
    reg2, got2 = CollectorRegistry(), []
    rr2 = _rr(reg2, clock, got2, sample_rate=0.0, slow_ms=0.001)  # every one is "slow"
    rr2.on_spans(_spans([_caller(t, 200) for t in traces] + _triton()))
    assert len(got2) == 120 and reg2.get_sample_value("sidecar_request_records_kept_total", {"why": "slow"}) == 120


def test_an_event_joins_by_request_id_and_carries_the_status_and_a_hashed_user(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUDIT_KEY", "s3cret")
    reg, clock, got = CollectorRegistry(), FakeClock(), []
    rr = _rr(reg, clock, got, sample_rate=0.0, user_ids="hash", user_id_key_env="AUDIT_KEY")
    rr.on_events(
        Batch(
            kind="events",
            source="http",
            items=(
                Event(
                    model="ctr",
                    version="1",
                    timestamp=1.7e9,
                    request_id="3",
                    user_id="alice",
                    fields={"http_status": 503.0},
                ),
            ),
        )
    )
    rr.on_spans(_spans(_triton()))
    assert len(got) == 1
    doc = got[0][3]
    assert doc["request_id"] == "3" and doc["code"] == "http_503" and doc["outcome"] == "error"
    assert doc["trace_id"] is not None and doc["joined"]
    assert doc["user"] == hmac.new(b"s3cret", b"alice", hashlib.sha256).hexdigest()
    assert "alice" not in repr(doc)


def test_a_side_left_alone_is_emitted_after_the_join_window_counted() -> None:
    reg, clock, got = CollectorRegistry(), FakeClock(), []
    rr = _rr(reg, clock, got, sample_rate=1.0, join_window_secs=30)
    spans = _triton()[:3]  # one request, no caller side
    rr.on_spans(_spans(spans))
    clock.advance(29)
    rr.on_spans(_spans([]))
    assert got == []
    clock.advance(2)
    rr.on_spans(_spans([]))
    assert len(got) == 1 and got[0][3]["outcome"] == "ok" and not got[0][3]["joined"]
    assert reg.get_sample_value("sidecar_request_records_unjoined_total", {"side": "triton"}) == 1


def test_pending_joins_are_bounded() -> None:
    reg, clock, got = CollectorRegistry(), FakeClock(), []
    rr = _rr(reg, clock, got, sample_rate=1.0, max_pending=3)
    rr.on_spans(_spans([_caller(f"{i:032x}", 200) for i in range(1, 6)]))
    assert len(rr._pending) == 3 and len(got) == 2
    assert reg.get_sample_value("sidecar_request_records_evicted_total") == 2


def test_hash_without_a_key_is_a_config_error() -> None:
    with pytest.raises(ValueError, match="user_id_key_env"):
        RequestRecordsConfig(user_ids="hash")
    with pytest.raises(ValueError, match="NOPE_NOT_SET"):
        RequestRecords(
            RequestRecordsConfig(user_ids="hash", user_id_key_env="NOPE_NOT_SET"),
            sink=print,
            registry=CollectorRegistry(),
            clock=FakeClock(),
        )


async def test_wired_records_reach_the_audit_log_and_get_v1_audit(tmp_path: Path) -> None:
    import httpx
    from alerting_helpers import make_service
    from fastapi import FastAPI

    svc = make_service(
        tmp_path, {"alerting": {"enabled": True, "audit": {"requests": {"enabled": True, "sample_rate": 0.0}}}}
    )
    traces = sorted(_by_trace(_triton()))
    assert svc.bus.publish(_spans([_caller(traces[5], 500), *_triton()])) == []
    app = FastAPI()
    app.include_router(svc.component("audit").routes())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        r = await c.get("/v1/audit", params={"kind": "request", "trace_id": traces[5]})
    assert r.status_code == 200
    [doc] = r.json()["events"]
    assert doc["outcome"] == "error" and doc["code"] == "http_500" and doc["triton_outcome"] == "ok"
    assert svc.registry.get_sample_value("sidecar_audit_events_total", {"kind": "request"}) == 1


async def test_a_lone_side_is_emitted_by_the_sweep_with_no_further_traffic_exactly_once() -> None:
    reg, clock, got = CollectorRegistry(), FakeClock(), []
    rr = _rr(reg, clock, got, sample_rate=1.0, join_window_secs=30, sweep_interval_secs=5)
    rr.on_spans(_spans(_triton()[:3]))  # one request, Triton's side only; then nothing arrives
    clock.advance(29)
    assert await rr.sweep_once() == 0 and got == []
    clock.advance(5)  # the next tick after the window: join_window + one tick at most
    assert await rr.sweep_once() == 1
    assert len(got) == 1 and not got[0][3]["joined"]
    clock.advance(60)
    assert await rr.sweep_once() == 0
    rr.on_spans(_spans([]))
    await rr.shutdown()
    assert len(got) == 1
    assert reg.get_sample_value("sidecar_request_records_unjoined_total", {"side": "triton"}) == 1


async def test_the_started_component_sweeps_on_its_own() -> None:
    import asyncio

    reg, clock = CollectorRegistry(), FakeClock()
    done = asyncio.Event()
    got: list[Rec] = []

    def sink(recs: list[Rec]) -> None:
        got.extend(recs)
        done.set()

    rr = RequestRecords(
        RequestRecordsConfig(enabled=True, sample_rate=1.0, join_window_secs=30, sweep_interval_secs=0.01),
        sink=sink,
        registry=reg,
        clock=clock,
    )
    rr.on_events(
        Batch(
            kind="events", source="t", items=(Event(model="ctr", version="1", timestamp=clock.now(), request_id="q-1"),)
        )
    )
    clock.advance(31)  # past the window; no span, no event, no flush follows
    await rr.start()
    try:
        await asyncio.wait_for(done.wait(), 10)  # waits for the loop's first sweeps, bounded
    finally:
        await rr.shutdown()
    assert [r[3]["request_id"] for r in got] == ["q-1"]
    assert reg.get_sample_value("sidecar_request_records_unjoined_total", {"side": "client"}) == 1


async def test_shutdown_emits_what_still_waits_once_even_without_start() -> None:
    reg, clock, got = CollectorRegistry(), FakeClock(), []
    rr = _rr(reg, clock, got, sample_rate=1.0)
    rr.on_spans(_spans(_triton()[:3]))  # one request, Triton's side only, well inside its window
    assert got == []
    await rr.shutdown()
    assert len(got) == 1 and not got[0][3]["joined"] and got[0][3]["model"] == "ctr"
    await rr.shutdown()  # idempotent: nothing is emitted twice
    assert len(got) == 1 and _total(reg, "ok") == 1
