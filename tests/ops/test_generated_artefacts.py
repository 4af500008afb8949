"""Generated artefacts are fresh and well-formed: dashboard JSON, provisioning, docs/configuration.md."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from dashboards import configref, generate
from dashboards.common import NEEDS
from sidecar.config import SidecarConfig

ROOT = Path(__file__).resolve().parents[2]


def test_committed_dashboard_json_and_provisioning_equal_a_fresh_generation(tmp_path: Path) -> None:
    assert generate.main(["--out", str(tmp_path)]) == 0
    fresh = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    assert len(fresh) == 10
    for rel in fresh:
        committed = ROOT / "dashboards" / rel
        assert committed.exists(), f"{rel} is not committed"
        assert committed.read_text() == (tmp_path / rel).read_text(), f"dashboards/{rel} is stale"
    assert generate.main(["--out", str(ROOT / "dashboards"), "--check"]) == 0


def test_check_mode_fails_on_a_stale_file(tmp_path: Path) -> None:
    generate.main(["--out", str(tmp_path)])
    stale = tmp_path / "json" / "triton-sidecar-serving.json"
    stale.write_text(stale.read_text().replace("Requests per second", "Requests per minute"))
    assert generate.main(["--out", str(tmp_path), "--check"]) == 1
    assert generate.main(["--out", str(tmp_path / "missing"), "--check"]) == 1


def test_every_panel_has_a_description_unit_datasource_variable_and_known_needs() -> None:
    for path in (ROOT / "dashboards" / "json").glob("*.json"):
        d = json.loads(path.read_text())
        names = {v["name"] for v in d["templating"]["list"]}
        assert "datasource" in names
        panels = [p for p in d["panels"] if p["type"] != "row"]
        assert panels, path.name
        for p in panels:
            assert p["description"] and len(p["description"]) > 40, (path.name, p["title"])
            assert p["fieldConfig"]["defaults"]["unit"], (path.name, p["title"])
            assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
            for t in p["targets"]:
                # a variable used in a query must be defined on the dashboard
                for var in re.findall(r"\$(\w+)", t["expr"]):
                    assert var in names or var.startswith("__"), (path.name, p["title"], var)
        ids = [p["id"] for p in d["panels"]]
        assert len(ids) == len(set(ids))
    assert {i.needs for i in generate.panel_infos()} <= set(NEEDS)


def test_serving_dashboard_has_model_and_version_variables_and_exemplars_on_trace_latency() -> None:
    d = json.loads((ROOT / "dashboards/json/triton-sidecar-serving.json").read_text())
    assert {"datasource", "model", "version"} <= {v["name"] for v in d["templating"]["list"]}
    exemplar = [p["title"] for p in d["panels"] if any(t.get("exemplar") for t in p.get("targets", []))]
    assert exemplar == ["Stage latency from traces p50 / p95 / p99 (exemplars)"]
    assert d["annotations"]["list"][0]["name"] == "Changes"


def test_provisioning_files_are_valid_yaml_pointing_at_the_dashboards() -> None:
    ds = yaml.safe_load((ROOT / "dashboards/provisioning/datasources/sidecar.yml").read_text())
    prom = next(d for d in ds["datasources"] if d["type"] == "prometheus")
    assert prom["uid"] == "prometheus" and prom["isDefault"] is True
    assert prom["jsonData"]["exemplarTraceIdDestinations"][0]["name"] == "trace_id"
    prov = yaml.safe_load((ROOT / "dashboards/provisioning/dashboards/sidecar.yml").read_text())
    assert prov["providers"][0]["options"]["path"] == generate.GRAFANA_DASHBOARD_DIR


def test_configuration_reference_is_fresh_and_names_every_section() -> None:
    text = configref.render(SidecarConfig)
    assert (ROOT / "docs/configuration.md").read_text() == text, "run python -m dashboards.configref"
    for key in (
        "server.max_body_bytes",
        "triton.interval_secs",
        "checks.drift.p_threshold",
        "alerting.alertmanager.urls",
        "gpu.nvml.enabled",
        "traces.forward.endpoint",
    ):
        assert f"`{key}`" in text, key
    assert configref.main(["--out", str(ROOT / "docs/configuration.md"), "--check"]) == 0


def test_configuration_reference_renders_any_model_and_check_mode_catches_drift(tmp_path: Path) -> None:
    from pydantic import BaseModel, Field

    class Inner(BaseModel):
        limit_mib: int = Field(5, gt=0, description="A limit.")

    class Outer(BaseModel):
        """Top."""

        name: str = Field(description="Required name.")
        inner: Inner = Inner()

    text = configref.render(Outer)
    assert "| `name` | str | **required** | Required name. |" in text
    assert "| `inner.limit_mib` | int | `5` | A limit. (> 0) |" in text
    stale = tmp_path / "configuration.md"
    stale.write_text("old\n")
    assert configref.main(["--out", str(stale), "--check"]) == 1


def test_docs_dashboards_lists_every_panel() -> None:
    text = (ROOT / "docs/dashboards.md").read_text()
    missing = [i.title for i in generate.panel_infos() if f"| {i.title} |" not in text]
    assert not missing, f"docs/dashboards.md lacks panels: {missing}"
