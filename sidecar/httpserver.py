"""The HTTP server's connection-level limits, which uvicorn does not have itself.

uvicorn times out idle keep-alive connections but not a client that sends its request *headers* slowly (a
slowloris holds a connection for as long as it trickles bytes). ``protocol_class`` returns uvicorn's own
protocol (httptools when installed, else h11) with one timer more: from the moment a connection opens (or
the first byte of a next request arrives) until that request's head is complete. When it fires, the
connection is closed, counted and logged in one line. Body read time is bounded separately, per request,
by ``RequestGuard.read_body``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import uvicorn

    from sidecar.config import ServerConfig

__all__ = ["protocol_class", "uvicorn_server"]


def _base() -> type[Any]:
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

        return HttpToolsProtocol
    except ImportError:  # uvicorn without the [standard] extra
        from uvicorn.protocols.http.h11_impl import H11Protocol

        return H11Protocol


def protocol_class(
    header_timeout_secs: float, on_timeout: Callable[[], None], logger: logging.Logger, base: type[Any] | None = None
) -> type[Any]:
    """A uvicorn HTTP protocol class that closes connections whose request head is too slow."""
    parent = base or _base()

    class HeaderTimed(parent):  # type: ignore[misc,valid-type]
        _header_timer: asyncio.TimerHandle | None = None
        _timed_cycle: Any = None

        def _arm(self) -> None:
            self._disarm()
            self._timed_cycle = self.cycle
            self._header_timer = self.loop.call_later(header_timeout_secs, self._headers_too_slow)

        def _disarm(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _headers_too_slow(self) -> None:
            self._header_timer = None
            on_timeout()
            peer = f"{self.client[0]}:{self.client[1]}" if self.client else "?"
            logger.warning(
                "closed a connection from %s: request head not complete within %gs", peer, header_timeout_secs
            )
            self.transport.close()

        def _check(self) -> None:
            # Both protocols create a new cycle object once a complete request head has been parsed.
            if self._header_timer is not None and self.cycle is not None and self.cycle is not self._timed_cycle:
                self._disarm()

        def connection_made(self, transport: asyncio.Transport) -> None:
            super().connection_made(transport)
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            # The first bytes after a finished response start the next head; an idle keep-alive connection
            # is left to uvicorn's keep-alive timeout and never counted here.
            if self._header_timer is None and (self.cycle is None or self.cycle.response_complete):
                self._arm()
            super().data_received(data)
            self._check()

    HeaderTimed.__name__ = f"HeaderTimed{parent.__name__}"
    return HeaderTimed


def uvicorn_server(app: Any, srv: ServerConfig, on_header_timeout: Callable[[], None]) -> uvicorn.Server:
    """The uvicorn server ``sidecar run`` serves with (the benchmarks build theirs here too, so they measure
    the same protocol, limits and loop): the caller runs it with ``sidecar.runtime.run``."""
    import uvicorn

    return uvicorn.Server(
        uvicorn.Config(
            app,
            log_level="warning",
            access_log=False,
            lifespan="on",
            http=protocol_class(srv.header_timeout_secs, on_header_timeout, logging.getLogger("sidecar.http")),
            timeout_keep_alive=int(srv.keep_alive_timeout_secs),
            h11_max_incomplete_event_size=srv.max_header_bytes,
            limit_concurrency=srv.max_connections,
        )
    )
