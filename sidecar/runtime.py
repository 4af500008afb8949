"""Process-wide runtime settings the server commands apply once, after start-up and before serving."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["loop_name", "run", "tune_gc"]

T = TypeVar("T")


def _uvloop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    try:
        import uvloop
    except ImportError:  # uvicorn without its [standard] extra
        return None
    return uvloop.new_event_loop


def loop_name() -> str:
    return "uvloop" if _uvloop_factory() is not None else "asyncio"


def run(main: Coroutine[Any, Any, T]) -> T:
    """Run the server's coroutine on uvloop when it is installed (it comes with ``uvicorn[standard]``).

    ``asyncio.run`` would pick the standard loop, where uvicorn's own runner prefers uvloop; ``bench_otlp.py``
    (``SIDECAR_BENCH_LOOP=asyncio`` for the standard loop) could not tell the two apart on this noisy 2-CPU
    machine, so this follows uvicorn rather than a measured gain.
    """
    factory = _uvloop_factory()
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)


def tune_gc() -> None:
    """Make the cyclic garbage collector cheap for a long-running ingest server.

    Span and event ingestion allocates many short-lived containers; with CPython's default gen-0 threshold
    (700) the collector runs every few requests and re-scans the modules, config and registry that live for
    the whole process (measured here at 3-4 us per span, the largest single cost on the OTLP path).
    ``gc.freeze()`` moves everything that exists after start-up out of the collector's sight, and a higher gen-0
    threshold runs it less often. Reference counting still frees acyclic garbage at once, so memory stays
    bounded by the components' own limits.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)
