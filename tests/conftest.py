"""Fixtures shared by every area: a fake clock, a fresh registry, and one real demo Triton per session."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from sidecar.clock import FakeClock

DATA = Path(__file__).parent / "data"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture(scope="session")
def demo_triton_otlp_port() -> int:
    """The loopback port the session's demo Triton sends OpenTelemetry spans to. Only requests that carry a W3C
    ``traceparent`` are traced (Triton samples those whatever its rate; its rate is one in a million otherwise),
    so tests that send none see no tracing; a test that wants the spans serves ``POST /v1/traces`` on this port
    (tests/sources/edge/test_edge_nginx.py)."""
    from sidecar.demo.tritonserver import free_port

    return free_port()


@pytest.fixture(scope="session")
def demo_triton(tmp_path_factory: pytest.TempPathFactory, demo_triton_otlp_port: int) -> Iterator[object]:
    """A real Triton 2.51 (CPU) serving the demo repository; shared by the tests that only read from it."""
    from sidecar.demo.tritonserver import TritonServer, demo_model_repository

    otlp = f"opentelemetry,url=http://127.0.0.1:{demo_triton_otlp_port}/v1/traces"
    tracing = ["mode=opentelemetry", otlp, "rate=1000000", "level=TIMESTAMPS"]
    server = TritonServer(
        demo_model_repository(),
        tmp_path_factory.mktemp("triton-demo"),
        extra_args=[a for t in tracing for a in ("--trace-config", t)],
    )
    server.start()
    try:
        yield server
    finally:
        server.stop()
