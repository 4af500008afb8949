"""Every page with one finding of every kind firing (probe, action plan, goodput, token-length drift, edge SLA,
tail and purge among them), as headless Chromium lays it out at 1400 px and 390 px (a phone), with the read token
set: nothing widens the page, each kind's line on ``/`` is there, every alert's summary is on ``/alerts`` whole, and
no section is left empty without a word.

The findings are ``tests/alerting/story_cases.py``'s, reported by a replaying check through the service's own path;
the `/` lines read the gauges the checks would export for the same moment. Screenshots:
``PYTHONPATH=$PWD:$PWD/tests/helpers python tests/pages/test_kinds_in_chromium.py --shots DIR`` (without
``--shots`` it serves until interrupted).
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "alerting"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "helpers"))

from app_server import AppServer
from chromium import chromium
from story_cases import CASES, edge_gauges, goodput_gauges, probe_gauges, tokens_gauges

from sidecar.alerting.render import finding_text
from sidecar.app import create_app
from sidecar.clock import FakeClock
from sidecar.component import Passive, Role
from sidecar.config import parse_config
from sidecar.model import Finding
from sidecar.service import Service
from sidecar.store import Store
from sidecar.wiring.alerting import build as alerting
from sidecar.wiring.pages import factories

READ = "r34d-token"
PAGES = (
    ("status", "/"),
    ("alerts", "/alerts"),
    ("audit", "/audit"),
    ("changes", "/changes"),
    ("drift", "/drift"),
    ("runbook", "/runbooks/GoodputBurn.md"),
    ("runbooks", "/runbooks/"),
)
WIDTHS = (1400, 390)
NEW = ("goodput", "token_drift", "probe", "action", "edge_sla", "edge_tail", "edge_purge")


class Replay(Passive):
    name = "replay"
    role = Role.CHECK

    def __init__(self, findings: Sequence[Finding]) -> None:
        self.findings = list(findings)

    def evaluate(self, now: float) -> Sequence[Finding]:
        return self.findings


def _gauges(reg: CollectorRegistry) -> None:
    goodput_gauges(reg)
    tokens_gauges(reg, psi=0.21)
    probe_gauges(reg)
    edge_gauges(reg, "edge_hit_ratio_burn", "tail", "purge")


class serve:
    def __enter__(self) -> str:
        cfg = parse_config(
            {
                "server": {"read_token": READ},
                "checks": {"eval_interval_secs": 3600},
                "alerting": {"enabled": True, "alertmanager": {"urls": ["http://alertmanager.example:9093"]}},
                "webhooks": [{"name": "ops", "url": "http://hooks.example/x", "secret": "s"}],
            }
        )
        t0 = time.time()
        self.clock = FakeClock(t0)
        drift_f, pages_f = factories()
        findings = [CASES[k].finding for k in sorted(CASES)]
        self.svc = Service(
            cfg,
            clock=self.clock,
            store=Store(":memory:"),
            http=httpx.AsyncClient(transport=httpx.MockTransport(lambda r: httpx.Response(200, json={}))),
            factories=[alerting, drift_f, pages_f, lambda ctx: [Replay(findings)]],
        )
        _gauges(self.svc.registry)
        self.app_server = AppServer(create_app(self.svc))
        base = self.app_server.start()
        # A purge and a deploy on /changes, both before the findings (so the alerts cite the deploy).
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {READ}"}) as http:
            for body in (
                {"purge": {"pattern": "/model/weights/v1.3."}, "who": "ops", "at": t0 - 120},
                {"what": "chat v3 rollout, longer prompts", "model": "chat", "version": "3", "who": "ci", "at": t0 - 9},
            ):
                r = http.post("/v1/changes", json=body)
                assert r.status_code == 201, r.text
        self.svc.evaluate_once(self.clock.now())
        return base

    def __exit__(self, *exc: object) -> None:
        self.app_server.stop()


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with serve() as u:
        yield u


def _look(base: str, shots: Path | None = None) -> dict[tuple[str, int], dict[str, Any]]:
    out: dict[tuple[str, int], dict[str, Any]] = {}
    with chromium() as browser:
        for width in WIDTHS:
            ctx = browser.new_context(
                viewport={"width": width, "height": 900}, extra_http_headers={"Authorization": f"Bearer {READ}"}
            )
            page = ctx.new_page()
            for name, path in PAGES:
                resp = page.goto(base + path, wait_until="load")
                out[(name, width)] = {
                    "status": resp.status if resp is not None else 0,
                    "over": page.evaluate(
                        "document.documentElement.scrollWidth - document.documentElement.clientWidth"
                    ),
                    "text": page.inner_text("main"),
                    # Sections (h2) followed by nothing at all before the next one: an empty section.
                    "empty": page.evaluate(
                        """() => [...document.querySelectorAll('main h2')].filter(h => {
                            let n = h.nextElementSibling;
                            return !n || n.tagName === 'H2' || !n.innerText.trim();
                        }).map(h => h.innerText)"""
                    ),
                }
                if shots is not None:
                    page.screenshot(path=str(shots / f"kinds-{name}-{width}.png"), full_page=True)
            ctx.close()
    return out


@pytest.mark.chromium
def test_every_page_fits_and_tells_every_kind_at_1400_and_390_px(url: str) -> None:
    seen = _look(url)
    for (name, width), v in seen.items():
        assert v["status"] == 200, (name, width, v["status"])
        assert v["over"] == 0, f"{name} at {width} px is {v['over']} px wider than the window"
        assert not v["empty"], f"{name} at {width} px has empty sections: {v['empty']}"
    for width in WIDTHS:
        status, alerts = seen[("status", width)]["text"], seen[("alerts", width)]["text"]
        for line in ("goodput:", "token lengths:", "edge:", "probes:"):
            assert line in status.lower() or line.rstrip(":") in status.lower(), (line, status)
        assert "91.2% over 1h" in status and "ctr v1 failing (3 in a row)" in status
        assert "cache purge" in status and "chat v3 rollout" in status  # `/`'s last changes
        assert "cache purge" in seen[("changes", width)]["text"]
        for kind in NEW:
            summary = finding_text(CASES[kind].finding)[0]
            assert summary in " ".join(alerts.split()), (kind, summary)


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
            print(f"{name} at {width} px: {v['over']} px too wide; empty sections {v['empty']}")


if __name__ == "__main__":
    main()
