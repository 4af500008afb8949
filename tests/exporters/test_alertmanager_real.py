"""Against a REAL Alertmanager 0.25 (Debian's prometheus-alertmanager): alerts fire with every label and
annotation, resolve, and survive an Alertmanager outage and restart through the persisted outbox.

Alertmanager notifies a local webhook receiver (group_wait 0s), which is how resolved notices are seen: the v2
API lists only alerts that are still active.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from alerting_helpers import make_service
from waiting import wait_until

from sidecar.clock import FakeClock
from sidecar.demo.tritonserver import free_port
from sidecar.model import Batch, Change, Event
from sidecar.naming import fingerprint

pytestmark = pytest.mark.alertmanager

AM_BIN = "/usr/bin/prometheus-alertmanager"


class Hook:
    """A webhook receiver collecting what Alertmanager notifies."""

    def __init__(self) -> None:
        self.alerts: list[dict[str, Any]] = []
        outer = self

        class H(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.alerts.extend(body["alerts"])
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()


class Alertmanager:
    def __init__(self, workdir: Path, hook_url: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.storage = workdir / "data"
        self.config = workdir / "alertmanager.yml"
        self.config.write_text(
            "route:\n  receiver: hook\n  group_by: ['...']\n  group_wait: 0s\n  group_interval: 1s\n"
            "  repeat_interval: 1h\n"
            f"receivers:\n  - name: hook\n    webhook_configs:\n      - url: {hook_url}\n        send_resolved: true\n"
        )
        self.log = workdir / "alertmanager.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [
                AM_BIN,
                f"--config.file={self.config}",
                f"--storage.path={self.storage}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--cluster.listen-address=",
            ],
            stdout=self.log.open("ab"),
            stderr=subprocess.STDOUT,
        )
        wait_for(lambda: _ready(self.url), 30, f"Alertmanager did not become ready: {self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None

    def alerts(self, **filters: str) -> list[dict[str, Any]]:
        params = [("filter", f'{k}="{v}"') for k, v in filters.items()]
        return list(httpx.get(f"{self.url}/api/v2/alerts", params=params, timeout=5).json())


def _ready(url: str) -> bool:
    try:
        return httpx.get(f"{url}/-/ready", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def wait_for(cond: Callable[[], Any], timeout_s: float, message: str) -> Any:
    got = wait_until(cond, timeout_s, interval_s=0.1)
    if not got:
        pytest.fail(message)
    return got


@pytest.fixture(scope="module")
def hook() -> Iterator[Hook]:
    h = Hook()
    yield h
    h.server.shutdown()


@pytest.fixture(scope="module")
def am(tmp_path_factory: pytest.TempPathFactory, hook: Hook) -> Iterator[Alertmanager]:
    if not Path(AM_BIN).exists() or shutil.which("amtool") is None:
        pytest.fail("prometheus-alertmanager is not installed (Debian package prometheus-alertmanager)")
    a = Alertmanager(tmp_path_factory.mktemp("am"), hook.url)
    a.start()
    try:
        yield a
    finally:
        a.stop()


def _cfg(am_url: str) -> dict[str, Any]:
    wer = {
        "display_name": "WER",
        "field": "fields.wer",
        "group_by": ["model", "version"],  # per version, so the alert names version 7
        "aggregate": "mean",
        "window_secs": 300,
        "bucket_secs": 10,
        "compare": "absolute",
        "direction": "up",
        "threshold": 0.08,
        "for_secs": 60,
        "severity": "high",
        "team": "speech",
        "min_events": 5,
        "runbook": "wer-high.md",
    }
    return {
        "alerting": {
            "enabled": True,
            "resend_delay_secs": 1800,
            "resolved_retention_secs": 3600,
            "alertmanager": {"urls": [am_url]},
        },
        "dashboard_url": "https://grafana.example",
        "server": {"public_url": "http://sidecar.example:9500"},
        "checks": {"business": {"enabled": True, "checks": {"wer_high": wer}}},
    }


def _feed(svc: Any, clock: FakeClock, model: str, wer: float) -> None:
    svc.bus.publish(
        Batch(
            kind="events",
            source="t",
            items=tuple(
                Event(
                    model=model,
                    version="7",
                    timestamp=clock.now(),
                    fields={"wer": wer},
                    trace_id="4bf92f3577b34da6a3ce929d0e0e4736",
                )
                for _ in range(10)
            ),
        )
    )


def _t(s: str) -> float:
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


def _same_as_book(got: dict[str, Any], held: dict[str, Any]) -> None:
    assert got["labels"] == held["labels"]
    assert got["annotations"] == held["annotations"]
    assert _t(got["startsAt"]) == pytest.approx(_t(held["startsAt"]), abs=0.001)
    assert _t(got["endsAt"]) == pytest.approx(_t(held["endsAt"]), abs=0.001)


def _held(svc: Any, model: str) -> dict[str, Any]:
    book = svc.component("alert_book")
    (a,) = [a for a in book.alerts.values() if a.labels.get("model") == model]
    assert a.last_sent_at is not None
    return dict(a.notice("http://sidecar.example:9500/v1/alerts"))


async def test_alert_fires_with_every_label_and_annotation_then_resolves(
    tmp_path: Path, am: Alertmanager, hook: Hook
) -> None:
    # The fake clock starts an hour in the past so that a resolved notice's endsAt is in Alertmanager's past;
    # the resend delay (30 min, so endsAt = now + 2 h) keeps a firing one's endsAt in its future.
    clock = FakeClock(time.time() - 3600)
    svc = make_service(tmp_path, _cfg(am.url), clock=clock, transport=httpx.AsyncHTTPTransport())
    exporter = svc.component("alertmanager")
    svc.component("changes").record(  # type: ignore[attr-defined]
        Change(
            what="feature PR#221",
            at=clock.now() - 600,
            who="ci",
            model="asr-fire",
            link="https://github.com/acme/asr/pull/221",
        )
    )
    _feed(svc, clock, "asr-fire", 0.12)
    svc.evaluate_once(clock.now())
    clock.advance(60)
    _feed(svc, clock, "asr-fire", 0.12)
    svc.evaluate_once(clock.now())
    held = _held(svc, "asr-fire")
    assert await exporter.flush_all() == {am.url: "empty"}  # type: ignore[attr-defined]

    (got,) = wait_for(lambda: am.alerts(model="asr-fire"), 10, "the alert never showed up in Alertmanager")
    _same_as_book(got, held)
    assert got["labels"] == {
        "alertname": "WerHigh",
        "check": "wer_high",
        "model": "asr-fire",
        "version": "7",
        "severity": "high",
        "team": "speech",
    }
    assert got["annotations"]["summary"] == (
        "[HIGH] WER 0.12 above 0.08 over 5m | model asr-fire v7 | "
        "recent change: feature PR#221 (https://github.com/acme/asr/pull/221)"
    )
    assert set(got["annotations"]) == {
        "summary",
        "description",
        "runbook_url",
        "dashboard_url",
        "trace_url",
        "audit_url",
    }
    assert got["annotations"]["trace_url"] == "http://sidecar.example:9500/traces/4bf92f3577b34da6a3ce929d0e0e4736"
    assert got["annotations"]["audit_url"] == (
        "http://sidecar.example:9500/audit?trace_id=4bf92f3577b34da6a3ce929d0e0e4736"
    )
    assert got["status"]["state"] == "active"

    # WER back to normal for a whole window: the alert resolves, endsAt in the past.
    for _ in range(31):
        clock.advance(10)
        _feed(svc, clock, "asr-fire", 0.03)
    svc.evaluate_once(clock.now())
    resolved = _held(svc, "asr-fire")
    assert _t(resolved["endsAt"]) == pytest.approx(clock.now(), abs=0.001)
    await exporter.flush_all()  # type: ignore[attr-defined]
    wait_for(lambda: not am.alerts(model="asr-fire"), 10, "the alert did not resolve in Alertmanager")
    note = wait_for(
        lambda: [a for a in hook.alerts if a["labels"].get("model") == "asr-fire" and a["status"] == "resolved"],
        15,
        "no resolved notification",
    )[-1]
    _same_as_book(note, resolved)
    await svc.shutdown()


async def test_alertmanager_down_then_restarted_gets_every_pending_notice(
    tmp_path: Path, am: Alertmanager, hook: Hook
) -> None:
    clock = FakeClock(time.time() - 3600)
    svc = make_service(tmp_path, _cfg(am.url), clock=clock, transport=httpx.AsyncHTTPTransport())
    exporter: Any = svc.component("alertmanager")
    # "asr-a" fires and is delivered while Alertmanager is up.
    for _ in range(2):
        _feed(svc, clock, "asr-a", 0.2)
        svc.evaluate_once(clock.now())
        clock.advance(60)
    await exporter.flush_all()
    wait_for(lambda: am.alerts(model="asr-a"), 10, "asr-a never showed up")
    wait_for(lambda: [a for a in hook.alerts if a["labels"].get("model") == "asr-a"], 15, "no firing note")

    am.stop()
    try:
        # While it is down: asr-a resolves, asr-b starts firing, and asr-b is re-sent after the resend delay.
        for _ in range(31):
            clock.advance(10)
            _feed(svc, clock, "asr-a", 0.01)
            _feed(svc, clock, "asr-b", 0.3)
            svc.evaluate_once(clock.now())
        clock.advance(1800)
        _feed(svc, clock, "asr-b", 0.3)
        svc.evaluate_once(clock.now())
        assert await exporter.flush_all() == {am.url: "retry"}
        held = {m: _held(svc, m) for m in ("asr-a", "asr-b")}
        assert sorted(exporter.pending(am.url), key=lambda n: n["labels"]["model"]) == [held["asr-a"], held["asr-b"]]
    finally:
        am.start()
    # The sidecar process restarts too: a new service on the same store delivers what the outbox holds.
    svc2 = make_service(tmp_path, _cfg(am.url), clock=clock, store=svc.store, transport=httpx.AsyncHTTPTransport())
    assert await svc2.component("alertmanager").flush_all() == {am.url: "empty"}  # type: ignore[attr-defined]
    (b,) = wait_for(lambda: am.alerts(model="asr-b"), 10, "asr-b never reached the restarted Alertmanager")
    _same_as_book(b, held["asr-b"])
    assert am.alerts(model="asr-a") == []
    note = wait_for(
        lambda: [a for a in hook.alerts if a["labels"].get("model") == "asr-a" and a["status"] == "resolved"],
        15,
        "asr-a's resolved notice was lost",
    )[-1]
    _same_as_book(note, held["asr-a"])
    assert fingerprint(b["labels"]) != fingerprint(note["labels"])
    await svc.shutdown()


def _rows(svc: Any, kind: str, model: str) -> list[dict[str, Any]]:
    got = svc.component("audit").page({"kind": kind, "limit": "1000"}, ["kind", "limit"])["events"]
    return [e for e in got if e["labels"].get("model") == model]


async def test_audit_rows_of_a_real_alertmanager_refusing_down_and_back(
    tmp_path: Path, am: Alertmanager, hook: Hook
) -> None:
    from sidecar.model import Finding

    clock = FakeClock(time.time() - 3600)
    svc = make_service(tmp_path, _cfg(am.url), clock=clock, transport=httpx.AsyncHTTPTransport())
    exporter: Any = svc.component("alertmanager")
    book: Any = svc.component("alert_book")
    # Alertmanager 0.25 answers 400 to a label name outside [a-zA-Z_][a-zA-Z0-9_]*.
    bad = Finding(
        check="odd",
        kind="business",
        active=True,
        value=1.0,
        severity="low",
        labels={"model": "asr-bad", "bad-label": "x"},
    )
    book.on_findings([bad], clock.now())
    assert await exporter.flush_all() == {am.url: "empty"}
    (failed,) = _rows(svc, "alert_delivery_failed", "asr-bad")
    assert failed["status"] == 400 and "bad-label" in failed["reason"] and failed["attempts"] == 1
    assert failed["alertmanager"] == am.url and failed["state"] == "firing"

    for _ in range(2):  # fires and is delivered at the first try: no delivery row
        _feed(svc, clock, "asr-audit", 0.2)
        svc.evaluate_once(clock.now())
        clock.advance(60)
    assert await exporter.flush_all() == {am.url: "empty"}
    wait_for(lambda: am.alerts(model="asr-audit"), 10, "asr-audit never showed up")
    assert _rows(svc, "alert_delivered_after_retry", "asr-audit") == []

    am.stop()
    try:
        clock.advance(1800)  # the resend delay: re-sent into an Alertmanager that is down
        _feed(svc, clock, "asr-audit", 0.2)
        svc.evaluate_once(clock.now())
        assert await exporter.flush_all() == {am.url: "retry"}
        assert await exporter.flush_all() == {am.url: "retry"}
    finally:
        am.start()
    assert await exporter.flush_all() == {am.url: "empty"}
    (after,) = _rows(svc, "alert_delivered_after_retry", "asr-audit")
    assert after["attempts"] == 3 and after["reason"] == "connect" and after["state"] == "firing"
    (resent,) = _rows(svc, "alert_resent", "asr-audit")
    assert resent["window"] == 0
    assert [e["kind"] for e in _rows(svc, "alert_fired", "asr-audit")] == ["alert_fired"]
    assert _rows(svc, "alert_delivery_failed", "asr-audit") == []
    # The invalid alert was re-sent too (a new notice, refused again after the two connect failures): one row
    # per refused notice, none repeated by the flushes in between.
    twice = _rows(svc, "alert_delivery_failed", "asr-bad")
    assert sorted(r["attempts"] for r in twice) == [1, 3] and len({r["id"] for r in twice}) == 2
    await svc.shutdown()
