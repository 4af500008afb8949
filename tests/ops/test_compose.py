"""compose.yaml against the Compose specification's JSON schema, and every path it mounts exists in the repo."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import yaml

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = Path(__file__).resolve().parents[1] / "data" / "ops" / "compose-spec.json"


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
    assert set(c["services"]) == expected
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
