from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[2] / "data" / "servers"


@pytest.fixture
def fixture_text() -> Callable[[str], str]:
    """The text of a source-built fixture in tests/data/servers/ (headers cite the server's source)."""
    return lambda name: (DATA / name).read_text()
