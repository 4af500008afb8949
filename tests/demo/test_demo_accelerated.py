"""The whole demo scenario on an accelerated clock: the real traffic, steps, watcher and promise table code,
the real sidecar (its app in-process, its checks, actions layer and alert book) and a real Alertmanager; only
Triton is a fake that scores with the demo models' own ``score`` functions and takes as long as their own
``delay_secs`` and ``token_times`` say, on a simulated timer the traffic times its requests and streams with,
and the sidecar's evaluation ticker is driven by the fake ticker. Thirteen minutes of scenario run in well under
a minute, with no sleeping.

The fake clock runs behind real time (it starts 15 minutes in the past): Alertmanager judges ``endsAt`` by its own
clock, so a resolved notice (``endsAt`` = when it resolved) must lie in its past, and a firing one in its future;
the resend delay is raised so that a firing notice's ``endsAt`` (now + 4 x resend delay) does.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from exporters.alertmanager import AlertmanagerExporter
from sidecar.app import create_app
from sidecar.clock import FakeClock
from sidecar.config import load_config
from sidecar.demo.alertmanager import DemoAlertmanager
from sidecar.demo.play import ScenarioRun
from sidecar.demo.run import demo_config, write_config
from sidecar.demo.scenario import DemoScenario
from sidecar.demo.story import EXPECTED, STAND_IN_OVERHEAD_SECS, clock_text, stand_in
from sidecar.demo.traffic import Traffic
from sidecar.demo.watch import ACTION, AM_ACTIVE, AM_GONE, describe
from sidecar.service import Service
from sidecar.store import Store

pytestmark = pytest.mark.alertmanager

RUN_SECS = 780  # past the last promise's deadline (income resolves within 3.5 min of +9 min)
EVAL_SECS = 5.0


class FakeTicker:
    """Moves the fake clock instead of waiting; runs the sidecar's evaluation at each interval it passes."""

    def __init__(self, clock: FakeClock, on_eval: Callable[[], Awaitable[None]], end_secs: float) -> None:
        self.clock, self.on_eval, self.end = clock, on_eval, end_secs
        self.t0 = clock.now()
        self.next_eval = 0.0

    def elapsed(self) -> float:
        return self.clock.now() - self.t0

    async def sleep_until(self, at_secs: float, stop: asyncio.Event) -> None:
        if at_secs >= self.end:
            stop.set()
            return
        while self.next_eval <= at_secs:
            self.clock.advance(max(0.0, self.next_eval - self.elapsed()))
            await self.on_eval()
            self.next_eval += EVAL_SECS
        self.clock.advance(max(0.0, at_secs - self.elapsed()))


class SimTimer:
    """The traffic's timer: the fake Triton moves it by as long as each answer and each token takes."""

    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> float:
        return self.t


class TokenStream(httpx.AsyncByteStream):
    """Server-sent events, one per token, each when the model's ``token_times`` says (on the timer)."""

    def __init__(self, timer: SimTimer, times: list[float], first: int) -> None:
        self.timer, self.times, self.first = timer, times, first

    async def __aiter__(self) -> Any:
        t0, at = self.timer.t, STAND_IN_OVERHEAD_SECS
        for i, tok in enumerate(self.times):
            self.timer.t = t0 + at + tok
            yield f'data: {{"TOKEN":{self.first + i},"model_name":"chat","model_version":"1"}}\n\n'.encode()
        self.timer.t += STAND_IN_OVERHEAD_SECS


def fake_triton(timer: SimTimer) -> Callable[[httpx.Request], httpx.Response]:
    models, chat = stand_in()

    def handle(request: httpx.Request) -> httpx.Response:
        parts = request.url.path.split("/")  # /v2/models/{m}/versions/{v}/infer or .../generate_stream
        model, version = parts[3], parts[5]
        body = json.loads(request.content)
        if parts[6] == "generate_stream":
            times = chat.token_times(body["PROMPT_TOKENS"], body["MAX_TOKENS"])
            headers = {"content-type": "text/event-stream"}
            return httpx.Response(200, headers=headers, stream=TokenStream(timer, times, body["PROMPT_TOKENS"]))
        x = np.array([body["inputs"][0]["data"]], dtype=np.float32)
        module = models[(model, version)]
        timer.t += getattr(module, "delay_secs", lambda _x: 0.0)(x) + STAND_IN_OVERHEAD_SECS
        if model == "fraud" and x[0, 0] < 0:
            return httpx.Response(400, json={"error": "amount must not be negative"})
        score = float(module.score(x).reshape(-1)[0])
        return httpx.Response(200, json={"outputs": [{"name": "score", "datatype": "FP32", "data": [score]}]})

    return handle


