"""Webhooks against a local HTTP server: the signature verifies, 5xx is retried, the rate limit and every
delivery are counted."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from prometheus_client import CollectorRegistry

from exporters.config import WebhookConfig
from exporters.webhook import SIGNATURE_HEADER, TIMESTAMP_HEADER, WebhookExporter
from sidecar.clock import FakeClock
from sidecar.model import Finding

SECRET = "s3cret"


class Receiver:
    def __init__(self) -> None:
        self.answers: list[int] = []
        self.calls: list[tuple[dict[str, str], bytes]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.calls.append(({k.lower(): v for k, v in self.headers.items()}, body))
                code = outer.answers.pop(0) if outer.answers else 200
                self.send_response(code)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    t = threading.Thread(target=r.server.serve_forever, daemon=True)
    t.start()
    try:
        yield r
    finally:
        r.server.shutdown()
        r.server.server_close()


async def _no_sleep(_: float) -> None:
    return None


def finding(model: str = "ctr", active: bool = True) -> Finding:
    return Finding(
        check="drift",
        kind="drift",
        labels={"model": model, "version": "2", "feature": "x"},
        active=active,
        value=0.4,
        threshold=0.1,
        summary="x drifted",
    )


def exporter(url: str, clock: FakeClock, registry: CollectorRegistry, **kw: object) -> WebhookExporter:
    cfg = WebhookConfig.model_validate(
        {"name": "retrain", "url": url, "secret": SECRET, "retry": {"max_attempts": 5}, **kw}
    )
    return WebhookExporter(cfg, registry=registry, clock=clock, http=httpx.AsyncClient(), sleep=_no_sleep)


def count(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(name, {"exporter": "webhook_retrain", **labels}) or 0.0


async def test_signature_verifies_and_delivery_is_counted(
    receiver: Receiver, clock: FakeClock, registry: CollectorRegistry
) -> None:
    hook = exporter(receiver.url, clock, registry)
    hook.on_findings([finding()], clock.now())
    await hook.sender.flush()
    ((headers, body),) = receiver.calls
    ts = headers[TIMESTAMP_HEADER.lower()]
    assert ts == str(int(clock.now()))
    want = "sha256=" + hmac.new(SECRET.encode(), f"{ts}.".encode() + body, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(headers[SIGNATURE_HEADER.lower()], want)
    wrong = "sha256=" + hmac.new(b"other", f"{ts}.".encode() + body, hashlib.sha256).hexdigest()
    assert headers[SIGNATURE_HEADER.lower()] != wrong
    sent = json.loads(body)
    assert sent["labels"] == {"model": "ctr", "version": "2", "feature": "x"} and sent["summary"] == "x drifted"
    assert count(registry, "sidecar_export_sent_total") == 1
    # Still active next round: no second call.
    hook.on_findings([finding()], clock.now())
    await hook.sender.flush()
    assert len(receiver.calls) == 1


async def test_5xx_is_retried_until_delivered(
    receiver: Receiver, clock: FakeClock, registry: CollectorRegistry
) -> None:
    receiver.answers = [503, 500]
    hook = exporter(receiver.url, clock, registry)
    hook.on_findings([finding()], clock.now())
    await hook.sender.flush()
    assert len(receiver.calls) == 3
    assert receiver.calls[0][1] == receiver.calls[2][1]
    assert count(registry, "sidecar_export_failed_total", reason="http_5xx") == 2
    assert count(registry, "sidecar_export_sent_total") == 1


async def test_4xx_is_dropped_as_permanent(receiver: Receiver, clock: FakeClock, registry: CollectorRegistry) -> None:
    receiver.answers = [401]
    hook = exporter(receiver.url, clock, registry)
    hook.on_findings([finding()], clock.now())
    await hook.sender.flush()
    assert len(receiver.calls) == 1
    assert count(registry, "sidecar_export_dropped_total", reason="permanent") == 1


async def test_rate_limit_is_per_webhook_and_counted(
    receiver: Receiver, clock: FakeClock, registry: CollectorRegistry
) -> None:
    hook = exporter(receiver.url, clock, registry, min_interval_secs=60)
    hook.on_findings([finding("ctr"), finding("rank")], clock.now())
    clock.advance(59)
    hook.on_findings([finding("ctr"), finding("rank"), finding("fraud")], clock.now())
    await hook.sender.flush()
    assert [json.loads(b)["labels"]["model"] for _, b in receiver.calls] == ["ctr"]
    # rank held back twice, fraud once; each is tried again the next round.
    assert registry.get_sample_value("sidecar_webhook_rate_limited_total", {"webhook": "retrain"}) == 3
    clock.advance(1)
    hook.on_findings([finding("ctr"), finding("rank"), finding("fraud")], clock.now())
    await hook.sender.flush()
    assert [json.loads(b)["labels"]["model"] for _, b in receiver.calls] == ["ctr", "rank"]
    assert registry.get_sample_value("sidecar_webhook_rate_limited_total", {"webhook": "retrain"}) == 4


async def test_match_selects_findings(receiver: Receiver, clock: FakeClock, registry: CollectorRegistry) -> None:
    hook = exporter(receiver.url, clock, registry, match={"kind": "diagnosis"})
    diag = Finding(check="diagnose", kind="diagnosis", labels={"diagnosis": "no_spans"}, active=True, value=1.0)
    hook.on_findings([finding(), diag], clock.now())
    await hook.sender.flush()
    assert [json.loads(b)["labels"] for _, b in receiver.calls] == [{"diagnosis": "no_spans"}]
