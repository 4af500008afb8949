"""Connection slots for the HTTP server: a cap for requests, a reserve only the probes may use, and eviction
of idle sockets, so a flood of connections never fails the liveness probe.

uvicorn's own ``limit_concurrency`` answers 503 to *every* request once that many connections are open,
``/healthz`` included, and counts nothing. Instead every connection takes a slot when it opens:

- a **general** slot while fewer than ``server.max_connections`` hold one: everything is served;
- else a **probe** slot while fewer than ``server.probe_reserve_connections`` hold one: ``/healthz`` and
  ``/readyz`` are served, any other request gets 503 + Retry-After and the connection is closed
  (``reason="cap"``);
- else the connection that has waited longest for a request head (a new socket that sent nothing yet, or a
  keep-alive one between requests) is closed to make room (``reason="evicted"``), so idle sockets can never
  hold the probes out; when every connection is busy with a request, the new one is answered 503 and closed
  (``reason="full"``).

Idle sockets are also closed by the header timeout (``reason="header_timeout"``, see ``sidecar.httpserver``).
The two caps together stay below the process's file-descriptor limit (``fd_budget``).
"""

from __future__ import annotations

import logging
import resource
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Literal, Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge

from sidecar.errors import ConfigError

__all__ = ["FD_RESERVE", "PROBE_PATHS", "REASONS", "ConnectionTable", "FdBudget", "fd_budget"]

Slot = Literal["general", "probe"]
REASONS = ("cap", "full", "evicted", "header_timeout")
PROBE_PATHS = frozenset({"/healthz", "/readyz"})
# File descriptors kept out of the connection budget: the store (SQLite + WAL), log and trace files, the
# clients to Triton, Alertmanager and the other exporters, and the listening socket.
FD_RESERVE = 256
_LOG_EVERY_SECS = 10.0


class Closable(Protocol):
    """What the table needs of a connection: closing it."""

    def close_idle(self) -> None: ...


class FdBudget:
    """How many connections fit under RLIMIT_NOFILE, and what start-up had to do to make them fit."""

    def __init__(self, general: int, probe: int, soft: int, hard: int, raised_from: int | None, clamped_from: int):
        self.general = general
        self.probe = probe
        self.soft = soft
        self.hard = hard
        self.raised_from = raised_from
        self.clamped_from = clamped_from

    def line(self) -> str:
        head = (
            f"connections: {self.general} for requests (server.max_connections) + {self.probe} kept for "
            f"/healthz and /readyz (server.probe_reserve_connections); file descriptors: limit {self.soft} "
            f"(hard {self.hard}), {FD_RESERVE} kept for files and clients"
        )
        if self.raised_from is not None:
            head += f"; soft limit raised from {self.raised_from}"
        if self.clamped_from != self.general:
            head += f"; server.max_connections {self.clamped_from} lowered to {self.general} to fit"
        return head


def _finite(n: int) -> int:
    return 1 << 30 if n == resource.RLIM_INFINITY else n


