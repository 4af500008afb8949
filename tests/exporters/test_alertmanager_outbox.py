"""The Alertmanager outbox is a durable queue behind the shared sender: never given up on, counted like every
other exporter."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from prometheus_client import CollectorRegistry

from exporters.alertmanager import AlertmanagerExporter
from exporters.config import AlertmanagerConfig
from sidecar.clock import FakeClock
from sidecar.store import Store

T0 = 1_700_000_000.0
AM = "http://am-0:9093"


def _notice(name: str) -> dict[str, Any]:
    return {"labels": {"alertname": name}, "annotations": {}, "startsAt": "2023-11-14T22:13:20.000Z"}


async def test_outbox_outlives_the_retry_budget_and_counts_in_the_shared_families(tmp_path: Path) -> None:
    clock, reg = FakeClock(T0), CollectorRegistry()
    slept: list[float] = []
    got: list[bytes] = []

    def handler(req: httpx.Request) -> httpx.Response:
        if len(slept) < 6:  # down for longer than max_attempts and max_elapsed_secs allow an in-memory queue
            raise httpx.ConnectError("connection refused")
        got.append(req.content)
        return httpx.Response(200)

    async def sleep(s: float) -> None:
        slept.append(s)
        clock.advance(s)

    am = AlertmanagerExporter(
        AlertmanagerConfig.model_validate(
            {"urls": [AM], "retry": {"max_attempts": 2, "max_elapsed_secs": 1, "initial_backoff_secs": 1}}
        ),
        registry=reg,
        clock=clock,
        store=Store(tmp_path / "s.sqlite"),
        http=httpx.AsyncClient(transport=httpx.MockTransport(handler)),
        sleep=sleep,
    )
    am.enqueue([_notice("A"), _notice("B")])
    assert await am.senders[AM].deliver_head() == "sent"
    assert len(got) == 1 and am.pending(AM) == [] and len(slept) == 6

    def v(name: str, **labels: str) -> float | None:
        return reg.get_sample_value(name, {"exporter": "alertmanager", **labels})

    assert v("sidecar_export_received_total") == 2 and v("sidecar_export_sent_total") == 2
    assert v("sidecar_export_failed_total", reason="connect") == 6
    assert v("sidecar_export_dropped_total", reason="gave_up") is None
    assert v("sidecar_export_queue_items") == 0


async def test_a_huge_retry_after_does_not_silence_the_outbox_for_longer_than_max_elapsed(tmp_path: Path) -> None:
    clock = FakeClock(T0)
    slept: list[float] = []
    answers = [httpx.Response(503, headers={"Retry-After": "86400"}), httpx.Response(200)]

    async def sleep(s: float) -> None:
        slept.append(s)
        clock.advance(s)

    am = AlertmanagerExporter(
        AlertmanagerConfig.model_validate({"urls": [AM], "retry": {"max_elapsed_secs": 120}}),
        registry=CollectorRegistry(),
        clock=clock,
        store=Store(tmp_path / "s.sqlite"),
        http=httpx.AsyncClient(transport=httpx.MockTransport(lambda r: answers.pop(0))),
        sleep=sleep,
    )
    am.enqueue([_notice("A")])
    assert await am.senders[AM].deliver_head() == "sent"
    assert slept == [120.0]
