"""The demo models behave as the banner says, run outside Triton with a stand-in for its Python backend utils."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from sidecar.demo.story import _load_model
from sidecar.demo.tritonserver import demo_model_repository


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
