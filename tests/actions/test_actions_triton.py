"""The probe and the actions layer against a real Triton 2.51 (CPU) in explicit model-control mode (issue 29):
(a) a model whose output turns to NaN after a few requests is caught by the probe, reloaded and healthy again,
and the recorded change and the audit rows say so; (b) a model that stays broken gets its fallback loaded;
(c) a v2 that is 50% slower at p99 is reverted to v1 by its canary verdict, with no failed request while
Triton switches; (d) in dry run, Triton's repository index is unchanged while the plan is shown."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry

from sidecar.actions.layer import ActionLayer
from sidecar.checks.probe.check import ModelProbe
from sidecar.clock import FakeClock, SystemClock
from sidecar.config import parse_config
from sidecar.demo.tritonserver import TritonServer
from sidecar.model import Batch, Event, Finding
from sidecar.service import Service
from sidecar.store import Store
from sidecar.wiring.actions import build as actions
from sidecar.wiring.alerting import build as alerting
from sidecar.wiring.canary import build as canary_build

from .test_layer import _probe_finding

pytestmark = pytest.mark.triton

CONFIG = """name: "{name}"
backend: "python"
max_batch_size: 8
input [ {{ name: "x", data_type: TYPE_FP32, dims: [ 4 ] }} ]
output [ {{ name: "score", data_type: TYPE_FP32, dims: [ 1 ] }} ]
instance_group [ {{ count: 1, kind: KIND_CPU }} ]
"""

# Healthy for its first ``GOOD`` requests after each load, NaN after (GOOD < 0: always NaN).
MODEL = """import numpy as np
import triton_python_backend_utils as pb_utils

GOOD = {good}


class TritonPythonModel:
    def initialize(self, args):
        self.calls = 0

    def execute(self, requests):
        out = []
        for r in requests:
            self.calls += 1
            x = pb_utils.get_input_tensor_by_name(r, "x").as_numpy().astype(np.float32)
            y = x.sum(axis=1, keepdims=True) / 100.0
            if GOOD < 0 or self.calls > GOOD:
                y = y * np.float32("nan")
            out.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("score", y.astype(np.float32))]))
        return out
"""

MODELS = {"flaky": 4, "broken": -1, "broken_fallback": 1_000_000}

ROLLOUT_CONFIG = """name: "rollout"
backend: "python"
max_batch_size: 8
version_policy: { all { } }
input [ { name: "x", data_type: TYPE_FP32, dims: [ 4 ] } ]
output [ { name: "score", data_type: TYPE_FP32, dims: [ 1 ] } ]
instance_group [ { count: 1, kind: KIND_CPU } ]
"""

# v1 takes 20 ms, v2 30 ms: 50% slower at every quantile.
ROLLOUT = """import time
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            time.sleep({sleep})
            x = pb_utils.get_input_tensor_by_name(r, "x").as_numpy().astype(np.float32)
            s = 1.0 / (1.0 + np.exp(-x.sum(axis=1, keepdims=True)))
            out.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("score", s.astype(np.float32))]))
        return out
