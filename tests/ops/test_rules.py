"""The alerting and recording rules: promtool check and unit tests, metadata on every rule, runbooks that exist,
and the example Alertmanager config checked with amtool."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
ALERTS = ROOT / "alerts"
OURS = ["serving", "gpu", "drift", "sidecar", "llm"]

pytestmark = pytest.mark.prometheus


def _rules(name: str) -> list[dict]:
    groups = yaml.safe_load((ALERTS / f"{name}.rules.yml").read_text())["groups"]
    return [r for g in groups for r in g["rules"]]


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    if shutil.which(cmd[0]) is None:
        pytest.fail(f"{cmd[0]} is not installed (Debian package prometheus / prometheus-alertmanager)")
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=ALERTS)


def test_promtool_check_rules_passes_on_every_rule_file() -> None:
    files = sorted(str(p) for p in ALERTS.glob("*.rules.yml"))
    assert len(files) >= 4
    r = _run("promtool", "check", "rules", *files)
    assert r.returncode == 0, r.stdout + r.stderr


def test_promtool_unit_tests_pass() -> None:
    tests = sorted(str(p) for p in (ALERTS / "tests").glob("*.test.yml"))
    r = _run("promtool", "test", "rules", *tests)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("SUCCESS") == len(tests)


def test_every_alert_of_ours_is_tested_firing_and_quiet() -> None:
    for name in OURS:
        test = yaml.safe_load((ALERTS / "tests" / f"{name}.test.yml").read_text())
        fired: set[str] = set()
        quiet: set[str] = set()
        for case in test["tests"]:
            for a in case.get("alert_rule_test", []):
                (fired if a.get("exp_alerts") else quiet).add(a["alertname"])
        alerts = {r["alert"] for r in _rules(name) if "alert" in r}
        assert alerts <= fired, f"{name}: never tested firing: {alerts - fired}"
        assert alerts <= quiet, f"{name}: never tested quiet: {alerts - quiet}"


def test_every_alert_of_ours_has_severity_summary_description_and_an_existing_runbook() -> None:
    severities = {"critical", "high", "warning", "info"}
    for name in OURS:
        for r in _rules(name):
            if "alert" not in r:
                assert r["record"].startswith("sidecar:"), r["record"]
                continue
            assert r["labels"]["severity"] in severities, r["alert"]
            ann = r["annotations"]
            assert ann["summary"] and ann["description"], r["alert"]
            m = re.fullmatch(r"https://\S+/docs/runbooks/(\w+)\.md", ann["runbook_url"])
            assert m and m.group(1) == r["alert"], (r["alert"], ann["runbook_url"])
            runbook = ROOT / "docs" / "runbooks" / f"{r['alert']}.md"
            assert runbook.exists(), f"{runbook} is missing"
            text = runbook.read_text()
            for heading in ("## What it means", "## First three things to look at", "## Silence it safely"):
                assert heading in text, (runbook.name, heading)


def test_every_runbook_link_in_any_rule_file_resolves() -> None:
    for path in ALERTS.glob("*.rules.yml"):
        for g in yaml.safe_load(path.read_text())["groups"]:
            for r in g["rules"]:
                url = r.get("annotations", {}).get("runbook_url")
                if url:
                    rel = url.split("/blob/main/", 1)[1]
                    assert (ROOT / rel).exists(), f"{path.name} {r['alert']}: {rel} missing"


@pytest.mark.alertmanager
def test_amtool_accepts_the_example_alertmanager_config() -> None:
    path = ALERTS / "alertmanager.yml"
    if not path.exists():
        pytest.skip("alerts/alertmanager.yml is not written yet (alerting area)")
    r = _run("amtool", "check-config", str(path))
    assert r.returncode == 0, r.stdout + r.stderr
    # Our rules' severities route somewhere other than the catch-all default.
    for sev, receiver in (("critical", "oncall-pager"), ("warning", "platform-tickets")):
        r = _run(
            "amtool",
            "config",
            "routes",
            "test",
            f"--config.file={path}",
            f"severity={sev}",
            "alertname=TritonTargetDown",
        )
        assert r.returncode == 0 and receiver in r.stdout, (sev, r.stdout, r.stderr)
