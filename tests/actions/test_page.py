"""``/`` shows each probed model's last result, the actions layer's mode and, as alerts, the exact plan of a dry
run, with the real alert book behind the page."""

from __future__ import annotations

import html
import logging
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry

from sidecar.actions.config import ActionsConfig
from sidecar.actions.layer import ActionLayer
from sidecar.app import create_app
from sidecar.checks.probe.check import ModelProbe
from sidecar.checks.probe.client import ProbeAnswer
from sidecar.checks.probe.config import ProbesConfig
from sidecar.clock import FakeClock
from sidecar.component import Context
from sidecar.config import parse_config
from sidecar.pages.probe_line import probe_line
from sidecar.pages.readers import Api
from sidecar.pages.status import StatusPages
from sidecar.polled import ManualTicker
from sidecar.service import Service
from sidecar.store import Store
from sidecar.wiring.alerting import build as alerting

PROBE = {
    "inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}],
    "outputs": [{"name": "score", "datatype": "FP32", "shape": [1, 1]}],
}


class NanClient:
    async def infer(self, model: str, *a: Any, **kw: Any) -> dict[str, ProbeAnswer]:
        v = 0.5 if model == "rank" else float("nan")
        return {"score": ProbeAnswer("FP32", (1, 1), np.full((1, 1), v, dtype=np.float32))}

    async def close(self) -> None:
        return None


def _mine(ctx: Context) -> list[Any]:
    probes = ProbesConfig.model_validate({"enabled": True, "models": {"ctr": PROBE, "rank": PROBE}})
    actions = ActionsConfig.model_validate({"enabled": True, "models": {"ctr": {"on_probe_failure": ["reload"]}}})
    return [
        ModelProbe(probes, client=NanClient(), registry=ctx.registry, clock=ctx.clock, ticker=ManualTicker),
        ActionLayer(actions, control=None, bus=ctx.bus, registry=ctx.registry, clock=ctx.clock, ticker=ManualTicker),
        StatusPages(
            registry=ctx.registry,
            clock=ctx.clock,
            api=Api(ctx.registry, logging.getLogger("t")),
            runbook_url="/runbooks",
        ),
    ]


def test_the_line_is_absent_without_probes_or_actions() -> None:
    assert probe_line(CollectorRegistry()) is None


async def test_status_page_shows_probes_mode_and_the_dry_run_plan(tmp_path: Path) -> None:
    cfg = parse_config({"triton": {"enabled": False}, "alerting": {"enabled": True}})
    svc = Service(
        cfg,
        clock=FakeClock(1_800_000_000.0),
        registry=CollectorRegistry(),
        store=Store(tmp_path / "s.sqlite"),
        http=httpx.AsyncClient(transport=httpx.MockTransport(lambda r: httpx.Response(200, json={}))),
        factories=[alerting, _mine],
    )
    probe = svc.component("probe")
    assert probe_line(svc.registry) == "not probed yet | actions: dry run (plans only)"
    for _ in range(3):
        await probe.probe("ctr")
    await probe.probe("rank")
    svc.evaluate_once()  # the probe's finding: a plan
    svc.evaluate_once()  # the plan's alert
    with TestClient(create_app(svc, manage_lifecycle=False)) as client:
        page = html.unescape(client.get("/").text)
    assert 'id="probe-line">probes: ctr failing (3 in a row); rank ok | actions: dry run (plans only)</p>' in page
    assert "[dry run] would reload ctr: POST /v2/repository/models/ctr/load | because ctr probe failing" in page
    assert "ActionPlanned" in page and "ModelProbeFailing" in page
    svc.store.close()
