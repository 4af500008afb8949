"""Fixtures of the fault tests; each stops what it started, even when the test fails."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from faultkit import SidecarProcess, StandIn


@pytest.fixture
def stand_in() -> Iterator[StandIn]:
    s = StandIn()
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def sidecar_factory(tmp_path: Path) -> Iterator[Any]:
    started: list[SidecarProcess] = []

    def make(config: dict[str, Any], name: str = "sidecar") -> SidecarProcess:
        wd = tmp_path / name
        wd.mkdir(parents=True, exist_ok=True)
        sc = SidecarProcess(wd, config)
        started.append(sc)
        sc.start()
        return sc

    try:
        yield make
    finally:
        for sc in started:
            sc.stop()
