"""One NVML call at a time: a failure is skipped for that field only and counted by field and NVML error; a
field NVML says is NOT_SUPPORTED on a GPU is not asked again for that GPU; GPU_IS_LOST and UNINITIALIZED
become exceptions that end the GPU's or the whole sample."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pynvml
from prometheus_client import Counter

from sidecar.errors import GpuLost, NvmlUninitialized

__all__ = [
    "MAX_CMDLINE_BYTES",
    "MISSING",
    "GpuLost",
    "NvmlCalls",
    "Uninitialized",
    "read_cmdline",
    "read_process_name",
    "reason",
    "split_cmdline",
    "text",
]

# A stub's argv (binary, model path, shm names, instance) is a few hundred bytes; a longer line is cut here.
MAX_CMDLINE_BYTES = 4096
MAX_CMDLINE_ARGS = 32

_REASONS: dict[int, str] = {
    pynvml.NVML_ERROR_NOT_SUPPORTED: "not_supported",
    pynvml.NVML_ERROR_GPU_IS_LOST: "gpu_is_lost",
    pynvml.NVML_ERROR_NO_PERMISSION: "no_permission",
    pynvml.NVML_ERROR_UNINITIALIZED: "uninitialized",
    pynvml.NVML_ERROR_LIBRARY_NOT_FOUND: "library_not_found",
    pynvml.NVML_ERROR_DRIVER_NOT_LOADED: "driver_not_loaded",
    pynvml.NVML_ERROR_FUNCTION_NOT_FOUND: "function_not_found",
    pynvml.NVML_ERROR_TIMEOUT: "timeout",
    pynvml.NVML_ERROR_NOT_FOUND: "not_found",
}

MISSING = object()


def reason(exc: BaseException) -> str:
    return _REASONS.get(getattr(exc, "value", -1), "other")


def text(v: Any) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


def read_process_name(pid: int) -> str | None:
    """The process's ``comm`` (as ``ps`` shows it, at most 15 characters); None when gone or not visible."""
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as f:
            return f.read().strip() or None
    except OSError:
        return None


def read_cmdline(pid: int) -> bytes:
    """``/proc/<pid>/cmdline``, at most ``MAX_CMDLINE_BYTES``; raises OSError (FileNotFoundError or
    ProcessLookupError when the process is gone, PermissionError when it is not ours to read)."""
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read(MAX_CMDLINE_BYTES)


def split_cmdline(raw: bytes) -> tuple[str, ...]:
    """The NUL-separated argv, bounded in length and argument count."""
    args = raw[:MAX_CMDLINE_BYTES].split(b"\0")
    if args and args[-1] == b"":
        args.pop()
    return tuple(a.decode("utf-8", "replace") for a in args[:MAX_CMDLINE_ARGS])


Uninitialized = NvmlUninitialized  # the name this module's callers use


class NvmlCalls:
    def __init__(self, errors: Counter) -> None:
        self.errors = errors
        self.unsupported: set[tuple[int, str]] = set()

    def call(self, index: int, field: str, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)``, or ``MISSING`` when it failed (counted)."""
        if (index, field) in self.unsupported:
            return MISSING
        try:
            return fn(*args)
        except pynvml.NVMLError as exc:
            why = reason(exc)
            self.errors.labels(field, why).inc()
            if why == "not_supported":
                self.unsupported.add((index, field))
            elif why == "gpu_is_lost":
                raise GpuLost() from exc
            elif why == "uninitialized":
                raise Uninitialized() from exc
            return MISSING
