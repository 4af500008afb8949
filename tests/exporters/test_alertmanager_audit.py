"""Delivery outcomes of alert notices in the audit trail: a notice Alertmanager refused for good (4xx) is one
``alert_delivery_failed`` row with the answer and the attempt count; a notice that got through only after
failed attempts is one ``alert_delivered_after_retry`` row; a notice delivered at the first try adds none.
``GET /v1/audit?kind=...`` shows each exactly once, retries of the same flush included."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from alerting_helpers import make_service
from fastapi import FastAPI

from sidecar.clock import FakeClock
from sidecar.model import Finding

T0 = 1_700_000_000.0
AM = "http://am-0:9093"


def _finding(model: str) -> Finding:
    return Finding(
        check="wer_high",
        kind="business",
        active=True,
        value=0.2,
        threshold=0.08,
        severity="high",
        labels={"alertname": "WerHigh", "model": model, "version": "1"},
    )


class Script:
    """Answers POST /api/v2/alerts with the next status of a script (the last one repeats)."""

    def __init__(self, *statuses: int) -> None:
        self.statuses = list(statuses)
        self.posts = 0

    def __call__(self, req: httpx.Request) -> httpx.Response:
        self.posts += 1
        code = self.statuses.pop(0) if len(self.statuses) > 1 else self.statuses[0]
        if code == 400:
            return httpx.Response(400, json={"code": 400, "message": "start time must be before end time"})
        return httpx.Response(code)


def _svc(tmp_path: Path, script: Script) -> tuple[Any, FakeClock]:
    clock = FakeClock(T0)
    svc = make_service(
        tmp_path,
        {"alerting": {"enabled": True, "alertmanager": {"urls": [AM]}}},
        clock=clock,
        transport=httpx.MockTransport(script),
    )
    return svc, clock


async def _audit(svc: Any, kind: str) -> list[dict[str, Any]]:
    app = FastAPI()
    app.include_router(svc.component("audit").routes())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        r = await c.get("/v1/audit", params={"kind": kind})
    assert r.status_code == 200
    return list(r.json()["events"])


async def test_a_refused_notice_is_one_delivery_failed_row(tmp_path: Path) -> None:
    script = Script(400)
    svc, clock = _svc(tmp_path, script)
    am: Any = svc.component("alertmanager")
    svc.component("alert_book").on_findings([_finding("asr")], clock.now())  # type: ignore[attr-defined]
    assert await am.flush_all() == {AM: "empty"}
    assert await am.flush_all() == {AM: "empty"}  # nothing left, nothing recorded twice
    (row,) = await _audit(svc, "alert_delivery_failed")
    assert row["labels"]["model"] == "asr" and row["labels"]["alertname"] == "WerHigh"
    assert row["alertmanager"] == AM
    assert row["status"] == 400 and "start time must be before end time" in row["reason"]
    assert row["attempts"] == 1 and row["state"] == "firing"
    assert await _audit(svc, "alert_delivered_after_retry") == []
    await svc.shutdown()


async def test_a_notice_refused_after_retries_carries_the_attempt_count(tmp_path: Path) -> None:
    script = Script(503, 503, 400)
    svc, clock = _svc(tmp_path, script)
    am: Any = svc.component("alertmanager")
    svc.component("alert_book").on_findings([_finding("asr")], clock.now())  # type: ignore[attr-defined]
    assert [await am.flush_once(AM) for _ in range(3)] == [("retry", None), ("retry", None), ("rejected", None)]
    (row,) = await _audit(svc, "alert_delivery_failed")
    assert row["attempts"] == 3 and row["status"] == 400
    await svc.shutdown()


async def test_delivered_after_retries_is_one_row_and_a_first_try_delivery_none(tmp_path: Path) -> None:
    script = Script(503, 429, 200)
    svc, clock = _svc(tmp_path, script)
    am: Any = svc.component("alertmanager")
    book: Any = svc.component("alert_book")
    book.on_findings([_finding("asr"), _finding("tts")], clock.now())
    assert (await am.flush_once(AM))[0] == "retry"
    assert (await am.flush_once(AM))[0] == "retry"
    assert await am.flush_all() == {AM: "empty"}
    rows = await _audit(svc, "alert_delivered_after_retry")
    assert sorted(r["labels"]["model"] for r in rows) == ["asr", "tts"]
    assert {r["attempts"] for r in rows} == {3}
    assert {r["reason"] for r in rows} == {"http_429"}  # the last failure before it went through
    # The next notice (a re-send) goes through at once: no row.
    clock.advance(3600)
    book.on_findings([_finding("asr"), _finding("tts")], clock.now())
    assert await am.flush_all() == {AM: "empty"}
    assert len(await _audit(svc, "alert_delivered_after_retry")) == 2
    assert await _audit(svc, "alert_delivery_failed") == []
    await svc.shutdown()


async def test_one_bad_notice_in_a_batch_fails_alone(tmp_path: Path) -> None:
    # Alertmanager 0.25 answers 400 to a batch holding one invalid alert (it stores the valid ones all the same):
    # the batch is sent again notice by notice, so only the invalid one is recorded as failed.
    import json

    posts: list[int] = []

    def handler(req: httpx.Request) -> httpx.Response:
        notices = json.loads(req.content)
        posts.append(len(notices))
        if any("bad-label" in n["labels"] for n in notices):
            return httpx.Response(400, json='invalid label set: invalid name "bad-label"')
        return httpx.Response(200)

    clock = FakeClock(T0)
    svc = make_service(
        tmp_path,
        {"alerting": {"enabled": True, "alertmanager": {"urls": [AM]}}},
        clock=clock,
        transport=httpx.MockTransport(handler),
    )
    am: Any = svc.component("alertmanager")
    bad = Finding(
        check="odd", kind="business", active=True, value=1.0, severity="low", labels={"model": "bad", "bad-label": "x"}
    )
    svc.component("alert_book").on_findings([_finding("asr"), bad], clock.now())  # type: ignore[attr-defined]
    assert await am.flush_all() == {AM: "empty"}
    assert posts == [2, 1, 1]
    (row,) = await _audit(svc, "alert_delivery_failed")
    assert row["labels"]["model"] == "bad" and "bad-label" in row["reason"]
    assert svc.registry.get_sample_value("sidecar_alertmanager_notices_rejected_total", {"alertmanager": AM}) == 1
    assert svc.registry.get_sample_value("sidecar_alertmanager_notices_sent_total", {"alertmanager": AM}) == 1
    assert await _audit(svc, "alert_delivered_after_retry") == []  # a batch refused for another notice
    await svc.shutdown()


async def test_alertmanager_down_while_a_refused_batch_is_split_keeps_the_rest_queued(tmp_path: Path) -> None:
    answers = [400, 200, "down", 200]  # batch refused; first alone ok; then down; the rest later

    def handler(req: httpx.Request) -> httpx.Response:
        a = answers.pop(0)
        if a == "down":
            raise httpx.ConnectError("refused")
        return httpx.Response(int(a))

    clock = FakeClock(T0)
    svc = make_service(
        tmp_path,
        {"alerting": {"enabled": True, "alertmanager": {"urls": [AM]}}},
        clock=clock,
        transport=httpx.MockTransport(handler),
    )
    am: Any = svc.component("alertmanager")
    svc.component("alert_book").on_findings(  # type: ignore[attr-defined]
        [_finding("a"), _finding("b"), _finding("c")], clock.now()
    )
    assert await am.flush_once(AM) == ("retry", None)
    assert sorted(n["labels"]["model"] for n in am.pending(AM)) == ["b", "c"]  # one request for both, not two
    assert await am.flush_all() == {AM: "empty"} and answers == []
    assert await _audit(svc, "alert_delivery_failed") == []
    await svc.shutdown()
