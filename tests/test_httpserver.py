"""Connection limits uvicorn lacks: a request head that trickles in is cut off, counted, logged once."""

from __future__ import annotations

import asyncio
import contextlib
import logging

import pytest
import uvicorn
from fastapi import FastAPI

from sidecar.httpserver import protocol_class
from sidecar.instance import bind_listener


async def _serve(
    header_timeout: float, timeouts: list[int], base: type | None = None
) -> tuple[uvicorn.Server, asyncio.Task[None], int]:
    app = FastAPI()

    @app.get("/ok")
    async def ok() -> dict[str, bool]:
        return {"ok": True}

    sock = bind_listener("127.0.0.1", 0)
    cls = protocol_class(header_timeout, lambda: timeouts.append(1), logging.getLogger("test.http"), base=base)
    server = uvicorn.Server(uvicorn.Config(app, http=cls, log_level="warning", lifespan="off"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        await asyncio.sleep(0.01)
    return server, task, sock.getsockname()[1]


def _bases() -> list[type | None]:
    from uvicorn.protocols.http.h11_impl import H11Protocol

    return [None, H11Protocol]  # None: httptools, uvicorn's default when installed


@pytest.mark.parametrize("base", _bases(), ids=["httptools", "h11"])
async def test_a_request_head_that_never_completes_is_closed_and_counted(
    base: type | None, caplog: pytest.LogCaptureFixture
) -> None:
    timeouts: list[int] = []
    server, task, port = await _serve(0.2, timeouts, base)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /ok HTTP/1.1\r\nHost: x\r\n")  # no blank line: the head is never complete
        await writer.drain()
        assert await asyncio.wait_for(reader.read(), timeout=5) == b""  # the server closed it
        assert timeouts == [1]
        assert sum("request head not complete" in r.getMessage() for r in caplog.records) == 1
        # A complete request on a fresh connection is served, and keep-alive still works after it.
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        for _ in range(2):
            writer.write(b"GET /ok HTTP/1.1\r\nHost: x\r\n\r\n")
            await writer.drain()
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=5)
            assert head.startswith(b"HTTP/1.1 200")
            await reader.readexactly(int(head.split(b"content-length: ")[1].split(b"\r\n")[0]))
        writer.close()
        assert timeouts == [1]
    finally:
        server.should_exit = True
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, 5)
