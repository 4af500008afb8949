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
def demo_triton(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A real Triton 2.51 (CPU) serving the demo repository; shared by the tests that only read from it."""
    from sidecar.demo.tritonserver import TritonServer, demo_model_repository

    server = TritonServer(demo_model_repository(), tmp_path_factory.mktemp("triton-demo"))
    server.start()
    try:
        yield server
    finally:
        server.stop()
