"""The model-API poller the cold-start watch and batching advisor read: what it publishes, and every failure
counted (never raised, never a half batch)."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from prometheus_client import CollectorRegistry

from sidecar.clock import FakeClock
from sidecar.component import Bus
from sidecar.model import Batch
from sidecar.sources.triton_model_api import TritonModelApiSource

URL = "http://triton.example:8000"
INDEX = [
    {"name": "a", "version": "1", "state": "READY"},
    {"name": "b", "version": "1", "state": "LOADING"},
    {"name": "c"},
]
STATS = {
    "model_stats": [
        {
            "name": "a",
            "version": "1",
            "inference_count": 7,
            "execution_count": 3,
            "inference_stats": {"success": {"count": 7, "ns": 70}, "queue": {"count": 7, "ns": 14}},
        }
    ]
}


class Triton:
    def __init__(self) -> None:
        self.answers: dict[str, httpx.Response | Exception] = {}
        self.config_calls = 0

    def __call__(self, req: httpx.Request) -> httpx.Response:
        got = self.answers.get(req.url.path)
        if isinstance(got, Exception):
            raise got
        if got is not None:
            return got
        if req.url.path == "/v2/repository/index":
            return httpx.Response(200, json=INDEX)
        if req.url.path == "/v2/models/stats":
            return httpx.Response(200, json=STATS)
        if req.url.path == "/v2/models/a/config":
            self.config_calls += 1
            return httpx.Response(200, json={"max_batch_size": 4, "dynamic_batching": {}})
        return httpx.Response(404)


def make(triton: Triton, **kw: int) -> tuple[TritonModelApiSource, list[Batch], CollectorRegistry, FakeClock]:
    reg, clock = CollectorRegistry(), FakeClock()
    bus = Bus(reg)
    got: list[Batch] = []
    bus.subscribe("samples", "t", got.append)
    src = TritonModelApiSource(
        triton_http_url=URL,
        interval_secs=1,
        timeout_secs=1,
        max_models=kw.get("max", 10),
        config_refresh_secs=60,
        registry=reg,
        clock=clock,
        http=httpx.AsyncClient(transport=httpx.MockTransport(triton)),
        bus=bus,
    )
    return src, got, reg, clock


def test_one_poll_publishes_states_stats_and_the_config_of_ready_models() -> None:
    triton = Triton()
    src, got, _, clock = make(triton)
    asyncio.run(src.poll_once())
    (batch,) = got
    assert batch.complete and batch.source == "triton_model_api" and batch.received_at == clock.now()
    states = {(dict(s.labels)["model"], dict(s.labels)["state"]) for s in batch.items if s.name == "triton_model_state"}
    assert states == {("a", "READY"), ("b", "LOADING")}  # "c" has no version: not loaded at all
    stats = {dict(s.labels)["stat"]: s.value for s in batch.items if s.name == "triton_model_stats"}
    assert stats == {
        "inference_count": 7,
        "execution_count": 3,
        "success_count": 7,
        "success_ns": 70,
        "queue_count": 7,
        "queue_ns": 14,
    }
    cfg = {dict(s.labels)["field"]: s.value for s in batch.items if s.name == "triton_model_config"}
    assert cfg == {"max_batch_size": 4, "dynamic_batching": 1, "max_queue_delay_us": 0}
    asyncio.run(src.poll_once())
    assert triton.config_calls == 1  # cached until config_refresh_secs


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (httpx.Response(503, text="busy"), "http_status"),
        (httpx.Response(200, text="<html>"), "parse"),
        (httpx.Response(200, json={"not": "a list"}), "parse"),
        (httpx.ConnectError("refused"), "connect"),
        (httpx.ReadTimeout("slow"), "timeout"),
    ],
)
def test_a_failed_poll_publishes_nothing_and_is_counted(answer: httpx.Response | Exception, reason: str) -> None:
    triton = Triton()
    triton.answers["/v2/repository/index"] = answer
    src, got, reg, _ = make(triton)
    assert asyncio.run(src.poll_once()) == []
    assert got == []
    assert reg.get_sample_value("sidecar_triton_model_api_errors_total", {"reason": reason}) == 1


def test_a_config_that_fails_keeps_the_poll_and_is_counted() -> None:
    triton = Triton()
    triton.answers["/v2/models/a/config"] = httpx.Response(500)
    src, got, reg, _ = make(triton)
    assert asyncio.run(src.poll_once())
    assert not [s for s in got[0].items if s.name == "triton_model_config"]
    assert reg.get_sample_value("sidecar_triton_model_api_errors_total", {"reason": "config_http_status"}) == 1


def test_models_above_the_bound_are_refused_and_counted() -> None:
    src, got, reg, _ = make(Triton(), max=1)
    asyncio.run(src.poll_once())
    assert len([s for s in got[0].items if s.name == "triton_model_state"]) == 1
    assert reg.get_sample_value("sidecar_triton_model_api_refused_total") == 1
