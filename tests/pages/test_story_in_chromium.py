"""``/``, ``/alerts`` and a drift detail page during a drift, as headless Chromium lays them out at 1400 px and
390 px (a phone): nothing widens the page, and the alert's evidence and the "now" figures are on screen.

A real drift check (method multiscale) fed through the events API on a fake clock: a pinned reference, two
drifting 60 s blocks, then a quiet one, so the alert fires on the evidence while the latest block is quiet.
Also the screenshots ``docs/screenshots/story-*.png``:
``PYTHONPATH=$PWD:$PWD/tests/helpers python tests/pages/test_story_in_chromium.py --shots docs/screenshots``
(without ``--shots`` it serves until interrupted). The Alertmanager is answered in-process; nothing leaves the
host.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app_server import AppServer
from chromium import chromium

from sidecar.app import create_app
from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.service import Service
from sidecar.store import Store
from sidecar.wiring.alerting import build as alerting
from sidecar.wiring.events import build as events
from sidecar.wiring.pages import factories

AM = "http://alertmanager.example:9093"
PAGES = (("status", "/"), ("alerts", "/alerts"), ("drift-detail", "/drift/ctr/2/clicks_7d"))
WIDTHS = (1400, 390)


def _events(rng: np.random.Generator, n: int, ts: float, shift: float) -> list[dict[str, Any]]:
    clicks = rng.gamma(2.0, 3.0, n) * (1.0 + shift)
    age, u = rng.normal(38, 11, n), rng.random(n)
    return [
        {
            "model": "ctr",
            "version": "2",
            "timestamp": ts,
            "features": {
                "clicks_7d": float(c),
                "age": float(a),
                "country": "br" if shift and uu < 0.2 else ("de" if uu < 0.6 else "fr"),
            },
        }
        for c, a, uu in zip(clicks, age, u, strict=True)
    ]


class serve:
    """The sidecar, its evaluation driven here block by block."""

    def __enter__(self) -> str:
        cfg = parse_config(
            {
                "checks": {
                    "eval_interval_secs": 3600,
                    "drift": {
                        "enabled": True,
                        "method": "multiscale",
                        "eval_threads": 1,
                        "min_samples": 100,
                        "reference": {"mode": "pinned", "pinned_events": 1000},
                    },
                },
                "alerting": {"enabled": True, "alertmanager": {"urls": [AM]}},
            }
        )
        t0 = time.time() - 900
        t0 -= t0 % 1800
        self.clock = clock = FakeClock(t0)
        drift_f, pages_f = factories()
        self.svc = svc = Service(
            cfg,
            clock=clock,
            store=Store(":memory:"),
            http=httpx.AsyncClient(transport=httpx.MockTransport(lambda r: httpx.Response(200, json={}))),
            factories=[alerting, events, drift_f, pages_f],
        )
        self.app_server = AppServer(create_app(svc))
        base = self.app_server.start()
        rng = np.random.default_rng(3)
        with httpx.Client(base_url=base) as http:
            for block, (n, shift) in enumerate(((1000, 0.0), (400, 0.4), (400, 0.4), (400, 0.0))):
                clock.advance(t0 + 60 * block + 1 - clock.now())
                evs = _events(rng, n, clock.now(), shift)
                for i in range(0, n, 500):
                    assert http.post("/v1/events", json=evs[i : i + 500]).json()["accepted"] == len(evs[i : i + 500])
                clock.advance(t0 + 60 * (block + 1) - clock.now())
                svc.evaluate_once(clock.now())
        clock.advance(15)
        return base

    def __exit__(self, *exc: object) -> None:
        self.app_server.stop()


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with serve() as u:
        yield u


def _look(base: str, shots: Path | None = None) -> dict[tuple[str, int], dict[str, Any]]:
    """Per page and width: how far the page is wider than the window, and the texts the checks need."""
    out: dict[tuple[str, int], dict[str, Any]] = {}
    with chromium() as browser:
        for width in WIDTHS:
            page = browser.new_page(viewport={"width": width, "height": 900})
            for name, path in PAGES:
                page.goto(base + path, wait_until="load")
                out[(name, width)] = {
                    "over": page.evaluate(
                        "document.documentElement.scrollWidth - document.documentElement.clientWidth"
                    ),
                    "text": page.inner_text("main"),
                }
                if shots is not None:
                    suffix = "" if width == WIDTHS[0] else f"-{width}"
                    page.screenshot(path=str(shots / f"story-{name}{suffix}.png"), full_page=True)
            page.close()
    return out


@pytest.mark.chromium
def test_status_alerts_and_drift_detail_fit_1400_and_390_px_during_a_drift(url: str) -> None:
    seen = _look(url)
    for (name, width), v in seen.items():
        assert v["over"] == 0, f"{name} at {width} px is {v['over']} px wider than the window"
    for width in WIDTHS:
        assert "FeatureDrifting" in seen[("status", width)]["text"]
        assert "in the 60s block to" in seen[("alerts", width)]["text"]  # the evidence, quoted
        assert "now: KS D=" in seen[("alerts", width)]["text"]
        detail = seen[("drift-detail", width)]["text"]
        assert "Evidence" in detail and "now: KS D=" in detail


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shots", type=Path, help="write screenshots here and exit")
    args = ap.parse_args()
    with serve() as base:
        print(base, flush=True)
        if args.shots is None:
            threading.Event().wait()  # serve until interrupted (Ctrl-C)
        args.shots.mkdir(parents=True, exist_ok=True)
        for (name, width), v in _look(base, args.shots).items():
            print(f"{name} at {width} px: {v['over']} px too wide")


if __name__ == "__main__":
    main()
