"""Process-wide runtime settings the server commands apply once, after start-up and before serving."""

from __future__ import annotations

import asyncio
import atexit
import gc
from collections.abc import Callable, Coroutine
from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, Field

from sidecar.configbase import StrictModel

__all__ = ["RuntimeConfig", "loop_name", "run", "tune_gc"]

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


def _thresholds(v: tuple[int, int, int]) -> tuple[int, int, int]:
    g0, g1, g2 = v
    if not 100 <= g0 <= 10_000_000:
        raise ValueError(f"the first (gen-0) threshold must be 100..10000000, not {g0} (0 turns the collector off)")
    if not (1 <= g1 <= 1000 and 1 <= g2 <= 1000):
        raise ValueError(f"the second and third thresholds must be 1..1000, not {g1} and {g2}")
    return v


class RuntimeConfig(StrictModel):
    """Process-wide settings of the Python runtime, applied once at the end of start-up (``tune_gc``)."""

    gc_threshold: Annotated[tuple[int, int, int], AfterValidator(_thresholds)] = Field(
        (50_000, 20, 100),
        description="Python's cyclic garbage collector thresholds (gc.set_threshold: gen-0 allocations, then how "
        "many gen-0 and gen-1 runs between the next generation's), set after start-up, when everything made so far "
        "is frozen out of the collector's sight (gc.freeze). Higher runs it less often; memory stays bounded: "
        "acyclic garbage is freed at once regardless (docs/reliability-measured.md).",
    )


def tune_gc(cfg: RuntimeConfig | None = None) -> None:
    """Make the cyclic garbage collector cheap for a long-running ingest server: the one place the process's
    collector is set (``sidecar run``, the demo, and the benchmarks, which call this same function).

    Span and event ingestion allocates many short-lived containers; with CPython's default thresholds
    (700, 10, 10) the collector runs every few requests and its full collections re-scan every long-lived object
    (the modules, the config, the registry, and the stores and windows, which grow with the data held): on the
    trace-file path that was 40% of the reader's CPU (docs/reliability-measured.md). ``gc.freeze()`` moves
    everything that exists after start-up out of the collector's sight, and higher thresholds
    (``runtime.gc_threshold``) run it less often. Reference counting still frees acyclic garbage at once, so
    memory stays bounded by the components' own limits.
    """
    cfg = cfg or RuntimeConfig()
    gc.collect()
    gc.freeze()
    gc.set_threshold(*cfg.gc_threshold)
    # Frozen objects are never collected, not even by the collection at exit: the service's cycles would still
    # hold its windows' KLL sketches when datasketches (nanobind) checks at shutdown, which then reports every
    # one as leaked. Unfrozen at exit, the last collection frees them (registered once, however often this runs).
    atexit.unregister(gc.unfreeze)
    atexit.register(gc.unfreeze)