def fd_budget(max_connections: int, probe_reserve: int) -> FdBudget:
    """Fit ``max_connections + probe_reserve`` under the file-descriptor limit, ``FD_RESERVE`` kept aside.

    The soft limit is raised toward the hard one when it is too low (what Go's runtime does at start); what
    still does not fit lowers ``max_connections``. A limit too low for even a few connections is a
    ConfigError naming the field.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = max_connections + probe_reserve + FD_RESERVE
    raised_from = None
    if _finite(soft) < need:
        target = min(need, _finite(hard))
        if target > soft:
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
                raised_from, soft = soft, target
            except (ValueError, OSError):  # a container may forbid it; then the limit is what it is
                pass
    room = _finite(soft) - FD_RESERVE - probe_reserve
    if room < 1:
        raise ConfigError(
            "server.max_connections",
            f"the file-descriptor limit ({soft}, hard {hard}) leaves no room for connections after "
            f"{FD_RESERVE} reserved and {probe_reserve} for probes; raise `ulimit -n`",
        )
    general = min(max_connections, room)
    return FdBudget(general, probe_reserve, _finite(soft), _finite(hard), raised_from, max_connections)


class ConnectionTable:
    """The slots of one server's connections; every refusal counted by reason, logged at most every 10 s."""

    def __init__(
        self,
        *,
        max_connections: int,
        probe_reserve: int,
        registry: CollectorRegistry,
        logger: logging.Logger | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_general = max_connections
        self.max_probe = probe_reserve
        self._held: dict[Slot, int] = {"general": 0, "probe": 0}
        self._slots: dict[Closable, Slot] = {}
        self._waiting: OrderedDict[Closable, None] = OrderedDict()
        self._log = logger or logging.getLogger("sidecar.http")
        self._mono = monotonic
        self._last_log: dict[str, float] = {}
        self._unlogged: dict[str, int] = dict.fromkeys(REASONS, 0)
        self.refused = Counter(
            "sidecar_http_connections_refused",
            "Connections refused or closed by the server's connection limits, by reason: cap (a request other "
            "than a probe on a probe-reserve slot, answered 503), full (every slot busy, answered 503 at "
            "accept), evicted (an idle connection closed to make room), header_timeout (request head not "
            "complete in time).",
            ["reason"],
            registry=registry,
        )
        for reason in REASONS:
            self.refused.labels(reason)
        self.open = Gauge(
            "sidecar_http_connections_open",
            "Open HTTP connections, by slot (general or probe).",
            ["slot"],
            registry=registry,
        )
        self.limit = Gauge(
            "sidecar_http_connections_limit",
            "Connection slots, by kind (general or probe).",
            ["slot"],
            registry=registry,
        )
        self.limit.labels("general").set(max_connections)
        self.limit.labels("probe").set(probe_reserve)
        for slot in ("general", "probe"):
            self.open.labels(slot).set(0)

    @property
    def open_count(self) -> int:
        return len(self._slots)

    def admit(self, conn: Closable) -> Slot | None:
        """A slot for a new connection, evicting the longest-idle one when all are held; None: refuse it."""
        slot = self._free()
        if slot is None and self._waiting:
            victim = next(iter(self._waiting))
            self.release(victim)
            self.count("evicted", f"closed an idle connection to make room: all {self.total} slots are held")
            victim.close_idle()
            slot = self._free()
        if slot is None:
            self.count("full", f"refused a connection: all {self.total} slots are busy with requests")
            return None
        self._slots[conn] = slot
        self._held[slot] += 1
        self.open.labels(slot).set(self._held[slot])
        return slot

    @property
    def total(self) -> int:
        return self.max_general + self.max_probe

    def _free(self) -> Slot | None:
        if self._held["general"] < self.max_general:
            return "general"
        if self._held["probe"] < self.max_probe:
            return "probe"
        return None

    def release(self, conn: Closable) -> None:
        """Free the connection's slot; safe to call twice."""
        self._waiting.pop(conn, None)
        slot = self._slots.pop(conn, None)
        if slot is not None:
            self._held[slot] -= 1
            self.open.labels(slot).set(self._held[slot])

    def waiting(self, conn: Closable) -> None:
        """The connection waits for a request head: it may be evicted, the longest-waiting first."""
        if conn in self._slots:
            self._waiting[conn] = None
            self._waiting.move_to_end(conn)

    def busy(self, conn: Closable) -> None:
        """The connection has a request in hand: never evicted."""
        self._waiting.pop(conn, None)

    def count(self, reason: str, message: str) -> None:
        """Count a refusal; log it, or the number of them since the last line, at most once per 10 s."""
        self.refused.labels(reason).inc()
        now = self._mono()
        last = self._last_log.get(reason)
        if last is not None and now - last < _LOG_EVERY_SECS:
            self._unlogged[reason] += 1
            return
        more = self._unlogged[reason]
        self._unlogged[reason] = 0
        self._last_log[reason] = now
        self._log.warning("%s%s", message, f" ({more} more like it since the last line)" if more else "")
