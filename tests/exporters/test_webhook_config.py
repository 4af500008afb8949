"""Webhook config errors name the field path; a webhook in a Service takes the round's findings."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry

from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.errors import ConfigError
from sidecar.model import Finding
from sidecar.service import Service
from sidecar.store import Store
from sidecar.wiring.diagnose import build as diagnose_build


def hook(name: str = "retrain", url: str = "https://ci.example/hook") -> dict[str, object]:
    return {"name": name, "url": url, "secret": "s"}


def test_duplicate_names_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"webhooks: .*\[1\]\.name: 'retrain' is used twice"):
        parse_config({"webhooks": [hook(), hook(url="https://other/hook")]})


@pytest.mark.parametrize("url", ["ftp://x/hook", "not a url", "http://"])
def test_url_must_be_http(url: str) -> None:
    with pytest.raises(ConfigError, match=r"webhooks\[0\]\.url: .*must be an http:// or https:// URL"):
        parse_config({"webhooks": [hook(url=url)]})


def test_unknown_key_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"webhooks\[0\]\.retries"):
        parse_config({"webhooks": [{**hook(), "retries": 3}]})


def test_a_configured_webhook_is_a_finding_sink_of_the_service(tmp_path: Path, clock: FakeClock) -> None:
    cfg = parse_config({"webhooks": [{**hook(), "match": {"kind": "drift"}}], "diagnose": {"enabled": False}})
    svc = Service(
        cfg,
        clock=clock,
        registry=CollectorRegistry(),
        store=Store(tmp_path / "s.sqlite"),
        http=httpx.AsyncClient(transport=httpx.MockTransport(lambda r: httpx.Response(200))),
        factories=[diagnose_build],
    )

    class Drifting:
        name = "drift"

        def evaluate(self, now: float) -> list[Finding]:
            return [Finding(check="drift", kind="drift", labels={"model": "ctr"}, active=True, value=0.3)]

    svc.components.append(Drifting())
    svc.evaluate_once(clock.now())
    assert len(svc.component("webhook_retrain").sender.queue) == 1
