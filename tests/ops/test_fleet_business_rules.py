"""The business checks across replicas in the fleet rules: the unit tests' expected figures
(alerts/tests/fleet_business.test.yml) are what Python computes from the same input series (sums of sums over
sums of counts, a restarted sidecar left out, Prometheus' histogram_quantile of the merged bins, a baseline of
the recorded hourly windows of the week before), and promtool passes them."""

from __future__ import annotations

import itertools
import math
import re
import shutil
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest
import yaml

from sidecar.checks.fleet.bins import histogram_quantile
from sidecar.fleet_rules import FleetRulesOptions, fleet_rules

ROOT = Path(__file__).resolve().parents[2]
TEST_FILE = ROOT / "alerts" / "tests" / "fleet_business.test.yml"


def _expand(values: str) -> list[float | None]:
    """promtool's expanding notation: ``a+bxn`` is n+1 values, ``_xn`` n missing ones."""
    out: list[float | None] = []
    for tok in values.split():
        if m := re.fullmatch(r"_x(\d+)", tok):
            out += [None] * int(m.group(1))
        elif m := re.fullmatch(r"([-+0-9.e]+)([-+][0-9.e]+)x(\d+)", tok):
            a, b, k = float(m.group(1)), float(m.group(2)), int(m.group(3))
            out += [a + i * b for i in range(k + 1)]
        else:
            out.append(float(tok))
    return out


def _labels(series: str) -> tuple[str, dict[str, str]]:
    name, rest = series.split("{", 1)
    return name, dict(re.findall(r'(\w+)="([^"]*)"', rest))


def _series(doc: dict) -> dict[tuple[str, str, str], dict[str, list[float | None]]]:
    """(metric, check, instance) -> {le or "": values per hour}."""
    out: dict[tuple[str, str, str], dict[str, list[float | None]]] = defaultdict(dict)
    for s in doc["tests"][0]["input_series"]:
        name, lab = _labels(s["series"])
        out[(name, lab["check"], lab["instance"])][lab.get("le", lab.get("window", ""))] = _expand(s["values"])
    return out


def _delta(vals: list[float | None], t: int, resets: list[float | None]) -> float | None:
    """The rules' exact increase over one step (an hour), None when the count reset inside it."""
    if any(b is not None and a is not None and b < a for a, b in itertools.pairwise(resets[t - 1 : t + 1])):
        return None
    now = vals[t]
    return None if now is None else now - (vals[t - 1] or 0.0)


def _fleet(ser: dict, metric: str, check: str, t: int, le: str = "") -> float:
    total = 0.0
    for (name, chk, inst), by in ser.items():
        if name == metric and chk == check:
            count = "sidecar_fleet_business_bin_count" if "bin" in metric else "sidecar_fleet_business_events_total"
            d = _delta(by[le], t, ser[(count, chk, inst)][""])
            total += d or 0.0
    return total


def test_unit_test_expectations_equal_a_python_computation_on_the_merged_counters() -> None:
    doc = yaml.safe_load(TEST_FILE.read_text())
    ser = _series(doc)
    n = _fleet(ser, "sidecar_fleet_business_events_total", "ctr_mean", 3)
    mean = _fleet(ser, "sidecar_fleet_business_sum_total", "ctr_mean", 3) / n
    les = ["0.5", "0.8", "0.9", "+Inf"]
    cum = [_fleet(ser, "sidecar_fleet_business_bin_bucket", "fraud_p95", 3, le) for le in les]
    p95 = histogram_quantile(0.95, [float(x) for x in les], cum)
    # ctr_down at 193h: the current hour, and the 168 recorded hourly windows before it (hours 25..192)
    ev, sm = "sidecar_fleet_business_events_total", "sidecar_fleet_business_sum_total"
    cur = _fleet(ser, sm, "ctr_down", 193) / _fleet(ser, ev, "ctr_down", 193)
    bn = sum(_fleet(ser, ev, "ctr_down", h) for h in range(25, 193))
    base = sum(_fleet(ser, sm, "ctr_down", h) for h in range(25, 193)) / bn
    want = {
        ("sidecar:fleet_business_n:delta1h", "ctr_mean"): n,
        ("sidecar:fleet_business_replicas:1h", "ctr_mean"): 2,  # c restarted inside the window: left out
        ("sidecar:fleet_business_value:1h", "ctr_mean"): mean,
        ("sidecar:fleet_business_n:delta1h", "fraud_p95"): cum[-1],
        ("sidecar:fleet_business_value:1h", "fraud_p95"): p95,
        ("sidecar:fleet_business_value:1h", "ctr_down"): cur,
        ("sidecar:fleet_business_baseline_n:168h", "ctr_down"): bn,
        ("sidecar:fleet_business_baseline:168h", "ctr_down"): base,
        ("sidecar:fleet_business_change:1h", "ctr_down"): (cur - base) / abs(base),
    }
    assert n == 900 and mean == pytest.approx(0.2) and 0.8 < p95 < 0.9 and bn == 16800
    got = {}
    for t in doc["tests"][0]["promql_expr_test"]:
        m = re.search(r'(sidecar:\w+:\w+)\{check="(\w+)"\}', t["expr"])
        assert m is not None
        got[(m.group(1), m.group(2))] = t["exp_samples"][0]["value"]
    assert set(got) == set(want)
    for k, v in want.items():
        assert got[k] == pytest.approx(v, abs=1e-12), k


def test_the_business_group_alerts_without_instance_and_reads_the_checks_settings() -> None:
    (drift, biz) = fleet_rules(FleetRulesOptions())["groups"]
    assert drift["name"] == "sidecar-fleet-drift" and biz["name"] == "sidecar-fleet-business"
    alerts = {r["alert"]: r for r in biz["rules"] if "alert" in r}
    assert set(alerts) == {"FleetBusinessCheckBreached", "FleetBusinessSettingsMismatch"}
    assert not any("instance" in r["expr"] for r in alerts.values())
    expr = alerts["FleetBusinessCheckBreached"]["expr"]
    for compare, direction in itertools.product(("absolute", "relative"), ("up", "down")):
        assert f'compare="{compare}", direction="{direction}"' in expr
    o = FleetRulesOptions(business_window_secs=1800, business_baseline_secs=86400)
    names = {r.get("record") for r in fleet_rules(o)["groups"][1]["rules"]}
    assert {"sidecar:fleet_business_value:30m", "sidecar:fleet_business_baseline:24h"} <= names
    assert "[86399s:30m] offset 30m" in str(fleet_rules(o)["groups"][1])
    with pytest.raises(ValueError, match="business_baseline_secs"):
        FleetRulesOptions(business_window_secs=3600, business_baseline_secs=3600)
    assert math.isclose(o.business_window_secs, 1800)


@pytest.mark.prometheus
def test_promtool_passes_the_business_unit_tests() -> None:
    if shutil.which("promtool") is None:
        pytest.fail("promtool is not installed (Debian package prometheus)")
    r = subprocess.run(
        ["promtool", "test", "rules", str(TEST_FILE)], capture_output=True, text=True, cwd=TEST_FILE.parent
    )
    assert r.returncode == 0 and "SUCCESS" in r.stdout, r.stdout + r.stderr
