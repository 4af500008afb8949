"""The pages the sidecar serves about itself, as headless Chromium shows them with no internet: ``/docs`` (Swagger
UI from the fastapi-offline wheel, served by the sidecar) renders the operations of the OpenAPI 3.1 document
FastAPI writes, and a runbook page fits a phone-wide window.

Also the screenshots in docs/screenshots/api-docs*.png and runbook*.png:
``python tests/pages/test_docs_page.py --shots docs/screenshots`` (without ``--shots`` it serves until interrupted).
"""

from __future__ import annotations

import argparse
import copy
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "helpers"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app_server import AppServer
from chromium import chromium

from sidecar.app import create_app
from sidecar.checks.business.examples import EXAMPLE_BUSINESS_CHECKS
from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.service import Service
from sidecar.store import Store
from sidecar.wiring.alerting import build as alerting
from sidecar.wiring.business import build as business
from sidecar.wiring.events import build as events
from sidecar.wiring.pages import build as pages

RUNBOOK = "/runbooks/ctr-mean-down.md"
SHOTS = (("api-docs", "/docs"), ("runbook", RUNBOOK))
WIDTHS = (1400, 390)
# Everything a page loads must come from the sidecar itself (the test's browser has no route anywhere else).
_OVER = "document.documentElement.scrollWidth - document.documentElement.clientWidth"


class serve:
    """A sidecar with events, alerting (the runbooks) and the example business checks, CTR on a 10-minute window."""

    def __enter__(self) -> str:
        checks: dict[str, Any] = copy.deepcopy(EXAMPLE_BUSINESS_CHECKS)
        checks["checks"]["ctr_mean_down"].update(window_secs=600, bucket_secs=10, baseline_secs=3600, for_secs=60)
        cfg = parse_config(
            {
                "alerting": {"enabled": True, "changes": {"poll_repository": False}},
                "checks": {"business": checks},
            }
        )
        self.svc = Service(
            cfg,
            clock=FakeClock(time.time()),
            store=Store(":memory:"),
            http=httpx.AsyncClient(transport=httpx.MockTransport(lambda r: httpx.Response(200, json={}))),
            factories=[alerting, business, events, pages],
        )
        self.app_server = AppServer(create_app(self.svc))
        return self.app_server.start()

    def __exit__(self, *exc: object) -> None:
        self.app_server.stop()


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with serve() as u:
        yield u


def _offline_page(browser: Any, base: str, width: int, asked: list[str]) -> Any:
    """A page that may reach only the sidecar: any other request is recorded and aborted."""
    page = browser.new_page(viewport={"width": width, "height": 900})

    def route(r: Any) -> None:
        if r.request.url.startswith(base + "/"):
            r.continue_()
        else:
            asked.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    return page


@pytest.mark.chromium
def test_docs_render_the_operations_offline(url: str) -> None:
    asked: list[str] = []
    with chromium() as browser:
        page = _offline_page(browser, url, 1400, asked)
        page.goto(f"{url}/docs", wait_until="load")
        events = page.locator(".opblock", has=page.locator(".opblock-summary-path", has_text="/v1/events"))
        events.first.wait_for(state="visible", timeout=20_000)
        title = page.locator(".info .title").first.inner_text()
        paths = page.eval_on_selector_all(".opblock-summary-path", "els => els.map(e => e.textContent)")
        errors = page.locator(".errors-wrapper, .loading-container .errors").count()
        unrenderable = page.get_by_text("Unable to render this definition").count()
    assert asked == []  # no CDN, no font service: nothing but the sidecar
    assert unrenderable == 0 and errors == 0
    assert "OAS 3.1" in title, title  # the version FastAPI writes, read by this Swagger UI
    assert {"/v1/events", "/healthz", "/readyz", "/metrics"} <= {s.replace("\u200b", "") for s in paths}


@pytest.mark.chromium
def test_a_runbook_page_fits_a_phone_and_a_wide_window(url: str) -> None:
    asked: list[str] = []
    with chromium() as browser:
        seen = {}
        for width in WIDTHS:
            page = _offline_page(browser, url, width, asked)
            page.goto(url + RUNBOOK, wait_until="load")
            tables = "els => Math.max(0, ...els.map(e => e.scrollWidth - e.clientWidth))"
            seen[width] = (
                max(page.evaluate(_OVER), page.eval_on_selector_all("#params .scroll", tables)),
                page.eval_on_selector("header.top", "e => getComputedStyle(e).backgroundColor"),
                page.locator('tr[data-path="checks.business.checks.ctr_mean_down.window_secs"] td.value')
                .inner_text()
                .strip(),
            )
            page.close()
    assert asked == []
    for width, (over, header_bg, window) in seen.items():
        assert over <= 0, (width, over)  # no sideways scrolling, of the page or of a settings table
        assert header_bg == "rgb(29, 43, 58)", width  # the pages' stylesheet applied: it is one of the pages
        assert window == "600 (10m)", width  # the config's window, not the runbook's old 24 hours


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shots", type=Path, help="write screenshots here and exit")
    args = ap.parse_args()
    with serve() as base:
        print(base, flush=True)
        if args.shots is None:
            threading.Event().wait()  # serve until interrupted (Ctrl-C)
        args.shots.mkdir(parents=True, exist_ok=True)
        with chromium() as browser:
            for name, path in SHOTS:
                for width in WIDTHS:
                    page = browser.new_page(viewport={"width": width, "height": 900})
                    page.goto(base + path, wait_until="networkidle")
                    if path == "/docs":
                        page.locator(".opblock").first.wait_for(state="visible")
                    suffix = "" if width == WIDTHS[0] else f"-{width}"
                    full = path == RUNBOOK and width == WIDTHS[0]  # the whole runbook once; the rest as seen
                    page.screenshot(path=str(args.shots / f"{name}{suffix}.png"), full_page=full)
                    page.close()


if __name__ == "__main__":
    main()
