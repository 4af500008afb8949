"""The HTTP server ``sidecar run`` serves with, and the connection-level limits uvicorn does not have itself.

uvicorn times out idle keep-alive connections but not a client that sends its request *headers* slowly (a
slowloris holds a connection for as long as it trickles bytes), nor a socket that opens and sends nothing.
``protocol_class`` returns uvicorn's own protocol (httptools when installed, else h11) with one timer more:
from the moment a connection opens (or the first byte of a next request arrives) until that request's head
is complete. When it fires, the connection is closed, counted and logged. Body read time is bounded
separately, per request, by ``RequestGuard.read_body``.

The same protocol takes a slot in a ``ConnectionTable`` (``sidecar.httpconns``) when a connection opens:
connections beyond ``server.max_connections`` are served only for the probes, idle sockets are evicted to
make room, and uvicorn's ``limit_concurrency`` (503 to everything, probes included) is not used.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sidecar.httpconns import PROBE_PATHS, ConnectionTable, fd_budget

if TYPE_CHECKING:
    import uvicorn
    from prometheus_client import CollectorRegistry
    from starlette.types import Receive, Scope, Send

    from sidecar.config import ServerConfig

__all__ = ["protocol_class", "uvicorn_server"]

_BUSY_BODY = b"every connection slot is busy; retry later\n"
_BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\nretry-after: 1\r\n"
    b"connection: close\r\ncontent-length: %d\r\n\r\n%s" % (len(_BUSY_BODY), _BUSY_BODY)
)
_CAP_BODY = b"connection limit reached (server.max_connections); retry later\n"


def _base() -> type[Any]:
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

        return HttpToolsProtocol
    except ImportError:  # uvicorn without the [standard] extra
        from uvicorn.protocols.http.h11_impl import H11Protocol

        return H11Protocol


def protocol_class(
    header_timeout_secs: float,
    on_timeout: Callable[[], None],
    logger: logging.Logger,
    base: type[Any] | None = None,
    connections: ConnectionTable | None = None,
) -> type[Any]:
    """A uvicorn HTTP protocol class that closes connections whose request head is too slow and, given a
    ``ConnectionTable``, keeps to its slots."""
    parent = base or _base()

    def timed_out(peer: str) -> None:
        on_timeout()
        message = f"closed a connection from {peer}: request head not complete within {header_timeout_secs:g}s"
        if connections is not None:
            connections.count("header_timeout", message)
        else:
            logger.warning("%s", message)

    class HeaderTimed(parent):  # type: ignore[misc,valid-type]
        _header_timer: asyncio.TimerHandle | None = None
        _timed_cycle: Any = None
        _slot: str | None = None
        _served_app: Any = None
        app: Any  # set by uvicorn's __init__; a probe-slot connection wraps it

        def _arm(self) -> None:
            self._disarm()
            self._timed_cycle = self.cycle
            self._header_timer = self.loop.call_later(header_timeout_secs, self._headers_too_slow)
            if connections is not None:
                connections.waiting(self)

        def _disarm(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _headers_too_slow(self) -> None:
            self._header_timer = None
            timed_out(f"{self.client[0]}:{self.client[1]}" if self.client else "?")
            self.transport.close()

        def _check(self) -> None:
            # Both protocols create a new cycle object once a complete request head has been parsed.
            if self._header_timer is not None and self.cycle is not None and self.cycle is not self._timed_cycle:
                self._disarm()
                if connections is not None:
                    connections.busy(self)

        def close_idle(self) -> None:
            self._disarm()
            self.transport.close()

        def connection_made(self, transport: asyncio.Transport) -> None:
            super().connection_made(transport)
            if connections is not None:
                self._slot = connections.admit(self)
                if self._slot is None:
                    transport.write(_BUSY)
                    transport.close()
                    return
                if self._slot == "probe":
                    self._served_app = self.app
                    self.app = self._probes_only  # only this connection's requests
            self._arm()

        async def _probes_only(self, scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http" or scope["path"] in PROBE_PATHS:
                await self._served_app(scope, receive, send)
                return
            assert connections is not None
            connections.count(
                "cap", f"answered 503 to {scope['path']}: over server.max_connections ({connections.max_general})"
            )
            headers = [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"retry-after", b"1"),
                (b"connection", b"close"),
                (b"content-length", str(len(_CAP_BODY)).encode()),
            ]
            await send({"type": "http.response.start", "status": 503, "headers": headers})
            await send({"type": "http.response.body", "body": _CAP_BODY})

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            if connections is not None:
                connections.release(self)
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            # The first bytes after a finished response start the next head; an idle keep-alive connection
            # is left to uvicorn's keep-alive timeout and never counted here.
            if self._header_timer is None and (self.cycle is None or self.cycle.response_complete):
                self._arm()
            super().data_received(data)
            self._check()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            # Idle in keep-alive until the next request: evictable, like a socket that sent nothing yet.
            if connections is not None and self.timeout_keep_alive_task is not None:
                connections.waiting(self)

    HeaderTimed.__name__ = f"HeaderTimed{parent.__name__}"
    return HeaderTimed


def uvicorn_server(
    app: Any,
    srv: ServerConfig,
    *,
    registry: CollectorRegistry,
    on_header_timeout: Callable[[], None] | None = None,
    logger: logging.Logger | None = None,
) -> uvicorn.Server:
    """The uvicorn server ``sidecar run`` serves with (the benchmarks build theirs here too, so they measure
    the same protocol, limits and loop): the caller runs it with ``sidecar.runtime.run``.

    Connection limits are fitted under the file-descriptor limit here (raising the soft limit if need be)
    and said in one log line; refusals go to ``sidecar_http_connections_refused_total`` in ``registry``.
    """
    import uvicorn

    log = logger or logging.getLogger("sidecar.http")
    budget = fd_budget(srv.max_connections, srv.probe_reserve_connections)
    (log.warning if budget.clamped_from != budget.general else log.info)("%s", budget.line())
    table = ConnectionTable(max_connections=budget.general, probe_reserve=budget.probe, registry=registry, logger=log)
    return uvicorn.Server(
        uvicorn.Config(
            app,
            log_level="warning",
            access_log=False,
            lifespan="on",
            http=protocol_class(srv.header_timeout_secs, on_header_timeout or (lambda: None), log, connections=table),
            timeout_keep_alive=int(srv.keep_alive_timeout_secs),
            h11_max_incomplete_event_size=srv.max_header_bytes,
            # No limit_concurrency: it answers 503 to every request, /healthz included, once that many
            # connections are open. The ConnectionTable above keeps the cap and the probes' reserve.
        )
    )
