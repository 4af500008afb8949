"""Delivery to an Alertmanager reads with one word on every screen: ``/readyz`` (the Alertmanager exporter's
readiness detail, which ``/`` shows in its readiness card) and the delivery table of ``/alerts`` both take it from
``sidecar/delivery_state.py``: ``failing`` while notices wait and POSTs fail (once "ok ... unreachable" on one and
"failing" on the other), ``delivered`` once it takes them."""

from __future__ import annotations

import asyncio

from fastapi.testclient import TestClient
from test_status_pages import AM, _delivery, _get, _setup_alerts

from sidecar.app import create_app
from sidecar.delivery_state import STATES


def _readyz(svc: object) -> str:
    r = TestClient(create_app(svc)).get("/readyz")  # type: ignore[arg-type]
    return str(r.json()["components"]["alertmanager"])


def test_readyz_and_the_alerts_page_say_the_same_word_for_delivery() -> None:
    svc, up, _ = _setup_alerts()
    am = svc.component("alertmanager")
    assert _delivery(_get(svc, "/alerts"))[1] == "queued" and f"{AM}: queued, 2 queued" in _readyz(svc)
    assert asyncio.run(am.flush_once(AM))[0] == "retry"  # Alertmanager answers 503
    word = _delivery(_get(svc, "/alerts"))[1]
    ready = _readyz(svc)
    assert word == "failing" and f"{AM}: failing, 2 queued" in ready, ready
    assert "unreachable" not in ready
    # `/`'s readiness card quotes /readyz: the same word there.
    assert f"{AM}: failing" in _get(svc, "/").by_id("readiness").text()
    up.am_status = 200
    assert asyncio.run(am.flush_once(AM))[0] == "sent"
    assert _delivery(_get(svc, "/alerts"))[1] == "delivered" and f"{AM}: delivered, 0 queued" in _readyz(svc)
    # The page's legend explains the words it uses.
    legend = _get(svc, "/alerts").text()
    assert all(word in legend for word in ("failing", "queued", "delivered")) and set(STATES) >= {"failing"}