"""
PROBE = {
    "inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}],
    "outputs": [{"name": "score", "datatype": "FP32", "shape": [1, 1], "min": 0, "max": 1}],
}


@pytest.fixture(scope="module")
def triton(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    root = tmp_path_factory.mktemp("triton-actions")
    repo = root / "repo"
    for name, good in MODELS.items():
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "config.pbtxt").write_text(CONFIG.format(name=name))
        (repo / name / "1" / "model.py").write_text(MODEL.format(good=good))
    for version, sleep in (("1", 0.02), ("2", 0.03)):
        (repo / "rollout" / version).mkdir(parents=True)
        (repo / "rollout" / version / "model.py").write_text(ROLLOUT.format(sleep=sleep))
    (repo / "rollout" / "config.pbtxt").write_text(ROLLOUT_CONFIG)
    server = TritonServer(
        repo,
        root / "work",
        model_control_explicit=True,
        load_models=["flaky", "broken", "rollout"],
        summary_latencies=False,
    )
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _index(server: TritonServer) -> list[dict[str, Any]]:
    r = httpx.post(f"{server.http_url}/v2/repository/index", json={}, timeout=30)
    r.raise_for_status()
    return sorted(r.json(), key=lambda m: (m["name"], m.get("version", "")))


def _service(server: TritonServer, tmp_path: Path, model: str, actions_cfg: dict[str, Any]) -> Service:
    cfg = parse_config(
        {
            "triton": {"enabled": False, "http_url": server.http_url},
            "alerting": {"enabled": True, "audit": {"enabled": True}},
            "probes": {"enabled": True, "failures_to_fire": 3, "timeout_secs": 30, "models": {model: PROBE}},
            "actions": {"enabled": True, "cooldown_secs": 0, "max_evidence_age_secs": 300, **actions_cfg},
        }
    )
    return Service(
        cfg,
        clock=SystemClock(),
        registry=CollectorRegistry(),
        store=Store(tmp_path / "s.sqlite"),
        factories=[alerting, actions],
    )


def _of(findings: list[Finding], kind: str) -> list[Finding]:
    return [f for f in findings if f.kind == kind]


async def _close(svc: Service) -> None:
    probe, layer = svc.component("probe"), svc.component("actions")
    await probe.client.close()
    if layer.control is not None:
        await layer.control.close()
    await svc.shutdown()


async def test_a_model_turning_to_nan_is_reloaded_and_healthy_again(triton: TritonServer, tmp_path: Path) -> None:
    svc = _service(triton, tmp_path, "flaky", {"dry_run": False, "models": {"flaky": {"on_probe_failure": ["reload"]}}})
    probe: ModelProbe = svc.component("probe")
    layer: ActionLayer = svc.component("actions")
    try:
        assert [await probe.probe("flaky") for _ in range(4)] == ["ok"] * 4
        assert [await probe.probe("flaky") for _ in range(3)] == ["non_finite"] * 3
        (caught,) = _of(svc.evaluate_once(), "probe")
        assert caught.active and caught.summary.startswith("flaky probe failing: 3 in a row (NaN or inf")

        await layer.poll_once()  # carries out the queued reload through Triton's model-control API
        (rec,) = layer.records
        assert (rec.action, rec.outcome, rec.error) == ("reload", "done", "")
        assert await probe.probe("flaky") == "ok"  # a fresh instance: healthy again
        found = svc.evaluate_once()
        assert not _of(found, "probe")[0].active
        (taken,) = _of(found, "action")
        assert taken.labels["alertname"] == "ActionTaken" and taken.active

        changes = svc.component("changes").recent("flaky", None, 0)
        assert [c.source for c in changes] == ["action"]
        assert changes[0].what.startswith(
            "did reload flaky: POST /v2/repository/models/flaky/load | because flaky probe failing: 3 in a row"
        )
        audit = svc.component("audit")
        (row,) = audit.events("change")
        assert row["source"] == "action" and row["what"] == changes[0].what
        crossed = {r["labels"]["alertname"]: r for r in audit.events("finding_crossed")}
        assert set(crossed) == {"ModelProbeFailing", "ActionTaken"}
        assert crossed["ActionTaken"]["summary"] == changes[0].what
        (cleared,) = audit.events("finding_cleared")
        assert cleared["labels"]["alertname"] == "ModelProbeFailing"
    finally:
        await _close(svc)


async def test_a_model_that_stays_broken_gets_its_fallback(triton: TritonServer, tmp_path: Path) -> None:
    steps = {"on_probe_failure": ["reload", "fallback"], "fallback_model": "broken_fallback"}
    svc = _service(triton, tmp_path, "broken", {"dry_run": False, "models": {"broken": steps}})
    probe: ModelProbe = svc.component("probe")
    layer: ActionLayer = svc.component("actions")
    try:
        for expected in ("reload", "fallback"):
            assert [await probe.probe("broken") for _ in range(3)] == ["non_finite"] * 3
            svc.evaluate_once()
            await layer.poll_once()
            assert (layer.records[-1].action, layer.records[-1].outcome) == (expected, "done")
        states = {m["name"]: m.get("state") for m in _index(triton)}
        assert states["broken_fallback"] == "READY"
        whats = [c.what for c in svc.component("changes").recent("broken", None, 0)]
        assert whats[0].startswith("did load the fallback of broken: POST /v2/repository/models/broken_fallback/load")
        assert whats[1].startswith("did reload broken")
    finally:
        await _close(svc)


async def test_dry_run_leaves_the_repository_alone_and_shows_the_plan(triton: TritonServer, tmp_path: Path) -> None:
    svc = _service(triton, tmp_path, "broken", {"models": {"broken": {"on_probe_failure": ["reload"]}}})
    probe: ModelProbe = svc.component("probe")
    layer: ActionLayer = svc.component("actions")
    try:
        before = _index(triton)
        assert [await probe.probe("broken") for _ in range(3)] == ["non_finite"] * 3
        svc.evaluate_once()
        await layer.poll_once()
        found = svc.evaluate_once()
        assert _index(triton) == before
        (planned,) = _of(found, "action")
        assert planned.labels["alertname"] == "ActionPlanned"
        assert planned.summary.startswith("[dry run] would reload broken: POST /v2/repository/models/broken/load")
        assert svc.component("changes").recent("broken", None, 0) == []
        (row,) = [r for r in svc.component("audit").events("finding_crossed") if r["check"] == "actions"]
        assert row["summary"] == planned.summary
    finally:
        await _close(svc)


def _ready_versions(server: TritonServer, model: str) -> list[str]:
    return sorted(m["version"] for m in _index(server) if m["name"] == model and m.get("state") == "READY")


async def test_a_slower_v2_is_reverted_to_v1_without_a_failed_request(triton: TritonServer, tmp_path: Path) -> None:
    cfg = parse_config(
        {
            "triton": {"enabled": False, "http_url": triton.http_url},
            "alerting": {"enabled": True, "audit": {"enabled": True}},
            "checks": {"canary": {"enabled": True, "min_samples": 200, "min_tail_samples": 2, "for_secs": 0}},
            "actions": {
                "enabled": True,
                "dry_run": False,
                "cooldown_secs": 0,
                "models": {"rollout": {"on_canary_worse": ["revert"]}},
            },
        }
    )
    clock = SystemClock()
    store = Store(tmp_path / "s.sqlite")
    svc = Service(
        cfg, clock=clock, registry=CollectorRegistry(), store=store, factories=[alerting, canary_build, actions]
    )
    layer: ActionLayer = svc.component("actions")
    assert _ready_versions(triton, "rollout") == ["1", "2"]
    body = {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1.0, 0.0, -1.0, 0.5]}]}
    calls: dict[str, list[tuple[int, str, Event | None]]] = {}

    def measure(version: str) -> None:
        """220 timed calls to one version (after one that warms its stub), each kept as an event."""
        out = calls.setdefault(version, [])
        with httpx.Client(base_url=triton.http_url, timeout=30) as http:
            warm = http.post(f"/v2/models/rollout/versions/{version}/infer", json=body)
            out.append((warm.status_code, warm.text, None))
            for _ in range(220):
                t0 = time.perf_counter()
                r = http.post(f"/v2/models/rollout/versions/{version}/infer", json=body)
                ms = (time.perf_counter() - t0) * 1000
                event = Event("rollout", version, clock.now(), score=0.5, fields={"latency_ms": ms, "error": 0.0})
                out.append((r.status_code, r.text, event))

    try:
        # Each version from its own thread, at once: v2's 30 ms sleeps overlap v1's 20 ms ones instead of adding
        # up (one instance a version, so neither version's calls queue behind the other's).
        callers = [threading.Thread(target=measure, args=(v,)) for v in ("1", "2")]
        for t in callers:
            t.start()
        for t in callers:
            t.join(120)
        events = []
        for version in ("1", "2"):
            assert len(calls[version]) == 221, (version, len(calls[version]))
            for code, text, _ in calls[version]:
                assert code == 200, text
            events += [e for _, _, e in calls[version] if e is not None]
        svc.bus.publish(Batch(kind="events", source="http", items=tuple(events)))

        # Callers keep using the model (Triton picks the version) while the revert runs: none may fail.
        stop = threading.Event()
        statuses: list[int] = []

        def traffic() -> None:
            with httpx.Client(base_url=triton.http_url, timeout=30) as http:
                while not stop.is_set():
                    statuses.append(http.post("/v2/models/rollout/infer", json=body).status_code)

        caller = threading.Thread(target=traffic)
        caller.start()
        try:
            t0 = time.monotonic()
            (verdict,) = [f for f in svc.evaluate_once() if f.kind == "canary"]
            # v2 sleeps 50% longer at every quantile; on two shared cores the p99 test alone (from 2-3 tail
            # values) is sometimes undecided, so the verdict may rest on p50 only: either is "worse".
            assert verdict.active and verdict.facts["verdict"] == "worse", verdict.facts
            assert {"p50", "p99"} & set(str(verdict.facts["worse"]).split(","))
            await layer.poll_once()
            took = time.monotonic() - t0
            await asyncio.sleep(0.5)  # a few more calls after the switch
        finally:
            stop.set()
            caller.join(30)
        (rec,) = layer.records
        assert (rec.action, rec.outcome, rec.target_version) == ("revert", "done", "1"), rec
        assert _ready_versions(triton, "rollout") == ["1"]
        assert took < cfg.actions.timeout_secs
        assert len(statuses) > 5 and set(statuses) == {200}, statuses
        assert layer.holds == {"rollout": "1"}
        (change,) = svc.component("changes").recent("rollout", None, 0)
        assert change.version == "1" and "version_policy {specific: {versions: [1]}}" in change.what
        # The same verdict again (its window still says worse): held, no second revert, said once (ActionHeld).
        svc.evaluate_once()
        await layer.poll_once()
        assert [r.outcome for r in layer.records] == ["done", "held"]
        assert layer.records[-1].target_version == "1"
        assert _ready_versions(triton, "rollout") == ["1"]
        # The held model's probe fails: its reload pins v1 again (a plain load would bring v2 back from
        # config.pbtxt, whose policy serves every version: flapping).
        failing = _probe_finding(FakeClock(clock.now()))
        failing = replace(failing, labels={**failing.labels, "model": "rollout"})
        layer.on_findings([failing], clock.now())
        await layer.poll_once()
        rec = layer.records[-1]
        assert (rec.action, rec.outcome, rec.target_version) == ("reload", "done", "1"), rec
        assert "version_policy {specific: {versions: [1]}}" in rec.plan
        assert _ready_versions(triton, "rollout") == ["1"]
    finally:
        await layer.control.close()  # type: ignore[union-attr]
        await svc.shutdown()
