"""The demo models behave as the banner says, run outside Triton with a stand-in for its Python backend utils."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from sidecar.demo.story import _load_model
from sidecar.demo.tritonserver import demo_model_file, demo_model_repository


class ModelError(Exception):
    pass


def fake_pb_utils() -> SimpleNamespace:
    def get_input(request: dict[str, Any], name: str) -> SimpleNamespace:
        return SimpleNamespace(as_numpy=lambda: request[name])

    return SimpleNamespace(
        get_input_tensor_by_name=get_input,
        Tensor=lambda name, data: (name, data),
        InferenceResponse=lambda output_tensors: output_tensors,
        TritonModelException=ModelError,
    )


def fraud_model(monkeypatch: pytest.MonkeyPatch) -> tuple[Any, list[float]]:
    module = _load_model(Path(demo_model_repository()) / "fraud" / "1" / "model.py")
    monkeypatch.setattr(module, "pb_utils", fake_pb_utils())
    slept: list[float] = []
    monkeypatch.setattr(module.time, "sleep", slept.append)  # the model's own `time`: a NameError fails here
    return module, slept


def test_a_high_risk_fraud_request_is_slow_not_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    module, slept = fraud_model(monkeypatch)
    slow = {"x": np.array([[60.0, 0.1, module.SLOW_RISK_Z + 0.5]], dtype=np.float32)}
    [[(name, score)]] = module.TritonPythonModel().execute([slow])
    assert name == "score" and score.shape == (1, 1) and 0.0 < float(score[0, 0]) < 1.0
    assert slept == [module.SLOW_SECS]


def test_an_ordinary_fraud_request_is_fast_and_a_negative_amount_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    module, slept = fraud_model(monkeypatch)
    model = module.TritonPythonModel()
    model.execute([{"x": np.array([[60.0, 0.1, 0.0]], dtype=np.float32)}])
    assert slept == []
    with pytest.raises(ModelError, match="negative"):
        model.execute([{"x": np.array([[-1.0, 0.1, 0.0]], dtype=np.float32)}])


def test_fraud_v2_is_slower_at_the_tail_only(monkeypatch: pytest.MonkeyPatch) -> None:
    v1, v2 = _load_model(demo_model_file("fraud", "1")), _load_model(demo_model_file("fraud", "2"))
    rng = np.random.default_rng(0)
    x = np.column_stack([rng.uniform(1, 100, 20_000), rng.normal(size=20_000), rng.normal(size=20_000)])
    d1 = np.array([v1.delay_secs(x[i : i + 1]) for i in range(len(x))])
    d2 = np.array([v2.delay_secs(x[i : i + 1]) for i in range(len(x))])
    assert 0.005 < (d1 > 0).mean() < 0.02 and 0.05 < (d2 > 0).mean() < 0.09  # ~1% against ~7%
    assert np.quantile(d1, 0.5) == np.quantile(d2, 0.5) == 0.0
    assert np.quantile(d2, 0.99) == v2.SLOW_SECS > v1.SLOW_SECS
    np.testing.assert_array_equal(v1.score(x[:50]), v2.score(x[:50]))  # same answers, later


def test_the_chat_model_streams_its_tokens_on_its_script(monkeypatch: pytest.MonkeyPatch) -> None:
    module = _load_model(demo_model_file("chat", "1"))
    sent: list[Any] = []
    slept: list[float] = []
    clock = [100.0]
    monkeypatch.setattr(module.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(module.time, "sleep", lambda s: (slept.append(s), clock.__setitem__(0, clock[0] + s)))
    pb = fake_pb_utils()
    pb.TRITONSERVER_RESPONSE_COMPLETE_FINAL = 1
    monkeypatch.setattr(module, "pb_utils", pb)

    class Request(dict):  # type: ignore[type-arg]
        def get_response_sender(self) -> Any:
            return SimpleNamespace(send=lambda response=None, flags=0: sent.append((response, flags)))

    req = Request(PROMPT_TOKENS=np.array([48], dtype=np.int32), MAX_TOKENS=np.array([5], dtype=np.int32))
    module.TritonPythonModel().execute([req])
    assert [int(r[0][1][0]) for r, _ in sent[:-1]] == [48, 49, 50, 51, 52] and sent[-1] == (None, 1)
    assert slept[0] == pytest.approx(module.first_token_secs(48)) == pytest.approx(0.04 + 0.002 * 48)
    assert slept[1:] == pytest.approx([module.GAP_SECS] * 4)
    assert module.token_times(248, 3)[0] - module.token_times(48, 3)[0] == pytest.approx(0.4)
