"""The drift pages as headless Chromium lays them out, over a real drift check fed through the events API: the
list fits a 1400 px window, and the detail drawings (ECDF with its D segment, category bars) lie inside the
page with the D segment between the two curves.

Also the screenshots in docs/screenshots/drift*.png:
``python tests/pages/test_drift_in_chromium.py --shots docs/screenshots`` (without ``--shots`` it serves until
interrupted). The Alertmanager is answered in-process; nothing leaves the host.
"""

from __future__ import annotations

import argparse
import subprocess
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
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "helpers"))
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
SHOTS = (
    ("drift", "/drift", "1400,520"),
    ("drift-numeric", "/drift/ctr/2/clicks_7d", "1400,900"),
    ("drift-categorical", "/drift/ctr/2/country", "1400,760"),
    ("drift-390", "/drift", "390,2000"),
)


def _rows(rng: np.random.Generator, n: int, drifted: bool) -> list[dict[str, Any]]:
    clicks = rng.gamma(2.0, 3.0, n) * (1.35 if drifted else 1.0)
    income = rng.normal(52_000, 9_000 * (1.6 if drifted else 1.0), n)
    age = rng.normal(38, 11, n)
    u, m = rng.random(n), rng.random(n)
    countries = np.array(["de", "fr", "es", "it", "nl"])[rng.choice(5, n, p=[0.35, 0.25, 0.2, 0.12, 0.08])]
    return [
        {
            "clicks_7d": float(c),
            "income": float(i),
            "age": float(a),
            "country": "br" if drifted and uu < 0.15 else str(k),
            "device": None if drifted and mm < 0.18 else ("ios" if uu < 0.45 else "android"),
        }
        for c, i, a, uu, mm, k in zip(clicks, income, age, u, m, countries, strict=True)
    ]


def _post(http: httpx.Client, clock: FakeClock, model: str, version: str, rows: list[dict[str, Any]]) -> None:
    for i in range(0, len(rows), 200):
        evs = [
            {
                "model": model,
                "version": version,
                "timestamp": clock.now(),
                "features": r,
                "score": float(abs(r.get("age", 0.0) or 0.0)) / 100,
            }
            for r in rows[i : i + 200]
        ]
        assert http.post("/v1/events", json=evs).json()["accepted"] == len(evs)
        clock.advance(5)


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with serve() as u:
        yield u


class serve:
    """A sidecar with drift on a real check: ctr v2 drifted (reference pinned about 70 minutes back), fraud v1 still
    collecting its reference."""

    def __enter__(self) -> str:
        cfg = parse_config(
            {
                "checks": {
                    "eval_interval_secs": 3600,
                    "drift": {
                        "enabled": True,
                        "method": "window",
                        "sustained_secs": 300,
                        "min_samples": 200,
                        "reference": {"mode": "pinned", "pinned_events": 3000},
                    },
                },
                "alerting": {"enabled": True, "alertmanager": {"urls": [AM]}},
            }
        )
        self.clock = clock = FakeClock(time.time() - 5400)
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
        rng = np.random.default_rng(7)
        with httpx.Client(base_url=base) as http:
            _post(http, clock, "ctr", "2", _rows(rng, 3000, drifted=False))
            clock.advance(3600)
            _post(http, clock, "ctr", "2", _rows(rng, 4000, drifted=True))
            _post(http, clock, "fraud", "1", [{"amount": float(v)} for v in rng.lognormal(3, 1, 400)])
        svc.evaluate_once(clock.now())
        clock.advance(420)
        svc.evaluate_once(clock.now())
        clock.advance(20)
        return base

    def __exit__(self, *exc: object) -> None:
        self.app_server.stop()


@pytest.mark.chromium
def test_drift_pages_lay_out_inside_the_window(url: str) -> None:
    over = "document.documentElement.scrollWidth - document.documentElement.clientWidth"
    box = "e => { const b = e.getBoundingClientRect(); return [b.x, b.y, b.right, b.bottom]; }"
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(f"{url}/drift", wait_until="load")
        list_over = page.evaluate(over)
        states = page.eval_on_selector_all(
            "#drift tr.feature td.state > span.badge", "els => els.map(e => e.textContent)"
        )
        page.goto(f"{url}/drift/ctr/2/clicks_7d", wait_until="load")
        num_over = page.evaluate(over)
        svg = page.eval_on_selector("#ecdf", box)
        dline = page.eval_on_selector("#d-line", box)
        stroke = page.eval_on_selector("#cur-curve", "e => getComputedStyle(e).stroke")
        page.goto(f"{url}/drift/ctr/2/country", wait_until="load")
        cat_over = page.evaluate(over)
        bars = page.eval_on_selector("#bars", box)
        new_fill = page.eval_on_selector("#bars g.cat.new text.catlabel", "e => getComputedStyle(e).fill")
    assert (list_over, num_over, cat_over) == (0, 0, 0)
    rank = {"drifting": 0, "condition holds": 1, "insufficient data": 2, "ok": 3}
    assert states[0] == "drifting" and "insufficient data" in states and states[-1] == "ok"
    assert [rank[s] for s in states] == sorted(rank[s] for s in states)  # worst first
    assert svg[0] >= 0 and svg[2] <= 1400 and svg[3] > svg[1] + 200
    assert svg[0] < dline[0] < svg[2] and svg[1] < dline[1] < dline[3] < svg[3]  # D inside the plot, with height
    assert stroke == "rgb(255, 127, 14)"  # the stylesheet's rules for the drawing applied
    assert bars[2] <= 1400 and new_fill == "rgb(214, 39, 40)"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shots", type=Path, help="write screenshots here and exit")
    args = ap.parse_args()
    with serve() as base:
        print(base, flush=True)
        if args.shots is None:
            threading.Event().wait()  # serve until interrupted (Ctrl-C)
        args.shots.mkdir(parents=True, exist_ok=True)
        for name, path, size in SHOTS:
            subprocess.run(
                [
                    "chromium",
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--hide-scrollbars",
                    f"--screenshot={args.shots / (name + '.png')}",
                    f"--window-size={size}",
                    base + path,
                ],
                check=True,
                capture_output=True,
                timeout=60,
            )


if __name__ == "__main__":
    main()
