"""Every name a client or an operator controls reaches the pages escaped: span, service and model names, version,
attribute keys and values, event names, error messages, readiness details, alert labels and annotations, change
texts, drift feature names and GPU names, each carrying markup, both quote kinds and an ampersand."""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Any

from fastapi import APIRouter
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry, Gauge

from sidecar.app import create_app
from sidecar.clock import FakeClock
from sidecar.component import Readiness, Role
from sidecar.config import parse_config
from sidecar.model import Span, SpanEvent
from sidecar.service import Service
from sidecar.store import Store
from sidecar.wiring.pages import build as pages
from sidecar.wiring.traces import build as traces

TID = "0af7651916cd43dd8448eb211c80319c"
T0 = 1_800_000_000_000_000_000
MS = 1_000_000


def evil(tag: str) -> str:
    """A value that breaks out of text, a double- and a single-quoted attribute, and an entity, named by tag."""
    return f"<script>alert({tag})</script>\"'&{tag}"


class _Reader(HTMLParser):
    """What a browser makes of the page: the tags it opens, and the text and attribute values it reads."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: set[str] = set()
        self.values: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.values.extend(v for _, v in attrs if v)

    def handle_data(self, data: str) -> None:
        self.values.append(data)


def _spans() -> list[Span]:
    model = {"triton.model_name": evil("model"), "triton.model_version": evil("ver")}
    return [
        Span(
            TID,
            "b000000000000001",
            None,
            evil("root"),
            T0,
            T0 + 200 * MS,
            service_name=evil("svc"),
            attributes={evil("akey"): evil("aval")},
        ),
        Span(
            TID,
            "b000000000000002",
            "b000000000000001",
            "model span",
            T0 + 5 * MS,
            T0 + 150 * MS,
            service_name="triton",
            attributes=model,
            events=(SpanEvent(evil("event"), T0 + 6 * MS, {"k": evil("evattr")}),),
        ),
        Span(
            TID,
            "b000000000000003",
            "b000000000000001",
            evil("failing"),
            T0 + 150 * MS,
            T0 + 190 * MS,
            status_code=2,
            status_message=evil("errmsg"),
        ),
    ]


class Hostile:
    """A component whose readiness and read-only API answers carry markup (as a misconfigured or hostile peer
    would make them)."""

    name = "hostile"
    role = Role.SINK

    async def start(self) -> None: ...

    async def shutdown(self) -> None: ...

    def readiness(self) -> Readiness:
        return Readiness(True, evil("ready"))

    def routes(self) -> APIRouter:
        r = APIRouter()

        @r.get("/v1/alerts")
        async def alerts() -> list[dict[str, Any]]:
            return [
                {
                    "labels": {"alertname": evil("alertname"), "model": evil("alertmodel")},
                    "annotations": {"summary": evil("summary")},
                    "state": "firing",
                    "startsAt": "2027-01-15T08:00:00Z",
                    "endsAt": "2027-01-15T08:10:00Z",
                }
            ]

        @r.get("/v1/changes")
        async def changes() -> list[dict[str, Any]]:
            return [
                {
                    "id": "c1",
                    "at": 1_800_000_000.0,
                    "at_iso": "2027-01-15T08:00:00Z",
                    "what": evil("what"),
                    "who": evil("who"),
                    "model": evil("chmodel"),
                    "version": None,
                    "link": None,
                    "source": "api",
                }
            ]

        return r


def _client() -> tuple[TestClient, Service]:
    cfg = parse_config({"triton": {"enabled": False}, "traces": {"enabled": True, "slow_threshold_ms": 50}})
    svc = Service(
        cfg,
        clock=FakeClock(),
        store=Store(":memory:"),
        registry=CollectorRegistry(),
        factories=[traces, pages, lambda ctx: [Hostile()]],
    )
    svc.component("traces").ingest(_spans(), "test")
    drifting = Gauge("sidecar_drift_drifting", "drift", ["model", "version", "feature", "test"], registry=svc.registry)
    drifting.labels(evil("dmodel"), "1", evil("feature"), "ks").set(1)
    gpu = Gauge("sidecar_gpu_up", "gpu", ["gpu", "uuid", "name"], registry=svc.registry)
    gpu.labels("0", "GPU-1", evil("gpuname")).set(1)
    return TestClient(create_app(svc)), svc


def _assert_escaped(page: str, tags: list[str]) -> None:
    reader = _Reader()
    reader.feed(page)
    reader.close()
    assert "script" not in reader.tags  # no value became markup
    for tag in tags:
        assert evil(tag) not in page, tag
        # Read back whole (so no quote ended an attribute early): shown, and shown as text, not as markup.
        assert any(evil(tag) in v for v in reader.values), f"{tag} is not shown on the page"


def test_trace_list_escapes_every_name() -> None:
    c, _ = _client()
    with c:
        page = c.get("/traces").text
    # The failure reason (the error span's message) is on the list too.
    _assert_escaped(page, ["root", "model", "ver", "errmsg"])


def test_waterfall_escapes_names_attributes_events_and_errors() -> None:
    c, _ = _client()
    with c:
        r = c.get(f"/traces/{TID}")
    assert r.status_code == 200
    _assert_escaped(r.text, ["root", "svc", "akey", "aval", "model", "ver", "event", "evattr", "failing", "errmsg"])


def test_index_escapes_readiness_alerts_changes_drift_and_gpus() -> None:
    c, _ = _client()
    with c:
        r = c.get("/")
    assert r.status_code == 200
    _assert_escaped(
        r.text,
        ["ready", "alertname", "alertmodel", "summary", "what", "who", "chmodel", "dmodel", "feature", "gpuname"],
    )


def test_changes_page_escapes_what_who_and_model() -> None:
    c, _ = _client()
    with c:
        r = c.get("/changes")
    assert r.status_code == 200
    _assert_escaped(r.text, ["what", "who", "chmodel"])
