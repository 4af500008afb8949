"""Connection slots: the cap, the probes' reserve, eviction of the longest-idle socket, counted refusals."""

from __future__ import annotations

import logging
import resource

import pytest
from prometheus_client import CollectorRegistry

from sidecar.errors import ConfigError
from sidecar.httpconns import FD_RESERVE, ConnectionTable, fd_budget


class Conn:
    def __init__(self, name: str) -> None:
        self.name = name
        self.closed = False

    def close_idle(self) -> None:
        self.closed = True


def _table(registry: CollectorRegistry, general: int = 2, probe: int = 1, **kw: object) -> ConnectionTable:
    return ConnectionTable(max_connections=general, probe_reserve=probe, registry=registry, **kw)  # type: ignore[arg-type]


def _refused(registry: CollectorRegistry, reason: str) -> float:
    return registry.get_sample_value("sidecar_http_connections_refused_total", {"reason": reason}) or 0.0


def _open(registry: CollectorRegistry, slot: str) -> float:
    return registry.get_sample_value("sidecar_http_connections_open", {"slot": slot}) or 0.0


def test_general_slots_first_then_the_probe_reserve(registry: CollectorRegistry) -> None:
    t = _table(registry)
    a, b, c = Conn("a"), Conn("b"), Conn("c")
    assert [t.admit(a), t.admit(b), t.admit(c)] == ["general", "general", "probe"]
    assert (_open(registry, "general"), _open(registry, "probe")) == (2, 1)
    assert registry.get_sample_value("sidecar_http_connections_limit", {"slot": "probe"}) == 1
    t.release(a)
    t.release(a)  # twice is harmless
    assert _open(registry, "general") == 1
    assert t.admit(Conn("d")) == "general"
    for reason in ("cap", "full", "evicted", "header_timeout"):  # every reason reads 0 before it happens
        assert registry.get_sample_value("sidecar_http_connections_refused_total", {"reason": reason}) == 0


def test_when_full_the_longest_idle_connection_makes_room(registry: CollectorRegistry) -> None:
    t = _table(registry)
    a, b, c = Conn("a"), Conn("b"), Conn("c")
    for conn in (a, b, c):
        t.admit(conn)
        t.waiting(conn)
    t.busy(a)  # a has a request in hand: never evicted
    t.waiting(b)  # b became idle again later than c: c has waited longest
    d = Conn("d")
    assert t.admit(d) == "probe"  # c held the probe slot
    assert (a.closed, b.closed, c.closed) == (False, False, True)
    assert _refused(registry, "evicted") == 1
    assert t.open_count == 3
    t.release(c)  # its connection_lost comes later: nothing more to free
    assert t.open_count == 3


def test_when_every_connection_is_busy_the_new_one_is_refused_as_full(registry: CollectorRegistry) -> None:
    t = _table(registry)
    conns = [Conn(str(i)) for i in range(3)]
    for conn in conns:
        t.admit(conn)  # admitted but never waiting: each has a request in hand
    assert t.admit(Conn("x")) is None
    assert _refused(registry, "full") == 1 and _refused(registry, "evicted") == 0
    assert not any(c.closed for c in conns)
    assert t.open_count == 3


def test_a_released_connection_is_not_evicted_later(registry: CollectorRegistry) -> None:
    t = _table(registry, general=1, probe=1)
    a, b = Conn("a"), Conn("b")
    t.admit(a)
    t.waiting(a)
    t.release(a)
    t.waiting(a)  # a late call for a gone connection must not put it back
    t.admit(b)
    t.admit(Conn("c"))
    assert t.admit(Conn("d")) is None and not a.closed


def test_refusals_are_logged_at_most_once_per_ten_seconds_with_the_count(
    registry: CollectorRegistry, caplog: pytest.LogCaptureFixture
) -> None:
    now = [0.0]
    t = _table(registry, logger=logging.getLogger("test.conns"), monotonic=lambda: now[0])
    with caplog.at_level(logging.WARNING, "test.conns"):
        for _ in range(5):
            t.count("cap", "answered 503")
        now[0] = 10.0
        t.count("cap", "answered 503")
    lines = [r.getMessage() for r in caplog.records]
    assert lines == ["answered 503", "answered 503 (4 more like it since the last line)"]
    assert _refused(registry, "cap") == 6


def test_the_budget_fits_under_the_descriptor_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    limits = {"soft": 1024, "hard": 1024}
    monkeypatch.setattr(resource, "getrlimit", lambda _: (limits["soft"], limits["hard"]))

    def setrlimit(_: int, value: tuple[int, int]) -> None:
        limits["soft"] = value[0]

    monkeypatch.setattr(resource, "setrlimit", setrlimit)
    b = fd_budget(4096, 16)  # the hard limit stops the raise: max_connections is lowered, the probes kept
    assert (b.general, b.probe, b.raised_from) == (1024 - FD_RESERVE - 16, 16, None)
    assert "server.max_connections 4096 lowered to 752" in b.line()
    limits["hard"] = 65536
    b = fd_budget(4096, 16)  # the soft limit is raised as far as needed, no further
    assert (b.general, b.raised_from, limits["soft"]) == (4096, 1024, 4096 + 16 + FD_RESERVE)
    assert "soft limit raised from 1024" in b.line() and "lowered" not in b.line()
    limits["soft"] = limits["hard"] = 200
    with pytest.raises(ConfigError) as err:
        fd_budget(100, 16)
    assert err.value.path == "server.max_connections"