class Routes(httpx.AsyncBaseTransport):
    """triton.test -> the fake Triton, sidecar.test -> the sidecar's app in-process, anything else -> the network;
    every answer of /v1/alerts and Alertmanager's /api/v2/alerts is recorded with the scenario's time."""

    def __init__(self, app: Any, elapsed: Callable[[], float], timer: SimTimer) -> None:
        self.triton = httpx.MockTransport(fake_triton(timer))
        self.sidecar = httpx.ASGITransport(app=app)
        self.net = httpx.AsyncHTTPTransport()
        self.elapsed = elapsed
        self.answers: list[tuple[float, str, Any]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        host = request.url.host
        transport = self.triton if host == "triton.test" else self.sidecar if host == "sidecar.test" else self.net
        resp = await transport.handle_async_request(request)
        if request.url.path in ("/v1/alerts", "/api/v2/alerts"):
            await resp.aread()
            self.answers.append((self.elapsed(), request.url.path, json.loads(resp.content)))
        return resp

    async def aclose(self) -> None:
        await self.net.aclose()


def _key(labels: dict[str, str]) -> tuple[str, ...]:
    return tuple(sorted(f"{k}={v}" for k, v in labels.items() if k != "severity"))


def lines_from_answers(answers: list[tuple[float, str, Any]]) -> list[str]:
    """The alert lines the demo should print, derived straight from what the two APIs answered."""
    out: list[str] = []
    states: dict[tuple[str, ...], str] = {}
    am_active: set[tuple[str, ...]] = set()
    names: dict[tuple[str, ...], str] = {}
    for t, path, body in answers:
        if path == "/v1/alerts":
            for a in body:
                k = _key(a["labels"])
                names.setdefault(k, describe(a["labels"]))
                s = {"inactive": "RESOLVED"}.get(a["state"], a["state"].upper())
                if states.get(k) != s and (s != "RESOLVED" or k in states):
                    out.append(f"  [{clock_text(t)}] {s:<26} {names[k]}")
                states[k] = s
        else:
            now = {_key(a["labels"]) for a in body if a["status"]["state"] == "active"}
            for k in sorted(now - am_active):
                names.setdefault(k, describe(dict(x.split("=", 1) for x in k)))
                out.append(f"  [{clock_text(t)}] {AM_ACTIVE:<26} {names[k]}")
            for k in sorted(am_active - now):
                out.append(f"  [{clock_text(t)}] {AM_GONE:<26} {names[k]}")
            am_active = now
    return out


@pytest.fixture
def alertmanager(tmp_path: Path) -> Any:
    am = DemoAlertmanager(tmp_path / "alertmanager")
    if am.binary is None:
        pytest.skip("prometheus-alertmanager is not installed (bash .ci/setup installs it)")
    assert am.start(), (tmp_path / "alertmanager" / "alertmanager.log").read_text()
    try:
        yield am
    finally:
        am.stop()


async def test_the_whole_scenario_prints_what_the_sidecar_and_alertmanager_saw(
    tmp_path: Path, alertmanager: DemoAlertmanager
) -> None:
    raw = demo_config("http://triton.test", "http://triton.test/metrics", 0, tmp_path, alertmanager.url)
    raw["server"]["public_url"] = "http://sidecar.test"
    raw["triton"]["enabled"] = False
    raw["traces"]["enabled"] = False
    raw["gpu"] = {"enabled": False}
    raw["probes"]["enabled"] = False  # they reach Triton with tritonclient, not through this test's transport
    raw["alerting"]["resend_delay_secs"] = 900  # see the module docstring
    cfg = load_config(write_config(raw, tmp_path))  # the file the demo writes is the config it runs
    # 15 minutes in the past, on the replay's alignment to the drift check's 60 s blocks (a reproducible run).
    clock = FakeClock((time.time() - 900) // 60 * 60 + 20)
    store = Store(tmp_path / "state.sqlite")
    svc = Service(cfg, clock=clock, store=store)
    [am] = [c for c in svc.components if isinstance(c, AlertmanagerExporter)]
    for check in svc.checks():
        await check.start()  # type: ignore[attr-defined]

    async def evaluate() -> None:
        await asyncio.to_thread(svc.evaluate_once, clock.now())
        assert set((await am.flush_all()).values()) <= {"empty", "sent"}

    ticker = FakeTicker(clock, evaluate, RUN_SECS)
    timer = SimTimer()
    routes = Routes(create_app(svc, manage_lifecycle=False), ticker.elapsed, timer)
    printed: list[str] = []
    traffic = Traffic(
        "http://triton.test", sidecar_url="http://sidecar.test", scenario=DemoScenario(), clock=clock, timer=timer.now
    )
    play = ScenarioRun(
        traffic, sidecar_url="http://sidecar.test", alertmanager_url=alertmanager.url, ticker=ticker, out=printed.append
    )
    try:
        async with httpx.AsyncClient(transport=routes) as client:
            table = await play.run(asyncio.Event(), client)
            final_am = (await client.get(f"{alertmanager.url}/api/v2/alerts")).json()
            final_sidecar = (await client.get("http://sidecar.test/v1/alerts")).json()
    finally:
        await svc.shutdown()
        store.close()
    text = "\n".join(printed)

    # Every scenario step is printed at the second it happens.
    steps = [ln for ln in printed if "] SCENARIO " in ln]
    assert [ln.split("]")[0] + "]" for ln in steps] == [f"  [{clock_text(t)}]" for t, _ in DemoScenario.timeline()]
    assert all(what in ln for ln, (_, what) in zip(steps, DemoScenario.timeline(), strict=True))

    # The printed alert lines are exactly what /v1/alerts and Alertmanager answered, when they answered it.
    alert_lines = [
        ln
        for ln in printed
        if re.match(r"  \[\+\d+:\d\d\] ", ln) and "] SCENARIO " not in ln and f"] {ACTION} " not in ln
    ]
    assert alert_lines == lines_from_answers(routes.answers[:-2]), text
    assert traffic.stats.events_posted > 10_000 and traffic.stats.events_dropped == 0

    # At the end, Alertmanager holds exactly the alerts the sidecar has firing, with the sidecar's startsAt.
    firing = {_key(a["labels"]): a["startsAt"] for a in final_sidecar if a["state"] == "firing"}
    in_am = {_key(a["labels"]): a["startsAt"] for a in final_am if a["status"]["state"] == "active"}
    assert firing and in_am == firing
    last_am_word = {k: seen[-1][1] for k, seen in play.watcher.am_seen.items()}
    assert {k for k, w in last_am_word.items() if w == AM_ACTIVE} == set(firing)

    # The promise table: one verdict per promise, each kept, and its sidecar column is the printed lines.
    assert table[0].startswith("What the banner promised")
    verdicts = [ln for ln in table if ln.startswith("  [")]
    assert [ln.split("]")[0] for ln in verdicts] == ["  [kept"] * len(EXPECTED), "\n".join(table)
    for p, ln in zip(EXPECTED, verdicts, strict=True):
        assert p.promise() in ln
    clicks_row = table[table.index(next(ln for ln in verdicts if "clicks_7d" in ln)) + 1]
    fired = [ln.split("]")[0][3:] for ln in alert_lines if "FIRING" in ln and "clicks_7d" in ln]
    assert clicks_row.split()[0] == "sidecar" and fired and all(f"FIRING {t}" in clicks_row for t in fired)

    # The goodput alert names the recorded prompt change; the dry-run plan is printed under its alert, exactly.
    [goodput] = [a for a in final_sidecar if a["labels"]["alertname"] == "GoodputBurn"]
    assert "prompt template v2" in goodput["annotations"]["summary"], goodput
    [plan] = [ln for ln in printed if f"] {ACTION} " in ln]
    assert "[dry run] would revert fraud: POST /v2/repository/models/fraud/load with config version_policy " in plan
    assert "{specific: {versions: [1]}}" in plan and "fraud v2 rollout" in plan
    assert traffic.stats.streams >= RUN_SECS - 5 and traffic.stats.streams_failed == 0
    print(text)  # the sample shown by `pytest -s`: the timeline, then the promise table
