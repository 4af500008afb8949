"""compose.yaml against the Compose specification's JSON schema, and every path it mounts exists in the repo."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = Path(__file__).resolve().parents[1] / "data" / "ops" / "compose-spec.json"
FLEET = {
    "triton-a",
    "triton-b",
    "sidecar-a",
    "sidecar-b",
    "fleet-prometheus",
    "victoriametrics",
    "vmalert",
    "fleet-grafana",
}


def _compose() -> dict:
    data: dict = yaml.safe_load((ROOT / "compose.yaml").read_text())
    return data


def test_compose_file_is_valid_against_the_compose_spec_schema() -> None:
    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft7Validator.check_schema(schema)
    jsonschema.validate(_compose(), schema, cls=jsonschema.Draft7Validator)


def test_the_schema_check_would_catch_a_mistake() -> None:
    schema = json.loads(SCHEMA.read_text())
    bad = _compose()
    bad["services"]["sidecar"]["healthcheck"]["interval"] = 10  # must be a duration string
    bad["services"]["sidecar"]["restart_policy"] = "always"  # no such service key
    errors = list(jsonschema.Draft7Validator(schema).iter_errors(bad))
    assert errors


def test_every_mounted_path_and_build_context_exists_in_the_repo() -> None:
    c = _compose()
    named = set(c["volumes"])
    for name, svc in c["services"].items():
        for v in svc.get("volumes", []):
            src = v.split(":")[0]
            if src.startswith("."):
                assert (ROOT / src).exists(), f"{name}: {src} does not exist"
            else:
                assert src in named, f"{name}: volume {src} is not declared"
        if "build" in svc:
            assert (ROOT / svc["build"]["context"] / svc["build"]["dockerfile"]).is_file()


def test_services_have_healthchecks_named_volumes_and_no_literal_secrets() -> None:
    c = _compose()
    expected = {"triton", "sidecar", "prometheus", "alertmanager", "grafana", "jaeger", "elasticsearch"}
    assert {n for n, s in c["services"].items() if "profiles" not in s} == expected
    assert {n for n, s in c["services"].items() if "profiles" in s} == FLEET
    for name, svc in c["services"].items():
        assert "healthcheck" in svc, name
    assert c["services"]["triton"]["image"] == "nvcr.io/nvidia/tritonserver:24.10-py3"
    assert "./sidecar/demo/model_repository:/models:ro" in c["services"]["triton"]["volumes"]
    assert "./alerts/alertmanager.yml:/etc/alertmanager/alertmanager.yml:ro" in c["services"]["alertmanager"]["volumes"]
    text = (ROOT / "compose.yaml").read_text()
    for m in re.finditer(r"(?im)^\s*([A-Z_]*(PASSWORD|TOKEN|SECRET|API_KEY)[A-Z_]*):\s*(.+)$", text):
        assert m.group(3).strip().startswith("${"), f"{m.group(1)} is set literally"


def test_compose_configs_for_the_sidecar_and_prometheus_are_valid() -> None:
    from sidecar.config import load_config

    cfg = load_config(ROOT / "docs/compose/sidecar.yaml")
    assert cfg.triton.metrics_url == "http://triton:8002/metrics"
    prom = yaml.safe_load((ROOT / "docs/compose/prometheus.yml").read_text())
    jobs = {j["job_name"] for j in prom["scrape_configs"]}
    assert "triton-sidecar" in jobs  # alerts/sidecar.rules.yml's SidecarDown keys on it
    assert prom["rule_files"] == ["/etc/prometheus/alerts/*.rules.yml"]


def test_the_fleet_profile_runs_two_replicas_and_both_engines_on_the_generated_rules(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from sidecar.checks.drift.datafile import load_reference_file
    from sidecar.config import load_config
    from sidecar.fleet_rules import write

    c = _compose()
    svc = c["services"]
    assert all(svc[n]["profiles"] == ["fleet"] for n in FLEET)
    # Every service and every host port at most once across both stacks (they may run together).
    host_ports = [p.split(":")[-2] for s in svc.values() for p in s.get("ports", [])]
    assert len(host_ports) == len(set(host_ports))
    # Each sidecar beside its own replica, both on one config and one reference file.
    prom = yaml.safe_load((ROOT / "docs/compose/fleet/prometheus.yml").read_text())
    targets = {t for j in prom["scrape_configs"] for sc in j["static_configs"] for t in sc["targets"]}
    ref = "./docs/compose/fleet/ctr-reference.csv:/refs/ctr-reference.csv:ro"
    for side in ("a", "b"):
        s = svc[f"sidecar-{side}"]
        assert s["environment"]["TRITON_HOST"] == f"triton-{side}" and f"triton-{side}" in s["depends_on"]
        assert "./docs/compose/fleet/sidecar.yaml:/etc/sidecar/sidecar.yaml:ro" in s["volumes"] and ref in s["volumes"]
        monkeypatch.setenv("TRITON_HOST", f"triton-{side}")
        cfg = load_config(ROOT / "docs/compose/fleet/sidecar.yaml")
        assert cfg.triton.metrics_url == f"http://triton-{side}:8002/metrics"
        assert cfg.checks.fleet.enabled and cfg.checks.drift.reference.mode == "file"
        assert cfg.checks.drift.reference.path == "/refs/ctr-reference.csv"
        assert f"sidecar-{side}:{cfg.server.port}" in targets
        assert s["healthcheck"]["test"][-1].count(f"localhost:{cfg.server.port}/healthz") == 1
    refs = load_reference_file(ROOT / "docs/compose/fleet/ctr-reference.csv", created_at=0.0, max_rows=100_000)
    assert set(refs) == set(cfg.checks.drift.models["ctr"].features)
    # Prometheus loads alerts/ (fleet.rules.yml among them, the generator's output) and remote-writes raw series
    # to VictoriaMetrics, where vmalert evaluates the same file and both notify the Alertmanager.
    assert "./alerts:/etc/prometheus/alerts:ro" in svc["fleet-prometheus"]["volumes"]
    assert prom["rule_files"] == ["/etc/prometheus/alerts/*.rules.yml"]
    assert prom["remote_write"][0]["url"] == "http://victoriametrics:8428/api/v1/write"
    assert prom["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"] == ["alertmanager:9093"]
    vmalert = svc["vmalert"]
    assert "./alerts/fleet.rules.yml:/etc/alerts/fleet.rules.yml:ro" in vmalert["volumes"]
    assert {"-rule=/etc/alerts/fleet.rules.yml", "-notifier.url=http://alertmanager:9093"} <= set(vmalert["command"])
    assert "-datasource.url=http://victoriametrics:8428" in vmalert["command"]
    assert write(tmp_path).read_text() == (ROOT / "alerts/fleet.rules.yml").read_text()  # the generated file
    assert svc["fleet-grafana"]["environment"]["PROMETHEUS_URL"] == "http://fleet-prometheus:9090"
    assert "./dashboards/json:/var/lib/grafana/dashboards/sidecar:ro" in svc["fleet-grafana"]["volumes"]
