"""The clients actions act through: the NVML snapshot ("no GPU" without one) and the webhook."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import httpx
import pynvml
import pytest

from sidecar.actions.control import ActionError, nvml_snapshot, post_webhook


def test_no_nvml_says_no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail() -> None:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)

    monkeypatch.setattr(pynvml, "nvmlInit", fail)
    assert nvml_snapshot() == "no GPU"


def test_a_gpu_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    fake = {
        "nvmlInit": lambda: None,
        "nvmlShutdown": lambda: calls.append("shutdown"),
        "nvmlDeviceGetCount": lambda: 1,
        "nvmlDeviceGetHandleByIndex": lambda i: i,
        "nvmlDeviceGetMemoryInfo": lambda h: SimpleNamespace(used=40 * 2**30, total=80 * 2**30),
        "nvmlDeviceGetUtilizationRates": lambda h: SimpleNamespace(gpu=97),
        "nvmlDeviceGetTemperature": lambda h, sensor: 71,
        "nvmlDeviceGetName": lambda h: b"NVIDIA H100",
    }
    for name, fn in fake.items():
        monkeypatch.setattr(pynvml, name, fn)
    assert nvml_snapshot() == "GPU 0 NVIDIA H100: 40.0/80.0 GiB used, 97% busy, 71 C"
    assert calls == ["shutdown"]


async def test_the_webhook_posts_the_record_and_a_refusal_is_an_action_error() -> None:
    seen: list[dict[str, Any]] = []
    status = [200]

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        return httpx.Response(status[0])

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
        post = post_webhook(http)
        await post("http://hooks.example/a", {"action": "reload", "model": "ctr"})
        assert seen == [{"action": "reload", "model": "ctr"}]
        status[0] = 503
        with pytest.raises(ActionError, match="webhook: answered 503"):
            await post("http://hooks.example/a", {"action": "reload"})
