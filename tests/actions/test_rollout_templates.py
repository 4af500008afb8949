"""The Argo Rollouts AnalysisTemplate and the Flagger MetricTemplates in docs/rollouts/ against a real Prometheus
(2.42) scraping the sidecar's figures: each query, with its arguments filled in, returns what makes the rollout
fail for a candidate whose probe fails and whose canary verdict is worse, and pass for a healthy one."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import yaml
from prometheus_client import CollectorRegistry, start_http_server
from waiting import wait_until

from sidecar.checks.canary.check import CanaryCheck
from sidecar.checks.canary.config import CanaryConfig
from sidecar.checks.probe.check import ModelProbe
from sidecar.checks.probe.client import ProbeAnswer
from sidecar.checks.probe.config import ProbesConfig
from sidecar.clock import FakeClock
from sidecar.demo.tritonserver import free_port
from sidecar.model import Batch, Event

pytestmark = pytest.mark.prometheus

ROOT = Path(__file__).resolve().parents[2]
ARGO = ROOT / "docs" / "rollouts" / "argo-analysis-template.yaml"
FLAGGER = ROOT / "docs" / "rollouts" / "flagger-metric-templates.yaml"
PROBE = {
    "versions": ["1", "2"],
    "inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}],
    "outputs": [{"name": "score", "finite": True}],
}


class Answers:
    """``ctr`` v2 answers NaN; everything else a finite score."""

    async def infer(self, model: str, version: str, *a: Any, **kw: Any) -> dict[str, ProbeAnswer]:
        v = float("nan") if (model, version) == ("ctr", "2") else 0.5
        return {"score": ProbeAnswer("FP32", (1, 1), np.full((1, 1), v, dtype=np.float32))}

    async def close(self) -> None:
        return None


async def _figures() -> CollectorRegistry:
    """Real probe and canary figures: ctr v2 fails its probe and is 50% slower than v1; rank v2 is healthy."""
    reg, clock = CollectorRegistry(), FakeClock()
    cfg = ProbesConfig.model_validate({"enabled": True, "models": {"ctr": PROBE, "rank": PROBE}})
    probe = ModelProbe(cfg, client=Answers(), registry=reg, clock=clock)
    for model in ("ctr", "rank"):
        for version in ("1", "2"):
            await probe.probe(model, version)
    canary = CanaryCheck(CanaryConfig.model_validate({"enabled": True, "min_samples": 200}), registry=reg, clock=clock)
    rng = np.random.default_rng(7)
    items = []
    for model, slow in (("ctr", 1.5), ("rank", 1.0)):
        for version, factor in (("1", 1.0), ("2", slow)):
            lat = rng.normal(20.0, 2.0, 600) * factor
            items += [
                Event(model, version, clock.now() - i * 0.01, fields={"latency_ms": float(x), "error": 0.0})
                for i, x in enumerate(lat)
            ]
    canary.observe(Batch("events", "test", tuple(items)))
    canary.evaluate(clock.now())
    return reg


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    import asyncio

    reg = asyncio.run(_figures())
    port = free_port()
    server, thread = start_http_server(port, addr="127.0.0.1", registry=reg)
    tmp = tmp_path_factory.mktemp("prom-rollouts")
    prom_port = free_port()
    cfg = {
        "global": {"scrape_interval": "1s"},
        "scrape_configs": [{"job_name": "sidecar", "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}],
    }
    (tmp / "prometheus.yml").write_text(json.dumps(cfg))
    with (tmp / "prometheus.log").open("wb") as log:
        prom = subprocess.Popen(
            [
                "/usr/bin/prometheus",
                f"--config.file={tmp / 'prometheus.yml'}",
                f"--storage.tsdb.path={tmp / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{prom_port}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{prom_port}"
    try:
        ok = wait_until(
            lambda: _query(url, 'count(sidecar_canary_verdict{model="rank"})') and _query(url, "sidecar_probe_success"),
            60,
            interval_s=0.2,
            ignore=(httpx.HTTPError,),
        )
        assert ok, (tmp / "prometheus.log").read_text()[-2000:]
        yield url
    finally:
        prom.terminate()
        prom.wait(15)
        server.shutdown()
        thread.join(5)


def _query(url: str, q: str) -> list[float]:
    r = httpx.get(f"{url}/api/v1/query", params={"query": q}, timeout=10)
    r.raise_for_status()
    body = r.json()
    assert body["status"] == "success", body
    return [float(s["value"][1]) for s in body["data"]["result"]]


def _argo_condition(expr: str, result: list[float]) -> bool:
    """An Argo condition of the form these templates use (``len``, indexing, ``&&``, ``||``, comparisons)."""
    py = expr.replace("&&", " and ").replace("||", " or ")
    return bool(eval(py, {"__builtins__": {}}, {"len": len, "result": result}))


@pytest.mark.parametrize(("model", "fails"), [("ctr", True), ("rank", False)])
def test_the_argo_analysis_template_fails_a_bad_candidate_and_passes_a_good_one(
    prometheus: str, model: str, fails: bool
) -> None:
    doc = yaml.safe_load(ARGO.read_text())
    assert doc["apiVersion"] == "argoproj.io/v1alpha1" and doc["kind"] == "AnalysisTemplate"
    assert {a["name"] for a in doc["spec"]["args"]} == {"model", "candidate", "prometheus-address"}
    assert {m["name"] for m in doc["spec"]["metrics"]} == {"probe-passing", "canary-not-worse"}
    for metric in doc["spec"]["metrics"]:
        query = metric["provider"]["prometheus"]["query"]
        query = query.replace("{{args.model}}", model).replace("{{args.candidate}}", "2")
        result = _query(prometheus, query)
        assert len(result) == 1, (metric["name"], query, result)
        assert _argo_condition(metric["failureCondition"], result) is fails, (metric["name"], result)
        assert _argo_condition(metric["successCondition"], result) is not fails, (metric["name"], result)


@pytest.mark.parametrize(("model", "fails"), [("ctr", True), ("rank", False)])
def test_the_flagger_metric_templates_fail_a_bad_target_and_pass_a_good_one(
    prometheus: str, model: str, fails: bool
) -> None:
    docs = {d["metadata"]["name"]: d for d in yaml.safe_load_all(FLAGGER.read_text())}
    assert set(docs) == {"sidecar-probe-success", "sidecar-canary-worse"}
    # The threshold ranges the file's header tells a Canary to use.
    within = {"sidecar-probe-success": lambda v: v >= 1, "sidecar-canary-worse": lambda v: v <= 0}
    for name, doc in docs.items():
        assert doc["apiVersion"] == "flagger.app/v1beta1" and doc["kind"] == "MetricTemplate"
        assert doc["spec"]["provider"]["type"] == "prometheus"
        (value,) = _query(prometheus, doc["spec"]["query"].replace("{{ target }}", model))
        assert within[name](value) is not fails, (name, value)
