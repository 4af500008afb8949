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


@pytest.mark.parametrize("base", _bases(), ids=["httptools", "h11"])
async def test_slots_on_both_protocols_probe_reserve_and_keep_alive_eviction(base: type | None) -> None:
    from prometheus_client import CollectorRegistry

    from sidecar.httpconns import ConnectionTable

    registry = CollectorRegistry()
    table = ConnectionTable(max_connections=1, probe_reserve=1, registry=registry)
    app = FastAPI()

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/other")
    async def other() -> dict[str, bool]:
        return {"ok": True}

    sock = bind_listener("127.0.0.1", 0)
    cls = protocol_class(60, lambda: None, logging.getLogger("test.http"), base=base, connections=table)
    server = uvicorn.Server(uvicorn.Config(app, http=cls, log_level="warning", lifespan="off"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    port = sock.getsockname()[1]

    def refused(reason: str) -> float:
        return registry.get_sample_value("sidecar_http_connections_refused_total", {"reason": reason}) or 0.0

    async def ask(writer: asyncio.StreamWriter, reader: asyncio.StreamReader, path: str) -> bytes:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=5)
        await reader.readexactly(int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0]))
        return head

    try:
        while not server.started:
            await asyncio.sleep(0.01)
        r1, w1 = await asyncio.open_connection("127.0.0.1", port)  # the general slot
        assert (await ask(w1, r1, "/other")).startswith(b"HTTP/1.1 200")  # now idle in keep-alive
        r2, w2 = await asyncio.open_connection("127.0.0.1", port)  # the probe slot
        assert (await ask(w2, r2, "/healthz")).startswith(b"HTTP/1.1 200")
        head = await ask(w2, r2, "/other")
        assert head.startswith(b"HTTP/1.1 503") and b"retry-after: 1" in head.lower()
        assert await asyncio.wait_for(r2.read(), timeout=5) == b""  # Connection: close
        assert refused("cap") == 1
        # Both slots held again (a new probe-slot socket), then one more: the keep-alive one idle longest goes.
        r3, w3 = await asyncio.open_connection("127.0.0.1", port)
        assert (await ask(w3, r3, "/healthz")).startswith(b"HTTP/1.1 200")
        r4, w4 = await asyncio.open_connection("127.0.0.1", port)
        assert await asyncio.wait_for(r1.read(), timeout=5) == b""
        assert refused("evicted") == 1
        assert (await ask(w4, r4, "/other")).startswith(b"HTTP/1.1 200")  # took the freed general slot
        for w in (w1, w2, w3, w4):
            w.close()
    finally:
        server.should_exit = True
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, 5)


async def test_when_every_slot_is_mid_request_a_new_connection_gets_503_at_once() -> None:
    from prometheus_client import CollectorRegistry

    from sidecar.httpconns import ConnectionTable

    registry = CollectorRegistry()
    table = ConnectionTable(max_connections=1, probe_reserve=1, registry=registry)
    release = asyncio.Event()
    entered: list[str] = []
    app = FastAPI()

    @app.get("/healthz")  # a probe that hangs, so the probe slot is busy too
    async def healthz() -> dict[str, str]:
        entered.append("healthz")
        await release.wait()
        return {"status": "ok"}

    @app.get("/hold")
    async def hold() -> dict[str, bool]:
        entered.append("hold")
        await release.wait()
        return {"ok": True}

    sock = bind_listener("127.0.0.1", 0)
    cls = protocol_class(60, lambda: None, logging.getLogger("test.http"), connections=table)
    server = uvicorn.Server(uvicorn.Config(app, http=cls, log_level="warning", lifespan="off"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    port = sock.getsockname()[1]
    try:
        while not server.started:
            await asyncio.sleep(0.01)
        held = []
        for path in ("/hold", "/healthz"):
            r, w = await asyncio.open_connection("127.0.0.1", port)
            w.write(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            await w.drain()
            held.append((r, w))
        while len(entered) < 2:  # both requests are in their handlers: nothing is idle, nothing evictable
            await asyncio.sleep(0.01)
        r, w = await asyncio.open_connection("127.0.0.1", port)
        answer = await asyncio.wait_for(r.read(), timeout=5)  # written at accept, then closed
        assert answer.startswith(b"HTTP/1.1 503") and b"retry-after: 1" in answer
        assert registry.get_sample_value("sidecar_http_connections_refused_total", {"reason": "full"}) == 1
        release.set()
        for r, w in held:  # the held requests finish normally
            assert (await asyncio.wait_for(r.readuntil(b"\r\n\r\n"), timeout=5)).startswith(b"HTTP/1.1 200")
            w.close()
        w.close()
    finally:
        server.should_exit = True
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, 5)
