"""The artefacts under alerts/ checked with the real tools: promtool and amtool; and our exposition linted."""

from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

import pytest
from alerting_helpers import events, make_service
from prometheus_client import generate_latest

from sidecar.checks.business.examples import EXAMPLE_BUSINESS_CHECKS
from sidecar.clock import FakeClock

ROOT = Path(__file__).resolve().parents[2]
ALERTS = ROOT / "alerts"

pytestmark = pytest.mark.prometheus


def _run(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    if shutil.which(args[0]) is None:
        pytest.fail(f"{args[0]} is not installed (Debian packages prometheus and prometheus-alertmanager)")
    return subprocess.run(
        args, input=stdin.decode() if stdin else None, capture_output=True, text=True, timeout=60, cwd=ROOT
    )


def test_promtool_check_and_unit_test_rules() -> None:
    r = _run("promtool", "check", "rules", str(ALERTS / "business.rules.yml"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS: 8 rules found" in r.stdout
    r = _run("promtool", "test", "rules", str(ALERTS / "tests" / "business.test.yml"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS" in r.stdout


def test_amtool_check_config() -> None:
    r = _run("amtool", "check-config", str(ALERTS / "alertmanager.yml"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS" in r.stdout


@pytest.mark.parametrize(
    ("labels", "receivers"),
    [
        (["severity=critical", "team=risk"], "risk-pager"),
        (["severity=critical", "team=growth"], "oncall-pager"),
        (["severity=high", "team=growth"], "team-channel,ml-oncall"),
        (["severity=high", "team=speech"], "team-channel,ml-oncall"),
        (["severity=high"], "ml-oncall"),
        (["severity=warning", "alertname=SidecarAlertDeliveryFailing"], "platform-tickets"),
        (["severity=info"], "platform-tickets"),
        (["alertname=Unlabelled"], "default"),
    ],
)
def test_amtool_routes_by_severity_and_team(labels: list[str], receivers: str) -> None:
    r = _run("amtool", "config", "routes", "test", f"--config.file={ALERTS / 'alertmanager.yml'}", *labels)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip() == receivers


def test_our_exposition_passes_promtool_check_metrics(tmp_path: Path) -> None:
    clock, rng = FakeClock(1_700_000_000), random.Random(9)
    svc = make_service(
        tmp_path,
        {
            "alerting": {
                "enabled": True,
                "alertmanager": {"urls": ["http://am:9093"]},
                "audit": {"elasticsearch": {"url": "http://es:9200"}},
            },
            "checks": {"business": EXAMPLE_BUSINESS_CHECKS},
        },
        clock=clock,
    )
    for _ in range(40):
        clock.advance(30)
        svc.bus.publish(events("asr", "1", clock.now(), [0.5] * 3, wer=0.1))
        svc.bus.publish(events("ctr", "2", clock.now(), [rng.random() for _ in range(3)]))
        svc.evaluate_once(clock.now())
    text = generate_latest(svc.registry)
    # The example check spans every version of its model (no version in group_by).
    assert b'sidecar_business_value{check="wer_high",model="asr",version="all"}' in text
    assert b"sidecar_alert_notices_total" in text
    r = _run("promtool", "check", "metrics", stdin=text)
    assert r.returncode == 0, r.stdout + r.stderr
