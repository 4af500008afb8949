"""Shared helpers for the traces tests (imported by module name; pytest's rootdir import mode)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import uvicorn
from prometheus_client import CollectorRegistry
from waiting import wait_until

from sidecar.app import create_app
from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.demo.tritonserver import free_port
from sidecar.service import Service
from sidecar.wiring.traces import build

DATA = Path(__file__).parent.parent / "data" / "traces"


def make_service(
    traces: dict[str, Any] | None = None,
    server: dict[str, Any] | None = None,
    clock: FakeClock | None = None,
    registry: CollectorRegistry | None = None,
) -> Service:
    cfg = parse_config(
        {"store": {"path": ":memory:"}, "server": server or {}, "traces": {"enabled": True, **(traces or {})}}
    )
    return Service(cfg, clock=clock or FakeClock(), registry=registry or CollectorRegistry(), factories=[build])


def sample(registry: CollectorRegistry, name: str, labels: dict[str, str] | None = None) -> float:
    v = registry.get_sample_value(name, labels or {})
    return 0.0 if v is None else v


@contextlib.contextmanager
def live_sidecar(
    traces: dict[str, Any] | None = None,
    registry: CollectorRegistry | None = None,
) -> Iterator[tuple[str, Service]]:
    """The real app under uvicorn in a thread on a free loopback port; stopped even when the test fails."""
    svc = Service(
        parse_config({"store": {"path": ":memory:"}, "traces": {"enabled": True, **(traces or {})}}),
        registry=registry or CollectorRegistry(),
        factories=[build],
    )
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(create_app(svc), host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        if not wait_until(lambda: server.started or not thread.is_alive(), 20) or not server.started:
            raise RuntimeError("the sidecar did not start")
        yield f"http://127.0.0.1:{port}", svc
    finally:
        server.should_exit = True
        thread.join(15)


def wait_for(cond: Callable[[], bool], secs: float) -> bool:
    """Poll a condition until a deadline (for real processes that work at their own pace)."""
    return bool(wait_until(cond, secs))
