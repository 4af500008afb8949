"""Reads and changes Triton's trace settings at run time (``/v2/trace/setting``, ``/v2/models/{m}/trace/setting``).

The HTTP side of the tracing governor (``sidecar/checks/tracing_governor/check.py`` decides; this only talks to
Triton, through the injected client). Every call answers the settings Triton reports after it, so the caller
records what took effect, not what it asked for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx
import orjson

from sidecar.errors import ControlError

__all__ = ["TraceControlError", "TraceSetting", "TritonTraceControl"]


class TraceControlError(ControlError):
    """A trace-settings call to Triton failed; ``reason`` is a bounded label value."""


@dataclass(frozen=True)
class TraceSetting:
    rate: int
    levels: tuple[str, ...]
    mode: str = ""

    @classmethod
    def parse(cls, body: Any) -> TraceSetting:
        if not isinstance(body, dict):
            raise TraceControlError("parse", "trace setting is not a JSON object")
        try:
            levels = tuple(str(x) for x in body.get("trace_level") or ())
            return cls(rate=int(body.get("trace_rate", 0)), levels=levels, mode=str(body.get("trace_mode", "")))
        except (TypeError, ValueError) as exc:
            raise TraceControlError("parse", f"trace setting has a bad trace_rate: {exc}") from exc


class TritonTraceControl:
    def __init__(self, triton_http_url: str, http: httpx.AsyncClient, timeout_secs: float = 5.0) -> None:
        self.url = triton_http_url.rstrip("/")
        self.http = http
        self.timeout = timeout_secs

    def _path(self, model: str | None) -> str:
        return f"/v2/models/{quote(model, safe='')}/trace/setting" if model else "/v2/trace/setting"

    async def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> TraceSetting:
        try:
            if method == "GET":
                resp = await self.http.get(self.url + path, timeout=self.timeout)
            else:
                resp = await self.http.post(self.url + path, json=body, timeout=self.timeout)
        except httpx.TimeoutException as exc:
            raise TraceControlError("timeout", f"{path} timed out") from exc
        except httpx.HTTPError as exc:
            raise TraceControlError("connect", f"{path} unreachable: {exc!r}") from exc
        if resp.status_code != 200:
            raise TraceControlError("http_status", f"{path} answered {resp.status_code}: {resp.text[:200]}")
        try:
            return TraceSetting.parse(orjson.loads(resp.content))
        except orjson.JSONDecodeError as exc:
            raise TraceControlError("parse", f"{path} is not JSON") from exc

    async def get(self, model: str | None = None) -> TraceSetting:
        return await self._call("GET", self._path(model))

    async def set(self, model: str | None, rate: int, levels: tuple[str, ...]) -> TraceSetting:
        return await self._call("POST", self._path(model), {"trace_rate": str(rate), "trace_level": list(levels)})

    async def clear(self, model: str) -> TraceSetting:
        """Drop a model's own settings: it follows the global ones again."""
        return await self._call("POST", self._path(model), {"trace_rate": None, "trace_level": None})
