"""Delivery: the persisted Alertmanager outbox and the shared retrying sender (audit events and Elasticsearch:
test_audit.py, test_elasticsearch.py)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import httpx
import pytest
from alerting_helpers import DATA
from prometheus_client import CollectorRegistry

from exporters.alertmanager import AlertmanagerExporter
from exporters.config import AlertmanagerConfig
from exporters.sender import Backoff, MemoryQueue, RetryPolicy, Sender, retry_after_secs
from exporters.telemetry import ExportTelemetry
from sidecar.clock import FakeClock
from sidecar.errors import RetryableExportError
from sidecar.store import Store

T0 = 1_700_000_000.0
AMS = ["http://am-0:9093", "http://am-1:9093"]


def _notice(name: str, ends: str = "2023-11-14T22:20:00.000Z", summary: str = "s") -> dict[str, Any]:
    return {
        "labels": {"alertname": name, "severity": "high"},
        "annotations": {"summary": summary},
        "startsAt": "2023-11-14T22:13:20.000Z",
        "endsAt": ends,
    }


def _exporter(
    tmp_path: Path, handler: Any, store: Store | None = None, reg: CollectorRegistry | None = None, **cfg: Any
) -> AlertmanagerExporter:
    return AlertmanagerExporter(
        AlertmanagerConfig.model_validate({"urls": AMS, **cfg}),
        registry=reg or CollectorRegistry(),
        clock=FakeClock(T0),
        store=store or Store(tmp_path / "s.sqlite"),
        http=httpx.AsyncClient(transport=httpx.MockTransport(handler)),
    )


async def test_every_alertmanager_gets_every_notice(tmp_path: Path) -> None:
    got: dict[str, list[Any]] = {}

    def handler(req: httpx.Request) -> httpx.Response:
        got.setdefault(req.url.host, []).extend(json.loads(req.content))
        return httpx.Response(200)

    am = _exporter(tmp_path, handler)
    am.enqueue([_notice("A"), _notice("B")])
    am.enqueue([_notice("A", summary="newer")])  # replaces the queued A: only the latest state matters
    assert await am.flush_all() == {AMS[0]: "empty", AMS[1]: "empty"}
    for host in ("am-0", "am-1"):
        assert sorted((n["labels"]["alertname"], n["annotations"]["summary"]) for n in got[host]) == [
            ("A", "newer"),
            ("B", "s"),
        ]
    assert all(am.pending(u) == [] for u in AMS)


async def test_outbox_survives_an_outage_and_a_restart(tmp_path: Path) -> None:
    up = {"am-0": False, "am-1": True}
    got: list[Any] = []
    reg = CollectorRegistry()

    def handler(req: httpx.Request) -> httpx.Response:
        if not up[req.url.host]:
            raise httpx.ConnectError("connection refused")
        if req.url.host == "am-0":
            got.extend(json.loads(req.content))
        return httpx.Response(200)

    store = Store(tmp_path / "s.sqlite")
    am = _exporter(tmp_path, handler, store=store, reg=reg)
    am.enqueue([_notice("A"), _notice("B")])
    assert await am.flush_once(AMS[0]) == ("retry", None)
    assert (
        reg.get_sample_value(
            "sidecar_alertmanager_request_failures_total", {"alertmanager": AMS[0], "reason": "connect"}
        )
        == 1
    )
    await am.flush_all()
    assert am.pending(AMS[1]) == [] and len(am.pending(AMS[0])) == 2
    # The sidecar restarts while am-0 is still down; a new exporter finds the outbox in the store.
    am2 = _exporter(tmp_path, handler, store=store)
    up["am-0"] = True
    await am2.flush_all()
    assert sorted(n["labels"]["alertname"] for n in got) == ["A", "B"] and am2.pending(AMS[0]) == []


async def test_4xx_is_logged_counted_and_not_retried(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    calls = []

    def handler(req: httpx.Request) -> httpx.Response:
        calls.append(req)
        return httpx.Response(400, content=(DATA / "am-400.json").read_bytes())

    reg = CollectorRegistry()
    am = _exporter(tmp_path, handler, reg=reg, urls=[AMS[0]])
    am.enqueue([_notice("A")])
    assert await am.flush_once(AMS[0]) == ("rejected", None)
    assert await am.flush_once(AMS[0]) == ("empty", None)
    assert len(calls) == 1
    assert reg.get_sample_value("sidecar_alertmanager_notices_rejected_total", {"alertmanager": AMS[0]}) == 1
    assert "start time must be before end time" in caplog.text


async def test_5xx_and_429_keep_the_notice_and_pass_retry_after(tmp_path: Path) -> None:
    answers = [httpx.Response(503), httpx.Response(429, headers={"Retry-After": "7"}), httpx.Response(200)]
    am = _exporter(tmp_path, lambda req: answers.pop(0), urls=[AMS[0]])
    am.enqueue([_notice("A")])
    assert await am.flush_once(AMS[0]) == ("retry", None)
    assert await am.flush_once(AMS[0]) == ("retry", 7.0)
    assert await am.flush_once(AMS[0]) == ("sent", None)


def test_outbox_is_bounded_and_counts_refusals(tmp_path: Path) -> None:
    reg = CollectorRegistry()
    am = _exporter(tmp_path, lambda r: httpx.Response(200), reg=reg, urls=[AMS[0]], max_outbox=2)
    am.enqueue([_notice("A"), _notice("B"), _notice("C")])
    am.enqueue([_notice("A", summary="update")])  # an update of a queued alert still fits
    assert [n["labels"]["alertname"] for n in am.pending(AMS[0])] == ["B", "A"]
    assert reg.get_sample_value("sidecar_alertmanager_notices_dropped_total", {"alertmanager": AMS[0]}) == 1


def test_backoff_grows_with_jitter_and_honours_retry_after() -> None:
    b = Backoff(RetryPolicy(initial_backoff_secs=1, max_backoff_secs=8, multiplier=2, jitter=0.2), random.Random(0))
    delays = [b.next_delay() for _ in range(6)]
    for d, base in zip(delays, [1, 2, 4, 8, 8, 8], strict=True):
        assert base * 0.8 <= d <= base * 1.2
    assert len(set(delays)) == 6  # jittered
    assert b.next_delay(42.0) == 42.0
    assert retry_after_secs("Wed, 21 Oct 2015 07:28:00 GMT", 1445412470.0) == pytest.approx(10.0)
    assert retry_after_secs("soon", 0) is None


async def test_sender_retries_then_gives_up_after_max_elapsed_counting_every_drop() -> None:
    clock, reg = FakeClock(T0), CollectorRegistry()
    slept: list[float] = []

    async def sleep(s: float) -> None:
        slept.append(s)
        clock.advance(s)

    async def always_down(batch: list[int]) -> list[int]:
        raise RetryableExportError("503", retry_after_s=None if len(slept) % 2 else 2.0)

    s: Sender[int] = Sender(
        "t",
        always_down,
        policy=RetryPolicy(0.5, 4, 2, 0.1, max_elapsed_secs=20),
        queue=MemoryQueue(3),
        max_batch=10,
        stats=ExportTelemetry.of(reg).exporter("t"),
        clock=clock,
        sleep=sleep,
        rng=random.Random(1),
    )
    assert [s.submit(i) for i in range(4)] == [True, True, True, False]
    await s.flush()
    assert sum(slept) <= 20 and slept[0] == 2.0
    assert reg.get_sample_value("sidecar_export_dropped_total", {"exporter": "t", "reason": "gave_up"}) == 3
    assert reg.get_sample_value("sidecar_export_dropped_total", {"exporter": "t", "reason": "queue_full"}) == 1
    assert reg.get_sample_value("sidecar_export_received_total", {"exporter": "t"}) == 4
    # Every try failed: one more than the waits between them (no wait after the last one).
    assert reg.get_sample_value("sidecar_export_failed_total", {"exporter": "t", "reason": "error"}) == len(slept) + 1


async def test_background_delivery_after_start_and_clean_shutdown(tmp_path: Path) -> None:
    import asyncio

    got: list[Any] = []
    answers = iter([httpx.Response(503)] + [httpx.Response(200)] * 100)

    def handler(req: httpx.Request) -> httpx.Response:
        resp = next(answers)
        if resp.status_code == 200:
            got.extend(json.loads(req.content))
        return resp

    slept: list[float] = []

    async def fast_sleep(s: float) -> None:
        slept.append(s)
        await asyncio.sleep(0)

    am = AlertmanagerExporter(
        AlertmanagerConfig.model_validate({"urls": [AMS[0]]}),
        registry=CollectorRegistry(),
        clock=FakeClock(T0),
        store=Store(tmp_path / "s.sqlite"),
        http=httpx.AsyncClient(transport=httpx.MockTransport(handler)),
        sleep=fast_sleep,
    )
    await am.start()
    # The book enqueues from the evaluation worker thread.
    await asyncio.to_thread(am.enqueue, [_notice("A")])
    async with asyncio.timeout(5):
        while not got:
            await asyncio.sleep(0.01)
    assert got[0]["labels"]["alertname"] == "A" and len(slept) == 1  # one backoff after the 503
    await am.shutdown()
    await am.shutdown()  # idempotent
