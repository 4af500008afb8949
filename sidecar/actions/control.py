"""What actions act through, each injectable: Triton's model control (the official ``tritonclient``, explicit
model-control mode), an NVML snapshot, a webhook. Every failure is an ``ActionError`` with a short reason."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import httpx

from sidecar.errors import ActionError

__all__ = ["ActionError", "ModelControl", "TritonModelControl", "Webhook", "nvml_snapshot", "post_webhook"]


class ModelControl(Protocol):
    async def load(self, model: str, config: Mapping[str, Any] | None = None) -> None: ...

    async def model_config(self, model: str) -> dict[str, Any]: ...

    async def close(self) -> None: ...


class TritonModelControl:
    """``tritonclient.http.aio`` against ``url`` (http://host:port); ``load`` with ``config`` sends it as the
    load request's ``config`` parameter (Triton uses it in place of config.pbtxt)."""

    def __init__(self, url: str, *, timeout_secs: float = 120.0) -> None:
        self.ssl = url.startswith("https://")
        self.url = url.removeprefix("http://").removeprefix("https://").rstrip("/")
        self.timeout_secs = timeout_secs
        self._client: Any = None

    def _get(self) -> Any:
        if self._client is None:
            import tritonclient.http.aio as triton

            self._client = triton.InferenceServerClient(self.url, conn_timeout=self.timeout_secs, ssl=self.ssl)
        return self._client

    async def _call(self, what: str, fn: Callable[[], Any]) -> Any:
        from tritonclient.utils import InferenceServerException

        try:
            return await asyncio.wait_for(fn(), self.timeout_secs)
        except TimeoutError:
            raise ActionError(f"{what}: no answer in {self.timeout_secs:g}s") from None
        except InferenceServerException as exc:
            raise ActionError(f"{what}: {exc.message() or exc}") from None
        except Exception as exc:  # aiohttp's connection errors
            raise ActionError(f"{what}: {type(exc).__name__}: {exc}") from None

    async def load(self, model: str, config: Mapping[str, Any] | None = None) -> None:
        text = json.dumps(config) if config is not None else None
        await self._call(f"load {model}", lambda: self._get().load_model(model, config=text))

    async def model_config(self, model: str) -> dict[str, Any]:
        cfg = await self._call(f"config of {model}", lambda: self._get().get_model_config(model))
        return dict(cfg)

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.close()


Webhook = Callable[[str, Mapping[str, Any]], Any]  # (url, body) -> awaitable


def post_webhook(http: httpx.AsyncClient, timeout_secs: float = 10.0) -> Webhook:
    async def post(url: str, body: Mapping[str, Any]) -> None:
        try:
            r = await http.post(url, json=dict(body), timeout=timeout_secs)
        except httpx.HTTPError as exc:
            raise ActionError(f"webhook: {type(exc).__name__}") from None
        if r.status_code >= 300:
            raise ActionError(f"webhook: answered {r.status_code}")

    return post


def nvml_snapshot() -> str:
    """A short line per GPU (name, memory used, utilisation, temperature); ``no GPU`` where NVML has none."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return "no GPU"
    try:
        n = pynvml.nvmlDeviceGetCount()
        if n == 0:
            return "no GPU"
        lines = []
        for i in range(n):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            mem = pynvml.nvmlDeviceGetMemoryInfo(h)
            util = pynvml.nvmlDeviceGetUtilizationRates(h)
            temp = pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU)
            name = pynvml.nvmlDeviceGetName(h)
            name = name.decode() if isinstance(name, bytes) else str(name)
            lines.append(
                f"GPU {i} {name}: {mem.used / 2**30:.1f}/{mem.total / 2**30:.1f} GiB used, {util.gpu}% busy, {temp} C"
            )
        return "; ".join(lines)
    except Exception as exc:
        return f"GPU snapshot failed: {type(exc).__name__}"
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()
