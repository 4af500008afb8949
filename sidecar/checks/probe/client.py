"""How a probe reaches Triton: the ``ProbeClient`` protocol (tests pass a fake) and its implementation over
the official ``tritonclient`` (HTTP or gRPC, asyncio flavours). A failure is a ``ProbeFailure`` with a reason
token; the check never sees a transport exception."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import numpy as np

from sidecar.checks.probe.config import ProbeInput
from sidecar.errors import ProbeFailure

__all__ = ["ProbeAnswer", "ProbeClient", "ProbeFailure", "TritonProbeClient"]

_NP = {
    "BOOL": np.bool_,
    "INT8": np.int8,
    "INT16": np.int16,
    "INT32": np.int32,
    "INT64": np.int64,
    "UINT8": np.uint8,
    "UINT16": np.uint16,
    "UINT32": np.uint32,
    "UINT64": np.uint64,
    "FP16": np.float16,
    "FP32": np.float32,
    "FP64": np.float64,
}


@dataclass(frozen=True)
class ProbeAnswer:
    """One output as Triton returned it."""

    datatype: str
    shape: tuple[int, ...]
    values: Any  # numpy array


class ProbeClient(Protocol):
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
    ) -> Mapping[str, ProbeAnswer]: ...

    async def close(self) -> None: ...


class TritonProbeClient:
    """``tritonclient.http.aio`` or ``tritonclient.grpc.aio``; ``url`` is ``host:port`` of that API."""

    def __init__(self, url: str, *, protocol: Literal["http", "grpc"] = "http") -> None:
        self.ssl = url.startswith("https://")  # the HTTP API behind TLS (gRPC: plain, as Triton serves it)
        self.url = url.removeprefix("http://").removeprefix("https://").rstrip("/")
        self.protocol = protocol
        self._client: Any = None

    def _mod(self) -> Any:
        if self.protocol == "grpc":
            import tritonclient.grpc.aio as mod
        else:
            import tritonclient.http.aio as mod
        return mod

    def _get(self) -> Any:
        if self._client is None:
            kw = {"ssl": True} if self.ssl and self.protocol == "http" else {}
            self._client = self._mod().InferenceServerClient(self.url, **kw)
        return self._client

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
        mod = self._mod()
        from tritonclient.utils import InferenceServerException

        reqs = []
        for i in inputs:
            t = mod.InferInput(i.name, list(i.shape), i.datatype)
            t.set_data_from_numpy(np.asarray(i.data, dtype=_NP[i.datatype]).reshape(i.shape))
            reqs.append(t)
        wanted = [mod.InferRequestedOutput(n) for n in outputs]
        try:
            result = await asyncio.wait_for(
                self._get().infer(
                    model, reqs, model_version=version, outputs=wanted, request_id=request_id, headers=dict(headers)
                ),
                timeout_secs,
            )
        except TimeoutError:
            raise ProbeFailure("timeout", f"no answer in {timeout_secs:g}s") from None
        except InferenceServerException as exc:
            raise ProbeFailure("server_error", str(exc.message() or exc)) from None
        except (OSError, ConnectionError) as exc:
            raise ProbeFailure("unavailable", str(exc) or type(exc).__name__) from None
        except Exception as exc:  # aiohttp / grpc transport errors have no common base we can import lazily
            raise ProbeFailure("unavailable", f"{type(exc).__name__}: {exc}") from None
        out: dict[str, ProbeAnswer] = {}
        for name in outputs:
            meta = result.get_output(name)
            if meta is None:
                continue
            if isinstance(meta, dict):
                dtype, shape = str(meta.get("datatype", "")), tuple(int(d) for d in meta.get("shape", ()))
            else:
                dtype, shape = str(meta.datatype), tuple(int(d) for d in meta.shape)
            out[name] = ProbeAnswer(dtype, shape, result.as_numpy(name))
        return out

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.close()
