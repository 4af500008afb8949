"""Every push endpoint answers a failed bus subscriber the same way (issue 25): 500 with a reason that names the
subscriber, counted in ``sidecar_push_subscriber_failures_total{endpoint}``; once the subscriber works again
the same push is taken. The subscriber here is a real one on the service's bus that raises while told to."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from google.rpc import status_pb2
from prometheus_client import CollectorRegistry

from sidecar.app import create_app
from sidecar.clock import FakeClock
from sidecar.component import Context
from sidecar.config import parse_config
from sidecar.model import Batch
from sidecar.service import Service
from sidecar.store import Store
from sidecar.wiring.alerting import build as alerting
from sidecar.wiring.event_subs import subscribe_events
from sidecar.wiring.events import build as events
from sidecar.wiring.traces import build as traces

DATA = Path(__file__).resolve().parents[1] / "data" / "traces"
TRITON_JSON = (DATA / "otlp-traces-triton.json").read_bytes()
PYTHON_PB = (DATA / "otlp-traces-python.pb").read_bytes()
EVENT = {"model": "ctr", "version": "2", "features": {"x": 1.5}}


class Flaky:
    """Subscribes to every pushed kind; raises while ``broken``."""

    def __init__(self) -> None:
        self.broken = False
        self.taken = 0

    def __call__(self, batch: Batch) -> None:
        if self.broken:
            raise RuntimeError("injected subscriber fault")
        self.taken += len(batch.items)

    def factory(self, ctx: Context) -> list[Any]:
        for kind in ("changes", "spans"):
            ctx.bus.subscribe(kind, f"flaky_{kind}", self)
        subscribe_events(ctx.bus, "flaky_events", self)  # both shapes events travel in (columns as events)
        return []


def _service(tmp_path: Path, flaky: Flaky) -> Service:
    cfg = parse_config({"triton": {"enabled": False}, "alerting": {"enabled": True}, "traces": {"enabled": True}})
    return Service(
        cfg,
        clock=FakeClock(1_800_000_000.0),
        registry=CollectorRegistry(),
        store=Store(tmp_path / "s.sqlite"),
        http=httpx.AsyncClient(transport=httpx.MockTransport(lambda r: httpx.Response(200, json={}))),
        factories=[alerting, traces, events, flaky.factory],
    )


Push = Callable[[TestClient, int], httpx.Response]  # the n-th distinct batch
# endpoint -> (the push, the subscriber that fails on it, the status of a taken push)
PUSHES: dict[str, tuple[Push, str, int]] = {
    "/v1/events": (lambda c, n: c.post("/v1/events", json=[EVENT, EVENT]), "flaky_events", 200),
    "/v1/changes": (
        lambda c, n: c.post("/v1/changes", json={"what": f"feature pipeline v{n}", "id": f"pr-{n}"}),
        "flaky_changes",
        201,
    ),
    "/v1/traces": (
        lambda c, n: c.post("/v1/traces", content=TRITON_JSON, headers={"content-type": "application/json"}),
        "flaky_spans",
        200,
    ),
}


def _failures(svc: Service, endpoint: str) -> float:
    return svc.registry.get_sample_value("sidecar_push_subscriber_failures_total", {"endpoint": endpoint}) or 0.0


@pytest.mark.parametrize("endpoint", list(PUSHES))
def test_a_failed_subscriber_is_a_counted_500_naming_it(tmp_path: Path, endpoint: str) -> None:
    push, subscriber, ok_status = PUSHES[endpoint]
    flaky = Flaky()
    svc = _service(tmp_path, flaky)
    with TestClient(create_app(svc, manage_lifecycle=False)) as c:
        assert push(c, 0).status_code == ok_status  # taken: nothing counted
        assert _failures(svc, endpoint) == 0
        flaky.broken = True
        r = push(c, 1)
        assert r.status_code == 500, r.text
        assert r.headers["content-type"].startswith("application/json")
        doc = r.json()
        reason = doc["message"] if endpoint == "/v1/traces" else doc["detail"]  # OTLP answers a google.rpc.Status
        assert reason.startswith(f"{endpoint}: the batch was not taken: subscriber {subscriber} failed on it")
        if endpoint != "/v1/traces":
            assert doc["failed_subscribers"] == [subscriber]
        assert _failures(svc, endpoint) == 1
        assert svc.registry.get_sample_value("sidecar_bus_subscriber_errors_total", {"subscriber": subscriber}) == 1
        flaky.broken = False
        # Sent again: taken (the change log stored the change the first time, so that resend is a 200).
        assert push(c, 1).status_code in (200, ok_status)
        assert _failures(svc, endpoint) == 1


def test_the_otlp_protobuf_answer_is_a_status_with_the_same_reason(tmp_path: Path) -> None:
    flaky = Flaky()
    svc = _service(tmp_path, flaky)
    flaky.broken = True
    with TestClient(create_app(svc, manage_lifecycle=False)) as c:
        r = c.post("/v1/traces", content=PYTHON_PB, headers={"content-type": "application/x-protobuf"})
    assert r.status_code == 500 and r.headers["content-type"] == "application/x-protobuf"
    st = status_pb2.Status.FromString(r.content)
    assert st.code == 13  # INTERNAL
    assert st.message.startswith("/v1/traces: the batch was not taken: subscriber flaky_spans failed on it")
    assert _failures(svc, "/v1/traces") == 1


def test_events_failed_on_are_not_counted_as_received(tmp_path: Path) -> None:
    flaky = Flaky()
    svc = _service(tmp_path, flaky)
    flaky.broken = True
    with TestClient(create_app(svc, manage_lifecycle=False)) as c:
        assert c.post("/v1/events", json=[EVENT]).status_code == 500
    assert (svc.registry.get_sample_value("sidecar_events_received_total", {"source": "http"}) or 0) == 0
