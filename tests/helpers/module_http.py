"""One httpx client for every request a test module makes, closed when the module ends.

``httpx.get`` builds a client per call, and building one (its TLS context) costs about 50 ms of CPU on the
2-core CI machine: modules that poll servers several times a second, or query Prometheus for every dashboard
panel, kept a core busy with it. A module calls ``module_http()`` and imports ``close_module_http`` (an
autouse fixture) into its namespace.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

import httpx
import pytest

__all__ = ["close_module_http", "module_http"]


@functools.cache
def module_http() -> httpx.Client:
    return httpx.Client(timeout=10)


@pytest.fixture(scope="module", autouse=True)
def close_module_http() -> Iterator[None]:
    yield
    module_http().close()
    module_http.cache_clear()
