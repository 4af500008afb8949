"""The Kubernetes manifests `sidecar rules --fleet --k8s DIR` writes: fresh in docs/fleet/k8s, the PrometheusRule
wraps exactly the rules file's groups, the PodMonitor scrapes the port the sidecar container listens on."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import yaml

from sidecar.cli import main
from sidecar.config import load_config_text
from sidecar.fleet_k8s import PORT, PORT_NAME, write_k8s
from sidecar.fleet_rules import FleetRulesOptions, fleet_rules

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "docs" / "fleet" / "k8s"


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def test_the_committed_manifests_are_what_the_generator_writes(tmp_path: Path) -> None:
    assert main(["rules", "--fleet", "--out", str(tmp_path / "alerts"), "--k8s", str(tmp_path / "k8s")]) == 0
    written = sorted(p.name for p in (tmp_path / "k8s").iterdir())
    assert (
        written
        == sorted(p.name for p in K8S.iterdir())
        == ["deployment.yaml", "podmonitor.yaml", "prometheusrule.yaml"]
    )
    for name in written:
        assert (tmp_path / "k8s" / name).read_text() == (K8S / name).read_text(), f"docs/fleet/k8s/{name} is stale"


def test_the_prometheus_rule_wraps_the_rules_files_groups_and_promtool_accepts_them(tmp_path: Path) -> None:
    (rule,) = _docs(K8S / "prometheusrule.yaml")
    assert (rule["apiVersion"], rule["kind"]) == ("monitoring.coreos.com/v1", "PrometheusRule")
    committed = yaml.safe_load((ROOT / "alerts" / "fleet.rules.yml").read_text())
    assert rule["spec"]["groups"] == committed["groups"] == fleet_rules()["groups"]
    (tmp_path / "spec.rules.yml").write_text(yaml.safe_dump(rule["spec"], sort_keys=False, width=1000))
    r = subprocess.run(["promtool", "check", "rules", str(tmp_path / "spec.rules.yml")], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_other_options_reach_the_prometheus_rule(tmp_path: Path) -> None:
    o = FleetRulesOptions(window_secs=3600, ks_effect_floor=0.02)
    (rule,) = _docs(next(p for p in write_k8s(tmp_path, o) if p.name == "prometheusrule.yaml"))
    assert rule["spec"] == fleet_rules(o) != fleet_rules()
    records = [r["record"] for r in rule["spec"]["groups"][0]["rules"] if "record" in r]
    assert "sidecar:fleet_feature_ks_d:1h" in records


def test_the_pod_monitor_scrapes_the_port_the_sidecar_container_listens_on() -> None:
    (pm,) = _docs(K8S / "podmonitor.yaml")
    assert (pm["apiVersion"], pm["kind"]) == ("monitoring.coreos.com/v1", "PodMonitor")
    (endpoint,) = pm["spec"]["podMetricsEndpoints"]
    cm, dep = _docs(K8S / "deployment.yaml")
    assert (cm["kind"], dep["kind"]) == ("ConfigMap", "Deployment")
    pod = dep["spec"]["template"]
    assert pm["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    assert dep["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    assert pm["spec"]["namespaceSelector"]["matchNames"] == [dep["metadata"]["namespace"]]
    sidecar = next(c for c in pod["spec"]["containers"] if c["name"] == "sidecar")
    ports = {p["name"]: p["containerPort"] for p in sidecar["ports"]}
    assert endpoint["port"] == PORT_NAME and ports[PORT_NAME] == PORT
    assert endpoint["path"] == "/metrics" and len(PORT_NAME) <= 15  # a port name is an IANA_SVC_NAME
    # The sidecar's own config (the ConfigMap) is valid and listens on that port, with fleet bins on.
    cfg = load_config_text(cm["data"]["sidecar.yaml"], "the ConfigMap")
    assert cfg.server.port == PORT and cfg.server.host == "0.0.0.0"
    assert cfg.checks.fleet.enabled and cfg.checks.drift.reference.mode == "file"
    mounts = {m["name"]: m["mountPath"] for m in sidecar["volumeMounts"]}
    assert mounts["sidecar-config"] == "/etc/sidecar" and sidecar["args"][-1] == "/etc/sidecar/sidecar.yaml"
    assert cfg.checks.drift.reference.path is not None
    assert cfg.checks.drift.reference.path.startswith(mounts["reference"] + "/")
    assert {v["name"] for v in pod["spec"]["volumes"]} == set(mounts)


def test_docs_fleet_md_shows_the_generated_pod_monitor_and_sidecar_container() -> None:
    blocks = re.findall(r"```yaml\n(.*?)```", (ROOT / "docs" / "fleet.md").read_text(), re.S)
    shown = [yaml.safe_load(b) for b in blocks]
    (pm,) = _docs(K8S / "podmonitor.yaml")
    _, dep = _docs(K8S / "deployment.yaml")
    sidecar = next(c for c in dep["spec"]["template"]["spec"]["containers"] if c["name"] == "sidecar")
    assert pm in shown
    assert {"containers": [sidecar]} in shown
