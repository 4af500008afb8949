"""Connection floods against the real server (``uvicorn_server`` + ``create_app``, as ``sidecar run`` builds them)
on a loopback port: the probes answer, requests over the cap are refused with a count, idle sockets close.

The server runs in a thread on its own loop; the test is the client, with plain blocking sockets. Nothing
sleeps: the test waits on the server's own gauges and on sockets returning b'' when the server closes them.
"""

from __future__ import annotations

import contextlib
import http.client
import resource
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from waiting import wait_until

from sidecar.app import create_app
from sidecar.config import parse_config
from sidecar.httpserver import uvicorn_server
from sidecar.instance import bind_listener
from sidecar.runtime import run
from sidecar.service import Service
from sidecar.store import Store
from sidecar.wiring.events import build as events

FLOOD = 2000
PROBE_RESERVE = 8
BUSY_HEAD = b"POST /v1/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"


@dataclass
class Live:
    port: int
    registry: CollectorRegistry

    def value(self, name: str, **labels: str) -> float:
        return self.registry.get_sample_value(name, labels) or 0.0

    def refused(self, reason: str) -> float:
        return self.value("sidecar_http_connections_refused_total", reason=reason)

    def open(self, slot: str) -> float:
        return self.value("sidecar_http_connections_open", slot=slot)

    def connect(self) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=30)

    def get(self, path: str, method: str = "GET") -> tuple[int, dict[str, str], bytes, float]:
        """One request on a fresh connection (closed after): status, headers, body, seconds taken."""
        t0 = time.perf_counter()
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request(method, path, headers={"Connection": "close"})
            resp = conn.getresponse()
            body = resp.read()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, body, time.perf_counter() - t0
        finally:
            conn.close()


def _fd_room(need: int) -> None:
    """Client and server sockets share this process: raise the soft limit toward the hard one, or skip."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < need:
        if hard != resource.RLIM_INFINITY and hard < need:
            pytest.skip(f"RLIMIT_NOFILE hard limit {hard} is below the {need} descriptors this flood needs")
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))


@contextlib.contextmanager
def _server(**server: Any) -> Iterator[Live]:
    cfg = parse_config({"triton": {"enabled": False}, "store": {"path": ":memory:"}, "server": {"port": 0, **server}})
    svc = Service(cfg, registry=CollectorRegistry(), store=Store(":memory:"), factories=[events])
    sock = bind_listener("127.0.0.1", 0)
    srv = uvicorn_server(create_app(svc), cfg.server, registry=svc.registry)
    errors: list[BaseException] = []

    def serve() -> None:
        try:
            run(srv.serve(sockets=[sock]))
        except BaseException as exc:  # surfaced by the test, not lost in the thread
            errors.append(exc)

    thread = threading.Thread(target=serve, name="flood-server", daemon=True)
    thread.start()
    try:
        assert wait_until(lambda: srv.started or errors, 30), "server did not start"
        assert not errors, errors
        yield Live(sock.getsockname()[1], svc.registry)
    finally:
        srv.should_exit = True
        srv.force_exit = True  # do not wait for the held requests' bodies
        thread.join(30)
        sock.close()
    assert not errors, errors


def _closed_by_server(s: socket.socket) -> bool:
    """Block until the server closes ``s``: recv returns b'' (after anything it wrote first) or a reset."""
    try:
        while s.recv(4096):
            pass
    except ConnectionResetError:
        pass
    return True


def test_a_flood_of_2000_connections_leaves_the_probes_answering() -> None:
    _fd_room(2 * FLOOD + 512)
    held: list[socket.socket] = []
    with _server(
        max_connections=FLOOD - PROBE_RESERVE,
        probe_reserve_connections=PROBE_RESERVE,
        max_inflight_requests=FLOOD,
        header_timeout_secs=2,
        body_timeout_secs=600,
    ) as live:
        try:
            # Every general slot held by a push whose body never comes: busy connections, never evicted.
            busy = FLOOD - PROBE_RESERVE
            for _ in range(busy):
                s = live.connect()
                s.sendall(BUSY_HEAD)
                held.append(s)
            assert wait_until(lambda: live.value("sidecar_http_inflight_requests") == busy, 60), (
                live.value("sidecar_http_inflight_requests"),
                live.open("general"),
            )
            assert live.open("general") == busy
            # Every probe slot held by a socket that sends nothing: 2,000 connections held by the server.
            idle = [live.connect() for _ in range(PROBE_RESERVE)]
            held.extend(idle)
            assert wait_until(lambda: live.open("probe") == PROBE_RESERVE, 30)
            assert live.open("general") + live.open("probe") == FLOOD

            # The liveness probe on the main port: all slots are held, so the longest-idle socket makes room.
            status, _, body, secs = live.get("/healthz")
            assert (status, body) == (200, b'{"status":"ok"}'), (status, body)
            assert live.refused("evicted") == 1
            assert _closed_by_server(idle[0])
            assert wait_until(lambda: live.open("probe") == PROBE_RESERVE - 1, 30)

            # An ordinary request beyond the cap: a probe slot is free, but it is for the probes only.
            status, headers, body, _ = live.get("/metrics")
            assert status == 503 and headers["retry-after"] == "1" and headers["connection"] == "close"
            assert b"server.max_connections" in body
            assert live.refused("cap") == 1
            assert wait_until(lambda: live.open("probe") == PROBE_RESERVE - 1, 30)
            assert live.get("/readyz", "HEAD")[0] in (200, 503)  # readiness answers too (HEAD, no body)
            assert live.refused("cap") == 1

            # The idle sockets that were not evicted are closed by the header timeout, each counted once.
            assert all(_closed_by_server(s) for s in idle[1:])
            assert wait_until(lambda: live.refused("header_timeout") == PROBE_RESERVE - 1, 30)
            assert wait_until(lambda: live.open("probe") == 0, 30)
            assert live.refused("full") == 0
            assert secs < 5  # bounded, not a benchmark: the figure is in docs/security.md
        finally:
            for s in held:
                s.close()


def test_idle_sockets_over_the_cap_make_room_instead_of_failing_requests() -> None:
    """The reported case: more idle sockets than the cap used to 503 every request until the header timeout."""
    cap, reserve, flood = 50, 4, 300
    _fd_room(2 * flood + 512)
    with _server(max_connections=cap, probe_reserve_connections=reserve, header_timeout_secs=60) as live:
        sockets = [live.connect() for _ in range(flood)]
        try:
            # Each socket over cap + reserve closed the longest-idle one: the server holds cap + reserve.
            evicted = flood - cap - reserve
            assert wait_until(lambda: live.refused("evicted") == evicted, 30), live.refused("evicted")
            assert all(_closed_by_server(s) for s in sockets[:evicted])
            assert live.open("general") == cap and live.open("probe") == reserve
            # Ordinary requests are still served (each evicts an idle socket), not answered 503.
            for _ in range(3):
                status, _, _, _ = live.get("/metrics")
                assert status == 200
            assert live.refused("cap") == 0 and live.refused("full") == 0
            assert live.refused("evicted") >= evicted + 1
        finally:
            for s in sockets:
                s.close()
