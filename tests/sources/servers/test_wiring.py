"""The service builds one server source per configured server, and /readyz carries each one's line."""

from __future__ import annotations

from pathlib import Path

import httpx

from sidecar.config import parse_config
from sidecar.service import Service, default_factories
from sidecar.sources.servers.source import ServerSource
from sidecar.wiring.servers import build


def _config(tmp_path: Path) -> dict[str, object]:
    return {
        "store": {"path": str(tmp_path / "state.sqlite")},
        "triton": {"enabled": False},
        "servers": [
            {"name": "llama", "url": "http://vllm:8000/metrics"},
            {"name": "vision", "url": "http://triton:8002/metrics", "profile": "triton"},
        ],
    }


def test_the_default_factories_include_the_servers_builder() -> None:
    assert build in [getattr(f, "__wrapped__", f) for f in default_factories()]  # wrapped: wiring/tokens.py


async def test_one_source_per_server_each_in_readyz(tmp_path: Path) -> None:
    http = httpx.AsyncClient(transport=httpx.MockTransport(lambda r: httpx.Response(200, text="x 1\n")))
    service = Service(parse_config(_config(tmp_path)), http=http, factories=[build])
    try:
        sources = [c for c in service.components if isinstance(c, ServerSource)]
        assert [s.config.name for s in sources] == ["llama", "vision"]
        for s in sources:
            await s.scrape_once()
        ok, details = service.readiness()
        assert not ok
        text = str(details)
        assert "server llama at http://vllm:8000/metrics: the exposition (1 families) matches no profile" in text
        assert "profile triton matches none" in text
    finally:
        await service.shutdown()
