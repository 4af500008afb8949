"""The fleet rules: the committed file is what the generator writes, promtool passes it and its unit tests, and
the unit tests' expected n, D and PSI are what Python computes from the same input series (bin counts added
across sidecars, a restarted sidecar left out of the window, one born inside it counted whole)."""

from __future__ import annotations

import itertools
import math
import re
import shutil
import subprocess
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
import yaml
from scipy import stats as sps

from sidecar.checks.fleet.bins import binned_statistics
from sidecar.cli import main
from sidecar.fleet_rules import (
    FleetRulesOptions,
    critical_coefficient,
    duration,
    fleet_rules,
    normal_quantile,
    per_look_level,
)

ROOT = Path(__file__).resolve().parents[2]
ALERTS = ROOT / "alerts"
TEST_FILE = ALERTS / "tests" / "fleet.test.yml"


def _expand(values: str) -> list[float | None]:
    """promtool's expanding notation: ``a+bxn`` is n+1 values, ``_xn`` n missing ones."""
    out: list[float | None] = []
    for tok in values.split():
        if m := re.fullmatch(r"_x(\d+)", tok):
            out += [None] * int(m.group(1))
        elif m := re.fullmatch(r"([-+0-9.e]+)([-+][0-9.e]+)x(\d+)", tok):
            a, b, n = float(m.group(1)), float(m.group(2)), int(m.group(3))
            out += [a + i * b for i in range(n + 1)]
        else:
            out.append(float(tok))
    return out


def _labels(series: str) -> tuple[str, dict[str, str]]:
    name, rest = series.split("{", 1)
    return name, dict(re.findall(r'(\w+)="([^"]*)"', rest))


