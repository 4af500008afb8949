"""The Triton repository-index source: versions appearing and going become changes in the change log."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
from alerting_helpers import DATA, make_service
from prometheus_client import CollectorRegistry

from sidecar.clock import FakeClock

T0 = 1_700_000_000.0
CFG: dict[str, Any] = {
    "triton": {"http_url": "http://triton:8000"},
    "alerting": {"enabled": True},
}


async def test_repository_index_versions_appearing_and_going_are_recorded(tmp_path: Path) -> None:
    answers = [
        json.loads((DATA / f"repository-index-{n}.json").read_text())
        for n in ("ctr", "ctr-fraud", "fraud-ctr-unloaded")
    ]
    calls: list[httpx.Request] = []

    def handler(req: httpx.Request) -> httpx.Response:
        calls.append(req)
        if len(calls) == 4:
            return httpx.Response(503)
        return httpx.Response(200, json=answers[min(len(calls) - 1, 2)])

    clock, reg = FakeClock(T0), CollectorRegistry()
    svc = make_service(tmp_path, CFG, clock=clock, transport=httpx.MockTransport(handler), registry=reg)
    log: Any = svc.component("repository_index")
    assert await log.poll_once() == []  # the first snapshot is the starting point
    clock.advance(30)
    (appeared,) = await log.poll_once()
    assert (appeared.model, appeared.version, appeared.source) == ("fraud", "1", "triton_repository")
    assert appeared.what == "version 1 appeared in Triton"
    # Published on the bus and recorded by the change log.
    assert [c.what for c in svc.component("changes").recent("fraud", None, 0)] == [appeared.what]
    clock.advance(30)
    gone = await log.poll_once()
    assert sorted((c.model, c.version, c.what) for c in gone) == [
        ("ctr", "1", "version 1 disappeared in Triton"),
        ("ctr", "2", "version 2 disappeared in Triton"),
    ]
    assert await log.poll_once() == []
    assert reg.get_sample_value("sidecar_changes_poll_errors_total", {"reason": "http_status"}) == 1
    assert calls[0].method == "POST" and calls[0].url.path == "/v2/repository/index"
    await svc.shutdown()


async def test_versions_are_published_again_until_the_change_log_has_recorded_them(tmp_path: Path) -> None:
    answers = [json.loads((DATA / f"repository-index-{n}.json").read_text()) for n in ("ctr", "ctr-fraud")]
    calls: list[httpx.Request] = []

    def handler(req: httpx.Request) -> httpx.Response:
        calls.append(req)
        return httpx.Response(200, json=answers[min(len(calls) - 1, 1)])

    clock, reg = FakeClock(T0), CollectorRegistry()
    svc = make_service(tmp_path, CFG, clock=clock, transport=httpx.MockTransport(handler), registry=reg)
    source: Any = svc.component("repository_index")
    assert await source.poll_once() == []
    svc.store.execute(
        "CREATE TRIGGER injected BEFORE INSERT ON alerting_changes BEGIN SELECT RAISE(ABORT, 'injected failure'); END"
    )
    assert await source.poll_once() == []  # not recorded: the snapshot stays where it was
    assert reg.get_sample_value("sidecar_changes_poll_errors_total", {"reason": "not_recorded"}) == 1
    svc.store.execute("DROP TRIGGER injected")
    (appeared,) = await source.poll_once()
    assert appeared.model == "fraud"
    assert [c.model for c in svc.component("changes").recent(None, None, 0)] == ["fraud"]
    await svc.shutdown()
