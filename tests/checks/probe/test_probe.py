"""The model probe with a fake Triton client: the answer rules, the consecutive-failure rule, the rate bound,
the probe marker and the exported figures."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from sidecar.alerting.render import finding_text
from sidecar.checks.probe.check import ModelProbe, is_probe_request, is_probe_trace
from sidecar.checks.probe.client import ProbeAnswer, ProbeFailure
from sidecar.checks.probe.config import ProbeInput, ProbesConfig
from sidecar.clock import FakeClock
from sidecar.errors import ConfigError
from sidecar.polled import ManualTicker

MODEL = {
    "inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}],
    "outputs": [{"name": "score", "datatype": "FP32", "shape": [1, 1], "min": 0, "max": 1}],
}


class FakeClient:
    def __init__(self) -> None:
        self.answers: list[Mapping[str, ProbeAnswer] | ProbeFailure] = []
        self.calls: list[dict[str, object]] = []
        self.closed = False

    async def infer(
        self,
        model: str,
        version: str,
        inputs: Sequence[ProbeInput],
        outputs: Sequence[str],
        *,
        request_id: str,
        headers: Mapping[str, str],
        timeout_secs: float,
    ) -> Mapping[str, ProbeAnswer]:
        self.calls.append(
            {
                "model": model,
                "version": version,
                "request_id": request_id,
                "headers": dict(headers),
                "timeout": timeout_secs,
            }
        )
        a = self.answers.pop(0) if self.answers else _score(0.5)
        if isinstance(a, ProbeFailure):
            raise a
        return a

    async def close(self) -> None:
        self.closed = True


def _score(v: float, dtype: str = "FP32", shape: tuple[int, ...] = (1, 1)) -> Mapping[str, ProbeAnswer]:
    return {"score": ProbeAnswer(dtype, shape, np.full(shape, v, dtype=np.float32))}


def _probe(clock: FakeClock, registry: CollectorRegistry, client: FakeClient, **kw: object) -> ModelProbe:
    cfg = ProbesConfig.model_validate({"enabled": True, "models": {"ctr": MODEL}, **kw})
    return ModelProbe(cfg, client=client, registry=registry, clock=clock, ticker=ManualTicker)


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (_score(0.5), "ok"),
        (_score(float("nan")), "non_finite"),
        (_score(float("inf")), "non_finite"),
        (_score(1.5), "out_of_range"),
        (_score(0.5, dtype="FP64"), "dtype"),
        (_score(0.5, shape=(1, 2)), "shape"),
        ({}, "missing_output"),
        (ProbeFailure("timeout", "no answer in 5s"), "timeout"),
        (ProbeFailure("unavailable", "connection refused"), "unavailable"),
    ],
)
async def test_each_answer_rule_names_its_reason(
    clock: FakeClock, registry: CollectorRegistry, answer: object, reason: str
) -> None:
    client = FakeClient()
    client.answers.append(answer)  # type: ignore[arg-type]
    probe = _probe(clock, registry, client)
    assert await probe.probe("ctr") == reason
    result = "ok" if reason == "ok" else "failed"
    lbl = {"model": "ctr", "version": ""}
    assert registry.get_sample_value("sidecar_probe_requests_total", {**lbl, "result": result}) == 1
    if reason != "ok":
        assert registry.get_sample_value("sidecar_probe_failures_total", {**lbl, "reason": reason}) == 1
    assert registry.get_sample_value("sidecar_probe_success", lbl) == (1.0 if reason == "ok" else 0.0)


async def test_three_failures_in_a_row_make_a_finding_and_a_pass_clears_it(
    clock: FakeClock, registry: CollectorRegistry
) -> None:
    client = FakeClient()
    probe = _probe(clock, registry, client)
    (f,) = probe.evaluate(clock.now())
    assert f.insufficient_data and not f.active
    client.answers += [_score(float("nan"))] * 3 + [_score(0.2)]
    for expected_active in (False, False, True):
        await probe.ticker.tick()  # type: ignore[attr-defined]
        (f,) = probe.evaluate(clock.now())
        assert f.active is expected_active
        clock.advance(10)
    assert f.kind == "probe" and f.labels["alertname"] == "ModelProbeFailing" and f.value == 3
    assert f.facts["reason"] == "non_finite" and f.facts["last_at"] == clock.now() - 10
    summary, desc = finding_text(f)
    assert summary == "ctr probe failing: 3 in a row (NaN or inf in the output: score: 1 of 1 values are NaN or inf)"
    assert "sidecar-probe-ctr-3" in desc
    assert registry.get_sample_value("sidecar_probe_consecutive_failures", {"model": "ctr", "version": ""}) == 3
    await probe.ticker.tick()  # type: ignore[attr-defined]
    (f,) = probe.evaluate(clock.now())
    assert not f.active and f.facts["consecutive"] == 0


async def test_a_model_is_probed_once_per_interval_and_never_above_the_rate(
    clock: FakeClock, registry: CollectorRegistry
) -> None:
    client = FakeClient()
    models = {f"m{i}": MODEL for i in range(10)}
    cfg = ProbesConfig.model_validate({"enabled": True, "interval_secs": 10, "max_per_sec": 2, "models": models})
    probe = ModelProbe(cfg, client=client, registry=registry, clock=clock, ticker=ManualTicker)
    await probe.ticker.tick()  # type: ignore[attr-defined]
    assert len(client.calls) == 2  # the bucket holds 2 tokens
    assert registry.get_sample_value("sidecar_probe_deferred_total", {"reason": "rate_limit"}) == 8
    for _ in range(20):  # 10 s at one tick per 0.5 s: 2 per second at most
        clock.advance(0.5)
        await probe.ticker.tick()  # type: ignore[attr-defined]
    assert len(client.calls) <= 2 + 2 * 10
    sent = [str(c["model"]) for c in client.calls]
    assert sorted(set(sent)) == sorted(models)
    assert all(sent.count(m) <= 2 for m in models)  # each at most once per 10 s interval (+ the one at t=10)


async def test_probe_traffic_is_marked(clock: FakeClock, registry: CollectorRegistry) -> None:
    client = FakeClient()
    probe = _probe(clock, registry, client)
    await probe.probe("ctr")
    call = client.calls[0]
    assert is_probe_request(str(call["request_id"])) and not is_probe_request("req-1")
    headers = call["headers"]
    assert isinstance(headers, dict)
    trace = headers["traceparent"].split("-")[1]
    assert is_probe_trace(trace) and is_probe_trace(bytes.fromhex(trace))
    assert not is_probe_trace("0af7651916cd43dd8448eb211c80319c")


async def test_shutdown_closes_the_client(clock: FakeClock, registry: CollectorRegistry) -> None:
    client = FakeClient()
    probe = _probe(clock, registry, client)
    await probe.shutdown()
    await probe.shutdown()
    assert client.closed


def test_inputs_from_a_file_and_bad_config_named(tmp_path: Path) -> None:
    f = tmp_path / "in.json"
    f.write_text('[{"name": "x", "datatype": "FP32", "shape": [1, 2], "data": [1, 2]}]')
    cfg = ProbesConfig.model_validate(
        {"enabled": True, "models": {"ctr": {"inputs_file": str(f), "outputs": [{"name": "score"}]}}}
    )
    assert cfg.models["ctr"].inputs[0].shape == [1, 2]
    from sidecar.config import parse_config

    with pytest.raises(ConfigError, match=r"data: 3 values for shape \[1, 2\]"):
        bad = {
            "inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 2], "data": [1, 2, 3]}],
            "outputs": [{"name": "s"}],
        }
        parse_config({"probes": {"enabled": True, "models": {"ctr": bad}}})


async def test_fifty_models_at_the_default_rate_are_each_probed_once_per_interval(
    clock: FakeClock, registry: CollectorRegistry
) -> None:
    client = FakeClient()
    cfg = ProbesConfig.model_validate({"enabled": True, "models": {f"m{i}": MODEL for i in range(50)}})
    probe = ModelProbe(cfg, client=client, registry=registry, clock=clock, ticker=ManualTicker)
    assert probe.ticker.interval_secs == 1.0  # type: ignore[attr-defined]
    for _ in range(10):  # the first interval: 5 per second (max_per_sec) spread the 50 over 10 ticks
        await probe.ticker.tick()  # type: ignore[attr-defined]
        clock.advance(1)
    assert sorted(str(c["model"]) for c in client.calls) == sorted(f"m{i}" for i in range(50))
    for _ in range(10):  # the next interval: each once more, staggered the same way
        await probe.ticker.tick()  # type: ignore[attr-defined]
        clock.advance(1)
    sent = [str(c["model"]) for c in client.calls]
    assert len(sent) == 100 and all(sent.count(f"m{i}") == 2 for i in range(50))


async def test_each_listed_version_is_probed_on_its_own(clock: FakeClock, registry: CollectorRegistry) -> None:
    client = FakeClient()
    two = {**MODEL, "versions": ["1", "2"]}
    cfg = ProbesConfig.model_validate({"enabled": True, "models": {"ctr": two}})
    probe = ModelProbe(cfg, client=client, registry=registry, clock=clock, ticker=ManualTicker)
    for _ in range(3):
        assert await probe.probe("ctr", "1") == "ok"
        client.answers.append(_score(float("nan")))
        assert await probe.probe("ctr", "2") == "non_finite"
    by_version = {f.labels["version"]: f for f in probe.evaluate(clock.now())}
    assert not by_version["1"].active and by_version["2"].active
    assert finding_text(by_version["2"])[0].startswith("ctr v2 probe failing: 3 in a row")
    assert registry.get_sample_value("sidecar_probe_consecutive_failures", {"model": "ctr", "version": "2"}) == 3
    assert registry.get_sample_value("sidecar_probe_success", {"model": "ctr", "version": "1"}) == 1
    await probe.ticker.tick()  # type: ignore[attr-defined]
    assert sorted(str(c["version"]) for c in client.calls[-2:]) == ["1", "2"]
    with pytest.raises(ValueError, match="version or versions: not both"):
        ProbesConfig.model_validate({"enabled": True, "models": {"ctr": {**two, "version": "1"}}})


def test_the_client_takes_a_url_with_or_without_scheme() -> None:
    from sidecar.checks.probe.client import TritonProbeClient

    plain, tls = TritonProbeClient("http://triton:8000/"), TritonProbeClient("https://triton:8443")
    assert (plain.url, plain.ssl) == ("triton:8000", False)
    assert (tls.url, tls.ssl) == ("triton:8443", True)
    assert TritonProbeClient("triton:8001", protocol="grpc").url == "triton:8001"