def _python_merge(doc: dict, at_min: int, window_min: int) -> dict[tuple[str, str], dict[str, float]]:
    """Per (feature, ref_id): the fleet's per-bin (le or category) increase over the window, computed here."""
    by_instance: dict[tuple[str, str, str], dict[str, list[float | None]]] = defaultdict(dict)
    for s in doc["tests"][0]["input_series"]:
        name, lab = _labels(s["series"])
        if name in ("sidecar_fleet_feature_bucket", "sidecar_fleet_category_total", "sidecar_fleet_feature_count"):
            key = (lab["instance"], lab["feature"], lab["ref_id"])
            by_instance[key][lab.get("le", lab.get("category", "_count"))] = _expand(s["values"])
    merged: dict[tuple[str, str], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for (_, feature, ref_id), bins in by_instance.items():
        probe = bins.get("_count") or next(iter(bins.values()))
        window = [v for v in probe[at_min - window_min : at_min + 1] if v is not None]
        if any(b < a for a, b in itertools.pairwise(window)):
            continue  # a reset inside the window: that sidecar is left out
        for b, vals in bins.items():
            now, then = vals[at_min], vals[at_min - window_min]
            if now is not None:
                merged[(feature, ref_id)][b] += now - (then or 0.0)
    return merged


def test_the_committed_rules_are_what_the_generator_writes(tmp_path: Path) -> None:
    assert main(["rules", "--fleet", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "fleet.rules.yml").read_text() == (ALERTS / "fleet.rules.yml").read_text()
    assert main(["rules", "--fleet", "--out", str(tmp_path), "--window-secs", "0"]) == 2
    assert main(["rules", "--fleet", "--out", str(tmp_path), "--features", "0"]) == 2


def test_the_budget_sets_the_per_look_level_and_the_critical_value() -> None:
    o = FleetRulesOptions()
    assert per_look_level(o) == pytest.approx((1 / 30) / (20 * 48))
    c = critical_coefficient(per_look_level(o))
    assert math.exp(-2 * c * c) * 2 == pytest.approx(per_look_level(o))
    rules = {r.get("record") or r.get("alert"): r for r in fleet_rules(o)["groups"][0]["rules"]}
    assert normal_quantile(0.025) == pytest.approx(1.959964, abs=1e-6)
    assert repr(c) in rules["sidecar:fleet_feature_ks_critical:30m"]["expr"]
    alerts = [r for r in fleet_rules(o)["groups"][0]["rules"] if "alert" in r]
    assert [r["labels"].get("test") for r in alerts] == ["ks", "chi2", None]
    assert not any("instance" in r["expr"] for r in alerts)  # one alert per fleet, not per sidecar
    assert duration(7200) == "2h" and duration(90) == "90s"
    with pytest.raises(ValueError, match="window_secs"):
        FleetRulesOptions(window_secs=1.5)


def test_unit_test_expectations_equal_a_python_computation_on_the_merged_counts() -> None:
    doc = yaml.safe_load(TEST_FILE.read_text())
    merged = _python_merge(doc, at_min=40, window_min=30)
    c = critical_coefficient(per_look_level(FleetRulesOptions()))
    want: dict[tuple[str, str], float] = {}
    for (feature, _), bins in merged.items():
        if feature == "country":
            counts = np.array([bins["de"], bins["__other__"], bins["us"]])
            n, _, psi = binned_statistics("categorical", (0.3, 0.1, 0.6), counts)
            q = np.array([0.3, 0.1, 0.6])
            chi2 = float(n * np.sum((counts / n - q) ** 2 / q))
            k, z = len(q) - 1, normal_quantile(per_look_level(FleetRulesOptions()))
            crit = k * (1 - 2 / (9 * k) + z * math.sqrt(2 / (9 * k))) ** 3
            assert crit >= sps.chi2.isf(per_look_level(FleetRulesOptions()), k)  # Wilson-Hilferty: conservative
            want |= {
                ("sidecar:fleet_category_n:delta30m", feature): n,
                ("sidecar:fleet_category_psi:30m", feature): psi,
                ("sidecar:fleet_category_chi2:30m", feature): chi2,
                ("sidecar:fleet_category_chi2_critical:30m", feature): crit,
            }
            continue
        cum = np.array([bins[le] for le in ("1", "2", "3", "+Inf")])
        assert bins["_count"] == cum[-1]
        n, d, psi = binned_statistics("numeric", (0.25, 0.5, 0.75, 1.0), np.diff(np.concatenate(([0.0], cum))))
        want |= {
            ("sidecar:fleet_feature_n:delta30m", feature): n,
            ("sidecar:fleet_feature_ks_d:30m", feature): d,
            ("sidecar:fleet_feature_psi:30m", feature): psi,
            ("sidecar:fleet_feature_ks_critical:30m", feature): c * math.sqrt((n + 1000) / (n * 1000)),
        }
    assert want[("sidecar:fleet_feature_n:delta30m", "age")] == 380  # a + b + d (born inside); c restarted
    got = {}
    for t in doc["tests"][0]["promql_expr_test"]:
        m = re.search(r'(sidecar:\w+:\w+)\{feature="(\w+)"\}', t["expr"])
        assert m is not None
        got[(m.group(1), m.group(2))] = t["exp_samples"][0]["value"]
    got.pop(("sidecar:fleet_feature_replicas:30m", "age"))
    assert set(got) == set(want)
    for k, v in want.items():
        assert got[k] == pytest.approx(v, abs=1e-9), k


@pytest.mark.prometheus
def test_promtool_checks_the_rules_and_passes_their_unit_tests() -> None:
    if shutil.which("promtool") is None:
        pytest.fail("promtool is not installed (Debian package prometheus)")
    r = subprocess.run(["promtool", "check", "rules", "fleet.rules.yml"], capture_output=True, text=True, cwd=ALERTS)
    assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run(["promtool", "test", "rules", str(TEST_FILE)], capture_output=True, text=True, cwd=ALERTS)
    assert r.returncode == 0 and "SUCCESS" in r.stdout, r.stdout + r.stderr


@pytest.mark.alertmanager
def test_the_documented_route_groups_per_replica_alerts_with_the_fleet_alert(tmp_path: Path) -> None:
    if shutil.which("amtool") is None:
        pytest.fail("amtool is not installed (Debian package prometheus-alertmanager)")
    doc = (ROOT / "docs" / "fleet.md").read_text().split("## Alertmanager", 1)[1]
    block = re.search(r"```yaml\n(.*?)```", doc, re.S)
    assert block is not None
    cfg = tmp_path / "am.yml"
    cfg.write_text(block.group(1))
    r = subprocess.run(["amtool", "check-config", str(cfg)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    route = yaml.safe_load(block.group(1))["route"]["routes"][0]
    assert route["group_by"] == ["model", "version", "feature"]
    for alert in ("FleetFeatureDrifting", "FeatureDrifting", "FleetReferenceMismatch"):
        r = subprocess.run(
            ["amtool", "config", "routes", "test", f"--config.file={cfg}", f"alertname={alert}", "model=ctr"],
            capture_output=True,
            text=True,
        )
        assert r.returncode == 0 and r.stdout.strip() == "ml-drift", (alert, r.stdout, r.stderr)
